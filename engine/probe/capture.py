"""One forward pass with forward hooks on the query/key projections: per-head q, k and the model's
own attention probabilities (``output_attentions=True``), as NumPy arrays.

Hooks fire in call order, so layer i is the i-th call of a projection; the scale factor of each
layer is read from its attention module (``scaling``), with the architecture's formula as a
fallback for transformers versions that do not keep it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.probe.loader import LoadedModel


@dataclass(frozen=True)
class Capture:
    """Everything one forward pass gives, restricted to the valid (non-padding) tokens."""

    q: np.ndarray  #: (L, H, n, d_k) float32 queries per head
    k: np.ndarray  #: (L, H, n, d_k) float32 keys per head
    model_attn: np.ndarray  #: (L, H, n, n) float32 the model's own attention probabilities
    #: (L, H) largest model probability on a masked key of a valid query row (should be 0)
    masked_mass: np.ndarray
    scale: np.ndarray  #: (L,) factor the model multiplies q.k by (1/sqrt(d_k) for BERT)
    valid_positions: np.ndarray  #: (n,) positions of the valid tokens in the padded input
    causal: bool
    forward_s: float

    @property
    def pair_mask(self) -> np.ndarray:
        """(n, n) bool: key j is visible to query i (causal: j <= i)."""
        n = self.q.shape[2]
        if self.causal:
            return np.tril(np.ones((n, n), dtype=bool))
        return np.ones((n, n), dtype=bool)


def _attention_modules(loaded: LoadedModel) -> list[Any]:
    spec = loaded.spec
    found = []
    for mod in loaded.model.modules():
        if spec.fused is not None:
            if hasattr(mod, spec.fused) and not getattr(mod, "is_cross_attention", False):
                found.append(mod)
        elif hasattr(mod, spec.query) and hasattr(mod, spec.key):
            found.append(mod)
    if not found:
        names = spec.fused or f"{spec.query}/{spec.key}"
        raise ConfigError("model", f"{type(loaded.model).__name__} has no attention modules with "
                          f"{names} projections; this variant of {loaded.info.model_type} is not "
                          "supported")
    return found


def _fallback_scale(loaded: LoadedModel, module: Any, layer: int) -> float:
    d_k = loaded.info.d_k
    if loaded.info.model_type == "gpt2":
        cfg = loaded.model.config
        s = d_k**-0.5 if getattr(cfg, "scale_attn_weights", True) else 1.0
        if getattr(cfg, "scale_attn_by_inverse_layer_idx", False):
            s /= float(layer + 1)
        return s
    return 1.0 / math.sqrt(d_k)


def _register_hooks(loaded: LoadedModel, n_all: int, qs: list[np.ndarray], ks: list[np.ndarray],
                    scales: list[float]) -> list[Any]:
    """Forward hooks on every attention layer's q and k projections (or the fused qkv one) that
    append each layer's per-head q, k (H, n, d_k) and its scale; returns the hook handles."""
    spec, n_heads, d_k = loaded.spec, loaded.info.n_heads, loaded.info.d_k
    width = n_heads * d_k
    handles = []

    def heads(t: Any) -> np.ndarray:  # (1, n, H*d) -> (H, n, d)
        return t[0].detach().float().reshape(n_all, n_heads, d_k).permute(1, 0, 2).cpu().numpy()

    for mod in _attention_modules(loaded):
        if spec.fused is not None:
            def fused_hook(_m: Any, _inp: Any, out: Any, parent: Any = mod) -> None:
                qs.append(heads(out[..., :width]))
                ks.append(heads(out[..., width:2 * width]))
                scales.append(_scale_of(parent))

            handles.append(getattr(mod, spec.fused).register_forward_hook(fused_hook))
        else:
            def q_hook(_m: Any, _inp: Any, out: Any, parent: Any = mod) -> None:
                qs.append(heads(out))
                scales.append(_scale_of(parent))

            def k_hook(_m: Any, _inp: Any, out: Any) -> None:
                ks.append(heads(out))

            handles.append(getattr(mod, spec.query).register_forward_hook(q_hook))
            handles.append(getattr(mod, spec.key).register_forward_hook(k_hook))
    return handles


def capture(
    loaded: LoadedModel,
    input_ids: Sequence[int],
    attention_mask: Sequence[int] | None = None,
) -> Capture:
    """Run the model once on one sequence; return q, k and attention of its valid tokens.

    ``attention_mask`` (1 = token, 0 = padding) may mark padding anywhere; padding tokens are
    dropped from every returned array, and the model's weight on them is reported in
    ``masked_mass`` so a test can check that the model gave them none.
    """
    import torch  # lazy: the GUI imports this module before any model is loaded

    spec, n_heads = loaded.spec, loaded.info.n_heads
    ids = torch.as_tensor([list(input_ids)], dtype=torch.long)
    n_all = ids.shape[1]
    if attention_mask is None:
        mask = torch.ones_like(ids)
    else:
        mask = torch.as_tensor([list(attention_mask)], dtype=torch.long)
        if mask.shape != ids.shape:
            raise ValueError("attention_mask must have one entry per token")
    valid = mask[0].numpy().astype(bool)
    if valid.sum() < 1:
        raise ValueError("no valid token")

    qs: list[np.ndarray] = []
    ks: list[np.ndarray] = []
    scales: list[float] = []
    handles = _register_hooks(loaded, n_all, qs, ks, scales)
    t0 = time.perf_counter()
    try:
        with torch.inference_mode():
            out = loaded.model(input_ids=ids, attention_mask=mask, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    forward_s = time.perf_counter() - t0
    attentions = getattr(out, "attentions", None)
    if attentions is None or len(attentions) != len(qs) or len(ks) != len(qs):
        raise ConfigError("model", "the model did not return one attention map per captured "
                          f"layer ({0 if attentions is None else len(attentions)} maps, {len(qs)} "
                          "layers); this variant is not supported")
    attn_all = np.stack([a[0].detach().float().cpu().numpy() for a in attentions])  # (L,H,N,N)

    pos = np.flatnonzero(valid)
    layers = len(qs)
    scale = np.array([s if s is not None else _fallback_scale(loaded, None, i)
                      for i, s in enumerate(scales)], dtype=np.float64)
    # the model's weight on masked keys, over valid query rows (padding, and the future if causal)
    visible = valid[None, :] & valid[:, None]
    if spec.causal:
        visible &= np.tril(np.ones((n_all, n_all), dtype=bool))
    hidden = ~visible & valid[:, None]
    masked_mass = np.where(hidden, attn_all, 0.0).max(axis=(2, 3)) if hidden.any() else \
        np.zeros(attn_all.shape[:2])
    return Capture(
        q=np.stack(qs)[:, :, pos, :],
        k=np.stack(ks)[:, :, pos, :],
        model_attn=attn_all[:, :, pos][:, :, :, pos],
        masked_mass=np.asarray(masked_mass, dtype=np.float64).reshape(layers, n_heads),
        scale=scale,
        valid_positions=pos,
        causal=spec.causal,
        forward_s=forward_s,
    )


def _scale_of(module: Any) -> float | None:
    s = getattr(module, "scaling", None)
    return float(s) if isinstance(s, (int, float)) else None
