"""engine.probe.declared rule by rule, on plain config objects (no transformers, milliseconds):
each factor from the architecture's formula by hand, each source text as the audit prints it,
each rule's fall-through and edge (a flag off, a factor of 1, a tolerance from both sides)."""

from __future__ import annotations

import math
import sys
import types
from types import SimpleNamespace as NS

import numpy as np
import pytest

from engine.probe.declared import (
    Declaration,
    PositionLaw,
    declare,
    declared_scale,
    declared_softcap,
    position_law,
    rope_attention_factor,
    yarn_mscale,
)


def _module(name: str = "Attn", **attrs):
    """An attention module of class ``name`` (from a module without yarn_apply_mscale)."""
    return type(name, (), {"__module__": __name__})() if not attrs else \
        type(name, (), {"__module__": __name__, **attrs})()


def _yarn_family_module(monkeypatch, **attrs):
    """A module whose modeling file defines yarn_apply_mscale (DeepSeek's and its copies')."""
    mod = types.ModuleType("fake_modeling_deepseek")
    mod.yarn_apply_mscale = lambda *a: None
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return type("DeepseekAttention", (), {"__module__": mod.__name__, **attrs})()


# -- the product factor: config keys, adapters, the module's attribute ------------------------


def test_query_pre_attn_scalar_comes_first() -> None:
    cfg = NS(query_pre_attn_scalar=144, attention_multiplier=0.5)
    assert declared_scale(cfg, _module(scaling=0.3), 128) == (pytest.approx(144**-0.5, rel=1e-15),
                                                              "query_pre_attn_scalar 144")


def test_attention_multiplier_is_the_factor_itself() -> None:
    assert declared_scale(NS(attention_multiplier=0.015625), None, 64) == (
        0.015625, "attention_multiplier 0.015625")
    # 0 and non-numbers are not declarations: the next rule (1/sqrt(head_dim)) speaks
    for value in (0, "0.5", True, float("nan"), float("inf")):
        assert declared_scale(NS(attention_multiplier=value), None, 64) == (
            0.125, "1/sqrt(head_dim)")


@pytest.mark.parametrize("weights, by_layer, layer, factor, source", [
    (True, False, 3, 0.125, "GPT-2 flags (scale_attn_weights True)"),
    (False, False, 3, 1.0, "GPT-2 flags (scale_attn_weights False)"),
    (True, True, 3, 0.125 / 4, "GPT-2 flags (scale_attn_weights True, x 1/(layer + 1))"),
    (False, True, 0, 1.0, "GPT-2 flags (scale_attn_weights False, x 1/(layer + 1))"),
    (True, True, None, 0.125, "GPT-2 flags (scale_attn_weights True)"),
])
def test_gpt2_flags(weights: bool, by_layer: bool, layer, factor: float, source: str) -> None:
    """GPT-2: 1/sqrt(head_dim) when scale_attn_weights, and / (layer + 1) when
    scale_attn_by_inverse_layer_idx (a module without a layer index: not applied)."""
    cfg = NS(scale_attn_weights=weights, scale_attn_by_inverse_layer_idx=by_layer)
    mod = _module(layer_idx=layer, scaling=0.77)
    value, src = declared_scale(cfg, mod, 64)
    assert value == pytest.approx(factor, rel=1e-15) and src == source
    # one flag alone is not GPT-2's pair: the module's own attribute speaks
    assert declared_scale(NS(scale_attn_weights=weights), mod, 64)[1] == \
        "the module's scaling 0.77"


def test_adapters_conventions() -> None:
    d = 64
    assert declared_scale(NS(), _module(scaling=0.5), d, "gpt_neo") == (
        1.0, "GPT-Neo applies no scale")
    assert declared_scale(NS(), _module(inv_norm_factor=0.2), d, "bloom") == (
        0.2, "Bloom's inv_norm_factor")
    # Falcon: documented 1/sqrt(head_dim), by its model type, whatever its module's scaling says
    assert declared_scale(NS(model_type="falcon"), _module(scaling=0.5), d) == (
        0.125, "1/sqrt(head_dim) (Falcon)")
    assert declared_scale(NS(attn_config=NS(softmax_scale=0.3)), _module(), d, "mpt") == (
        0.3, "attn_config.softmax_scale 0.3")
    assert declared_scale(NS(attn_config=NS(softmax_scale=None)), _module(), d, "mpt") == (
        0.125, "1/sqrt(head_dim) (MPT)")
    assert declared_scale(NS(), _module(scale=True), d, "openai-gpt") == (
        0.125, "1/sqrt(head_dim) (OpenAI GPT's scale flag)")
    assert declared_scale(NS(), _module(norm_factor=4.0), d, "gpt_neox_japanese") == (
        0.25, "1/norm_factor (GPT-NeoX-Japanese)")
    # DeBERTa: (head_dim x (1 + its relative terms)) ** -0.5, c2p and p2c: 3 x 64
    value, src = declared_scale(NS(pos_att_type=["c2p", "p2c"], relative_attention=True),
                                _module(), d, "deberta")
    assert value == pytest.approx((3 * 64) ** -0.5, rel=1e-15) and "DeBERTa" in src


@pytest.mark.parametrize("scaling, value, source", [
    (0.125, 0.125, "1/sqrt(head_dim)"),
    (0.125 * (1 + 9e-7), 0.125 * (1 + 9e-7), "1/sqrt(head_dim)"),
    (0.125 * (1 + 2e-6), 0.125 * (1 + 2e-6), "the module's scaling 0.125"),
    (0.125 * (1 - 2e-6), 0.125 * (1 - 2e-6), "the module's scaling 0.125"),
    (1.0, 1.0, "none (the module's scaling is 1)"),
    (1, 1.0, "none (the module's scaling is 1)"),
    (0.0883883, 0.0883883, "the module's scaling 0.08839"),
])
def test_the_modules_scaling_attribute(scaling, value: float, source: str) -> None:
    """The module's ``scaling``: called 1/sqrt(head_dim) within 1e-6 of it (both sides of the
    edge), 'none' at 1, else printed to 4 digits."""
    v, src = declared_scale(NS(), _module(scaling=scaling), 64)
    assert v == value and type(v) is float and src == source


@pytest.mark.parametrize("scaling", [True, 0.0, -0.125, float("nan"), float("inf"), "0.125",
                                     None])
def test_a_scaling_that_is_no_factor_falls_back_to_one_over_sqrt_head_dim(scaling) -> None:
    assert declared_scale(NS(), _module(scaling=scaling), 16) == (0.25, "1/sqrt(head_dim)")


def test_declared_softcap() -> None:
    assert declared_softcap(NS(attn_logit_softcapping=50.0)) == 50.0
    assert declared_softcap(NS(attn_logit_softcapping=30)) == 30.0
    assert declared_softcap(NS(attn_logit_softcapping=None)) is None
    assert declared_softcap(NS()) is None


# -- before the call, before RoPE, on k ---------------------------------------------------------


def test_a_scaling_applied_before_the_call_leaves_pre_open() -> None:
    """OPT multiplies q by its ``scaling`` and passes 1: the product is what it passes, ``pre``
    is open (None) and the attribute is kept; the whole value is then unknown."""
    d = declare(NS(), _module(scaling=0.125), 64, call_scaling=1.0)
    assert (d.product, d.pre, d.attr, d.value) == (1.0, None, 0.125, None)
    assert d.source == "1/sqrt(head_dim), applied before the call (which passes 1)"
    assert declared_scale(NS(), _module(scaling=0.125), 64) == (0.125, "1/sqrt(head_dim)")
    # the attribute 0.3 passed as 0.0883883: printed to 4 digits
    d = declare(NS(), _module(scaling=0.3), 64, call_scaling=0.0883883)
    assert d.source == ("the module's scaling 0.3, applied before the call (which passes "
                        "0.08839)")
    # a value that pre is open for: declared_scale reports the product alone
    cfg, mod = NS(), _module(scaling=0.3)
    assert declare(cfg, mod, 64, call_scaling=0.5).value is None


def test_what_the_call_passes_is_compared_within_1e_6_in_log() -> None:
    mod = _module(scaling=0.3)
    for rel, open_ in ((1 + 9e-7, False), (1 - 9e-7, False), (1 + 2e-6, True), (1 - 2e-6, True)):
        d = declare(NS(), mod, 64, call_scaling=0.3 * rel)
        assert (d.pre is None) == open_, rel
        assert d.product == (0.3 * rel if open_ else 0.3)
    # a config key's factor is not the module's attribute: what the call passes is not asked
    d = declare(NS(attention_multiplier=0.3), mod, 64, call_scaling=1.0)
    assert (d.product, d.pre, d.attr) == (0.3, 1.0, None)
    # a call passing 0 (or nothing usable) against a positive attribute differs
    d = declare(NS(), mod, 64, call_scaling=0.0)
    assert d.pre is None and d.product == 0.0


def test_esm_scales_q_before_rope() -> None:
    """ESM: q x head_dim^-1/2 before RoPE, scaling 1 passed: pre 1/4 at head_dim 16."""
    for name in ("EsmSelfAttention", "EvollaSaProtSelfAttention"):
        d = declare(NS(), _module(name, scaling=1.0), 16)
        assert (d.product, d.pre, d.value) == (1.0, 0.25, 0.25)
        assert d.source == ("none (the module's scaling is 1) x q pre-scaled by "
                            "1/sqrt(head_dim) (ESM)")
    assert declare(NS(), _module("BertSelfAttention", scaling=1.0), 16).pre == 1.0
    # ESM whose attribute is applied before the call: pre stays open
    d = declare(NS(), _module("EsmSelfAttention", scaling=0.25), 16, call_scaling=1.0)
    assert d.pre is None


def test_key_multiplier_multiplies_pre() -> None:
    d = declare(NS(key_multiplier=0.5), _module(scaling=0.125), 64)
    assert (d.product, d.pre, d.value) == (0.125, 0.5, 0.0625)
    assert d.source == "1/sqrt(head_dim) x key_multiplier 0.5"
    assert declared_scale(NS(key_multiplier=0.5), _module(scaling=0.125), 64)[0] == 0.0625
    for none in (0, None, True):
        assert declare(NS(key_multiplier=none), _module(scaling=0.125), 64).pre == 1.0
    d = declare(NS(key_multiplier=0.5), _module(scaling=0.3), 64, call_scaling=1.0)
    assert d.pre is None and "key_multiplier" not in d.source


# -- RoPE: YaRN, LongRoPE, DeepSeek's mscale_all_dim --------------------------------------------


def _mscale(s: float, m: float) -> float:
    return 0.1 * m * math.log(s) + 1.0 if s > 1 else 1.0


def test_yarn_mscale() -> None:
    assert yarn_mscale(40.0) == pytest.approx(1 + 0.1 * math.log(40), rel=1e-15)
    assert yarn_mscale(40.0, 0.707) == pytest.approx(1 + 0.0707 * math.log(40), rel=1e-15)
    assert yarn_mscale(1.0, 5.0) == 1.0 and yarn_mscale(0.5, 5.0) == 1.0


@pytest.mark.parametrize("rope, config, factor", [
    ({"rope_type": "default", "factor": 8.0}, NS(), 1.0),
    ({"rope_type": "linear", "factor": 8.0}, NS(), 1.0),
    ({"rope_type": "yarn", "factor": 8.0, "attention_factor": 0.9}, NS(), 0.9),
    ({"rope_type": "yarn", "factor": 8.0}, NS(), 1 + 0.1 * math.log(8)),
    ({"type": "yarn", "factor": 8.0}, NS(), 1 + 0.1 * math.log(8)),
    # no factor: max positions / original ones (from the parameters or the config)
    ({"rope_type": "yarn", "original_max_position_embeddings": 1024},
     NS(max_position_embeddings=4096), 1 + 0.1 * math.log(4)),
    ({"rope_type": "yarn"}, NS(max_position_embeddings=4096, original_max_position_embeddings=512),
     1 + 0.1 * math.log(8)),
    ({"rope_type": "yarn"}, NS(max_position_embeddings=4096), 1.0),
    ({"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.707}, NS(),
     _mscale(40, 1.0) / _mscale(40, 0.707)),
    ({"rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 0.0}, NS(),
     _mscale(40, 1.0)),
    # LongRoPE: sqrt(1 + ln s / ln L0)
    ({"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 16}, NS(),
     math.sqrt(1 + math.log(4) / math.log(16))),
    ({"rope_type": "longrope"}, NS(max_position_embeddings=131072,
                                   original_max_position_embeddings=4096),
     math.sqrt(1 + math.log(32) / math.log(4096))),
    ({"rope_type": "longrope", "factor": 1.0, "original_max_position_embeddings": 16}, NS(), 1.0),
    ({"rope_type": "longrope", "factor": 4.0}, NS(), 1.0),
    ({"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 1}, NS(), 1.0),
])
def test_rope_attention_factor(rope: dict, config, factor: float) -> None:
    assert rope_attention_factor(rope, config) == pytest.approx(factor, rel=1e-14)


def _deepseek_rope(mscale: float = 1.0, mscale_all_dim: float = 1.0, kind: str = "yarn") -> dict:
    return {"rope_type": kind, "factor": 40.0, "original_max_position_embeddings": 4096,
            "mscale": mscale, "mscale_all_dim": mscale_all_dim}


def test_mscale_all_dim_squared_at_the_product_for_deepseeks_family(monkeypatch) -> None:
    """DeepSeek-V3 at s = 40, mscale 0.707 and mscale_all_dim 1: the product is
    head_dim^-1/2 x 1.3689^2, cos/sin carry mscale(40, 0.707) / mscale(40, 1) (its square on
    pre), and the whole value is head_dim^-1/2 x mscale(40, 0.707)^2."""
    cfg = NS(rope_parameters=_deepseek_rope(0.707, 1.0))
    m_all, m = _mscale(40, 1.0), _mscale(40, 0.707)
    for mod, kind in ((_yarn_family_module(monkeypatch), None), (None, "deepseek_v3"),
                      (None, "minicpm3")):
        d = declare(cfg, mod, 16, model_type=kind)
        assert d.product == pytest.approx(0.25 * m_all**2, rel=1e-14)
        assert d.cos_sin == pytest.approx(m / m_all, rel=1e-14)
        assert d.pre == pytest.approx((m / m_all) ** 2, rel=1e-14)
        assert d.value == pytest.approx(0.25 * m**2, rel=1e-14)
        assert d.source == ("1/sqrt(head_dim) x YaRN mscale^2 (1.369^2, mscale_all_dim 1) x yarn "
                            "attention factor^2 (0.921^2)")
    # the config's model_type, when the caller gives none
    d = declare(NS(model_type="deepseek_v2", **vars(cfg)), None, 16)
    assert d.product == pytest.approx(0.25 * m_all**2, rel=1e-14)


def test_mscale_all_dim_is_not_a_product_factor_elsewhere(monkeypatch) -> None:
    """Outside the family (a module from a file without yarn_apply_mscale, a port of another
    type), under the default rope type, or with mscale_all_dim 0: head_dim^-1/2 at the
    product; the cos/sin factor still applies."""
    rope = _deepseek_rope(0.707, 1.0)
    cos_sin = _mscale(40, 0.707) / _mscale(40, 1.0)
    for cfg, mod, kind in ((NS(rope_parameters=rope), _module(scaling=0.25), None),
                           (NS(rope_parameters=rope), None, "llama"),
                           (NS(rope_parameters=rope, model_type="llama"), None, None),
                           (NS(rope_parameters=rope), _module(scaling=0.25), "deepseek_v3")):
        d = declare(cfg, mod, 16, model_type=kind)
        assert d.product == 0.25 and d.cos_sin == pytest.approx(cos_sin, rel=1e-14)
    d = declare(NS(rope_parameters={**rope, "rope_type": "default"}), None, 16,
                model_type="deepseek_v3")
    assert (d.product, d.pre, d.cos_sin) == (0.25, 1.0, 1.0)
    d = declare(NS(rope_parameters={**rope, "mscale_all_dim": 0}), None, 16,
                model_type="deepseek_v3")
    assert d.product == 0.25
    d = declare(NS(rope_parameters={**rope, "factor": None}), _yarn_family_module(monkeypatch),
                16)
    assert d.product == 0.25


def test_yarn_cos_sin_factor_on_an_open_pre_is_kept_apart() -> None:
    """With ``pre`` open (the attribute applied before the call) the cos/sin factor is recorded
    but not multiplied into anything (the audit accounts for it separately)."""
    cfg = NS(rope_parameters={"rope_type": "yarn", "factor": 8.0})
    d = declare(cfg, _module(scaling=0.3), 64, call_scaling=1.0)
    assert d.pre is None and d.cos_sin == pytest.approx(1 + 0.1 * math.log(8), rel=1e-15)
    assert "attention factor" not in d.source
    d = declare(cfg, _module(scaling=0.125), 64)
    assert d.pre == pytest.approx((1 + 0.1 * math.log(8)) ** 2, rel=1e-15)
    assert d.source == "1/sqrt(head_dim) x yarn attention factor^2 (1.208^2)"


def test_rope_parameters_per_layer_type() -> None:
    """{layer type: parameters}: the module's type (its attribute, or layer_types[layer_idx]);
    without one, the parameters if every type has the same factor, else none."""
    yarn = {"rope_type": "yarn", "factor": 8.0}
    plain = {"rope_type": "default"}
    cfg = NS(rope_parameters={"full_attention": yarn, "sliding_attention": plain},
             layer_types=["sliding_attention", "full_attention"])
    f = 1 + 0.1 * math.log(8)
    assert declare(cfg, _module(layer_type="full_attention"), 16).cos_sin == pytest.approx(f)
    assert declare(cfg, _module(layer_type="sliding_attention"), 16).cos_sin == 1.0
    assert declare(cfg, _module(layer_idx=1), 16).cos_sin == pytest.approx(f)
    assert declare(cfg, _module(layer_idx=0), 16).cos_sin == 1.0
    for unknown in (_module(layer_idx=2), _module(layer_idx=-1), _module(), None):
        assert declare(cfg, unknown, 16).cos_sin == 1.0  # two factors: none chosen
    same = NS(rope_parameters={"a": yarn, "b": dict(yarn)})
    assert declare(same, None, 16).cos_sin == pytest.approx(f)
    # a layer type that is not a key: the shared factor if they agree
    assert declare(same, _module(layer_type="c"), 16).cos_sin == pytest.approx(f)
    # rope_scaling (older configs) when rope_parameters is absent or empty
    for old in (NS(rope_scaling=yarn), NS(rope_parameters={}, rope_scaling=yarn),
                NS(rope_parameters="yarn", rope_scaling=yarn)):
        assert declare(old, None, 16).cos_sin == pytest.approx(f)
    assert declare(NS(rope_parameters=plain, rope_scaling=yarn), None, 16).cos_sin == 1.0
    assert declare(NS(layer_types=("sliding_attention", "full_attention"),
                      rope_parameters=cfg.rope_parameters), _module(layer_idx=1),
                   16).cos_sin == pytest.approx(f)


# -- position laws ---------------------------------------------------------------------------


def test_position_law_factor_by_hand() -> None:
    """Llama 4: 1 + a ln(1 + floor((p + 1) / b)): 1 up to p = b - 2, 1 + a ln 2 from p = b - 1."""
    law = PositionLaw("t", 0.1, 8192.0, 1.0)
    got = law.factor(np.array([0, 8190, 8191, 16382, 16383]))
    want = [1.0, 1.0, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3)]
    np.testing.assert_allclose(got, want, rtol=1e-15)
    ministral = PositionLaw("m", 0.25, 16.0, 0.0)
    np.testing.assert_allclose(ministral.factor([15, 16, 47, 48]),
                               [1.0, 1 + 0.25 * math.log(2), 1 + 0.25 * math.log(3),
                                1 + 0.25 * math.log(4)], rtol=1e-15)


def test_llama4_temperature_tuning_on_its_layers_without_rope() -> None:
    cfg = NS(attn_temperature_tuning=True, no_rope_layers=[1, 1, 1, 0], attn_scale=0.1,
             floor_scale=8192)
    law = position_law(cfg, _module(layer_idx=3))
    assert law == PositionLaw("attention temperature tuning (attn_scale 0.1, floor_scale 8192)",
                              0.1, 8192.0, 1.0)
    assert declare(cfg, _module(layer_idx=3, scaling=0.125), 64).law == law
    for layer in (0, 2, 4, -1, None):  # with RoPE, or no such layer: no law
        assert position_law(cfg, _module(layer_idx=layer)) is None
    assert position_law(NS(**{**vars(cfg), "no_rope_layers": (1, 0)}),
                        _module(layer_idx=1)) is not None
    for off in ({"attn_temperature_tuning": False}, {"attn_scale": None}, {"floor_scale": 0},
                {"no_rope_layers": "0001"}):
        assert position_law(NS(**{**vars(cfg), **off}), _module(layer_idx=3)) is None
    # attn_scale 0 is a (useless) declaration: a law of factor 1, not "no law"
    assert position_law(NS(**{**vars(cfg), "attn_scale": 0}), _module(layer_idx=3)).a == 0.0


def test_ministral_llama_4_scaling_beta() -> None:
    rope = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16384,
            "llama_4_scaling_beta": 0.1}
    law = position_law(NS(rope_parameters=rope), None)
    assert law == PositionLaw("llama_4_scaling_beta 0.1 (original_max_position_embeddings 16384)",
                              0.1, 16384.0, 0.0)
    assert declare(NS(rope_parameters=rope), None, 64).law == law
    for off in ({"llama_4_scaling_beta": 0.0}, {"original_max_position_embeddings": None}):
        assert position_law(NS(rope_parameters={**rope, **off}), None) is None
    assert declare(NS(), None, 64).law is None


def test_declaration_value() -> None:
    assert Declaration(0.5, 0.25, "x").value == 0.125
    assert Declaration(0.5, None, "x").value is None


# -- where the factor comes from decides whether what the call passes is asked ---------------------


@pytest.mark.parametrize("config, module, adapter", [
    (NS(query_pre_attn_scalar=256), None, None),
    (NS(attention_multiplier=0.5), None, None),
    (NS(scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False), None, None),
    (NS(), None, "gpt_neo"),
    (NS(), _module(inv_norm_factor=0.2), "bloom"),
    (NS(model_type="falcon"), _module(scaling=0.3), None),
    (NS(), _module(scale=True), "openai-gpt"),
    (NS(attn_config=NS(softmax_scale=0.3)), None, "mpt"),
    (NS(), None, "mpt"),
    (NS(pos_att_type=["c2p"], relative_attention=True), None, "deberta"),
    (NS(), None, None),
    (NS(), _module(scaling="0.3"), None),
])
def test_a_factor_from_the_config_or_a_convention_is_not_the_call_s(config, module,
                                                                      adapter) -> None:
    """Only the module's own ``scaling`` attribute can be applied before the call: for every
    other source, a call passing something else leaves ``pre`` at 1 (the audit then compares the
    measured factor with the declared one)."""
    d = declare(config, module, 64, adapter, call_scaling=0.01)
    assert d.pre == 1.0 and d.attr is None and "applied before the call" not in d.source


def test_a_module_scaling_of_1_is_the_module_s_own() -> None:
    d = declare(NS(), _module(scaling=1.0), 64, call_scaling=0.125)
    assert (d.product, d.pre, d.attr) == (0.125, None, 1.0)


def test_missing_attributes_are_no_declarations() -> None:
    """Configs and modules that lack an attribute entirely (not set to None)."""
    assert declared_scale(NS(), None, 64, "mpt") == (0.125, "1/sqrt(head_dim) (MPT)")
    assert declared_scale(NS(attn_config=NS()), None, 64, "mpt") == (
        0.125, "1/sqrt(head_dim) (MPT)")
    cfg = NS(scale_attn_weights=True, scale_attn_by_inverse_layer_idx=True)
    for mod in (None, _module()):
        assert declared_scale(cfg, mod, 64) == (0.125, "GPT-2 flags (scale_attn_weights True)")
    # Llama 4's keys, each absent in turn
    full = {"attn_temperature_tuning": True, "no_rope_layers": [0, 1], "attn_scale": 0.1,
            "floor_scale": 8192}
    assert position_law(NS(**full), _module(layer_idx=0)).b == 8192.0  # layer 0 has no RoPE
    assert position_law(NS(**full), _module(layer_idx=1)) is None
    for key in full:  # (without no_rope_layers, every layer has RoPE)
        cfg = NS(**{k: v for k, v in full.items() if k != key})
        assert position_law(cfg, _module(layer_idx=0)) is None, key
    for mod in (None, _module()):
        assert position_law(NS(**full), mod) is None


def test_rope_type_from_the_older_type_key_and_its_default() -> None:
    """``type`` (older configs) names the kind when ``rope_type`` is absent; with neither, the
    kind is the default one: no mscale_all_dim at the product even in DeepSeek's family."""
    d = declare(NS(rope_scaling={"type": "yarn", "factor": 8.0}), _module(scaling=0.125), 64)
    assert d.source == "1/sqrt(head_dim) x yarn attention factor^2 (1.208^2)"
    d = declare(NS(rope_parameters={"factor": 40.0, "mscale_all_dim": 1.0, "mscale": 1.0}), None,
                16, model_type="deepseek_v3")
    assert (d.product, d.pre, d.cos_sin) == (0.25, 1.0, 1.0)
    d = declare(NS(rope_parameters={"type": "yarn", "factor": 40.0, "mscale_all_dim": 1.0,
                                    "mscale": 1.0}), None, 16, model_type="deepseek_v3")
    assert d.product == pytest.approx(0.25 * _mscale(40, 1.0) ** 2, rel=1e-14)


def test_the_cos_sin_factor_read_through_the_config() -> None:
    """YaRN without a factor: max positions / original ones, from the config, at declare()."""
    cfg = NS(rope_parameters={"rope_type": "yarn"}, max_position_embeddings=4096,
             original_max_position_embeddings=512)
    f = 1 + 0.1 * math.log(8)
    d = declare(cfg, _module(scaling=0.125), 64)
    assert d.cos_sin == pytest.approx(f, rel=1e-15) and d.pre == pytest.approx(f * f, rel=1e-15)
    # per layer type: one type's factor from the config, the other's written: they agree
    per_type = NS(rope_parameters={"a": {"rope_type": "yarn"},
                                   "b": {"rope_type": "yarn", "factor": 8.0}},
                  max_position_embeddings=4096, original_max_position_embeddings=512)
    assert declare(per_type, None, 64).cos_sin == pytest.approx(f, rel=1e-15)


@pytest.mark.parametrize("cs", [1.0, 2.0])
def test_a_cos_sin_factor_of_1_adds_nothing_and_2_is_a_factor(cs: float) -> None:
    rope = {"rope_type": "yarn", "factor": 8.0, "attention_factor": cs}
    d = declare(NS(rope_parameters=rope), _module(scaling=0.125), 64)
    assert (d.pre, d.cos_sin) == (cs * cs, cs)
    assert d.source == ("1/sqrt(head_dim)" if cs == 1.0 else
                        "1/sqrt(head_dim) x yarn attention factor^2 (2^2)")
    d = declare(NS(rope_parameters=rope), _module(scaling=0.3), 64, call_scaling=1.0)
    assert d.pre is None and d.cos_sin == cs


def test_factor_edges_at_2() -> None:
    """Factors just above 1 count: 2 is not 'no scaling'."""
    assert yarn_mscale(2.0) == pytest.approx(1 + 0.1 * math.log(2), rel=1e-15)
    assert rope_attention_factor({"rope_type": "longrope", "factor": 2.0,
                                  "original_max_position_embeddings": 16}, NS()) == \
        pytest.approx(math.sqrt(1.25), rel=1e-15)
    assert rope_attention_factor({"rope_type": "longrope", "factor": 4.0,
                                  "original_max_position_embeddings": 2}, NS()) == \
        pytest.approx(math.sqrt(3.0), rel=1e-15)


def test_layer_0_s_type_and_rope_parameters_per_layer() -> None:
    yarn = {"rope_type": "yarn", "factor": 8.0, "llama_4_scaling_beta": 0.1,
            "original_max_position_embeddings": 512}
    cfg = NS(rope_parameters={"full_attention": yarn, "sliding_attention": {"rope_type": "default"}},
             layer_types=["full_attention", "sliding_attention"])
    assert declare(cfg, _module(layer_idx=0), 16).cos_sin == pytest.approx(1 + 0.1 * math.log(8))
    assert position_law(cfg, _module(layer_idx=0)).a == 0.1
    assert position_law(cfg, _module(layer_type="full_attention")).a == 0.1
    assert position_law(cfg, _module(layer_idx=1)) is None
    assert position_law(cfg, None) is None  # two kinds, none chosen


def test_a_config_without_the_tuning_flag_has_no_temperature_law() -> None:
    cfg = NS(no_rope_layers=[0], attn_scale=0.1, floor_scale=8192)
    assert position_law(cfg, _module(layer_idx=0)) is None


def test_position_factors_are_float64() -> None:
    law = PositionLaw("t", 0.1, 4.0, 1.0)
    got = law.factor(np.arange(8, dtype=np.float32))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, 1 + 0.1 * np.log1p(np.floor((np.arange(8) + 1) / 4)),
                               rtol=1e-15)
