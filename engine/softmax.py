"""Softmax and its diagnostics, stable for any score spread (|s| up to 1e6 and beyond).

All functions work on the last axis of NumPy arrays of shape (..., n) and keep the input dtype
(float64 or float32). See docs/SCIENCE.md, "Numerics that must hold":

* softmax subtracts the row max;
* ``1 - p_max`` is never formed: it is the sum of the other weights;
* the Jacobian size ``||diag(p) - p p^T||_F`` is computed in O(n) in units of E = 1 - p_max, so
  nothing cancels near one-hot and nothing underflows when E is below 1e-154 (its log stays exact
  even when E itself underflows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: largest possible |entry| of a softmax Jacobian (p = 1/2 on the diagonal)
JACOBIAN_ENTRY_MAX = 0.25


def softmax(scores: np.ndarray) -> np.ndarray:
    """Stable softmax over the last axis: finite for any finite scores."""
    s = np.asarray(scores)
    if s.dtype.kind != "f":
        s = s.astype(np.float64)
    x = s - s.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def jacobian(p: np.ndarray) -> np.ndarray:
    """The full softmax Jacobian ``diag(p) - p p^T`` (n x n per row; use for small n only).

    The diagonal of the largest weight uses the sum of the others for ``1 - p_max``.
    """
    p = np.asarray(p)
    jac = -p[..., :, None] * p[..., None, :]
    n = p.shape[-1]
    diag = jacobian_diagonal(p)
    idx = np.arange(n)
    jac[..., idx, idx] = diag
    return jac


def jacobian_diagonal(p: np.ndarray) -> np.ndarray:
    """p_i (1 - p_i), the Jacobian's diagonal, without the n x n matrix (1 - p_max as the sum of
    the others, so a saturated row keeps its tiny diagonal)."""
    return p * _one_minus(p)


def _one_minus(p: np.ndarray) -> np.ndarray:
    """1 - p_i for every entry; for each row's max it is the sum of the other entries."""
    out = 1.0 - p
    m = np.argmax(p, axis=-1)[..., None]
    mask = np.ones(p.shape, dtype=bool)
    np.put_along_axis(mask, m, False, axis=-1)
    others = np.where(mask, p, 0).sum(axis=-1, keepdims=True)
    np.put_along_axis(out, m, others, axis=-1)
    return out


@dataclass(frozen=True)
class RowMetrics:
    """Per-row diagnostics of softmax(logits); every array has the leading shape of the input."""

    weights: np.ndarray  #: (..., n) softmax weights
    top_weight: np.ndarray  #: largest weight
    entropy: np.ndarray  #: -sum p log p (nats), in [0, log n]
    jacobian_fro: np.ndarray  #: ||diag(p) - p p^T||_F (may underflow to 0 in extreme rows)
    log10_jacobian_fro: np.ndarray  #: always finite, even where jacobian_fro underflows
    jacobian_max_abs: np.ndarray  #: largest |entry| = max_i p_i (1 - p_i) <= 0.25


def row_metrics(logits: np.ndarray) -> RowMetrics:
    """All per-row diagnostics in O(n) per row, from one pass over the shifted logits."""
    s = np.asarray(logits)
    if s.dtype.kind != "f":
        s = s.astype(np.float64)
    dt = s.dtype
    n = s.shape[-1]
    m = np.argmax(s, axis=-1)[..., None]
    x = s - np.take_along_axis(s, m, axis=-1)  # x <= 0, x[m] = 0
    # log of the mass off the max, O = sum_{i != m} exp(x_i), computed around the runner-up
    others = x.copy()
    np.put_along_axis(others, m, -np.inf, axis=-1)
    x2 = others.max(axis=-1, keepdims=True)
    log_o = x2 + np.log(np.exp(others - x2).sum(axis=-1, keepdims=True))
    o_mass = np.exp(log_o)
    log_z = np.log1p(o_mass)  # Z = 1 + O; log1p keeps tiny O (log(1 + 1e-18) is not 0)
    log_e = log_o - log_z  # log(1 - p_max), exact even when 1 - p_max underflows
    z = 1.0 + o_mass
    p = np.exp(x - log_z)

    top = (1.0 / z)[..., 0]
    # entropy H = log Z - sum p x   (no 0 * log 0: x is finite)
    entropy = log_z[..., 0] - (p * x).sum(axis=-1)
    entropy = np.clip(entropy, 0.0, np.log(n))

    v = np.exp(others - log_o)  # weights of the others relative to E: v_i = p_i / E, sum v = 1
    np.put_along_axis(v, m, 0.0, axis=-1)
    one_minus_p = 1.0 - p
    p_m = top[..., None]
    e_mass = np.exp(log_e)
    # ||J||^2 / E^2 = p_m^2 + sum v_i^2 (1-p_i)^2 + 2 p_m^2 sum v_i^2 + E^2 sum_{i!=j, others} v_i^2 v_j^2
    v2 = v * v
    r_v = v2.sum(axis=-1, keepdims=True)
    diag_others = (v2 * one_minus_p * one_minus_p)
    np.put_along_axis(diag_others, m, 0.0, axis=-1)
    inner = p_m * p_m + diag_others.sum(axis=-1, keepdims=True) + 2.0 * p_m * p_m * r_v
    inner = inner + e_mass * e_mass * _pair_sum(v2)
    log_fro = log_e + 0.5 * np.log(inner)
    fro = np.exp(log_fro)[..., 0]
    log10_fro = (log_fro / np.log(10.0))[..., 0]

    # largest |entry| is on the diagonal: p_i (1 - p_i), with 1 - p_max = E
    diag = p * one_minus_p
    np.put_along_axis(diag, m, p_m * e_mass, axis=-1)
    max_abs = diag.max(axis=-1)

    return RowMetrics(
        weights=p.astype(dt, copy=False),
        top_weight=top.astype(dt, copy=False),
        entropy=entropy.astype(dt, copy=False),
        jacobian_fro=fro.astype(dt, copy=False),
        log10_jacobian_fro=log10_fro.astype(dt, copy=False),
        jacobian_max_abs=max_abs.astype(dt, copy=False),
    )


def _pair_sum(b: np.ndarray) -> np.ndarray:
    """sum_{i != j} b_i b_j for b >= 0 without cancellation: 2 * sum_i b_i * sum_{j > i} b_j."""
    suffix = np.flip(np.cumsum(np.flip(b, axis=-1), axis=-1), axis=-1)  # suffix[i] = sum_{j>=i}
    after = suffix[..., 1:]
    return 2.0 * (b[..., :-1] * after).sum(axis=-1, keepdims=True)
