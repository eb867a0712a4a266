"""The GGUF weights check on hand-made tensors (no model): each storage type's bound by hand and
against the rounding the type really does (within it, and not far wider than it), the file's
tensor names, and the per-layer worst tensor."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.probe.port.gguf_meta import GgufMeta
from engine.probe.port.gguf_weights import gguf_names, supported, tolerance, weight_diffs

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")


@pytest.mark.parametrize("qtype, rel, tiny", [("F32", 2.0**-24, 2.0**-150),
                                              ("F16", 2.0**-11, 2.0**-25),
                                              ("BF16", 2.0**-8, 2.0**-134), ("F64", 2.0**-53, 0.0)])
def test_a_float_type_s_bound_is_half_an_ulp(qtype, rel, tiny) -> None:
    x = np.array([[1.0, -3.0, 0.0]])
    np.testing.assert_array_equal(tolerance(qtype, x),
                                  [[rel * (1 + 1e-6) + tiny, 3 * rel * (1 + 1e-6) + tiny, tiny]])


def test_float16_rounding_is_within_its_bound_and_uses_nearly_all_of_it() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=2000) * np.exp(rng.uniform(-5, 5, 2000))
    tol = tolerance("F16", x)
    x16 = x.astype(np.float16).astype(np.float64)
    assert np.all(np.abs(x16 - x) <= tol)
    # the largest rounding uses nearly all of the bound (half an ulp, not a wider band)
    assert np.max(np.abs(x16 - x) / tol) > 0.9


def test_each_q8_0_block_has_its_own_step() -> None:
    """Two blocks of a 64-wide row: steps 0.01 and 0.02 (from each block's largest |x|), each as
    float16; a 3-D tensor's blocks run along its last axis."""
    row = np.concatenate([np.linspace(-1.27, 0.5, 32), np.linspace(-1.0, 2.54, 32)])
    want = [0.005 + 127 * abs(0.01 - float(np.float16(0.01))) + 0.01 * 2**-10,
            0.01 + 127 * abs(0.02 - float(np.float16(0.02))) + 0.02 * 2**-10]
    got = tolerance("Q8_0", np.stack([row, -row]))
    assert got.shape == (2, 64)
    for r in (0, 1):
        np.testing.assert_allclose(got[r, :32], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[r, 32:], want[1], rtol=1e-12)
    np.testing.assert_allclose(tolerance("Q8_0", row.reshape(1, 2, 32))[0, 1], want[1],
                               rtol=1e-12)
    assert tolerance("Q8_0", np.float64(1.0)) is None
    assert tolerance("Q8_0", np.ones(40)) is None and tolerance("F8", np.ones(32)) is None


def test_q8_0_quantization_stays_within_its_bound_and_uses_most_of_it() -> None:
    q8 = gguf.GGMLQuantizationType.Q8_0
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(64, 128)) * np.exp(rng.uniform(-4, 2, (64, 1)))).astype(np.float32)
    back = gguf.quants.dequantize(gguf.quants.quantize(x, q8), q8).astype(np.float64)
    ratio = np.abs(back - x) / tolerance("Q8_0", x)
    assert ratio.max() <= 1.0 and ratio.max() > 0.5


def _t(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a, dtype=np.float64))


def test_the_worst_attention_tensor_per_layer() -> None:
    one = np.ones((2, 32))
    src = {"layers.0.self_attn.q_proj.weight": _t(one), "layers.0.self_attn.k_proj.weight": _t(one),
           "layers.1.self_attn.v_proj.weight": _t(one), "layers.1.self_attn.o_proj.weight": _t(one),
           "layers.1.mlp.up_proj.weight": _t(one), "embed_tokens.weight": _t(one),
           "layers.2.self_attn.q_proj.weight": _t(one), "layers.3.attention.query.weight": _t(one),
           "h.4.attn.qkv.weight": _t(one)}
    step = 2.0**-24 * (1 + 1e-6)  # F32's bound at |x| = 1 (+ 2^-150)
    state = {"layers.0.self_attn.q_proj.weight": _t(one + 0.5 * step),
             "layers.0.self_attn.k_proj.weight": _t(one + 3 * step),
             "layers.1.self_attn.v_proj.weight": _t(np.ones((2, 16))),  # another shape
             "layers.1.self_attn.o_proj.weight": _t(one + 1.0),
             "layers.1.mlp.up_proj.weight": _t(one + 100.0),  # not attention
             "embed_tokens.weight": _t(one + 100.0),  # not in a layer
             "layers.2.self_attn.q_proj.weight": _t(one),
             "layers.3.attention.query.weight": _t(one + 2 * step),
             "layers.5.self_attn.q_proj.weight": _t(one),  # not in the source
             "h.4.attn.qkv.weight": _t(one)}
    types = {k: "F32" for k in state}
    types["layers.2.self_attn.q_proj.weight"] = "Q4_K"
    del types["layers.3.attention.query.weight"]
    worst = weight_diffs(state, src, types)
    assert set(worst) == {0, 1, 2, 3}  # h.4 is not a "layers.N." name
    name, ratio, qtype = worst[0]
    assert (name, qtype) == ("layers.0.self_attn.k_proj.weight", "F32")
    assert ratio == pytest.approx(3.0, rel=1e-6)
    assert worst[1] == ("layers.1.self_attn.v_proj.weight", math.inf, "F32")
    assert worst[2][0] == "layers.2.self_attn.q_proj.weight" and math.isnan(worst[2][1])
    assert worst[2][2] == "Q4_K"
    assert worst[3][0] == "layers.3.attention.query.weight" and math.isnan(worst[3][1])
    # a layer with two tensors: the larger ratio, whichever comes first
    rev = weight_diffs(dict(reversed(list(state.items()))), src, types)
    assert rev[0][0] == "layers.0.self_attn.k_proj.weight"
    # a type without a name in the file is "?" (no bound: NaN)
    only3 = weight_diffs({"layers.3.attention.query.weight": state[
        "layers.3.attention.query.weight"]}, src, {})
    assert only3[3][0] == "layers.3.attention.query.weight" and only3[3][2] == "?"
    assert math.isnan(only3[3][1])


def test_a_nan_ratio_gives_way_to_a_measured_one_not_the_other_way() -> None:
    one = np.ones((1, 32))
    src = {"layers.0.self_attn.q_proj.weight": _t(one), "layers.0.self_attn.k_proj.weight": _t(one)}
    state = {"layers.0.self_attn.q_proj.weight": _t(one),
             "layers.0.self_attn.k_proj.weight": _t(one + 0.25)}
    for types in ({"layers.0.self_attn.q_proj.weight": "Q4_K",
                   "layers.0.self_attn.k_proj.weight": "F16"},):
        got = weight_diffs(state, src, types)[0]
        assert got[0] == "layers.0.self_attn.k_proj.weight"
        assert got[1] == pytest.approx(0.25 / (2.0**-11 * (1 + 1e-6) + 2.0**-25), rel=1e-9)
        got = weight_diffs(dict(reversed(list(state.items()))), src, types)[0]
        assert got[0] == "layers.0.self_attn.k_proj.weight"
    # a zero bound (F64 at 0): an exact value is 0 times it, a changed one enormous
    zero = {"layers.0.self_attn.q_proj.weight": _t(np.zeros((1, 32)))}
    assert weight_diffs(zero, zero, {"layers.0.self_attn.q_proj.weight": "F64"})[0][1] == 0.0
    bumped = {"layers.0.self_attn.q_proj.weight": _t(np.full((1, 32), 1e-200))}
    assert weight_diffs(bumped, zero, {"layers.0.self_attn.q_proj.weight": "F64"})[0][1] > 1e99


def _meta(arch: str, **values) -> GgufMeta:
    return GgufMeta(Path("x.gguf"), arch, values, {})


def test_the_file_s_tensor_names() -> None:
    state = {"layers.0.self_attn.q_proj.weight": 0, "layers.1.self_attn.k_proj.bias": 0,
             "embed_tokens.weight": 0, "layers.0.mlp.up_proj.weight": 0, "foo.bar": 0}
    assert gguf_names(_meta("llama", block_count=2), state) == {
        "layers.0.self_attn.q_proj.weight": "blk.0.attn_q.weight",
        "layers.1.self_attn.k_proj.bias": "blk.1.attn_k.bias",
        "embed_tokens.weight": "token_embd.weight",
        "layers.0.mlp.up_proj.weight": "blk.0.ffn_up.weight"}
    # only block_count blocks are mapped
    assert "layers.1.self_attn.k_proj.bias" not in gguf_names(_meta("llama", block_count=1), state)
    assert gguf_names(_meta("llama"), state) == {}
    assert gguf_names(_meta("no-such-arch", block_count=2), state) == {}


def test_supported_architectures(monkeypatch) -> None:
    pytest.importorskip("transformers")
    assert supported(_meta("llama")) and supported(_meta("qwen2"))
    assert not supported(_meta("no-such-arch"))
    monkeypatch.setitem(sys.modules, "transformers.integrations.ggml", None)
    assert not supported(_meta("llama"))


def test_q8_0_bound_of_a_vector_and_of_float32_values() -> None:
    """A 1-D tensor of whole blocks has a bound per block; float32 values are bounded in float64
    (the same bound as their float64 copies)."""
    row = np.concatenate([np.full(32, 1.27), np.full(32, 2.54)])
    got = tolerance("Q8_0", row)
    assert got.shape == (64,)
    np.testing.assert_allclose(got[:32], 0.005 + 127 * abs(0.01 - float(np.float16(0.01)))
                               + 0.01 * 2**-10, rtol=1e-12)
    rng = np.random.default_rng(2)
    x32 = rng.normal(size=(3, 64)).astype(np.float32)
    for qtype in ("Q8_0", "F32", "F16"):
        got = tolerance(qtype, x32)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, tolerance(qtype, x32.astype(np.float64)))


def test_ties_keep_the_first_tensor_and_other_tensors_are_not_compared() -> None:
    one = np.ones((1, 32))
    names = ("layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.weight",
             "layers.0.mlp.up_proj.weight")
    src = {n: _t(one) for n in names}
    state = {names[0]: _t(one), names[1]: _t(one), names[2]: _t(one + 100.0)}
    worst = weight_diffs(state, src, {n: "F32" for n in names})
    assert worst == {0: (names[0], 0.0, "F32")}
