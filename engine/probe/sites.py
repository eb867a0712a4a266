"""One attention call as NumPy data: q and k relative to the projections, the mask, the extra
terms of the logits, the model's own weights, and what kind of attention it is.

The query that reaches the attention function is not always what the query projection produced:
OPT and Whisper multiply it by 1/sqrt(d_k) right after ``q_proj`` and then call attention with
scaling 1; RoPE rotates q and k (norms unchanged); QK-norm models normalize them. The scale the
audit reports must be the one applied to the *projections'* q.k, so each head of the query (and
of the key) is matched to a d_k-wide block of one linear layer's output in the same call whose
per-token norms it reproduces up to one constant factor r. Then q_proj = q / r, whatever the
layout (separate projections, GPT-2's fused c_attn, Bloom's interleaved heads) and whether or not
the vectors were rotated; the match also tells RoPE (same norms, other direction) from a plain
rescaling. A head with no such block (QK-norm, MLA's assembled q) is measured as it reaches the
product, and said so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.probe.position import match_position_factor

#: the fit uses at most this many query rows per head, evenly spaced (memory stays bounded)
MAX_FIT_ROWS = 128
#: per-token norm ratios constant to this relative spread are one factor. A genuine constant
#: factor leaves only the float32 rounding of the few operations between the projection and the
#: product (a RoPE rotation, a multiplication or two: a few eps, ~1e-7 measured); 1e-4 sits
#: hundreds of times above that and far below the smallest step of a position-dependent factor
#: a model declares (Llama 4, Ministral 3: 0.1 ln 2 = 0.07)
RATIO_SPREAD_TOL = 1e-4
#: a mask entry below this is "masked" (transformers uses the dtype's minimum, -3.4e38)
MASKED_BELOW = -1e30


@dataclass(frozen=True)
class SiteRecord:
    """One site's data for the fit (and, with all rows kept, for the probe's statistics)."""

    site: int
    q: np.ndarray  #: (H, nq, d) float32 queries relative to the projection (q / r_q)
    k: np.ndarray  #: (Hkv, nk, d) float32 keys relative to the projection
    kv_head: np.ndarray  #: (H,) int: the key head each query head reads
    rows: np.ndarray  #: (R,) the query rows kept in ``probs``, ``bias``, ``visible``
    probs: np.ndarray  #: (H, R, nk) float32 the weights the values saw
    visible: np.ndarray  #: (R, nk) bool key visible to the row
    bias: np.ndarray | None  #: (1 or H, R, nk) float32 additive terms (position bias, ALiBi)
    sinks: np.ndarray | None  #: (H,) the sink logit of each head (gpt-oss), None without sinks
    softcap: float | None  #: the soft-cap c the call passed (before any injected change)
    scaling: float | None  #: the factor the call passed to the attention function
    q_ratio: np.ndarray | None  #: (H,) |q at the product| / |q projection|; None: unmatched
    k_ratio: np.ndarray | None  #: (Hkv,)
    rotated: bool  #: q/k match a projection up to a rotation (RoPE), not exactly
    causal: bool  #: no row sees a later key (and some row could have)
    window: int | None  #: the most keys any row sees, when smaller than the causal prefix
    sliding_window: int | None  #: the window the call declared (sliding_window argument)
    features: tuple[str, ...]
    #: (nq,) a factor q carries that depends on the query's position, shared by the heads and 1
    #: at the first query (Llama 4, Ministral 3; q above is divided by it), None without one
    q_position: np.ndarray | None = None

    @property
    def n_heads(self) -> int:
        return self.q.shape[0]

    @property
    def n_kv_heads(self) -> int:
        return self.k.shape[0]

    @property
    def d_k(self) -> int:
        return self.q.shape[2]

    def scores(self) -> np.ndarray:
        """(H, R, nk) float64 raw q.k of the projections' q and k, for the kept rows."""
        q = self.q.astype(np.float64)[:, self.rows]
        k = self.k.astype(np.float64)[self.kv_head]
        return q @ np.swapaxes(k, -1, -2)

    def prescale(self) -> np.ndarray:
        """(H,) factor between the projections' q.k and the q.k at the product (1 if unmatched)."""
        rq = np.ones(self.n_heads) if self.q_ratio is None else self.q_ratio
        rk = np.ones(self.n_kv_heads) if self.k_ratio is None else self.k_ratio
        return rq * rk[self.kv_head]


def record_call(call: object, max_rows: int | None = MAX_FIT_ROWS, has_norm: bool = False,
                cross: bool = False, unmatched: str | None = None) -> SiteRecord:
    """A :class:`~engine.probe.tap.SiteCall` (batch of one) as a :class:`SiteRecord`.
    ``unmatched``: what to call q and k when no projection made them (MLA), else QK-norm for a
    site with a norm inside (``has_norm``)."""
    q = _np(call.query)[0]  # (H, nq, d)
    k = _np(call.key)[0]  # (Hkv, nk, d)
    w = _np(call.weights)[0]  # (H, nq, nk)
    h, nq, _d = q.shape
    hkv, nk = k.shape[0], k.shape[1]
    kv_head = np.arange(h) // max(1, h // hkv) if h % hkv == 0 else np.zeros(h, dtype=int)
    visible, mask_bias = split_mask(call.mask, nq, nk)
    extra_bias = None if call.bias is None else _np(call.bias)[0]
    if extra_bias is not None and not np.any(extra_bias):
        extra_bias = None
    bias = _add(mask_bias, extra_bias)
    rows = _rows(nq, max_rows)
    extra = call.extra
    sinks = extra.get("s_aux")
    sinks = None if sinks is None else _np(sinks).astype(np.float64).reshape(-1)
    if sinks is not None and _rows_sum_to_one(w, visible):
        sinks = None  # passed, but applied on the output (Granite SWA): not a logit of the rows
    outs = [_np(o)[0] for o, _i in call.projections
            if getattr(o, "ndim", 0) == 3 and o.shape[0] == 1]
    outs += [_np(o)[:, 0] for o, _i in call.projections  # time-first layouts (FSMT)
             if getattr(o, "ndim", 0) == 3 and o.shape[1] == 1 and o.shape[0] > 1]
    q_ratio, q_rot = match_projection(q.astype(np.float64), outs)
    k_ratio, k_rot = match_projection(k.astype(np.float64), outs)
    q_pos = None
    if q_ratio is None and k_ratio is not None:  # a factor on q that varies with the position?
        got = match_position_factor(q.astype(np.float64), outs, RATIO_SPREAD_TOL)
        if got is not None:
            q_ratio, q_pos, q_rot = got
    if q_ratio is None or k_ratio is None:  # one side unmatched: measure both at the product
        q_ratio = k_ratio = q_pos = None
    qp = q if q_ratio is None else (q / q_ratio[:, None, None]).astype(np.float32)
    if q_pos is not None:  # (a token without a query, NaN, is 0 whatever it is divided by)
        qp = (qp / np.where(np.isfinite(q_pos), q_pos, 1.0)[None, :, None]).astype(np.float32)
    kp = k if k_ratio is None else (k / k_ratio[:, None, None]).astype(np.float32)
    causal, window = (False, None) if cross else attention_pattern(visible)
    softcap = _float(extra.get("softcap"))
    sw = extra.get("sliding_window")
    sw = int(sw) if isinstance(sw, (int, np.integer)) and not isinstance(sw, bool) else None
    label = unmatched or ("QK-norm" if has_norm else "q/k not a projection's output")
    feats = _features(h, hkv, cross, causal, window, sw, q_ratio, k_ratio, q_rot or k_rot, label,
                      extra.get("bias_kind", "relative position bias") if extra_bias is not None
                      else None, mask_bias is not None, softcap, sinks is not None)
    return SiteRecord(
        site=call.site, q=qp, k=kp, kv_head=kv_head, rows=rows,
        probs=w[:, rows].astype(np.float32), visible=visible[rows],
        bias=None if bias is None else bias[:, rows].astype(np.float32), sinks=sinks,
        softcap=softcap, scaling=_float(extra.get("scaling")), q_ratio=q_ratio, k_ratio=k_ratio,
        rotated=bool(q_rot or k_rot), causal=causal, window=window, sliding_window=sw,
        features=feats + (position_feature(q_pos),) if q_pos is not None else feats,
        q_position=q_pos)


def position_feature(f: np.ndarray) -> str:
    return f"q x{float(np.nanmin(f)):.4g} to x{float(np.nanmax(f)):.4g} with the position"


def _np(t: object) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _float(x: object) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) else None


def _add(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _rows(n: int, max_rows: int | None) -> np.ndarray:
    if max_rows is None or n <= max_rows:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max_rows)).astype(int))


#: rows of a plain softmax sum to 1 within float32 rounding; a sink logit takes more than this
SINK_MASS_MIN = 1e-5


def _rows_sum_to_one(w: np.ndarray, visible: np.ndarray) -> bool:
    """Every row that sees a key sums to 1: the weights are a softmax without a sink's share."""
    rows = visible.any(-1)
    sums = w.astype(np.float64).sum(-1)[:, rows]
    return bool(sums.size) and bool(np.all(np.abs(sums - 1.0) < SINK_MASS_MIN))


def split_mask(mask: object, nq: int, nk: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(visible (nq, nk) bool, finite additive part (1 or H, nq, nk) or None) of a mask."""
    if mask is None:
        return np.ones((nq, nk), dtype=bool), None
    import torch

    m = mask[0] if mask.ndim == 4 else mask
    if m.ndim == 2:
        m = m[None]
    m = m[..., -nq:, -nk:]
    if m.dtype == torch.bool:
        vis = m.cpu().numpy()
        return np.broadcast_to(vis.all(axis=0), (nq, nk)).copy(), None
    a = m.detach().double().cpu().numpy()
    vis_h = np.isfinite(a) & (a > MASKED_BELOW)
    vis = np.broadcast_to(vis_h.all(axis=0), (nq, nk)).copy()
    add = np.where(vis_h, a, 0.0)
    if not np.any(add):
        return vis, None
    return vis, add


def attention_pattern(visible: np.ndarray) -> tuple[bool, int | None]:
    """(causal, sliding window) of a visibility matrix: causal when no row sees a later key (and
    the matrix is square and bigger than 1); a window when some row sees fewer keys than its
    causal prefix holds."""
    nq, nk = visible.shape
    if nq != nk or nq < 2:
        return False, None
    causal = not np.triu(visible, k=1).any()
    if not causal:
        return False, None
    seen = visible.sum(axis=1)
    prefix = np.arange(1, nq + 1)
    valid = seen > 0
    if np.any(seen[valid] < prefix[valid]):
        return True, int(seen.max())
    return True, None


def match_projection(x: np.ndarray, outputs: list[np.ndarray]
                     ) -> tuple[np.ndarray | None, bool]:
    """Per head of ``x`` (H, n, d): the constant factor r with |x_h(t)| = r |block(t)| for a
    d-wide block of one projection output (n, W); (None, False) when some head has none. Also
    whether x is only a rotation of r * block (RoPE)."""
    h, n, d = x.shape
    xn = np.linalg.norm(x, axis=-1)  # (H, n)
    ratio = np.full(h, np.nan)
    best = np.full(h, np.inf)
    rotated = False
    for y in outputs:
        if y.shape[0] != n or y.shape[1] % d:
            continue
        blocks = y.astype(np.float64).reshape(n, -1, d).transpose(1, 0, 2)  # (J, n, d)
        bn = np.linalg.norm(blocks, axis=-1)  # (J, n)
        ok = (xn[:, None, :] > 1e-6 * xn.max()) & (bn[None] > 1e-30)  # (H, J, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(ok, xn[:, None, :] / np.where(bn[None] > 0, bn[None], 1.0), np.nan)
        with np.errstate(invalid="ignore"):  # (nanmean/nanmax: nanmedian is 10x slower)
            med = np.nanmean(np.where(ok.any(-1, keepdims=True), r, 1.0), axis=-1)  # (H, J)
            spread = np.nanmax(np.abs(r / med[..., None] - 1.0), axis=-1)
        spread = np.where(ok.sum(-1) >= min(2, n), spread, np.inf)
        j = np.nanargmin(np.where(np.isfinite(spread), spread, np.inf), axis=1)
        sj = spread[np.arange(h), j]
        take = (sj < RATIO_SPREAD_TOL) & (sj < best)
        if not take.any():
            continue
        for head in np.flatnonzero(take):
            ratio[head] = med[head, j[head]]
            best[head] = sj[head]
            diff = np.abs(x[head] - ratio[head] * blocks[j[head]]).max()
            rotated |= bool(diff > RATIO_SPREAD_TOL * max(np.abs(x[head]).max(), 1e-30) * 10)
    if not np.all(np.isfinite(ratio)):
        return None, False
    return ratio, rotated


def _pattern_name(cross: bool, causal: bool, window: int | None) -> str:
    if cross:
        return "cross-attention (all source tokens)"
    if window is not None:
        return f"sliding window {window}"
    return "causal" if causal else "bidirectional"


def _features(h: int, hkv: int, cross: bool, causal: bool, window: int | None, sw: int | None,
              q_ratio: np.ndarray | None, k_ratio: np.ndarray | None, rotated: bool,
              unmatched: str, bias_kind: str | None, mask_bias: bool, softcap: float | None,
              sinks: bool) -> tuple[str, ...]:
    out = [_pattern_name(cross, causal, window)]
    if sw is not None and window is None and causal:
        out.append(f"sliding window {sw} (longer than the text)")
    if hkv == 1 and h > 1:
        out.append("MQA (1 key head)")
    elif hkv < h:
        out.append(f"GQA {h}q/{hkv}kv")
    scaled = {side: float(np.median(r)) for side, r in (("q", q_ratio), ("k", k_ratio))
              if r is not None and np.any(np.abs(r - 1.0) > RATIO_SPREAD_TOL)}
    if rotated and len(scaled) == 2 and abs(scaled["q"] / scaled["k"] - 1) < 1e-3:
        out.append(f"RoPE, q and k x{scaled['q']:.4g} each")  # YaRN's cos/sin factor, or more
    else:
        if rotated:
            out.append("RoPE")
        out += [f"{side} pre-scaled x{val:.4g}" for side, val in scaled.items()]
    if q_ratio is None:
        out.append(unmatched)
    if bias_kind:
        out.append(bias_kind)
    if mask_bias:
        out.append("additive bias")
    if softcap is not None:
        out.append(f"soft-cap {softcap:g}")
    if sinks:
        out.append("sinks")
    return tuple(out)
