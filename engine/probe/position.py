"""Scales that depend on the query's position: find them in the capture, fit them per bucket.

Llama 4 (attention temperature tuning, on its layers without RoPE) and Ministral 3
(``llama_4_scaling_beta``) multiply q by a factor that grows with the position. One scale per
head cannot describe such a site, and the q that reaches the product is no longer a constant
multiple of the projection's output, so :func:`sites.match_projection` leaves it unmatched.

:func:`match_position_factor` finds it: per head and token, q at the product is ``c_h f(t)``
times a rotation (RoPE) of a d_k-wide block of a projection output, with one profile ``f`` shared
by every head (``f`` = 1 at the first query). A rotation of RoPE turns each pair of coordinates
(i, i + d/2, or 2i, 2i + 1 interleaved) and keeps its norm, so the vector of pair norms of q is
``c_h f(t)`` times the block's whatever the angles: that picks the block. Per-token factors that
differ between heads (a QK-norm with unit gains) are not a position law and stay unmatched.

:func:`bucket_fits` then fits one scale per bucket of query positions, s(position), beside the
law the model declares (:mod:`engine.probe.declared`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.probe.scale_fit import ScaleFit, fit_scale

#: per-token pair-norm vectors proportional to this (1 - cosine), float32 rounding allowing
PAIR_COS_TOL = 1e-8
#: query rows per position bucket at least, and buckets at most
BUCKET_ROWS, MAX_BUCKETS = 4, 6


def _pair_norms(x: np.ndarray, pairing: str) -> np.ndarray:
    """(..., d) -> (..., d/2): the norm of each coordinate pair a RoPE rotation turns."""
    d = x.shape[-1]
    if pairing == "half":
        a, b = x[..., : d // 2], x[..., d // 2:]
    else:
        a, b = x[..., 0::2], x[..., 1::2]
    return np.sqrt(a * a + b * b)


def match_position_factor(x: np.ndarray, outputs: list[np.ndarray], rel_tol: float
                          ) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """(c (H,), f (n,), rotated) with |x_h(t)| = c_h f(t) |block_h(t)|, f shared by every head
    within ``rel_tol`` and 1 at the first token that has a query (NaN where a token's q is 0 in
    every head: it carries no factor); None when there is no such block for every head."""
    _h, n, d = x.shape
    if d % 2 or n < 2:
        return None
    xn = np.linalg.norm(x, axis=-1)
    live = (xn > 1e-6 * xn.max()).all(axis=0)  # tokens with a query in every head
    if live.sum() < 2:
        return None
    for y in outputs:
        if y.shape[0] != n or y.shape[1] % d:
            continue
        blocks = y.astype(np.float64).reshape(n, -1, d).transpose(1, 0, 2)  # (J, n, d)
        for pairing in ("half", "interleaved"):
            got = _match(x[:, live], xn[:, live], blocks[:, live], pairing, rel_tol)
            if got is not None:
                c, f_live, rotated = got
                f = np.full(n, np.nan)
                f[live] = f_live
                return c, f, rotated
    return None


def _match(x: np.ndarray, xn: np.ndarray, blocks: np.ndarray, pairing: str, rel_tol: float
           ) -> tuple[np.ndarray, np.ndarray, bool] | None:
    u = _pair_norms(x, pairing)  # (H, n, d/2)
    v = _pair_norms(blocks, pairing)  # (J, n, d/2)
    un = u / np.maximum(np.linalg.norm(u, axis=-1, keepdims=True), 1e-300)
    vn = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-300)
    cos = np.einsum("htd,jtd->hjt", un, vn).min(axis=-1)  # (H, J): worst token
    j = cos.argmax(axis=1)
    if np.any(1.0 - cos[np.arange(len(j)), j] > PAIR_COS_TOL):
        return None
    bn = np.linalg.norm(blocks[j], axis=-1)  # (H, n)
    if np.any(bn <= 0):
        return None
    r = xn / bn  # (H, n)
    prof = r / r[:, :1]
    f = np.median(prof, axis=0)
    if np.any(np.abs(prof / f - 1.0) > rel_tol) or np.all(np.abs(f - 1.0) <= rel_tol):
        return None  # heads disagree (not a position law), or no position dependence at all
    rotated = bool(np.abs(x - r[..., None] * blocks[j]).max() > rel_tol * np.abs(x).max() * 10)
    return r[:, 0].copy(), f, rotated


@dataclass(frozen=True)
class PositionBucket:
    """The scale of one bucket of query positions (a site's heads fitted jointly)."""

    first: int  #: the first and last query position of the bucket
    last: int
    measured: float  #: the fitted scale x sqrt(d_k) (rows' factors as the weights show them)
    declared: float  #: the reference's scale x sqrt(d_k), averaged over the bucket's rows
    ratio: float  #: the fit of the q.k folded with the reference's law, over the reference
    tol: float  #: that fit's band on log ratio (inf: not identifiable)


def buckets(rows: np.ndarray) -> list[np.ndarray]:
    """Equal-count buckets of query rows (indices into ``rows``), at most MAX_BUCKETS."""
    n_b = max(1, min(MAX_BUCKETS, len(rows) // BUCKET_ROWS))
    return [b for b in np.array_split(np.arange(len(rows)), n_b) if b.size]


def bucket_fits(z: np.ndarray, p: np.ndarray, vis: np.ndarray, bias: np.ndarray | None,
                rows: np.ndarray, row_factor: np.ndarray, reference: float, d_k: int
                ) -> tuple[PositionBucket, ...]:
    """One joint fit per bucket of query rows: the plain scale, and the scale of q.k times the
    reference's per-row factor (``row_factor``, 1 without a law) against ``reference``."""
    h = z.shape[0]
    out = []
    for idx in buckets(rows):
        ok = vis[idx].sum(-1) >= 2
        idx = idx[ok]
        if idx.size == 0:
            continue
        zb, pb = z[:, idx], p[:, idx]
        visb = np.tile(vis[idx], (h, 1))
        bb = None if bias is None else np.broadcast_to(bias, z.shape)[:, idx].reshape(
            1, -1, z.shape[-1])
        plain = _joint(zb, pb, visb, bb, d_k)
        folded = _joint(zb * row_factor[idx][None, :, None], pb, visb, bb, d_k)
        sq = np.sqrt(d_k)
        out.append(PositionBucket(
            int(rows[idx[0]]), int(rows[idx[-1]]), float(plain.scale[0]) * sq,
            float(reference * row_factor[idx].mean()) * sq,
            float(folded.scale[0]) / reference, float(folded.tol_log[0])))
    return tuple(out)


def _joint(z: np.ndarray, p: np.ndarray, vis: np.ndarray, bias: np.ndarray | None, d_k: int
           ) -> ScaleFit:
    return fit_scale(z.reshape(1, -1, z.shape[-1]), p.reshape(1, -1, p.shape[-1]), vis,
                     d_k=d_k, bias=bias)
