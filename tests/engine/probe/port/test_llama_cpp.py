"""llama.cpp's reading of a GGUF file's attention keys, on metadata written by hand: each expected
value is transcribed here from llama.cpp's source (ggml-org/llama.cpp; the function named in each
test), not computed by the code under test."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.probe.port.gguf_meta import GgufMeta
from engine.probe.port.llama_cpp import llama_cpp_attention

LN40 = math.log(40.0)


def _meta(arch: str, **values) -> GgufMeta:
    return GgufMeta(Path("x.gguf"), arch, {k.replace("__", "."): v for k, v in values.items()}, {})


def test_gemma_27b_rule_and_the_ignored_scale_key() -> None:
    """llama_model_gemma2::load_arch_hparams: 1/sqrt(n_embd / n_head) at 46 blocks, else
    1/sqrt(n_embd_head_k); attention.scale is never read for gemma."""
    g27 = llama_cpp_attention(_meta("gemma2", block_count=46, embedding_length=4608,
                                    attention__head_count=32, attention__key_length=128))
    assert g27.kq == pytest.approx(1 / 12)  # 4608 / 32 = 144
    g9 = llama_cpp_attention(_meta("gemma2", block_count=42, embedding_length=3584,
                                   attention__head_count=16, attention__key_length=256,
                                   attention__scale=0.1))
    assert g9.kq == pytest.approx(1 / 16) and "not read" in g9.how
    g3 = llama_cpp_attention(_meta("gemma3", block_count=62, embedding_length=5376,
                                   attention__head_count=32, attention__key_length=128))
    assert g3.kq == pytest.approx(168**-0.5)
    # a 46-block gemma3 is not gemma3's 27B
    g3b = llama_cpp_attention(_meta("gemma3", block_count=46, embedding_length=5376,
                                    attention__head_count=32, attention__key_length=128))
    assert g3b.kq == pytest.approx(128**-0.5)


def test_attention_scale_is_read_for_granite_only() -> None:
    """llama_model_granite::load_arch_hparams reads LLM_KV_ATTENTION_SCALE; llama's does not
    (its graph's kq_scale is then 1/sqrt(n_embd_head))."""
    gr = llama_cpp_attention(_meta("granite", attention__key_length=64, attention__scale=0.0078125))
    assert gr.kq == 0.0078125
    assert llama_cpp_attention(_meta("granite", attention__key_length=64)).kq == 0.125
    ll = llama_cpp_attention(_meta("llama", attention__key_length=64, attention__scale=0.0078125))
    assert ll.kq == 0.125 and "not read for llama" in ll.how
    # no key_length: embedding_length / head_count
    assert llama_cpp_attention(_meta("qwen2", embedding_length=256,
                                     attention__head_count=4)).kq == 0.125


def test_yarn_full_rotary_puts_the_cos_sin_factor_squared_on_the_logits() -> None:
    """llama_context: yarn_attn_factor = get_mscale(f, 1) / (1 + 0.1 ln f) * attn_factor; ggml's
    rope multiplies by (1 + 0.1 ln f) again: cos/sin x attn_factor (1 + 0.1 ln 4)."""
    q = llama_cpp_attention(_meta("qwen2", attention__key_length=64,
                                  rope__scaling__type="yarn", rope__scaling__factor=4.0))
    m = 1 + 0.1 * math.log(4)
    assert q.rope == pytest.approx(m) and q.full_rotary
    assert q.logit_scale == pytest.approx(m * m / 8)
    a = llama_cpp_attention(_meta("qwen2", attention__key_length=64, rope__scaling__type="yarn",
                                  rope__scaling__factor=4.0, rope__scaling__attn_factor=0.5))
    assert a.rope == pytest.approx(0.5 * m)
    # linear scaling: no magnitude
    lin = llama_cpp_attention(_meta("llama", attention__key_length=64,
                                    rope__scaling__type="linear", rope__scaling__factor=4.0))
    assert lin.rope == 1.0 and lin.logit_scale == 0.125


def test_deepseek2_kq_scale_and_rotary_magnitude_with_and_without_the_log_multiplier() -> None:
    """llama_model_deepseek2::load_arch_hparams divides yarn_log_multiplier by 0.1; deepseek2.cpp:
    attn_factor_org = attn_factor (1 + 0.1 ln f), mscale = attn_factor_org (1 + 0.1 L ln f),
    kq_scale = mscale^2 / sqrt(192); 64 of 192 dims rotate with cos/sin x attn_factor (1+0.1 ln f)."""
    base = dict(attention__key_length=192, rope__dimension_count=64, rope__scaling__type="yarn",
                rope__scaling__factor=40.0)
    v3 = llama_cpp_attention(_meta("deepseek2", rope__scaling__yarn_log_multiplier=0.1, **base))
    assert not v3.full_rotary
    assert v3.kq == pytest.approx((1 + 0.1 * LN40) ** 2 / math.sqrt(192), rel=1e-6)
    assert v3.rope == pytest.approx(1.0, rel=1e-6)
    bare = llama_cpp_attention(_meta("deepseek2", **base))
    # without L: yarn_attn_factor = 1, so attn_factor_org = mscale = 1 + 0.1 ln 40 (= 1.369)
    assert bare.kq == pytest.approx((1 + 0.1 * LN40) ** 2 / math.sqrt(192), rel=1e-6)
    assert bare.rope == pytest.approx(1 + 0.1 * LN40, rel=1e-6)
    assert bare.rope**2 == pytest.approx(1.874, abs=5e-4)
    lite = llama_cpp_attention(_meta("deepseek2", rope__scaling__yarn_log_multiplier=0.0707,
                                     **base))
    assert lite.kq == pytest.approx((1 + 0.0707 * LN40) ** 2 / math.sqrt(192), rel=1e-6)
    assert lite.rope == pytest.approx(1.0, rel=1e-6)
    # the multiplier is read for deepseek2 only: a llama file's is ignored
    ll = llama_cpp_attention(_meta("llama", attention__key_length=64, rope__scaling__type="yarn",
                                   rope__scaling__factor=40.0,
                                   rope__scaling__yarn_log_multiplier=0.1))
    assert ll.rope == pytest.approx(1 + 0.1 * LN40) and ll.kq == 0.125


def test_soft_caps_follow_the_architecture_not_the_keys() -> None:
    """attn_soft_cap is set for gemma2 only; llama_hparams defaults the caps to 50 and 30."""
    g = llama_cpp_attention(_meta("gemma2", attention__key_length=8))
    assert (g.attn_cap, g.final_cap) == (50.0, 30.0) and "default" in g.attn_cap_how
    g2 = llama_cpp_attention(_meta("gemma2", attention__key_length=8,
                                   attn_logit_softcapping=40.0, final_logit_softcapping=20.0))
    assert (g2.attn_cap, g2.final_cap) == (40.0, 20.0)
    ll = llama_cpp_attention(_meta("llama", attention__key_length=8, attn_logit_softcapping=40.0))
    assert ll.attn_cap is None and ll.final_cap is None and "not read" in ll.attn_cap_how


def test_a_file_without_head_width_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        llama_cpp_attention(_meta("llama", embedding_length=64))
    assert "key_length" in str(err.value)
