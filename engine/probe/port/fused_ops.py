"""The q, k, v, mask and output of one fused attention operator, per head, from its tensors.

Layouts (batch of one, no past key/values: the audit runs one prompt):

* ONNX ``Attention`` (opset 23): 4-D (B, heads, tokens, d) inputs, or 3-D (B, tokens, heads*d)
  with ``q_num_heads``/``kv_num_heads``; ``attn_mask`` boolean (True attends) or additive;
  ``is_causal``; ``softcap``; ``scale`` (default 1/sqrt(d));
* ``com.microsoft.MultiHeadAttention``: 3-D query/key/value, ``num_heads``, optional ``bias``
  (q|k|v), ``key_padding_mask`` (1 attends), ``attention_bias``, ``unidirectional``;
* ``com.microsoft.GroupQueryAttention``: 3-D, ``num_heads``/``kv_num_heads``, always causal,
  ``softcap``, ``local_window_size``; a rotary embedding inside the operator (``do_rotary``) is
  refused when the graph is read: its rotated q and k never appear as tensors;
* ``com.microsoft.Attention``: the projections are inside: q|k|v = input @ weights + bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.probe.port.onnx_graph import OnnxSite
from engine.probe.sites import MASKED_BELOW


@dataclass
class FusedData:
    q: np.ndarray  #: (H, S, d) float64
    k: np.ndarray  #: (Hkv, L, d)
    v: np.ndarray  #: (Hkv, L, dv)
    out: np.ndarray  #: (H, S, dv)
    visible: np.ndarray  #: (S, L) bool
    bias: np.ndarray | None  #: (1 or H, S, L)
    softcap: float | None
    scale: float  #: the attribute (or the operator's default)
    scale_source: str
    causal: bool

    @property
    def kv_heads(self) -> int:
        return self.k.shape[0]

    @property
    def kv_head(self) -> np.ndarray:
        h, hkv = self.q.shape[0], self.k.shape[0]
        if h % hkv:
            raise ConfigError("onnx", f"{h} query heads cannot share {hkv} key heads")
        return np.arange(h) // (h // hkv)


def _split(x: np.ndarray, heads: int, what: str) -> np.ndarray:
    """(1, T, heads*d) or (1, heads, T, d) as (heads, T, d) float64."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 4 and x.shape[0] == 1:
        return x[0]
    if x.ndim == 3 and x.shape[0] == 1 and heads and x.shape[2] % heads == 0:
        t = x.shape[1]
        return x[0].reshape(t, heads, -1).transpose(1, 0, 2)
    raise ConfigError("onnx", f"the fused operator's {what} has shape {x.shape}; the audit reads "
                      "batch-of-one (1, tokens, heads*d) or (1, heads, tokens, d)")


def _scale(attrs: dict[str, Any], d: int) -> tuple[float, str]:
    s = attrs.get("scale")
    if s is None or float(s) == 0.0:
        return 1.0 / math.sqrt(d), "scale attribute absent: 1/sqrt(d)"
    return float(s), f"scale attribute {float(s):.6g}"


def _causal(s: int, n: int, window: int | None = None) -> np.ndarray:
    """Row i (the last s of n positions) sees keys <= its position (and within the window)."""
    pos = np.arange(n - s, n)[:, None]
    keys = np.arange(n)[None]
    vis = keys <= pos
    if window is not None and window > 0:
        vis &= keys > pos - window
    return vis


def _mask_terms(mask: np.ndarray | None, shape: tuple[int, int, int]
                ) -> tuple[np.ndarray, np.ndarray | None]:
    """(visible (S, L), additive (H, S, L) or None) of a boolean or additive mask."""
    if mask is None:
        return np.ones(shape[1:], dtype=bool), None
    m = np.asarray(mask)
    while m.ndim > 3:
        m = m[0]
    if m.dtype == np.bool_:
        return np.broadcast_to(m, shape).all(axis=0), None
    a = np.broadcast_to(m.astype(np.float64), shape)
    vis_h = np.isfinite(a) & (a > MASKED_BELOW)
    add = np.where(vis_h, a, 0.0)
    return vis_h.all(axis=0), (add if np.any(add) else None)


def unpack(site: OnnxSite, arrays: dict[str, np.ndarray], weights: Any = None) -> FusedData:
    kind = site.kind
    if kind == "Attention (ONNX opset 23)":
        return _onnx_attention(site, arrays)
    if kind == "com.microsoft.MultiHeadAttention":
        return _mha(site, arrays)
    if kind == "com.microsoft.GroupQueryAttention":
        return _gqa(site, arrays)
    return _ms_attention(site, arrays, weights)


def _onnx_attention(site: OnnxSite, arrays: dict[str, np.ndarray]) -> FusedData:
    a = site.attrs
    q = _split(arrays[site.q], int(a.get("q_num_heads", 0)), "query")
    k = _split(arrays[site.k], int(a.get("kv_num_heads", 0)), "key")
    v = _split(arrays[site.v], int(a.get("kv_num_heads", 0)), "value")
    out = _split(arrays[site.out], q.shape[0], "output")
    h, s, d = q.shape
    n = k.shape[1]
    visible, bias = _mask_terms(arrays.get(site.extra.get("attn_mask", "")), (h, s, n))
    causal = bool(a.get("is_causal", 0))
    if causal:
        visible = visible & _causal(s, n) if s == n else visible & (
            np.arange(n)[None] <= np.arange(s)[:, None])
    cap = float(a.get("softcap", 0.0)) or None
    scale, src = _scale(a, d)
    return FusedData(q, k, v, out, visible, bias, cap, scale, src, causal)


def _mha(site: OnnxSite, arrays: dict[str, np.ndarray]) -> FusedData:
    a = site.attrs
    heads = int(a.get("num_heads", 0))
    qx, kx, vx = (np.asarray(arrays[n], np.float64) for n in (site.q, site.k, site.v))
    if "bias" in site.extra:
        b = np.asarray(arrays[site.extra["bias"]], np.float64)
        dq, dk = qx.shape[-1], kx.shape[-1]
        qx, kx, vx = qx + b[:dq], kx + b[dq:dq + dk], vx + b[dq + dk:]
    q, k, v = _split(qx, heads, "query"), _split(kx, heads, "key"), _split(vx, heads, "value")
    out = _split(arrays[site.out], heads, "output")
    h, s, d = q.shape
    n = k.shape[1]
    visible, bias = _mask_terms(arrays.get(site.extra.get("attention_bias", "")), (h, s, n))
    kpm = arrays.get(site.extra.get("key_padding_mask", ""))
    if kpm is not None:
        visible = visible & (np.asarray(kpm).reshape(-1)[None, :n] != 0)
    causal = bool(a.get("unidirectional", 0))
    if causal:
        visible = visible & _causal(s, n)
    scale, src = _scale(a, d)
    return FusedData(q, k, v, out, visible, bias, None, scale, src, causal)


def _gqa(site: OnnxSite, arrays: dict[str, np.ndarray]) -> FusedData:
    a = site.attrs  # (do_rotary=1 is refused when the graph is read: onnx_graph._fused)
    if not site.k:
        raise ConfigError("onnx", f"{site.name}: GroupQueryAttention with packed q|k|v is not "
                          "read by the audit")
    q = _split(arrays[site.q], int(a.get("num_heads", 0)), "query")
    k = _split(arrays[site.k], int(a.get("kv_num_heads", 0)), "key")
    v = _split(arrays[site.v], int(a.get("kv_num_heads", 0)), "value")
    out = _split(arrays[site.out], q.shape[0], "output")
    s, n = q.shape[1], k.shape[1]
    window = int(a.get("local_window_size", -1))
    visible = _causal(s, n, window if window > 0 else None)
    cap = float(a.get("softcap", 0.0)) or None
    scale, src = _scale(a, q.shape[2])
    return FusedData(q, k, v, out, visible, None, cap, scale, src, True)


def _ms_attention(site: OnnxSite, arrays: dict[str, np.ndarray], weights: Any) -> FusedData:
    a = site.attrs
    heads = int(a.get("num_heads", 0))
    x = np.asarray(arrays[site.q], np.float64)
    w = np.asarray(weights["weights"], np.float64)
    b = weights.get("bias")
    qkv = x @ w + (0.0 if b is None else np.asarray(b, np.float64))
    sizes = a.get("qkv_hidden_sizes") or [qkv.shape[-1] // 3] * 3
    dq, dk = int(sizes[0]), int(sizes[1])
    q = _split(qkv[..., :dq], heads, "query")
    k = _split(qkv[..., dq:dq + dk], heads, "key")
    v = _split(qkv[..., dq + dk:], heads, "value")
    out = _split(arrays[site.out], heads, "output")
    h, s, d = q.shape
    visible, bias = _mask_terms(arrays.get(site.extra.get("attention_bias", "")), (h, s, s))
    mi = arrays.get(site.extra.get("mask_index", ""))
    if mi is not None:
        mi = np.asarray(mi)
        if mi.ndim != 2:
            raise ConfigError("onnx", f"{site.name}: mask_index of shape {mi.shape}; the audit "
                              "reads the (batch, tokens) 1/0 form")
        visible = visible & (mi.reshape(-1)[None, :s] != 0)
    causal = bool(a.get("unidirectional", 0))
    if causal:
        visible = visible & _causal(s, s)
    scale, src = _scale(a, d)
    return FusedData(q, k, v, out, visible, bias, None, scale, src, causal)
