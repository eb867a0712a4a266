"""Per-head statistics of captured queries and keys, against the i.i.d. theory of docs/SCIENCE.md.

Raw scores ``s_ij = q_i . k_j`` are pooled over the visible (query, key) pairs of one head.

The i.i.d. prediction uses PER-COORDINATE moments measured across the text's tokens: for each
coordinate c, the mean m and variance s^2 of q_c over the tokens, and those of k_c. If q and k were
independent of each other and their coordinates independent, ``q.k = sum_c q_c k_c`` would have

    E[q.k]   = sum_c mq_c mk_c
    Var(q.k) = sum_c [(sq_c^2 + mq_c^2)(sk_c^2 + mk_c^2) - mq_c^2 mk_c^2]

(docs/SCIENCE.md's formula, one term per coordinate). Per-coordinate rather than pooled moments,
because trained projections give coordinates very different means and spreads; pooling them
would charge the theory with a mismatch that is only coordinate heterogeneity. What the ratio
``raw_std / iid_pred_std`` then measures is what the variance-1 argument ignores: correlation
between q and k and between coordinates (trained heads: ratio above 1). Moments use ddof=0, the
same as the pooled score std they are compared with.

Uncertainty: a bootstrap over tokens. Each resample draws the n tokens with replacement
(multinomial counts c), and every statistic is recomputed with pair weights c_i c_j, which keeps
the dependence between pairs that share a token. The reported ``*_se`` figures are the standard
deviations over resamples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.softmax import row_metrics


@dataclass(frozen=True)
class ScoreStats:
    """(L, H) arrays: measured and predicted raw-score moments with bootstrap standard errors."""

    raw_mean: np.ndarray
    raw_std: np.ndarray
    iid_pred_mean: np.ndarray
    iid_pred_std: np.ndarray
    std_ratio: np.ndarray
    raw_std_se: np.ndarray
    iid_pred_std_se: np.ndarray
    std_ratio_se: np.ndarray


def concat_layers(parts: list) -> ScoreStats | RowStats:
    """Join per-layer ScoreStats or RowStats (computed one layer at a time) along the layer axis."""
    first = parts[0]
    fields = {}
    for name in first.__dataclass_fields__:
        vals = [getattr(p, name) for p in parts]
        if name == "row_ok" or vals[0] is None:
            fields[name] = vals[0]
        else:
            fields[name] = np.concatenate(vals, axis=0)
    return type(first)(**fields)


def iid_prediction(q: np.ndarray, k: np.ndarray, wq: np.ndarray | None = None,
                   wk: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of q.k predicted from per-coordinate moments.

    ``q`` (..., n, d), ``k`` (..., m, d); optional token weights ``wq`` (B, n), ``wk`` (B, m)
    (non-negative bootstrap counts) add a trailing resample axis. Returns arrays of shape (...)
    or (..., B).
    """
    mq, vq = _coord_moments(q, wq)
    mk, vk = _coord_moments(k, wk)
    # with weights (B, n) the results gain a resample axis: (..., B)
    mean = (mq * mk).sum(axis=-1)
    var = ((vq + mq**2) * (vk + mk**2) - mq**2 * mk**2).sum(axis=-1)
    return mean, var


def _coord_moments(x: np.ndarray, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-coordinate mean and variance over tokens; weights (B, n) give (..., B, d) results."""
    x = np.asarray(x, dtype=np.float64)
    m0 = x.mean(axis=-2)
    xc = x - m0[..., None, :]  # centred first: the weighted variance below then cancels nothing
    if w is None:
        return m0, (xc**2).mean(axis=-2)
    # bootstrap resamples only feed a standard error: float32 halves the cost of the products
    w32 = np.asarray(w, dtype=np.float32)
    xc32 = xc.astype(np.float32)
    tot = w.sum(axis=-1)[:, None]  # (B, 1)
    m1 = np.moveaxis(np.tensordot(w32, xc32, axes=([1], [-2])), 0, -2) / tot  # (..., B, d), BLAS
    m2 = np.moveaxis(np.tensordot(w32, xc32 * xc32, axes=([1], [-2])), 0, -2) / tot
    return m0[..., None, :] + m1, np.maximum(m2 - m1 * m1, 0.0)


def score_stats(q: np.ndarray, k: np.ndarray, pair_mask: np.ndarray, bootstrap: int = 200,
                seed: int = 0, cancelled: Callable[[], bool] | None = None) -> ScoreStats:
    """Pooled raw-score moments of every head vs. the i.i.d. prediction, with bootstrap SEs.

    ``q``, ``k`` (L, H, n, d) (any leading axes: (H, n, d) and (n, d) work alike); ``pair_mask``
    (n, n) bool, True where key j is visible to query i.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    s = q @ np.swapaxes(k, -1, -2)  # (L, H, n, n)
    pm = np.asarray(pair_mask, dtype=np.float64)
    n = q.shape[-2]
    n_pairs = pm.sum()
    raw_mean = (s * pm).sum(axis=(-2, -1)) / n_pairs
    raw_var = ((s - raw_mean[..., None, None]) ** 2 * pm).sum(axis=(-2, -1)) / n_pairs
    pred_mean, pred_var = iid_prediction(q, k)
    raw_std = np.sqrt(np.maximum(raw_var, 0.0))
    pred_std = np.sqrt(np.maximum(pred_var, 0.0))
    ratio = _safe_ratio(raw_std, pred_std)
    zeros = np.zeros_like(raw_std)
    if bootstrap < 2:
        return ScoreStats(raw_mean, raw_std, pred_mean, pred_std, ratio, zeros, zeros.copy(),
                          zeros.copy())
    rng = np.random.default_rng(seed)
    pair_moments = _PairMoments(s, pm, np.float32)
    raw_b, pred_b, ratio_b = [], [], []
    chunk = max(1, min(bootstrap, 64))
    done = 0
    while done < bootstrap:
        if cancelled is not None and cancelled():
            from engine.errors import Cancelled

            raise Cancelled()
        b = min(chunk, bootstrap - done)
        c = rng.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float64)  # (B, n)
        _, var_b = pair_moments(c)  # (L, H, B)
        _, pvar_b = iid_prediction(q, k, c, c)  # (L, H, B)
        rs = np.sqrt(np.maximum(var_b, 0.0))
        ps = np.sqrt(np.maximum(pvar_b, 0.0))
        raw_b.append(rs)
        pred_b.append(ps)
        ratio_b.append(_safe_ratio(rs, ps))
        done += b
    se = [np.concatenate(x, axis=-1).std(axis=-1, ddof=1) for x in (raw_b, pred_b, ratio_b)]
    return ScoreStats(raw_mean, raw_std, pred_mean, pred_std, ratio, *se)


class _PairMoments:
    """Weighted mean/variance of s over pairs with weights pm_ij c_i c_j, for many weight vectors.

    The centred products are formed once; each call is then two matrix products, (n, n) by (n, B).
    ``dtype`` float32 halves the cost of bootstrap resamples (their spread needs no more digits).
    """

    def __init__(self, s: np.ndarray, pm: np.ndarray, dtype: type = np.float64) -> None:
        self.pm = pm.astype(dtype)
        self.mu0 = (s * pm).sum(axis=(-2, -1)) / pm.sum()  # (L, H)
        sc = s - self.mu0[..., None, None]  # centred: E[s^2] - E[s]^2 below cancels nothing
        self.ws = (sc * pm).astype(dtype)
        self.ws2 = (sc * sc * pm).astype(dtype)

    def __call__(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """c (B, n) token weights -> mean and variance, each (L, H, B)."""
        ct = c.T.astype(self.ws.dtype)  # (n, B)
        w_tot = ((self.pm @ ct) * ct).sum(axis=0)  # (B,)
        m1 = ((self.ws @ ct) * ct).sum(axis=-2) / w_tot
        m2 = ((self.ws2 @ ct) * ct).sum(axis=-2) / w_tot
        m1, m2 = m1.astype(np.float64), m2.astype(np.float64)
        return self.mu0[..., None] + m1, np.maximum(m2 - m1**2, 0.0)


def _safe_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b, and 0 where b is 0 (a head whose q or k is constant): never NaN or Inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)
    return r


@dataclass(frozen=True)
class RowStats:
    """Per-query-row softmax diagnostics of every head under one scale: (L, H, n) arrays.

    Rows that see fewer than 2 keys (a causal model's first token) carry no information about
    the softmax; ``row_ok`` (n,) marks the rows that count in the per-head means. The others
    hold entropy 0, top weight 1, Jacobian 0 and a finite log10 of it, -300.
    """

    entropy_norm: np.ndarray  #: H / log(n_i), n_i = keys visible to row i
    top_weight: np.ndarray
    jacobian_fro: np.ndarray
    log10_jacobian_fro: np.ndarray
    row_ok: np.ndarray
    #: (L, H) largest |our weight - model weight| over all entries, when model weights were given
    max_abs_diff: np.ndarray | None


def row_groups(pair_mask: np.ndarray) -> list[tuple[slice | np.ndarray, slice | np.ndarray]]:
    """Rows with the same visible keys, grouped: [(rows, keys)], one softmax call per group.

    Contiguous index sets come back as slices (no copies: the common cases, all keys visible or
    a causal prefix, are contiguous).
    """
    pm = np.asarray(pair_mask, dtype=bool)
    groups: dict[bytes, list[int]] = {}
    for i, row in enumerate(pm):
        groups.setdefault(row.tobytes(), []).append(i)
    return [(_as_slice(np.array(rows)), _as_slice(np.flatnonzero(pm[rows[0]])))
            for rows in groups.values()]


def _as_slice(idx: np.ndarray) -> slice | np.ndarray:
    if idx.size and np.all(np.diff(idx) == 1):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def _count(idx: slice | np.ndarray) -> int:
    return idx.stop - idx.start if isinstance(idx, slice) else int(idx.size)


def row_stats(scores: np.ndarray, scale: np.ndarray | float, pair_mask: np.ndarray,
              model_attn: np.ndarray | None = None, bias: np.ndarray | None = None,
              cap: float | None = None) -> RowStats:
    """Softmax diagnostics of ``scale * scores`` over the visible keys of each row.

    ``scores`` (L, H, n, n) raw q.k; ``scale`` scalar, (L,) or (L, H). Masked keys are not set to a
    large negative number: each row is cut to its visible keys, so row_metrics (one implementation
    of the saturation-safe math) only ever sees finite logits, and n_i is the right entropy ceiling.
    The model's own logits may carry more than the scale: a soft-cap ``cap`` (c tanh(x / c))
    and additive terms ``bias`` (L, H, n, n) (position bias, ALiBi).
    """
    s = np.asarray(scores, dtype=np.float64)
    L, H, n, _ = s.shape
    sc = np.asarray(scale, dtype=np.float64)
    if sc.ndim == 1:
        sc = sc[:, None]
    sc = np.broadcast_to(sc, (L, H))[..., None, None]
    ent = np.zeros((L, H, n))
    top = np.ones((L, H, n))
    fro = np.zeros((L, H, n))
    log10_fro = np.full((L, H, n), -300.0)
    row_ok = np.zeros(n, dtype=bool)
    diff = np.zeros((L, H)) if model_attn is not None else None
    for rows, keys in row_groups(pair_mask):
        n_keys = _count(keys)
        if n_keys == 0:
            continue
        logits = s[:, :, rows][:, :, :, keys] * sc
        if cap is not None:
            logits = cap * np.tanh(logits / cap)
        if bias is not None:
            logits = logits + np.asarray(bias, dtype=np.float64)[:, :, rows][:, :, :, keys]
        rm = row_metrics(logits) if n_keys >= 2 else None
        if model_attn is not None:
            ma = np.asarray(model_attn, dtype=np.float64)[:, :, rows]
            ours = np.ones(logits.shape) if rm is None else rm.weights
            d = np.abs(ma[:, :, :, keys] - ours).max(axis=(2, 3))
            hidden = np.ones(n, dtype=bool)
            hidden[keys] = False
            if hidden.any():
                d = np.maximum(d, np.abs(ma[:, :, :, hidden]).max(axis=(2, 3)))
            diff = np.maximum(diff, d)
        if rm is None:
            continue
        row_ok[rows] = True
        ent[:, :, rows] = rm.entropy / math.log(n_keys)
        top[:, :, rows] = rm.top_weight
        fro[:, :, rows] = rm.jacobian_fro
        log10_fro[:, :, rows] = rm.log10_jacobian_fro
    return RowStats(ent, top, fro, log10_fro, row_ok, diff)


def attention_weights(scores: np.ndarray, scale: float, pair_mask: np.ndarray) -> np.ndarray:
    """(n, n) softmax weights of one head's ``scale * scores``; exactly 0 on masked keys."""
    s = np.asarray(scores, dtype=np.float64)
    w = np.zeros_like(s)
    for rows, keys in row_groups(pair_mask):
        n_keys = _count(keys)
        if n_keys == 0:
            continue
        r = np.arange(s.shape[0])[rows][:, None]
        c = np.arange(s.shape[1])[keys][None, :]
        w[r, c] = 1.0 if n_keys == 1 else row_metrics(s[rows][:, keys] * scale).weights
    return w
