"""Turn what ONNX Runtime returned for one attention site into the audit's fit.

An unfused site becomes a :class:`~engine.probe.sites.SiteRecord` (q and k relative to their
projections, the Softmax's own weights, the mask and bias from the Add operands) and is fitted by
:func:`engine.probe.audit.fit_site`, exactly as the source audit fits a layer. A fused operator's
output is fitted by :mod:`engine.probe.port.fused_fit`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.probe.audit import SiteFit, _layer_verdict, fit_site
from engine.probe.port.fused_fit import fit_output
from engine.probe.port.onnx_graph import OnnxSite
from engine.probe.scale_fit import verdict
from engine.probe.sites import (
    MASKED_BELOW,
    MAX_FIT_ROWS,
    SiteRecord,
    attention_pattern,
    match_projection,
)


@dataclass(frozen=True)
class PortSite:
    """One site of the port, fitted."""

    name: str
    kind: str
    n_heads: int
    d_k: int
    fit: SiteFit
    features: tuple[str, ...]
    declared: float | None  #: the scale the graph declares (fused: its attribute)
    declared_source: str
    causal: bool
    cross: bool


def _heads(x: np.ndarray, n: int | None = None) -> np.ndarray:
    """(B=1, H, n, d) or (H, n, d) as (H, n, d) float64."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 4:
        x = x[0]
    if x.ndim != 3:
        raise ConfigError("onnx", f"an attention tensor has shape {x.shape}, not (batch, heads, "
                          "tokens, width)")
    return x


def _projection_outputs(arrays: dict[str, np.ndarray], names: list[str]) -> list[np.ndarray]:
    outs = []
    for n in names:
        a = np.asarray(arrays[n])
        if a.ndim == 3 and a.shape[0] == 1:
            outs.append(a[0])
        elif a.ndim == 2:
            outs.append(a)
    return outs


def _relative(x: np.ndarray, outs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """x relative to its projection (x / r per head), the ratios, rotated."""
    ratio, rot = match_projection(x, outs)
    if ratio is None:
        return x, None, False
    return x / ratio[:, None, None], ratio, rot


def _mask(site: OnnxSite, arrays: dict[str, np.ndarray], shape: tuple[int, int, int]
          ) -> tuple[np.ndarray, np.ndarray | None]:
    """(visible (nq, nk), finite additive terms (H, nq, nk) or None) from the Add/Where operands."""
    total = np.zeros(shape)
    keep = np.ones(shape, dtype=bool)
    for name, sign in site.terms:
        total = total + sign * _broadcast(arrays[name], shape)
    for cond, when in site.where:
        c = _broadcast(arrays[cond], shape).astype(bool)
        keep &= c if when else ~c
    vis_h = keep & np.isfinite(total) & (total > MASKED_BELOW)
    bias = np.where(vis_h, total, 0.0)
    return vis_h.all(axis=0), (bias if np.any(bias) else None)


def _broadcast(a: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    while a.ndim > 3:
        if a.shape[0] != 1:
            raise ConfigError("onnx", f"a mask of shape {a.shape} has a batch larger than one")
        a = a[0]
    return np.broadcast_to(a, shape)


def unfused_record(site: OnnxSite, arrays: dict[str, np.ndarray]) -> SiteRecord:
    q_at = _heads(arrays[site.q])
    kt = _heads(arrays[site.k])
    if kt.shape[0] != q_at.shape[0] or kt.shape[1] != q_at.shape[2]:
        raise ConfigError("onnx", f"{site.name}: the score MatMul multiplies {q_at.shape} by "
                          f"{kt.shape}, not q (heads, tokens, d) by k^T (heads, d, tokens)")
    k_at = np.swapaxes(kt, -1, -2)
    h, nq, _d = q_at.shape
    nk = k_at.shape[1]
    if int(site.attrs.get("axis", -1)) not in (-1, 3):
        raise ConfigError("onnx", f"{site.name}: the Softmax is not over the keys (axis "
                          f"{site.attrs.get('axis')})")
    probs = _heads(arrays[site.probs])
    visible, bias = _mask(site, arrays, (h, nq, nk))
    q, qr, qrot = _relative(q_at, _projection_outputs(arrays, site.proj_q))
    k, kr, krot = _relative(k_at, _projection_outputs(arrays, site.proj_k))
    if qr is None or kr is None:
        q, k, qr, kr = q_at, k_at, None, None
    rows = np.unique(np.round(np.linspace(0, nq - 1, min(nq, MAX_FIT_ROWS))).astype(int))
    cross = nq != nk
    causal, window = (False, None) if cross else attention_pattern(visible)
    feats = _features(causal, window, qr, bool(qrot or krot), bias is not None, site.softcap)
    return SiteRecord(
        site=site.index, q=q.astype(np.float32), k=k.astype(np.float32),
        kv_head=np.arange(h), rows=rows, probs=probs[:, rows].astype(np.float32),
        visible=visible[rows], bias=None if bias is None else bias[:, rows].astype(np.float32),
        sinks=None, softcap=site.softcap, scaling=None, q_ratio=qr, k_ratio=kr,
        rotated=bool(qrot or krot), causal=causal, window=window, sliding_window=None,
        features=feats)


def _features(causal: bool, window: int | None, ratio: np.ndarray | None, rotated: bool,
              bias: bool, softcap: float | None) -> tuple[str, ...]:
    out = [f"sliding window {window}" if window else "causal" if causal else "bidirectional"]
    if rotated:
        out.append("RoPE")
    if ratio is None:
        out.append("q/k not a projection's output")
    if bias:
        out.append("additive bias")
    if softcap is not None:
        out.append(f"soft-cap {softcap:g}")
    return tuple(out)


def fit_unfused(site: OnnxSite, arrays: dict[str, np.ndarray], d_model: int) -> PortSite:
    rec = unfused_record(site, arrays)
    fit = fit_site(rec, d_model or rec.n_heads * rec.d_k)
    const = math.prod(site.scale_consts) if site.scale_consts else None
    src = (f"graph constants on the scores ({', '.join(f'{c:.4g}' for c in site.scale_consts)})"
           if site.scale_consts else "no constant on the scores")
    return PortSite(site.name, "unfused", rec.n_heads, rec.d_k, fit, rec.features, const, src,
                    rec.causal, rec.q.shape[1] != rec.k.shape[1])


def fit_fused(site: OnnxSite, arrays: dict[str, np.ndarray], d_model: int,
              weights: Any = None) -> PortSite:
    from engine.probe.port.fused_ops import unpack

    op = unpack(site, arrays, weights)
    q, qr, qrot = _relative(op.q, _projection_outputs(arrays, site.proj_q))
    k, kr, krot = _relative(op.k, _projection_outputs(arrays, site.proj_k))
    if qr is None or kr is None:
        q, k, qr = op.q, op.k, None
    if site.kind == "com.microsoft.Attention":  # the projections are inside the operator
        qr = np.ones(op.q.shape[0])
    z = q @ np.swapaxes(k[op.kv_head], -1, -2)
    h, d = q.shape[0], q.shape[2]
    d_model = d_model or h * d  # unknown without a source: the heads' total width
    v = op.v[op.kv_head]
    head = fit_output(z, op.visible, op.bias, v, op.out, d, op.softcap)
    layer = fit_output(z, op.visible, op.bias, v, op.out, d, op.softcap, joint=True)
    hv = [verdict(float(head.scale[i]), float(head.tol_log[i]), bool(head.identifiable[i]),
                  1.0, head.weight_sum_tol, d, d_model, h) for i in range(h)]
    fit = SiteFit(head, layer, hv, _layer_verdict(head, layer, hv, d, d_model, h), None, None)
    causal = op.causal
    feats = _features(causal, None, qr, bool(qrot or krot), op.bias is not None, op.softcap)
    if op.kv_heads < h:
        feats = (*feats, f"GQA {h}q/{op.kv_heads}kv")
    return PortSite(site.name, site.kind, h, d, fit, feats, op.scale, op.scale_source, causal,
                    q.shape[1] != k.shape[1])
