"""The scale a model *declares* for one attention site, read from its config (then its code).

The audit measures the factor applied to the projections' q.k; this module says what it should
be, so a difference is a finding (a wrong ``query_pre_attn_scalar``, a missing YaRN ``mscale``,
GPT-2 flags ignored, a planted bug). In order:

1. ``query_pre_attn_scalar`` (Gemma 2/3): ``query_pre_attn_scalar ** -0.5``, which is not always
   ``head_dim ** -0.5`` (Gemma 2 27B: 144 with head_dim 128);
2. ``attention_multiplier`` (Granite): the factor itself;
3. GPT-2's ``scale_attn_weights`` and ``scale_attn_by_inverse_layer_idx`` (divide by layer + 1);
4. an adapter's own convention (GPT-Neo: none; Bloom: its ``inv_norm_factor``);
5. the module's ``scaling`` attribute (T5 keeps 1.0: it folds the scale into the init; OPT's
   is the factor it multiplies q by before calling attention with scale 1);
6. otherwise ``head_dim ** -0.5``.

YaRN context extension then multiplies the logits by ``attention_factor ** 2`` (cos and sin are
scaled by it, so q and k each are); DeepSeek's ``mscale_all_dim`` instead multiplies the softmax
scale by ``(0.1 * mscale_all_dim * ln(factor) + 1) ** 2`` (onnxruntime-genai's mobius #548 left it
out: logits short by 1.87x).
"""

from __future__ import annotations

import math
from typing import Any


def declared_scale(config: Any, module: Any, d_k: int, adapter: str | None = None
                   ) -> tuple[float, str]:
    """(the factor on the projections' q.k that the config declares, where it comes from)."""
    value, source = _base(config, module, d_k, adapter)
    rope = _rope_parameters(config)
    if rope is not None and str(rope.get("rope_type", rope.get("type", ""))) == "yarn":
        factor = _num(rope.get("factor"))
        if factor is None:
            mpe, orig = (_num(getattr(config, "max_position_embeddings", None)),
                         _num(rope.get("original_max_position_embeddings")))
            factor = mpe / orig if mpe and orig else 1.0
        m_all = _num(rope.get("mscale_all_dim"))
        if m_all:
            f = yarn_mscale(factor, m_all)
            if source == "1/sqrt(head_dim)" or source.startswith("the module"):
                value, source = d_k**-0.5 * f * f, (f"1/sqrt(head_dim) x YaRN mscale^2 "
                                                    f"({f:.4g}^2, mscale_all_dim {m_all:g})")
        else:
            af = _num(rope.get("attention_factor"))
            if af is None:
                mscale = _num(rope.get("mscale"))
                af = yarn_mscale(factor, 1.0) if not mscale else yarn_mscale(factor, mscale)
            value, source = value * af * af, f"{source} x YaRN attention factor^2 ({af:.4g}^2)"
    return float(value), source


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's 0.1 * mscale * ln(s) + 1 (1 for s <= 1)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _base(config: Any, module: Any, d_k: int, adapter: str | None) -> tuple[float, str]:
    qpas = _num(getattr(config, "query_pre_attn_scalar", None))
    if qpas:
        return qpas**-0.5, f"query_pre_attn_scalar {qpas:g}"
    mult = _num(getattr(config, "attention_multiplier", None))
    if mult:
        return mult, f"attention_multiplier {mult:g}"
    if hasattr(config, "scale_attn_weights") and hasattr(config, "scale_attn_by_inverse_layer_idx"):
        v = d_k**-0.5 if config.scale_attn_weights else 1.0
        src = f"GPT-2 flags (scale_attn_weights {bool(config.scale_attn_weights)}"
        if config.scale_attn_by_inverse_layer_idx:
            layer = getattr(module, "layer_idx", None)
            if isinstance(layer, int):
                v /= float(layer + 1)
                src += ", x 1/(layer + 1)"
        return v, src + ")"
    if adapter == "gpt_neo":
        return 1.0, "GPT-Neo applies no scale"
    if adapter == "bloom":
        return float(module.inv_norm_factor), "Bloom's inv_norm_factor"
    s = getattr(module, "scaling", None)
    if isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and s > 0:
        if abs(s * math.sqrt(d_k) - 1.0) < 1e-6:
            return float(s), "1/sqrt(head_dim)"
        if s == 1.0:
            return 1.0, "none (the module's scaling is 1)"
        return float(s), f"the module's scaling {s:.4g}"
    return d_k**-0.5, "1/sqrt(head_dim)"


def declared_softcap(config: Any) -> float | None:
    """The attention logit soft-cap the config declares (Gemma 2), None without one."""
    return _num(getattr(config, "attn_logit_softcapping", None))


def _rope_parameters(config: Any) -> dict[str, Any] | None:
    for name in ("rope_parameters", "rope_scaling"):
        rp = getattr(config, name, None)
        if isinstance(rp, dict) and rp:
            return rp
    return None


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None
