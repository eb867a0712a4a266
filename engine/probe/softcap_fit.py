"""Fit a soft-capped head: the scale s below the cap and the cap c, from the model's own weights.

Gemma 2 computes its attention logits as ``c * tanh(s * q.k / c) + mask`` (``attn_logit_softcapping``
c = 50, s = ``query_pre_attn_scalar ** -0.5``). Below the cap log P is linear in q.k with slope s;
near it the curve bends, and that curvature is what pins c. Both are fitted per head by minimizing
the same mean KL(P || softmax(logits)) as :mod:`scale_fit`, here with a Levenberg-Marquardt
iteration on (log s, log c) whose matrix is the Fisher information of the row softmax (the
covariance under Q of the logits' derivatives, the KL's Hessian at a good fit).

The tolerances follow :mod:`scale_fit`'s rule: a value is consistent with the data when it
reproduces P about as well as the best fit, the other parameter re-fitted (its profile KL above
the minimum by no more than the budget :func:`kl_budget`: the misfit, or what float32 rounding of
the probabilities or of the logits alone leaves, whichever is largest). The logits' rounding term
is what keeps the band above the differences between float kernels: the model rounds every logit
to ``sqrt(d_k) eps`` of the largest, and a vectorized tanh or exp on another CPU moves the fitted
cap by a part of that, a shift the misfit alone need not reveal (it bit on AVX2: a declared cap
of 50 read as not reproduced by a fit of 50.00014 whose misfit was 8e-14). The bands on log s and
log c use the curvature with the other parameter profiled out. A cap the logits never approach
cannot be measured: the head's scale is then the plain fit's and its cap is reported as not
reached (``reach`` says how far the logits went). A declared cap is checked the same way, by its
profile KL: a model that should cap at 50 but does not (llama.cpp #8156) has logits beyond 50
that the declared cap cannot reproduce.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.probe.scale_fit import EPS32, KL_FLOOR, PROBES, ScaleFit, fit_scale, logit_resolution

#: Levenberg-Marquardt iterations at most (it converges in ~10 on the zoo's heads)
LM_STEPS = 60


@dataclass(frozen=True)
class CapFit:
    """Per head (H,) arrays: the fitted cap and how well it is known."""

    cap: np.ndarray  #: fitted c; inf where the logits never bend (cap not reached or absent)
    tol_log: np.ndarray  #: consistency band on log c (inf when not identifiable)
    identifiable: np.ndarray  #: bool: c at 0.9x and 1.1x both fit worse than the band allows
    reach: np.ndarray  #: the largest |s q.k| below the cap (how close the logits come to it)
    declared: float | None  #: the cap the model passed to its attention function
    declared_consistent: np.ndarray  #: bool: the declared cap reproduces P as well as the fit


def _prepare(z: np.ndarray, p: np.ndarray, vis: np.ndarray, bias: np.ndarray | None):
    z = np.asarray(z, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    vis = np.asarray(vis, dtype=bool)
    ok = vis.sum(axis=-1) >= 2
    z, p, vis = z[:, ok], p[:, ok], vis[ok]
    b = 0.0 if bias is None else np.where(vis, np.asarray(bias, dtype=np.float64)[:, ok], 0.0)
    p = np.where(vis, p, 0.0)
    row_sum = p.sum(axis=-1)
    p = p / np.where(row_sum > 0, row_sum, 1.0)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)
    return np.where(vis, z, 0.0), p, vis, b, plogp


def _logits(log_s: np.ndarray, log_c: np.ndarray, z: np.ndarray):
    """c tanh(s z / c) and its derivatives in log s and log c (series near u = 0)."""
    s = np.exp(log_s)[:, None, None]
    c = np.exp(log_c)[:, None, None]
    u = s * z / c
    t = np.tanh(u)
    sech2 = 1.0 - t * t
    dv = np.where(np.abs(u) < 1e-3, (2.0 / 3.0) * u**3, t - u * sech2) * c
    return c * t, s * z * sech2, dv


def _kl_of(logits: np.ndarray, p: np.ndarray, vis: np.ndarray, b, plogp: np.ndarray):
    x = np.where(vis, logits + b, -np.inf)
    m = x.max(axis=-1, keepdims=True)
    logq = np.where(vis, x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True)), 0.0)
    q = np.where(vis, np.exp(logq), 0.0)
    return (plogp - (p * logq).sum(-1)).mean(-1), q


def _kl(log_s, log_c, z, p, vis, b, plogp) -> tuple[np.ndarray, np.ndarray]:
    return _kl_of(_logits(log_s, log_c, z)[0], p, vis, b, plogp)


def _fisher(log_s, log_c, z, p, vis, b, plogp):
    """KL, gradient (H, 2) and Fisher matrix (H, 2, 2) in (log s, log c)."""
    lg, da, dv = _logits(log_s, log_c, z)
    f, q = _kl_of(lg, p, vis, b, plogp)
    g = np.stack([da, dv], axis=-1)  # (H, R, n, 2)
    eq = (q[..., None] * g).sum(-2)  # (H, R, 2)
    ep = (p[..., None] * g).sum(-2)
    grad = (eq - ep).mean(-2)
    cen = g - eq[..., None, :]
    fis = np.einsum("hrn,hrni,hrnj->hij", q, cen, cen) / z.shape[1]
    return f, grad, fis, q


def fit_capped(scores: np.ndarray, probs: np.ndarray, visible: np.ndarray,
               bias: np.ndarray | None = None, d_k: int = 1,
               declared_cap: float | None = None) -> tuple[ScaleFit, CapFit]:
    """Fit s (below the cap) and c per head; shapes as :func:`scale_fit.fit_scale`."""
    lin = fit_scale(scores, probs, visible, d_k=d_k, bias=bias)
    zv, p, vis, b, plogp = _prepare(scores, probs, visible, bias)
    h = zv.shape[0]
    zmax = np.abs(zv).max(axis=(-1, -2))
    reach_lin = lin.scale * zmax
    log_s = np.log(lin.scale)
    c0 = declared_cap if declared_cap else 2.0 * float(reach_lin.max())
    log_c = np.full(h, math.log(max(c0, 1e-6)))
    log_c_max = np.log(1e4 * np.maximum(reach_lin, 1e-6))
    f, grad, fis, _q = _fisher(log_s, log_c, zv, p, vis, b, plogp)
    lam = np.full(h, 1e-3)
    for _ in range(LM_STEPS):
        a = fis + lam[:, None, None] * (np.eye(2) * fis.diagonal(axis1=1, axis2=2)[:, None, :]
                                         + 1e-300 * np.eye(2))
        det = a[:, 0, 0] * a[:, 1, 1] - a[:, 0, 1] * a[:, 1, 0]
        safe = np.abs(det) > 0
        det = np.where(safe, det, 1.0)
        step_s = np.where(safe, -(a[:, 1, 1] * grad[:, 0] - a[:, 0, 1] * grad[:, 1]) / det, 0.0)
        step_c = np.where(safe, -(a[:, 0, 0] * grad[:, 1] - a[:, 1, 0] * grad[:, 0]) / det, 0.0)
        step_s, step_c = np.clip(step_s, -1.0, 1.0), np.clip(step_c, -2.0, 2.0)
        cand_s, cand_c = log_s + step_s, np.minimum(log_c + step_c, log_c_max)
        fc, gc, fisc, _qc = _fisher(cand_s, cand_c, zv, p, vis, b, plogp)
        better = fc < f
        log_s, log_c = np.where(better, cand_s, log_s), np.where(better, cand_c, log_c)
        f = np.where(better, fc, f)
        grad = np.where(better[:, None], gc, grad)
        fis = np.where(better[:, None, None], fisc, fis)
        lam = np.where(better, lam / 3.0, lam * 4.0)
        if np.all((np.abs(step_s) < 1e-12) & (np.abs(step_c) < 1e-10) | (lam > 1e12)):
            break
    misfit = np.maximum(f, 0.0)
    band = kl_budget(misfit, d_k, np.exp(log_s) * zmax)
    # cap identifiable: c x 0.9 and c x 1.1 (s kept) both fit worse than the band allows
    worse_c = np.stack([_kl(log_s, log_c + math.log(k), zv, p, vis, b, plogp)[0] - f
                        for k in PROBES], axis=1)
    cap_ok = (worse_c.min(axis=1) > band) & (log_c < log_c_max - 1e-9)
    fss, fsc, fcc = fis[:, 0, 0], fis[:, 0, 1], fis[:, 1, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        curv_s = np.where(fcc > 0, fss - fsc**2 / np.where(fcc > 0, fcc, 1.0), fss)
        curv_c = np.where(fss > 0, fcc - fsc**2 / np.where(fss > 0, fss, 1.0), fcc)
        tol_c = np.where(cap_ok & (curv_c > 0),
                         np.sqrt(2.0 * band / np.where(curv_c > 0, curv_c, 1.0)), np.inf)
    s = np.exp(log_s)
    declared_ok = np.ones(h, dtype=bool)
    if declared_cap:
        ref_s = np.where(cap_ok, log_s, np.log(lin.scale))
        ref_f = np.where(cap_ok, f, lin.misfit)
        ref_band = np.where(cap_ok, band, kl_budget(lin.misfit, d_k, reach_lin))
        f_decl = profile_kl(ref_s, np.full(h, math.log(declared_cap)), zv, p, vis, b, plogp)
        declared_ok = f_decl - ref_f <= ref_band
    scale_fit = _capped_scale_fit(lin, cap_ok, s, log_c, misfit, band, curv_s, zv, p, vis, b,
                                  plogp, d_k)
    reach = np.where(cap_ok, s * zmax, reach_lin)
    cap = CapFit(cap=np.where(cap_ok, np.exp(log_c), np.inf), tol_log=tol_c,
                 identifiable=cap_ok, reach=reach, declared=declared_cap,
                 declared_consistent=declared_ok)
    return scale_fit, cap


def kl_budget(misfit: np.ndarray, d_k: int, logit_max: np.ndarray) -> np.ndarray:
    """(H,) how far above the best fit's KL a candidate may reproduce P and still be consistent:
    the misfit, the KL that float32 rounding of P alone causes (:data:`KL_FLOOR`), or the KL of
    logits each off by their float32 resolution, ``(sqrt(d_k) eps * largest |logit|)^2 / 2``
    (the band :func:`scale_fit.fit_scale` floors log s at), whichever is largest."""
    rounding = 0.5 * (logit_resolution(d_k) * np.asarray(logit_max, dtype=np.float64)) ** 2
    return np.maximum(np.maximum(misfit, KL_FLOOR), rounding)


def profile_kl(log_s: np.ndarray, log_c: np.ndarray, z: np.ndarray, p: np.ndarray,
               vis: np.ndarray, b, plogp: np.ndarray, steps: int = 12) -> np.ndarray:
    """(H,) the least KL over s with the cap held at ``exp(log_c)`` (Newton on log s from
    ``log_s``; a step that does not lower the KL is not taken)."""
    f, grad, fis, _q = _fisher(log_s, log_c, z, p, vis, b, plogp)
    for _ in range(steps):
        curv = fis[:, 0, 0]
        step = np.clip(np.where(curv > 0, -grad[:, 0] / np.where(curv > 0, curv, 1.0), 0.0),
                       -1.0, 1.0)
        if np.all(np.abs(step) < 1e-12):
            break
        fc, gc, fisc, _qc = _fisher(log_s + step, log_c, z, p, vis, b, plogp)
        better = fc < f
        log_s = np.where(better, log_s + step, log_s)
        f = np.where(better, fc, f)
        grad = np.where(better[:, None], gc, grad)
        fis = np.where(better[:, None, None], fisc, fis)
        if not better.any():
            break
    return f


def _capped_scale_fit(lin: ScaleFit, cap_ok: np.ndarray, s: np.ndarray, log_c: np.ndarray,
                      misfit: np.ndarray, band: np.ndarray, curv_s: np.ndarray, zv, p, vis, b,
                      plogp, d_k: int) -> ScaleFit:
    """The ScaleFit of the capped heads (the plain fit's where the cap is not reached)."""
    log_s = np.log(s)
    _f, q = _kl(log_s, log_c, zv, p, vis, b, plogp)
    resid = np.abs(p - q).max(axis=(-1, -2))
    resid_probe = np.empty((s.size, 2))
    worse = np.empty((s.size, 2))
    for i, k in enumerate(PROBES):
        fk, qk = _kl(log_s + math.log(k), log_c, zv, p, vis, b, plogp)
        resid_probe[:, i] = np.abs(p - qk).max(axis=(-1, -2))
        worse[:, i] = fk - misfit
    with np.errstate(divide="ignore", invalid="ignore"):
        tol = np.where(curv_s > 0, np.sqrt(2.0 * band / np.where(curv_s > 0, curv_s, 1.0)),
                       np.inf)
        rounding = logit_resolution(d_k) * np.abs(zv).max(axis=(-1, -2)) * s / np.sqrt(
            np.where(curv_s > 0, curv_s, np.inf))
    tol = np.maximum(tol, np.maximum(rounding, EPS32))
    ident = (worse.min(axis=1) > band) & np.isfinite(tol)
    tol = np.where(ident, tol, np.inf)

    def pick(capped: np.ndarray, plain: np.ndarray) -> np.ndarray:
        shape = (-1,) + (1,) * (capped.ndim - 1)
        return np.where(cap_ok.reshape(shape), capped, plain)

    return ScaleFit(scale=pick(s, lin.scale), misfit=pick(misfit, lin.misfit),
                    curvature=pick(curv_s, lin.curvature), tol_log=pick(tol, lin.tol_log),
                    residual_max_abs=pick(resid, lin.residual_max_abs),
                    residual_probe=pick(resid_probe, lin.residual_probe),
                    worse_probe=pick(worse, lin.worse_probe),
                    identifiable=pick(ident, lin.identifiable), weight_sum=lin.weight_sum,
                    weight_sum_tol=lin.weight_sum_tol, rows=lin.rows)
