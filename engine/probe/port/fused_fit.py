"""Measure the scale a fused attention operator applies, from its inputs and its output.

A fused operator (ONNX ``Attention``, ONNX Runtime's ``MultiHeadAttention`` ...) returns
``softmax(s q.k + mask) v`` and never its weights, so its ``scale`` attribute cannot be checked
the way the unfused audit checks a Softmax. Here s is the factor for which that formula, computed
in float64 from the operator's own q, k, v and mask, reproduces the output it returned: per head,
s minimizes the mean squared difference (a coarse grid over 1e-5 .. 1e4, then a golden-section
search around its best point: the difference need not be unimodal over the whole range).

The tolerance follows :mod:`engine.probe.scale_fit`'s rule: a scale is consistent with the output
when its squared difference exceeds the minimum by no more than the misfit itself or than what
float32 rounding of the output alone causes (``L * (eps * max|v|)^2`` for L keys), through the
curvature in log s; never narrower than the float32 rounding of the logits.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from engine.probe.scale_fit import EPS32, LOG_S_RANGE, PROBES, ScaleFit, logit_resolution

#: coarse grid points over :data:`LOG_S_RANGE`, then golden-section steps around the best
GRID = 97
GOLDEN_STEPS = 60
#: log-s step of the finite-difference curvature
CURV_STEP = 1e-3
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _weights(log_s: np.ndarray, z: np.ndarray, vis: np.ndarray, bias: np.ndarray | float,
             softcap: float | None) -> np.ndarray:
    s = np.exp(log_s)[:, None, None]
    x = s * z if not softcap else softcap * np.tanh(s * z / softcap)
    x = np.where(vis, x + bias, -np.inf)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.where(vis, np.exp(x), 0.0)
    return e / e.sum(axis=-1, keepdims=True)


class _Problem:
    """One set of heads: z (H, R, L), v (H, L, dv), o (H, R, dv), rows seeing >= 2 keys."""

    def __init__(self, z, vis, bias, v, o, softcap):
        ok = vis.sum(axis=-1) >= 2
        if not ok.any():
            raise ValueError("no query row sees two or more keys; nothing to fit")
        self.z = np.where(vis[ok], z[:, ok], 0.0)
        self.vis = vis[ok]
        self.bias = 0.0 if bias is None else np.where(self.vis, bias[:, ok], 0.0)
        self.v, self.o = v, o[:, ok]
        self.softcap = softcap

    def weights(self, log_s: np.ndarray) -> np.ndarray:
        return _weights(log_s, self.z, self.vis, self.bias, self.softcap)

    def out(self, log_s: np.ndarray) -> np.ndarray:
        return self.weights(log_s) @ self.v

    def mse(self, log_s: np.ndarray) -> np.ndarray:
        """(H,) mean squared difference of the output at s from the operator's."""
        return ((self.out(log_s) - self.o) ** 2).mean(axis=(-1, -2))


def _minimize(f: Callable[[np.ndarray], np.ndarray], g: int) -> np.ndarray:
    """(G,) log s minimizing f over :data:`LOG_S_RANGE`: grid, then golden section."""
    grid = np.linspace(*LOG_S_RANGE, GRID)
    vals = np.stack([f(np.full(g, x)) for x in grid])  # (GRID, G)
    best = vals.argmin(axis=0)
    step = grid[1] - grid[0]
    lo, hi = grid[best] - step, grid[best] + step
    a, b = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(GOLDEN_STEPS):
        left = fa < fb
        hi, lo = np.where(left, b, hi), np.where(left, lo, a)
        a_new = np.where(left, hi - _GOLDEN * (hi - lo), b)
        b_new = np.where(left, a, lo + _GOLDEN * (hi - lo))
        f_new = f(np.where(left, a_new, b_new))
        fa, fb = np.where(left, f_new, fb), np.where(left, fa, f_new)
        a, b = a_new, b_new
    return np.where(fa < fb, a, b)


def fit_output(z: np.ndarray, visible: np.ndarray, bias: np.ndarray | None, v: np.ndarray,
               o: np.ndarray, d_k: int, softcap: float | None = None,
               joint: bool = False) -> ScaleFit:
    """Fit s per head (or one s for all heads, ``joint``). ``z`` (H, R, L) q.k (float64),
    ``visible`` (R, L), ``bias`` (1 or H, R, L) additive terms, ``v`` (H, L, dv) each query
    head's values, ``o`` (H, R, dv) the operator's output."""
    prob = _Problem(np.asarray(z, float), np.asarray(visible, bool),
                    None if bias is None else np.broadcast_to(bias, z.shape).astype(float),
                    np.asarray(v, float), np.asarray(o, float), softcap)
    h = z.shape[0]
    if joint:
        def f(ls: np.ndarray) -> np.ndarray:
            return prob.mse(np.repeat(ls, h)).sum(keepdims=True)
        groups = 1
    else:
        f, groups = prob.mse, h
    log_s = _minimize(f, groups)
    best = f(log_s)
    curv = (f(log_s + CURV_STEP) + f(log_s - CURV_STEP) - 2 * best) / CURV_STEP**2
    floor = prob.vis.shape[-1] * (EPS32 * np.abs(prob.v).max(axis=(-1, -2))) ** 2
    floor = floor.sum(keepdims=True) if joint else floor
    band = np.maximum(best, floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        tol = np.where(curv > 0, np.sqrt(2 * band / np.where(curv > 0, curv, 1.0)), np.inf)
    per_head = np.repeat(log_s, h) if joint else log_s
    w = prob.weights(per_head)
    ez = (w * prob.z).sum(-1)
    var = (w * (prob.z - ez[..., None]) ** 2).sum(-1).mean(-1)  # (H,)
    var = np.array([var.mean()]) if joint else var
    zmax = np.abs(prob.z).max(axis=(-1, -2))
    zmax = np.array([zmax.max()]) if joint else zmax
    with np.errstate(divide="ignore", invalid="ignore"):
        rounding = np.where(var > 0, logit_resolution(d_k) * zmax / np.sqrt(var), np.inf)
    tol = np.maximum(tol, np.maximum(rounding, EPS32))
    worse = np.stack([f(log_s + math.log(k)) - best for k in PROBES], axis=1)
    resid = np.abs(prob.out(per_head) - prob.o).max(axis=(-1, -2))
    probes = np.stack([np.abs(prob.out(per_head + math.log(k)) - prob.o).max(axis=(-1, -2))
                       for k in PROBES], axis=1)
    if joint:
        resid, probes = np.array([resid.max()]), probes.max(axis=0, keepdims=True)
    ident = (worse.min(axis=1) > band) & np.isfinite(tol)
    return ScaleFit(scale=np.exp(log_s), misfit=best, curvature=curv,
                    tol_log=np.where(ident, tol, np.inf), residual_max_abs=resid,
                    residual_probe=probes, worse_probe=worse, identifiable=ident,
                    weight_sum=np.ones(groups), weight_sum_tol=prob.vis.shape[-1] * EPS32,
                    rows=int(prob.vis.shape[0]))
