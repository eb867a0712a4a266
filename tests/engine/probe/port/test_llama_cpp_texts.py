"""llama.cpp's reading of a file's attention keys, the edges test_llama_cpp.py leaves: what each
rule says in words (the audit prints it), keys as per-layer lists, zero and missing values, the
rope kinds, and the soft-cap texts; values transcribed by hand from llama.cpp's rules."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.probe.port.gguf_meta import GgufMeta
from engine.probe.port.llama_cpp import get_mscale, llama_cpp_attention


def _lc(arch: str, **values):
    meta = GgufMeta(Path("dir/model.gguf"), arch,
                    {k.replace("__", "."): v for k, v in values.items()}, {})
    return llama_cpp_attention(meta)


def test_the_base_scale_in_words() -> None:
    assert _lc("llama", attention__key_length=64).how == "1/sqrt(key_length 64)"
    ll = _lc("llama", attention__key_length=64, attention__scale=0.5)
    assert (ll.kq, ll.how) == (0.125, "1/sqrt(key_length 64) (attention.scale in the file is not "
                                      "read for llama)")
    gr = _lc("granite", attention__key_length=64, attention__scale=[0.0078125])
    assert (gr.kq, gr.how) == (0.0078125, "attention.scale 0.0078125")
    # a zero key is no key, and granite's is never "not read"
    gr0 = _lc("granitemoe", attention__key_length=64, attention__scale=0.0)
    assert (gr0.kq, gr0.how) == (0.125, "1/sqrt(key_length 64)")
    assert _lc("granite", attention__key_length=64, attention__scale=True).kq == 0.125


def test_gemma_in_words() -> None:
    g27 = _lc("gemma2", block_count=[46], embedding_length=4608, attention__head_count=32,
              attention__key_length=128, attention__scale=0.1)
    assert g27.kq == pytest.approx(1 / 12)
    assert g27.how == ("1/sqrt(embedding_length / head_count = 144) (27B rule) (attention.scale "
                       "in the file is not read for gemma)")
    # the 27B rule without embedding_length: the key length
    g = _lc("gemma2", block_count=46, attention__head_count=32, attention__key_length=128)
    assert g.kq == pytest.approx(128**-0.5)
    assert g.how == "1/sqrt(embedding_length / head_count = 128) (27B rule)"
    g = _lc("gemma3", block_count=62, embedding_length=5376, attention__key_length=128)
    assert g.kq == pytest.approx(128**-0.5)
    g9 = _lc("gemma2", block_count=42, attention__key_length=256)
    assert (g9.kq, g9.how) == (1 / 16, "1/sqrt(key_length 256)")
    g9 = _lc("gemma3", block_count=42, attention__key_length=256, attention__scale=0.2)
    assert g9.how == "1/sqrt(key_length 256) (attention.scale in the file is not read for gemma)"


def test_rope_kinds_and_their_words() -> None:
    plain = _lc("llama", attention__key_length=64)
    assert (plain.rope, plain.rope_how, plain.logit_scale) == (1.0, "rotary cos/sin x1", 0.125)
    # linear (the default kind) with an attn_factor: the cos/sin carry it, the logits its square
    lin = _lc("llama", attention__key_length=64, rope__scaling__attn_factor=0.5,
              rope__scaling__factor=4.0)
    assert lin.rope == 0.5 and lin.rope_how == "rotary cos/sin x0.5 (attn_factor 0.5)"
    assert lin.logit_scale == pytest.approx(0.125 * 0.25)
    m = 1 + 0.1 * math.log(4)
    y = _lc("qwen2", attention__key_length=64, rope__scaling__type="YaRN",
            rope__scaling__factor=[4.0], rope__scaling__attn_factor=0.5)
    assert y.rope == pytest.approx(0.5 * m)
    assert y.rope_how == f"rotary cos/sin x{0.5 * m:.4g} (YaRN x4, attn_factor 0.5)"
    # "none", or a factor <= 0: no YaRN factor
    for values in ({"rope__scaling__type": "none", "rope__scaling__factor": 4.0},
                   {"rope__scaling__type": "yarn", "rope__scaling__factor": 0.0},
                   {"rope__scaling__type": "yarn", "rope__scaling__factor": -2.0}):
        r = _lc("qwen2", attention__key_length=64, **values)
        assert r.rope == pytest.approx(1.0), values
    assert _lc("qwen2", attention__key_length=64, rope__scaling__type="yarn",
               rope__scaling__factor=-2.0).rope_how == "rotary cos/sin x1 (YaRN x1)"
    # a factor below 1 is kept as the file has it (llama.cpp's get_mscale gives 1 there)
    assert _lc("qwen2", attention__key_length=64, rope__scaling__type="yarn",
               rope__scaling__factor=0.5).rope_how == "rotary cos/sin x1 (YaRN x0.5)"
    # an empty list is no factor
    assert _lc("qwen2", attention__key_length=64, rope__scaling__type="yarn",
               rope__scaling__factor=[]).rope_how == "rotary cos/sin x1 (YaRN x1)"
    # a boolean is not a number
    assert _lc("qwen2", attention__key_length=64, rope__scaling__type="yarn",
               rope__scaling__factor=True).rope == pytest.approx(1.0)


def test_the_rotated_dimensions() -> None:
    assert _lc("llama", attention__key_length=64, rope__dimension_count=0).n_rot == 64
    part = _lc("llama", attention__key_length=64, rope__dimension_count=32,
               rope__scaling__attn_factor=0.5)
    assert not part.full_rotary and part.logit_scale == 0.125
    assert _lc("llama", attention__key_length=64, rope__dimension_count=[64]).full_rotary
    assert _lc("llama", attention__key_length=64, rope__dimension_count=80).full_rotary


def test_deepseek2_in_words() -> None:
    ln40 = math.log(40)
    ds = _lc("deepseek2", attention__key_length=192, rope__dimension_count=64,
             rope__scaling__type="yarn", rope__scaling__factor=40.0,
             rope__scaling__yarn_log_multiplier=0.0707, rope__scaling__attn_factor=0.5)
    org = 0.5  # attn_factor_org = 0.5 / (1 + 0.1 ln 40) x (1 + 0.1 ln 40)
    ms = org * (1 + 0.0707 * ln40)
    assert ds.kq == pytest.approx(ms * ms / math.sqrt(192), rel=1e-9)
    assert ds.rope == pytest.approx(0.5, rel=1e-9)
    assert ds.how == (f"mscale^2/sqrt(key_length 192), mscale = {org:.4g} x (1 + 0.1 x 0.707 "
                      f"ln 40) = {ms:.4g}")
    # the log multiplier as llama.cpp stores it: the file's value / 0.1
    ds1 = _lc("deepseek2", attention__key_length=192, rope__dimension_count=64,
              rope__scaling__type="yarn", rope__scaling__factor=40.0,
              rope__scaling__yarn_log_multiplier=0.2)
    # L = 2: yarn_attn_factor = get_mscale(f, 2) / get_mscale(f, 2) / (1 + 0.1 ln f), so
    # attn_factor_org = 1 and mscale = 1 + 0.2 ln f; the cos/sin carry 1
    assert ds1.kq == pytest.approx((1 + 0.2 * ln40) ** 2 / math.sqrt(192), rel=1e-9)
    assert ds1.rope == pytest.approx(1.0, rel=1e-9)
    # "none": the factor left in the file is not used (f = 1), even by deepseek2's mscale
    ds3 = _lc("deepseek2", attention__key_length=192, rope__dimension_count=64,
              rope__scaling__type="none", rope__scaling__factor=40.0,
              rope__scaling__yarn_log_multiplier=0.1)
    assert ds3.kq == pytest.approx(1 / math.sqrt(192), rel=1e-12)
    # no YaRN: mscale = attn_factor
    ds2 = _lc("deepseek2", attention__key_length=192, rope__dimension_count=64)
    assert ds2.kq == pytest.approx(1 / math.sqrt(192))
    assert ds2.how == "mscale^2/sqrt(key_length 192), mscale = 1 x (1 + 0.1 x 0 ln 1) = 1"


def test_soft_cap_words() -> None:
    g = _lc("gemma2", attention__key_length=8, attn_logit_softcapping=40.0,
            final_logit_softcapping=0.0)
    assert (g.attn_cap, g.attn_cap_how) == (40.0, "40 (the file's key)")
    assert (g.final_cap, g.final_cap_how) == (30.0, "30 (llama.cpp's default: the file has no key)")
    ll = _lc("llama", attention__key_length=8)
    assert ll.attn_cap_how == ll.final_cap_how == "not applied: llama.cpp's llama graph has no soft-cap"
    ll = _lc("qwen2", attention__key_length=8, attn_logit_softcapping=50.0,
             final_logit_softcapping=30.0)
    assert ll.final_cap_how == ("not applied: llama.cpp's qwen2 graph has no soft-cap "
                                "(attn_logit_softcapping, final_logit_softcapping in the file is "
                                "not read)")
    assert ll.final_cap is None


def test_get_mscale() -> None:
    assert get_mscale(1.0, 5.0) == 1.0 and get_mscale(0.5, 5.0) == 1.0
    assert get_mscale(math.e, 2.0) == pytest.approx(1.2)
    assert get_mscale(1.5, 1.0) == pytest.approx(1 + 0.1 * math.log(1.5), rel=1e-12)
    assert get_mscale(1.0 + 1e-6, 1.0) - 1.0 == pytest.approx(1e-7, rel=1e-6)


def test_the_refusal_names_the_file_and_the_keys() -> None:
    with pytest.raises(ConfigError) as err:
        _lc("qwen2", embedding_length=64, attention__head_count=0)
    assert (err.value.field, err.value.message) == (
        "gguf", "model.gguf: neither qwen2.attention.key_length nor embedding_length / "
        "head_count is in the file")
