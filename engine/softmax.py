"""Softmax and its diagnostics, stable for any score spread (|s| up to 1e6 and beyond).

All functions work on the last axis of NumPy arrays of shape (..., n) and keep the input dtype
(float64 or float32). See docs/SCIENCE.md, "Numerics that must hold":

* softmax subtracts the row max;
* ``1 - p_max`` is never formed: it is the sum of the other weights;
* the Jacobian size ``||diag(p) - p p^T||_F`` is computed in O(n) in units of E = 1 - p_max, so
  nothing cancels near one-hot and nothing underflows when E is below 1e-154 (its log stays exact
  even when E itself underflows).

Weights that do not sum to one (docs/scale_controls.md, "What the figures mean"). With an
attention sink the row's softmax runs over the n keys plus the sink, and the sink's weight is
dropped; with sigmoid attention every key gets sigmoid(z + b) on its own. The figures keep one
meaning for every rule:

* weights: what the values see, p_i for each key (the sink is not a key);
* top weight: the largest p_i of a key (a row that rests on the sink is not saturated);
* key mass: sum_i p_i (1 for a softmax; 1 - sink weight with a sink; anything in (0, n) for
  sigmoid); sink weight: the sink's share, its own figure (0 without a sink);
* entropy: of the key weights normalized to sum 1, p_i / key mass, so it says how the attention
  that is paid spreads over the keys (in [0, ln n]); how much is paid is the key mass;
* Jacobian: d p_i / d z_j over the keys, where z is the logit the rule's q and k make before any
  cap: diag(p) - p p^T for softmax and sink (the same formula; p need not sum to 1), diag(p_i (1 -
  p_i)) for sigmoid, each column times the cap's slope tanh'(z_j / c) for ``softcap``. It is what
  flows back towards W_Q and W_K per unit of logit; the largest |entry| is still at most 0.25.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def jacobian(p: np.ndarray, rest: float = 0.0, log_slope: np.ndarray | None = None) -> np.ndarray:
    """The full softmax Jacobian ``diag(p) - p p^T`` (n x n per row; use for small n only).

    The diagonal of the largest weight uses the sum of the others (plus ``rest``, a sink's
    weight) for ``1 - p_max``. ``log_slope`` multiplies column j by exp(log_slope_j) (a cap's
    slope: the derivative with respect to the logits before the cap).
    """
    p = np.asarray(p)
    jac = -p[..., :, None] * p[..., None, :]
    n = p.shape[-1]
    diag = p * _one_minus(p, rest)
    idx = np.arange(n)
    jac[..., idx, idx] = diag
    if log_slope is not None:
        jac = jac * np.exp(np.asarray(log_slope))[..., None, :]
    return jac


def jacobian_diagonal(p: np.ndarray, rest: float = 0.0) -> np.ndarray:
    """p_i (1 - p_i), the Jacobian's diagonal, without the n x n matrix (1 - p_max as the sum of
    the others and ``rest``, so a saturated row keeps its tiny diagonal)."""
    return p * _one_minus(p, rest)


def _one_minus(p: np.ndarray, rest: float = 0.0) -> np.ndarray:
    """1 - p_i for every entry; for each row's max it is the sum of the other entries (and of
    ``rest``, the weight outside p: a sink's)."""
    out = 1.0 - p
    m = np.argmax(p, axis=-1)[..., None]
    mask = np.ones(p.shape, dtype=bool)
    np.put_along_axis(mask, m, False, axis=-1)
    others = np.where(mask, p, 0).sum(axis=-1, keepdims=True) + rest
    np.put_along_axis(out, m, others, axis=-1)
    return out


@dataclass(frozen=True)
class RowMetrics:
    """Per-row diagnostics of softmax(logits); every array has the leading shape of the input."""

    weights: np.ndarray  #: (..., n) softmax weights
    top_weight: np.ndarray  #: largest weight
    entropy: np.ndarray  #: -sum p log p (nats), in [0, log n]
    jacobian_fro: np.ndarray  #: ||diag(p) - p p^T||_F (may underflow to 0 in extreme rows)
    #: finite even where jacobian_fro underflows; -inf only where the Jacobian is exactly 0 (a
    #: row with one key, or one key left by a mask of -inf logits)
    log10_jacobian_fro: np.ndarray
    jacobian_max_abs: np.ndarray  #: largest |entry| = max_i p_i (1 - p_i) <= 0.25
    #: sum of the key weights (1 for a softmax over the keys alone)
    key_mass: np.ndarray | None = None
    #: the sink's weight (0 without a sink)
    sink_weight: np.ndarray | None = None


def row_metrics(logits: np.ndarray, sink: np.ndarray | float | None = None,
                log_slope: np.ndarray | None = None) -> RowMetrics:
    """All per-row diagnostics in O(n) per row, from one pass over the shifted logits.

    ``sink``: the sink's logit (a scalar or one per row, shape (..., 1)): it joins the softmax and
    its weight is reported as ``sink_weight``. ``log_slope``: ln(d logit_j / d z_j) per entry (a
    cap's slope), which multiplies column j of the Jacobian. See the module docstring."""
    if sink is not None or log_slope is not None:
        return _general_row_metrics(np.asarray(logits), sink, log_slope)
    s = np.asarray(logits)
    if s.dtype.kind != "f":
        s = s.astype(np.float64)
    dt = s.dtype
    n = s.shape[-1]
    m = np.argmax(s, axis=-1)[..., None]
    x = s - np.take_along_axis(s, m, axis=-1)  # x <= 0, x[m] = 0
    # log of the mass off the max, O = sum_{i != m} exp(x_i), computed around the runner-up
    # (-inf for a row with one key, or one key left unmasked: its Jacobian is exactly 0)
    others = x.copy()
    np.put_along_axis(others, m, -np.inf, axis=-1)
    log_o = _logsumexp(others)
    o_mass = np.exp(log_o)
    log_z = np.log1p(o_mass)  # Z = 1 + O; log1p keeps tiny O (log(1 + 1e-18) is not 0)
    log_e = log_o - log_z  # log(1 - p_max), exact even when 1 - p_max underflows
    z = 1.0 + o_mass
    p = np.exp(x - log_z)

    top = (1.0 / z)[..., 0]
    # entropy H = log Z - sum p x   (no 0 * log 0: a masked key, x = -inf, adds nothing)
    entropy = log_z[..., 0] - (p * np.where(p > 0, x, 0.0)).sum(axis=-1)
    entropy = np.clip(entropy, 0.0, np.log(n))

    # weights of the others relative to E: v_i = p_i / E, sum v = 1 (all 0 where E = 0)
    v = np.exp(others - np.where(np.isfinite(log_o), log_o, 0.0))
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
        key_mass=np.ones_like(top, dtype=dt),
        sink_weight=np.zeros_like(top, dtype=dt),
    )


def _logsumexp(x: np.ndarray) -> np.ndarray:
    """ln sum exp over the last axis, keepdims; -inf for a row of -inf."""
    top = x.max(axis=-1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(x - safe).sum(axis=-1, keepdims=True))


def _entropy_of_normalized(x: np.ndarray) -> np.ndarray:
    """Entropy (nats) of softmax(x) over the last axis, for x <= 0 with a 0 in every row (the
    shifted logits, or the log-weights of sigmoid keys shifted by their max): tiny masses keep
    their digits (log1p of the mass off the max)."""
    m = np.argmax(x, axis=-1)[..., None]
    others = x.copy()
    np.put_along_axis(others, m, -np.inf, axis=-1)
    log_z = np.log1p(np.exp(_logsumexp(others)))
    q = np.exp(x - log_z)
    return (log_z - (q * np.where(q > 0, x, 0.0)).sum(axis=-1, keepdims=True))[..., 0]


def _exclusive_sums(b: np.ndarray) -> np.ndarray:
    """sum_{i != j} b_i for every j, for b >= 0, without the cancellation of total - b_j."""
    before = np.concatenate([np.zeros_like(b[..., :1]), np.cumsum(b, axis=-1)[..., :-1]], axis=-1)
    after = np.flip(np.cumsum(np.flip(b, axis=-1), axis=-1), axis=-1)
    after = np.concatenate([after[..., 1:], np.zeros_like(b[..., :1])], axis=-1)
    return before + after


def _general_row_metrics(s: np.ndarray, sink: Any, log_slope: np.ndarray | None) -> RowMetrics:
    """``row_metrics`` with a sink and/or a cap's slope (the plain softmax keeps its own path).

    Jacobian of the keys, J = diag(p) - p p^T (p need not sum to 1), column j times d_j:
    ||J D||^2 = sum_j d_j^2 p_j^2 [(1 - p_j)^2 + sum_{i != j} p_i^2], with 1 - p_m = E taken as
    the mass off the top key m (other keys and the sink). Units: E where key m holds at least
    half (then E may be tiny), else p_m (a sink that takes nearly everything leaves tiny keys):
    either way nothing the norm depends on underflows."""
    if s.dtype.kind != "f":
        s = s.astype(np.float64)
    dt = s.dtype
    n = s.shape[-1]
    m = np.argmax(s, axis=-1)[..., None]
    x = s - np.take_along_axis(s, m, axis=-1)  # keys, x <= 0, x[m] = 0
    others = x.copy()
    np.put_along_axis(others, m, -np.inf, axis=-1)
    if sink is not None:
        x_sink = np.broadcast_to(np.asarray(sink, dtype=dt), s.shape[:-1] + (1,)) \
            - np.take_along_axis(s, m, axis=-1)
        pool = np.concatenate([others, x_sink], axis=-1)
    else:
        x_sink = None
        pool = others
    log_o = _logsumexp(pool)  # ln(mass off key m / p_m): other keys and the sink
    log_z = np.logaddexp(0.0, log_o)
    p = np.exp(x - log_z)
    top = np.exp(-log_z)[..., 0]
    key_mass = p.sum(axis=-1)
    sink_weight = (np.exp(x_sink - log_z)[..., 0] if x_sink is not None
                   else np.zeros_like(top))
    entropy = np.clip(_entropy_of_normalized(x), 0.0, np.log(n))

    log_fro, max_abs = _key_jacobian_size(p, others, m, log_o, log_slope)
    return RowMetrics(
        weights=p.astype(dt, copy=False),
        top_weight=top.astype(dt, copy=False),
        entropy=entropy.astype(dt, copy=False),
        jacobian_fro=np.exp(log_fro)[..., 0].astype(dt, copy=False),
        log10_jacobian_fro=(log_fro / np.log(10.0))[..., 0].astype(dt, copy=False),
        jacobian_max_abs=max_abs.astype(dt, copy=False),
        key_mass=key_mass.astype(dt, copy=False),
        sink_weight=sink_weight.astype(dt, copy=False),
    )


def _key_jacobian_size(p: np.ndarray, others: np.ndarray, m: np.ndarray, log_o: np.ndarray,
                       log_slope: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(ln ||J D||_F with keepdims, the largest |entry|) of the keys' Jacobian (see
    ``_general_row_metrics``): ``p`` the key weights, ``others`` the shifted key logits with
    -inf at the top key m, ``log_o`` ln(mass off key m / p_m)."""
    log_z = np.logaddexp(0.0, log_o)
    log_e = log_o - log_z  # ln E = ln(1 - p_m), exact when E underflows
    log_pm = -log_z
    p_m = np.exp(log_pm)
    e_mass = np.exp(log_e)
    if log_slope is not None:
        ls = np.broadcast_to(np.asarray(log_slope, dtype=p.dtype), p.shape)
        big = ls.max(axis=-1, keepdims=True)
        big = np.where(np.isfinite(big), big, 0.0)  # (a row of zero slopes: its norm is 0)
        log_d = ls - big  # <= 0; the common factor exp(big) goes into the log
    else:
        big = np.zeros_like(log_o)
        log_d = np.zeros_like(p)
    d = np.exp(log_d)
    log_d_m = np.take_along_axis(log_d, m, axis=-1)
    one_minus_p = 1.0 - p
    key_heavy = log_o <= 0.0  # key m holds at least half of the row: units of E, else of p_m
    log_unit = np.where(key_heavy, log_e, log_pm)
    # ln(p_i / unit) for the keys i != m (-inf, not NaN, where key m is the row's only key)
    log_r = others - np.where(key_heavy & np.isfinite(log_o), log_o, 0.0)
    r2 = np.exp(2.0 * log_r)
    u2 = np.exp(2.0 * log_unit)
    c_m = np.where(key_heavy, p_m, e_mass)  # E p_m / unit <= 1 (p_m or E: at least 1/2)
    # ||J D||^2 / unit^2 = d_m^2 (c_m^2 + p_m^2 sum r^2)
    #                      + sum_{j != m} d_j^2 r_j^2 [(1 - p_j)^2 + p_m^2 + unit^2 sum_{i != j, m} r_i^2]
    # summed in logs: the brackets are at least 1/4, but d_j and r_j may underflow together
    # (two keys capped deep in the tanh's tail: a norm of e^-700 is not 0, its log is finite)
    bracket_m = c_m * c_m + p_m * p_m * r2.sum(axis=-1, keepdims=True)
    bracket = one_minus_p * one_minus_p + p_m * p_m + u2 * _exclusive_sums(r2)
    log_cols = 2.0 * (log_d + log_r) + np.log(bracket)  # -inf at m (log_r), replaced next
    np.put_along_axis(log_cols, m, 2.0 * log_d_m + np.log(bracket_m), axis=-1)
    log_fro = log_unit + big + 0.5 * _logsumexp(log_cols)
    diag = d * p * one_minus_p
    np.put_along_axis(diag, m, np.exp(log_d_m) * p_m * e_mass, axis=-1)
    max_abs = diag.max(axis=-1) * np.exp(big[..., 0])
    return log_fro, max_abs


def log_sigmoid(y: np.ndarray) -> np.ndarray:
    """ln sigmoid(y), exact for any y (no log(0) for y << 0, no log(1 - tiny) for y >> 0)."""
    return -np.logaddexp(0.0, -y)


def sigmoid_row_metrics(logits: np.ndarray, bias: np.ndarray | float,
                        log_slope: np.ndarray | None = None) -> RowMetrics:
    """The diagnostics of sigmoid attention, p_i = sigmoid(z_i + b) (``bias`` b: a scalar or one
    per row, shape (..., 1); the rule uses b = -ln n). Jacobian: diag(p_i (1 - p_i)), column j
    times the slope; entropy of p / key mass; no sink (module docstring). Masked keys may stand
    at -1e300: their weight is 0."""
    z = np.asarray(logits)
    if z.dtype.kind != "f":
        z = z.astype(np.float64)
    dt = z.dtype
    n = z.shape[-1]
    y = z + np.asarray(bias, dtype=dt)
    log_p = log_sigmoid(y)
    log_q = log_sigmoid(-y)  # ln(1 - p), exact where p is near 1
    p = np.exp(log_p)
    top = p.max(axis=-1)
    key_mass = p.sum(axis=-1)
    entropy = np.clip(_entropy_of_normalized(log_p - log_p.max(axis=-1, keepdims=True)), 0.0,
                      np.log(n))
    log_j = log_p + log_q  # ln p_i (1 - p_i), the diagonal
    if log_slope is not None:
        log_j = log_j + np.broadcast_to(np.asarray(log_slope, dtype=dt), z.shape)
    log_fro = 0.5 * _logsumexp(2.0 * log_j)[..., 0]
    return RowMetrics(
        weights=p, top_weight=top, entropy=entropy.astype(dt, copy=False),
        jacobian_fro=np.exp(log_fro).astype(dt, copy=False),
        log10_jacobian_fro=(log_fro / np.log(10.0)).astype(dt, copy=False),
        jacobian_max_abs=np.exp(log_j.max(axis=-1)).astype(dt, copy=False),
        key_mass=key_mass.astype(dt, copy=False), sink_weight=np.zeros_like(top),
    )


def _pair_sum(b: np.ndarray) -> np.ndarray:
    """sum_{i != j} b_i b_j for b >= 0 without cancellation: 2 * sum_i b_i * sum_{j > i} b_j."""
    suffix = np.flip(np.cumsum(np.flip(b, axis=-1), axis=-1), axis=-1)  # suffix[i] = sum_{j>=i}
    after = suffix[..., 1:]
    return 2.0 * (b[..., :-1] * after).sum(axis=-1, keepdims=True)
