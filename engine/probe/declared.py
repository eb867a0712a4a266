"""The scale a model *declares* for one attention site, read from its config (then its code).

The audit measures the factor applied to the projections' q.k; this module says what it should
be, so a difference is a finding (a wrong ``query_pre_attn_scalar``, a missing YaRN ``mscale``,
GPT-2 flags ignored, a planted bug). A scale can sit anywhere between the projections and the
product, so the declaration is split in two (:class:`Declaration`): the factor the attention
function should apply (``product``) and the one q.k should already carry when it gets there
(``pre``: q and k pre-scales, the square of RoPE's cos/sin factor). The product factor is, in
order:

1. ``query_pre_attn_scalar`` (Gemma 2/3): ``query_pre_attn_scalar ** -0.5``, which is not always
   ``head_dim ** -0.5`` (Gemma 2 27B: 144 with head_dim 128);
2. ``attention_multiplier`` (Granite): the factor itself;
3. GPT-2's ``scale_attn_weights`` and ``scale_attn_by_inverse_layer_idx`` (divide by layer + 1);
4. an architecture's own convention (GPT-Neo: none; Bloom: its ``inv_norm_factor``; Falcon:
   ``head_dim ** -0.5``, documented, whatever its module's ``scaling`` says; MPT:
   ``attn_config.softmax_scale``, else ``head_dim ** -0.5``; DeBERTa:
   ``(head_dim * (1 + its relative terms)) ** -0.5``);
5. the module's ``scaling`` attribute (T5 keeps 1.0: it folds the scale into the init). A module
   whose attribute is not what it passes to the attention function applies it before the call
   (OPT and BART multiply q by it, OpenAI's privacy filter q and k each): ``pre`` is then left
   open, and the audit accepts the attribute on q or on q and k (:mod:`engine.probe.accounting`);
6. otherwise ``head_dim ** -0.5``.

Before the product: ESM multiplies q by ``head_dim ** -0.5`` before RoPE and passes scaling 1;
Falcon-H1 multiplies k by ``key_multiplier``; YaRN and LongRoPE multiply cos and sin by an
attention factor (q.k by its square). DeepSeek's ``mscale_all_dim`` (and every architecture that
copies its ``yarn_apply_mscale``) multiplies the product's ``head_dim ** -0.5`` by
``(0.1 * mscale_all_dim * ln(factor) + 1) ** 2`` while cos/sin carry
``mscale(s, mscale) / mscale(s, mscale_all_dim)`` (onnxruntime-genai's mobius #548 left the
first out: logits short by 1.87x). Llama 4's attention temperature tuning and Ministral 3's
``llama_4_scaling_beta`` multiply q by a factor that grows with the position
(:class:`PositionLaw`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

#: attention modules that multiply q by head_dim ** -0.5 before RoPE and pass scaling 1 (ESM's
#: "for BC we apply scaling before RoPE"; Evolla copies ESM's SaProt encoder)
Q_BEFORE_ROPE = frozenset({"EsmSelfAttention", "EvollaSaProtSelfAttention"})
#: model types whose attention multiplies its softmax scale by mscale(factor, mscale_all_dim)^2
#: (their modeling file's ``yarn_apply_mscale``; for ports, where no module is at hand)
MSCALE_ALL_DIM_TYPES = frozenset({
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe_lite", "glm_moe_dsa", "longcat_flash",
    "minicpm3", "mistral4", "mistral_large4", "youtu", "axk1", "axk2", "bailing_hybrid", "hy_v4"})


@dataclass(frozen=True)
class PositionLaw:
    """q multiplied by ``1 + a * ln(1 + floor((position + offset) / b))`` (position from 0)."""

    name: str
    a: float
    b: float
    offset: float

    def factor(self, positions: np.ndarray) -> np.ndarray:
        p = np.asarray(positions, dtype=np.float64)
        return 1.0 + self.a * np.log1p(np.floor((p + self.offset) / self.b))


@dataclass(frozen=True)
class Declaration:
    """What one site should apply to the projections' q.k, split by where."""

    product: float  #: the factor the attention function should apply
    #: the factor q.k should carry before the product (pre-scales x cos/sin factor^2); None: the
    #: module applies its own ``attr`` before the call, on q or on q and k (OPT, BART, ...)
    pre: float | None
    source: str
    attr: float | None = None  #: the module's scaling attribute, when it is not what it passes
    cos_sin: float = 1.0  #: RoPE's cos/sin factor (YaRN, LongRoPE)
    law: PositionLaw | None = None  #: a position-dependent factor on q, on top of ``pre``

    @property
    def value(self) -> float | None:
        """The whole factor on the projections' q.k (None when ``pre`` is left open)."""
        return None if self.pre is None else self.product * self.pre


def declared_scale(config: Any, module: Any, d_k: int, adapter: str | None = None
                   ) -> tuple[float, str]:
    """(the factor on the projections' q.k that the config declares, where it comes from)."""
    d = declare(config, module, d_k, adapter)
    return float(d.product * (d.pre if d.pre is not None else 1.0)), d.source


def declare(config: Any, module: Any, d_k: int, adapter: str | None = None,
            call_scaling: float | None = None, model_type: str | None = None) -> Declaration:
    """The :class:`Declaration` of one site. ``call_scaling``: what the module passed to the
    attention function (None: not known); ``model_type`` for a port without a module."""
    product, source, from_module = _base(config, module, d_k, adapter)
    decl = Declaration(product, 1.0, source)
    if from_module and call_scaling is not None and _differs(product, call_scaling):
        decl = Declaration(call_scaling, None, f"{source}, applied before the call (which passes "
                           f"{call_scaling:.4g})", attr=product)
    if type(module).__name__ in Q_BEFORE_ROPE and decl.pre is not None:
        decl = replace(decl, pre=decl.pre * d_k**-0.5,
                       source=f"{decl.source} x q pre-scaled by 1/sqrt(head_dim) (ESM)")
    km = _num(getattr(config, "key_multiplier", None))
    if km and decl.pre is not None:
        decl = replace(decl, pre=decl.pre * km, source=f"{decl.source} x key_multiplier {km:g}")
    decl = _with_rope(decl, config, module, d_k, model_type)
    law = position_law(config, module)
    return replace(decl, law=law) if law is not None else decl


def _with_rope(decl: Declaration, config: Any, module: Any, d_k: int,
               model_type: str | None) -> Declaration:
    """The RoPE scaling's factors: DeepSeek's mscale_all_dim^2 at the product, the cos/sin
    attention factor (squared) before it."""
    rope = _rope_parameters(config, module)
    if rope is None:
        return decl
    kind = str(rope.get("rope_type", rope.get("type", "default")))
    factor = _num(rope.get("factor"))
    m_all = _num(rope.get("mscale_all_dim"))
    if kind != "default" and m_all and factor and _applies_mscale_all_dim(module, config,
                                                                          model_type):
        f = yarn_mscale(factor, m_all)
        decl = replace(decl, product=d_k**-0.5 * f * f, source=(
            f"1/sqrt(head_dim) x YaRN mscale^2 ({f:.4g}^2, mscale_all_dim {m_all:g})"))
    cs = rope_attention_factor(rope, config)
    if cs != 1.0 and decl.pre is not None:
        decl = replace(decl, pre=decl.pre * cs * cs, cos_sin=cs,
                       source=f"{decl.source} x {kind} attention factor^2 ({cs:.4g}^2)")
    elif cs != 1.0:
        decl = replace(decl, cos_sin=cs)
    return decl


def rope_attention_factor(rope: dict[str, Any], config: Any) -> float:
    """The factor transformers multiplies cos and sin by (YaRN, LongRoPE; 1 for the others)."""
    kind = str(rope.get("rope_type", rope.get("type", "default")))
    if kind not in ("yarn", "longrope"):
        return 1.0
    af = _num(rope.get("attention_factor"))
    if af is not None:
        return af
    factor = _num(rope.get("factor"))
    orig = _num(rope.get("original_max_position_embeddings")) or _num(
        getattr(config, "original_max_position_embeddings", None))
    if factor is None:
        mpe = _num(getattr(config, "max_position_embeddings", None))
        factor = mpe / orig if mpe and orig else 1.0
    if kind == "longrope":
        if factor <= 1.0 or not orig or orig <= 1:
            return 1.0
        return math.sqrt(1.0 + math.log(factor) / math.log(orig))
    mscale, m_all = _num(rope.get("mscale")), _num(rope.get("mscale_all_dim"))
    if mscale and m_all:
        return yarn_mscale(factor, mscale) / yarn_mscale(factor, m_all)
    return yarn_mscale(factor, 1.0)


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's 0.1 * mscale * ln(s) + 1 (1 for s <= 1)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def position_law(config: Any, module: Any) -> PositionLaw | None:
    """Llama 4's temperature tuning (on its layers without RoPE) or Ministral 3's
    ``llama_4_scaling_beta``, as the config declares them; None for a model without."""
    if getattr(config, "attn_temperature_tuning", False):
        layer = getattr(module, "layer_idx", None)
        no_rope = getattr(config, "no_rope_layers", None)
        uses_rope = (bool(no_rope[layer]) if isinstance(layer, int) and isinstance(
            no_rope, (list, tuple)) and 0 <= layer < len(no_rope) else True)
        a, b = _num(getattr(config, "attn_scale", None)), _num(getattr(config, "floor_scale", None))
        if not uses_rope and a is not None and b:
            return PositionLaw(f"attention temperature tuning (attn_scale {a:g}, floor_scale "
                               f"{b:g})", a, b, 1.0)
    rope = _rope_parameters(config, module)
    beta = None if rope is None else _num(rope.get("llama_4_scaling_beta"))
    if beta:
        b = _num(rope.get("original_max_position_embeddings"))
        if b:
            return PositionLaw(f"llama_4_scaling_beta {beta:g} (original_max_position_embeddings "
                               f"{b:g})", beta, b, 0.0)
    return None


def _applies_mscale_all_dim(module: Any, config: Any, model_type: str | None) -> bool:
    mod = sys.modules.get(type(module).__module__) if module is not None else None
    if mod is not None and callable(getattr(mod, "yarn_apply_mscale", None)):
        return True
    kind = model_type or getattr(config, "model_type", None)
    return module is None and kind in MSCALE_ALL_DIM_TYPES


def _base(config: Any, module: Any, d_k: int, adapter: str | None) -> tuple[float, str, bool]:
    """(the product factor, its source, whether it is the module's own scaling attribute)."""
    qpas = _num(getattr(config, "query_pre_attn_scalar", None))
    if qpas:
        return qpas**-0.5, f"query_pre_attn_scalar {qpas:g}", False
    mult = _num(getattr(config, "attention_multiplier", None))
    if mult:
        return mult, f"attention_multiplier {mult:g}", False
    if hasattr(config, "scale_attn_weights") and hasattr(config, "scale_attn_by_inverse_layer_idx"):
        v = d_k**-0.5 if config.scale_attn_weights else 1.0
        src = f"GPT-2 flags (scale_attn_weights {bool(config.scale_attn_weights)}"
        if config.scale_attn_by_inverse_layer_idx:
            layer = getattr(module, "layer_idx", None)
            if isinstance(layer, int):
                v /= float(layer + 1)
                src += ", x 1/(layer + 1)"
        return v, src + ")", False
    if adapter == "gpt_neo":
        return 1.0, "GPT-Neo applies no scale", False
    if adapter == "bloom":
        return float(module.inv_norm_factor), "Bloom's inv_norm_factor", False
    if getattr(config, "model_type", None) == "falcon":  # (through the interface since
        # transformers 5.25; its ALiBi layers too, with the ALiBi term in the mask)
        return d_k**-0.5, "1/sqrt(head_dim) (Falcon)", False
    seq = None if adapter is None else _seq_declared(adapter, module, d_k)
    if seq is not None:
        return seq[0], seq[1], False
    if adapter == "mpt":
        s = _num(getattr(getattr(config, "attn_config", None), "softmax_scale", None))
        return ((s, f"attn_config.softmax_scale {s:g}", False) if s
                else (d_k**-0.5, "1/sqrt(head_dim) (MPT)", False))
    if adapter == "deberta":
        from engine.probe.adapters_deberta import declared

        return (*declared(config, d_k), False)
    s = getattr(module, "scaling", None)
    if isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and s > 0:
        if abs(s * math.sqrt(d_k) - 1.0) < 1e-6:
            return float(s), "1/sqrt(head_dim)", True
        if s == 1.0:
            return 1.0, "none (the module's scaling is 1)", True
        return float(s), f"the module's scaling {s:.4g}", True
    return d_k**-0.5, "1/sqrt(head_dim)", False


def _seq_declared(adapter: str, module: Any, d_k: int) -> tuple[float, str] | None:
    from engine.probe.adapters_seq import declared

    return declared(adapter, module, d_k)


def _differs(a: float, b: float) -> bool:
    return abs(math.log(a / b)) > 1e-6 if a > 0 and b > 0 else a != b


def declared_softcap(config: Any) -> float | None:
    """The attention logit soft-cap the config declares (Gemma 2), None without one."""
    return _num(getattr(config, "attn_logit_softcapping", None))


def _rope_parameters(config: Any, module: Any = None) -> dict[str, Any] | None:
    """The RoPE parameters of the module's layer (a per-layer-type dict picks its type)."""
    for name in ("rope_parameters", "rope_scaling"):
        rp = getattr(config, name, None)
        if not isinstance(rp, dict) or not rp:
            continue
        if all(isinstance(v, dict) for v in rp.values()):  # {layer type: parameters}
            kind = _layer_type(config, module)
            if kind in rp:
                return rp[kind]
            factors = {rope_attention_factor(v, config) for v in rp.values()}
            return next(iter(rp.values())) if len(factors) == 1 else None
        return rp
    return None


def _layer_type(config: Any, module: Any) -> str | None:
    kind = getattr(module, "layer_type", None)
    if isinstance(kind, str):
        return kind
    layer, types = getattr(module, "layer_idx", None), getattr(config, "layer_types", None)
    if isinstance(layer, int) and isinstance(types, (list, tuple)) and 0 <= layer < len(types):
        return str(types[layer])
    return None


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None
