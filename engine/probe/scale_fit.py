"""Fit the one factor s that makes softmax(s * q.k + mask) reproduce a model's own attention.

The objective is the mean over query rows of KL(P || softmax(s z)). As a function of s it is
convex (log-sum-exp is convex, the rest is linear), so a golden-section search on log s finds the
minimum to a few per cent, and safeguarded Newton steps on s polish it (quadratic convergence). Everything is vectorized over heads.

The fit judges itself: ``misfit`` is the KL left at the best s (float32 rounding of the model's
probabilities, or a model that is not a scaled softmax of q.k). A candidate scale is *consistent*
with the data when it reproduces P as well as the best fit does, i.e. when its KL exceeds the
minimum by no more than the misfit itself (or than the KL that float32 rounding of P alone
causes, :data:`KL_FLOOR`). With the curvature c of the KL in log s this is the band
``|log(s_cand / s)| <= sqrt(2 * max(misfit, KL_FLOOR) / c)``, and never narrower than the
float32 rounding of the logits (sqrt(d_k) eps of the largest, over their spread; ``tol_log``): no tolerance is chosen by hand. A head whose fit changes by less than that band at 0.9 s and 1.1 s (near-uniform
logits) cannot be audited.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: float32 resolution of a probability near 1 (the model's attention is float32)
EPS32 = float(np.finfo(np.float32).eps)
#: KL that float32 rounding of the probabilities alone causes: sum_j (eps P_j)^2 / (2 P_j)
KL_FLOOR = EPS32**2 / 2
#: the search range of s (log space); far wider than any real scale
LOG_S_RANGE = (math.log(1e-5), math.log(1e4))
#: identifiability probes: the fit at s * 0.9 and s * 1.1
PROBES = (0.9, 1.1)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class ScaleFit:
    """Per-head fit results, every array of shape (H,)."""

    scale: np.ndarray  #: fitted s
    misfit: np.ndarray  #: mean KL(P || softmax(s z)) per row at s
    curvature: np.ndarray  #: d^2 KL / d(log s)^2 at s
    tol_log: np.ndarray  #: the consistency band on log s (inf when not identifiable)
    residual_max_abs: np.ndarray  #: max |P - softmax(s z)| over visible pairs of counted rows
    residual_probe: np.ndarray  #: (H, 2) the same at 0.9 s and 1.1 s
    worse_probe: np.ndarray  #: (H, 2) KL increase at 0.9 s and 1.1 s over the minimum
    identifiable: np.ndarray  #: bool: both probes worsen the fit by more than the band allows
    weight_sum: np.ndarray  #: mean row sum of P over visible keys (1 for a softmax)
    weight_sum_tol: float  #: how far a float32 softmax row sum may stray from 1 (n * eps)
    rows: int  #: query rows counted (those that see at least 2 keys)


def misfit_limit(d_k: int, n_keys: int, logit_bound: float) -> float:
    """The most KL per row a float32 softmax of scaled q.k (and the model's additive terms) can
    leave against the exact one: every logit off by at most its worst-case float32 error
    (a d_k-term dot product: d_k/2 eps of |q||k|, plus the scaling, the additive terms and the
    softmax's shift: 4 eps, of ``logit_bound`` >= s |q| |k| + |terms|), every probability by the
    exp and the row's n-term sum (n/2 + 2 eps), and KL <= (largest log-probability error)^2 / 2.
    Misfits above it are not rounding: the weights are something else (an after-softmax factor
    under sinks, a position-dependent scale the reference does not carry)."""
    err = (d_k / 2 + 4) * EPS32 * logit_bound + (n_keys / 2 + 2) * EPS32
    return 0.5 * err * err + KL_FLOOR


def logit_resolution(d_k: int) -> float:
    """Relative float32 resolution of a logit q.k summed over d_k terms: sqrt(d_k) eps."""
    return math.sqrt(max(int(d_k), 1)) * EPS32


def _log_softmax(z: np.ndarray, vis: np.ndarray) -> np.ndarray:
    return _log_softmax_q(z, vis)[0]


def _log_softmax_q(z: np.ndarray, vis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log softmax (-inf where not visible) and softmax (0 there) from one exp; in place on
    one copy (the fit's arrays are heads x 128 rows x keys: each pass over them counts)."""
    z = np.where(vis, z, -np.inf)
    z -= z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=-1, keepdims=True)
    z -= np.log(total)
    e /= total
    return z, e


def _logits(s: np.ndarray, z: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """s z + b (no extra pass over the array when there is no additive term)."""
    if isinstance(b, float) and b == 0.0:
        return s * z
    return s * z + b


def _kl(log_s: np.ndarray, z: np.ndarray, p: np.ndarray, plogp: np.ndarray, vis: np.ndarray,
        b: np.ndarray | float = 0.0) -> np.ndarray:
    """(H,) mean over rows of KL(P || softmax(exp(log_s) z + b)); z, p: (H, R, n)."""
    s = np.exp(log_s)[:, None, None]
    logq = _log_softmax(_logits(s, z, b), vis)
    cross = (p * np.where(vis, logq, 0.0)).sum(axis=-1)
    return (plogp - cross).mean(axis=-1)


def _eval(log_s: np.ndarray, z: np.ndarray, p: np.ndarray, plogp: np.ndarray, ep: np.ndarray,
          vis: np.ndarray, b: np.ndarray | float = 0.0, mass: np.ndarray | None = None
          ) -> tuple[np.ndarray, ...]:
    """KL, its gradient and Hessian in s (row means), and Q, from one log-softmax. ``mass``
    (H, R): 0 for a row the model gave no weight (its KL is 0 at every s), None: every row 1."""
    s = np.exp(log_s)[:, None, None]
    logq, q = _log_softmax_q(_logits(s, z, b), vis)
    np.copyto(logq, 0.0, where=~vis)
    f = (plogp - (p * logq).sum(-1)).mean(-1)
    eq = (q * z).sum(-1)
    var = (q * (z - eq[..., None]) ** 2).sum(-1)
    if mass is not None:
        eq, var = eq * mass, var * mass
    grad = (eq - ep).mean(-1)
    hess = var.mean(-1)
    return f, grad, hess, q


def _golden_search(zv: np.ndarray, p: np.ndarray, plogp: np.ndarray, vis: np.ndarray,
                   iterations: int, bias: np.ndarray | float = 0.0) -> np.ndarray:
    """(H,) log s near the minimum: golden-section search on log s over :data:`LOG_S_RANGE` (the
    KL is unimodal in log s), all heads at once, one evaluation per step: each head evaluates its
    own new interior point."""
    h = zv.shape[0]
    lo = np.full(h, LOG_S_RANGE[0])
    hi = np.full(h, LOG_S_RANGE[1])
    a = hi - _GOLDEN * (hi - lo)
    b = lo + _GOLDEN * (hi - lo)
    fa, fb = _kl(a, zv, p, plogp, vis, bias), _kl(b, zv, p, plogp, vis, bias)
    for _ in range(iterations):
        left = fa < fb  # minimum in [lo, b]: b <- a, new a; else a <- b, new b
        hi = np.where(left, b, hi)
        lo = np.where(left, lo, a)
        a_next = np.where(left, hi - _GOLDEN * (hi - lo), b)
        b_next = np.where(left, a, lo + _GOLDEN * (hi - lo))
        f_new = _kl(np.where(left, a_next, b_next), zv, p, plogp, vis, bias)
        fa, fb = np.where(left, f_new, fb), np.where(left, fa, f_new)
        a, b = a_next, b_next
    return np.where(fa < fb, a, b)


def _newton(log_s: np.ndarray, zv: np.ndarray, p: np.ndarray, plogp: np.ndarray, ep: np.ndarray,
            vis: np.ndarray, steps: int, bias: np.ndarray | float = 0.0,
            mass: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Newton on s (gradient E_Q z - E_P z, Hessian Var_Q z) from ``log_s``; a step that does not
    lower the KL is halved (the KL is convex in s, so this converges quadratically).
    Returns log s, the KL, its Hessian in s and Q there."""
    f, grad, hess, q = _eval(log_s, zv, p, plogp, ep, vis, bias, mass)
    #: heads whose step failed every halving: their gradient and Hessian are unchanged, so the
    #: next step would retry the same candidates and fail again (skipping them saves passes)
    stuck = np.zeros(log_s.shape, dtype=bool)
    for _ in range(steps):
        s_cur = np.exp(log_s)
        step = np.where(hess > 0, grad / np.where(hess > 0, hess, 1.0), 0.0)
        active = (np.abs(step) > 1e-12 * s_cur) & ~stuck  # below: float64 rounding
        if not active.any():
            break
        step = np.where(active, step, 0.0)
        improved = np.zeros(log_s.shape, dtype=bool)
        for _half in range(4):
            s_new = s_cur - step
            cand = np.log(np.where(s_new > 0, s_new, s_cur))
            fc, gc, hc, qc = _eval(cand, zv, p, plogp, ep, vis, bias, mass)
            better = fc < f
            log_s = np.where(better, cand, log_s)
            f = np.where(better, fc, f)
            grad = np.where(better, gc, grad)
            hess = np.where(better, hc, hess)
            q = np.where(better[:, None, None], qc, q)
            improved |= better
            if (better | ~active).all():
                break
            step = np.where(better, 0.0, step / 2)
        stuck |= active & ~improved
    return log_s, f, hess, q


def fit_scale(scores: np.ndarray, probs: np.ndarray, visible: np.ndarray,
              iterations: int = 16, newton: int = 5, start: np.ndarray | None = None,
              d_k: int = 1, bias: np.ndarray | None = None) -> ScaleFit:
    """Fit s per head. ``scores`` (H, R, n) raw q.k, ``probs`` (H, R, n) the model's attention,
    ``visible`` (R, n) bool key-visible mask shared by the heads. Rows seeing < 2 keys are
    dropped (their softmax is 1 whatever s is). ``start`` (H,) skips the bracketing search and
    starts Newton there (a layer's joint fit starts from its heads' fits). ``d_k``: the length of
    the model's float32 dot products q.k, whose rounding bounds how well s can be known.
    ``bias`` (H or 1, R, n): additive terms of the logits that are not scaled (T5's relative
    position bias, ALiBi, a sink's logit)."""
    z = np.asarray(scores, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    vis = np.asarray(visible, dtype=bool)
    ok = vis.sum(axis=-1) >= 2
    z, p, vis = z[:, ok], p[:, ok], vis[ok]
    b: np.ndarray | float = 0.0
    if bias is not None:
        b = np.where(vis, np.asarray(bias, dtype=np.float64)[:, ok], 0.0)
    h, r = z.shape[0], z.shape[1]
    if r == 0:
        raise ValueError("no query row sees two or more keys; nothing to fit")
    n_keys = int(vis.sum(axis=-1).max())
    p = np.where(vis, p, 0.0)
    row_sum = p.sum(axis=-1)  # (H, R)
    weight_sum = row_sum.mean(axis=-1)
    p = p / np.where(row_sum > 0, row_sum, 1.0)[..., None]  # the fit compares shapes, not mass
    # a row the model gave no weight at all adds nothing to the KL at any s: it must add nothing
    # to Newton's gradient and curvature either (it pulled s off the minimum: 0.49998 for 0.5)
    mass = None if (row_sum > 0).all() else (row_sum > 0).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)  # (H, R)
    zv = np.where(vis, z, 0.0)

    if start is None:
        log_s = _golden_search(zv, p, plogp, vis, iterations, b)
    else:
        log_s = np.log(np.broadcast_to(np.asarray(start, dtype=np.float64), (h,))).copy()
    ep = (p * zv).sum(-1)
    log_s, f, hess, q = _newton(log_s, zv, p, plogp, ep, vis, newton, b, mass)
    s = np.exp(log_s)
    curv = (s**2) * hess
    misfit = np.maximum(f, 0.0)
    band = np.maximum(misfit, KL_FLOOR)
    with np.errstate(divide="ignore"):
        tol_log = np.where(curv > 0, np.sqrt(2.0 * band / np.where(curv > 0, curv, 1.0)), np.inf)
    # the model computes q.k in float32 over d_k terms: each logit carries a rounding error of
    # about sqrt(d_k) eps times the largest logit, and s is read from logit *differences* (their
    # spread is sqrt(Var_Q z)); a fit on few pairs cannot average that away (2 tokens: a head
    # at 1 +- 3e-7 read as 'other' at d_k 32). Factors closer than that are the same scale.
    zmax = np.abs(zv).max(axis=(-1, -2))
    with np.errstate(divide="ignore", invalid="ignore"):
        rounding = np.where(hess > 0, logit_resolution(d_k) * zmax / np.sqrt(hess), np.inf)
    tol_log = np.maximum(tol_log, np.maximum(rounding, EPS32))
    resid = np.abs(p - q).max(axis=(-1, -2))
    resid_probe = np.empty((h, 2))
    worse = np.empty((h, 2))
    for i, factor in enumerate(PROBES):
        fp, _g, _h, qp = _eval(log_s + math.log(factor), zv, p, plogp, ep, vis, b)
        resid_probe[:, i] = np.abs(p - qp).max(axis=(-1, -2))
        worse[:, i] = fp - f
    identifiable = (worse.min(axis=1) > band) & np.isfinite(tol_log)
    tol_log = np.where(identifiable, tol_log, np.inf)
    return ScaleFit(scale=s, misfit=misfit, curvature=curv, tol_log=tol_log,
                    residual_max_abs=resid, residual_probe=resid_probe, worse_probe=worse,
                    identifiable=identifiable, weight_sum=weight_sum,
                    weight_sum_tol=n_keys * EPS32, rows=r)


# -- verdicts ---------------------------------------------------------------------------------

STANDARD = "1/sqrt(d_k)"
TWICE = "scaled twice"
UNSCALED = "unscaled"
DMODEL = "scaled by 1/sqrt(d_model)"
HEAD_DIM = "scaled by 1/sqrt(d_model / heads)"
AFTER_SOFTMAX = "scaled after softmax"
NOT_AUDITABLE = "cannot be audited (near-uniform logits)"
#: verdicts that mean "as standard" (a layer with any other verdict is flagged)
OK_VERDICTS = (STANDARD,)


AS_DECLARED = "as declared"


def candidates(d_k: int, d_model: int, n_heads: int | None = None,
               reference: float = 1.0) -> list[tuple[str, float]]:
    """(verdict, s * sqrt(d_k)) of every known scale, standard first (``n_heads``: also the
    width d_model / heads, which is not head_dim in models that set head_dim themselves).
    ``reference``: the s * sqrt(d_k) the site should apply; the bugs are named relative to it
    (as :mod:`engine.probe.inject` plants them): twice divides it by sqrt(d_k) once more,
    d_model puts sqrt(d_model) where sqrt(d_k) was, unscaled is no factor at all."""
    out = [(STANDARD, 1.0), (TWICE, reference * d_k**-0.5), (UNSCALED, d_k**0.5)]
    if d_model != d_k:
        out.append((DMODEL, reference * (d_k / d_model) ** 0.5))
    if n_heads and abs(d_model / n_heads - d_k) > 1e-9:
        out.append((HEAD_DIM, reference * (d_k * n_heads / d_model) ** 0.5))
    return out


def verdict(scale: float, tol_log: float, identifiable: bool, weight_sum: float,
            weight_sum_tol: float, d_k: int, d_model: int, n_heads: int | None = None, *,
            reference: float | None = None, declared_as: str | None = None) -> str:
    """The verdict in words for one fitted scale (a head, or a layer's joint fit).

    ``reference``: the factor the site should apply (its declaration, or the factors its code
    applies when the declaration is unknown). A scale that matches it is the standard, or "as
    declared (``declared_as``)" (neutral words when ``declared_as`` is None): a bug's name only
    where the scale differs from it. Without a reference (Training lab runs) every scale is
    named among the known ones."""
    if abs(weight_sum - 1.0) > weight_sum_tol:
        return f"{AFTER_SOFTMAX} (weights sum to {weight_sum:.3g})"
    if not identifiable:
        return NOT_AUDITABLE
    x = scale * math.sqrt(d_k)
    rx = 1.0 if reference is None else reference * math.sqrt(d_k)
    if reference is not None and abs(math.log(x / rx)) <= tol_log:
        if abs(math.log(x)) <= tol_log:
            return STANDARD
        if declared_as is not None:
            return f"{AS_DECLARED} ({declared_as})"
        return _other(x, [(STANDARD, 1.0)])
    best = None
    known = candidates(d_k, d_model, n_heads, rx)
    for name, c in known:
        gap = abs(math.log(x / c))
        if gap <= tol_log and (best is None or gap < best[1]):
            best = (name, gap)
    if best is not None:
        return best[0]
    return _other(x, known)


def _other(x: float, known: list[tuple[str, float]]) -> str:
    """"other: s * sqrt(d_k) = x" with enough digits that the number never reads as a known
    scale ('= 1' for 0.9999997)."""
    digits = 3
    while digits < 9 and any(float(f"{x:.{digits}g}") == c for _n, c in known):
        digits += 1
    return f"other: s * sqrt(d_k) = {x:.{digits}g}"


def verdict_kind(text: str) -> str:
    """A verdict without its number ('other: ... = 0.51' and '= 0.52' are one kind)."""
    return text.split(" (")[0].split(" =")[0]


def is_flagged(text: str) -> bool:
    """True for any verdict other than the standard scale (not-auditable is not a flag; a
    declared non-standard scale is flagged as not 1/sqrt(d_k), not as a bug)."""
    return text not in OK_VERDICTS and text != NOT_AUDITABLE
