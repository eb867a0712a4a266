"""The test writer of GGUF files, on plain config objects and a stand-in model of a few
hand-made tensors (no transformers model): the keys llama.cpp's converter writes, their GGUF
types, the q/k row order for llama's rotary layout, Gemma's norms and Q8_0 storage, all read
back with the gguf package's reader."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from engine.probe.port.gguf_write import metadata, permute, write_gguf

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")


def _config(model_type: str = "llama", **extra):
    base = dict(model_type=model_type, num_attention_heads=4, hidden_size=32,
                num_hidden_layers=2, max_position_embeddings=64, intermediate_size=48,
                num_key_value_heads=2, rms_norm_eps=1e-6)
    base.update(extra)
    return SimpleNamespace(**base)


def test_llama_keys() -> None:
    assert metadata(_config()) == {
        "block_count": 2, "embedding_length": 32, "context_length": 64,
        "feed_forward_length": 48, "attention.head_count": 4, "attention.head_count_kv": 2,
        "attention.key_length": 8, "attention.value_length": 8,
        "attention.layer_norm_rms_epsilon": 1e-6, "rope.dimension_count": 8}
    # a config without the attribute at all (older models): as many key heads as query heads
    bare = _config()
    del bare.num_key_value_heads
    assert metadata(bare)["attention.head_count_kv"] == 4
    # no key heads given: as many as query heads; an explicit head_dim is the key length
    m = metadata(_config(num_key_value_heads=None, head_dim=16))
    assert m["attention.head_count_kv"] == 4
    assert (m["attention.key_length"], m["attention.value_length"],
            m["rope.dimension_count"]) == (16, 16, 16)


def test_gemma2_caps_and_window() -> None:
    m = metadata(_config("gemma2", head_dim=8, attn_logit_softcapping=50.0,
                         final_logit_softcapping=30, sliding_window=16))
    assert (m["attn_logit_softcapping"], m["final_logit_softcapping"]) == (50.0, 30.0)
    assert isinstance(m["final_logit_softcapping"], float)
    assert m["attention.sliding_window"] == 16
    m = metadata(_config("gemma2", attn_logit_softcapping=None, final_logit_softcapping=0.0,
                         sliding_window=None))
    assert not {"attn_logit_softcapping", "final_logit_softcapping",
                "attention.sliding_window"} & set(m)


def test_granite_scales() -> None:
    m = metadata(_config("granite", attention_multiplier=0.25, embedding_multiplier=12,
                         residual_multiplier=0.22, logits_scaling=8))
    assert {k: m[k] for k in ("attention.scale", "embedding_scale", "residual_scale",
                              "logit_scale")} == {"attention.scale": 0.25, "embedding_scale": 12.0,
                                                  "residual_scale": 0.22, "logit_scale": 8.0}
    assert "attention.scale" not in metadata(_config(attention_multiplier=0.25))


def test_deepseek_yarn_keys() -> None:
    rope = {"rope_type": "yarn", "factor": 40, "original_max_position_embeddings": 16,
            "mscale_all_dim": 0.707}
    m = metadata(_config("deepseek_v3", qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5,
                         rope_parameters=rope))
    assert (m["attention.key_length"], m["attention.value_length"],
            m["rope.dimension_count"]) == (10, 5, 4)
    assert (m["rope.scaling.type"], m["rope.scaling.factor"],
            m["rope.scaling.original_context_length"]) == ("yarn", 40.0, 16)
    assert m["rope.scaling.yarn_log_multiplier"] == pytest.approx(0.0707, rel=1e-12)
    m = metadata(_config("deepseek_v3", qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5,
                         rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                          "mscale_all_dim": 0}))
    assert "rope.scaling.yarn_log_multiplier" not in m
    assert "rope.scaling.original_context_length" not in m
    # another model's YaRN (old rope_scaling "type"): no log multiplier
    m = metadata(_config(rope_parameters=None, rope_scaling={"type": "yarn", "factor": 4.0,
                                                             "mscale_all_dim": 1.0}))
    assert m["rope.scaling.type"] == "yarn" and "rope.scaling.yarn_log_multiplier" not in m
    assert "rope.scaling.type" not in metadata(_config(rope_parameters={"rope_type": "linear",
                                                                        "factor": 2.0}))


def test_permute_interleaves_each_head_s_halves() -> None:
    w = np.arange(8.0).reshape(8, 1)
    np.testing.assert_array_equal(permute(w, 2)[:, 0], [0, 2, 1, 3, 4, 6, 5, 7])
    w = np.arange(12.0).reshape(12, 1)
    np.testing.assert_array_equal(permute(w, 2)[:, 0], [0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11])
    w = np.arange(16.0).reshape(8, 2)
    assert permute(w, 1)[1].tolist() == [8.0, 9.0]  # rows move whole


def _net(model_type: str = "llama", heads: int = 2, kv: int | None = 1):
    """A stand-in model: one layer, 4-wide heads, hand-made tensors."""
    cfg = _config(model_type, num_attention_heads=heads, num_key_value_heads=kv, hidden_size=8,
                  num_hidden_layers=1, intermediate_size=32, head_dim=4)
    rows = torch.arange(8.0)[:, None].repeat(1, 32)  # row i holds i
    state = {"layers.0.self_attn.q_proj.weight": rows.clone(),
             "layers.0.self_attn.k_proj.weight": rows[:4 * (kv or heads)].clone(),
             "layers.0.self_attn.v_proj.weight": torch.linspace(-1, 1, 4 * 32).reshape(4, 32),
             "layers.0.self_attn.v_proj.bias": torch.full((4,), 0.125),
             "layers.0.input_layernorm.weight": torch.full((8,), 0.5),
             "norm.weight": torch.full((8,), 0.25),
             "not.a.tensor.llama.reads": torch.ones(3)}
    return SimpleNamespace(config=cfg, state_dict=lambda: state)


def _read(path):
    r = gguf.GGUFReader(str(path), "r")
    keys = {f.name: (f.contents(), f.types[0].name if f.types else None) for f in r.fields.values()}
    tensors = {t.name: t for t in r.tensors}
    return keys, tensors


def test_written_keys_types_and_llama_s_q_k_order(tmp_path) -> None:
    path = write_gguf(_net(), tmp_path / "l.gguf", drop=["context_length"],
                      override={"attention.scale": 0.5, "flag": True, "rope.scaling.type": "yarn"})
    assert path == tmp_path / "l.gguf"
    keys, tensors = _read(path)
    assert keys["general.architecture"][0] == "llama"
    assert keys["general.name"][0] == "tiny llama"
    assert keys["llama.block_count"] == (1, "UINT32")
    assert keys["llama.attention.scale"] == (0.5, "FLOAT32")
    assert keys["llama.flag"] == (True, "BOOL")
    assert keys["llama.rope.scaling.type"] == ("yarn", "STRING")
    assert "llama.context_length" not in keys and keys["llama.embedding_length"][0] == 8
    assert set(tensors) == {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                            "blk.0.attn_v.bias", "blk.0.attn_norm.weight", "output_norm.weight"}
    np.testing.assert_array_equal(tensors["blk.0.attn_v.bias"].data, np.full(4, 0.125))
    assert all(t.tensor_type.name == "F32" for t in tensors.values())
    q = np.asarray(tensors["blk.0.attn_q.weight"].data)[:, 0]
    k = np.asarray(tensors["blk.0.attn_k.weight"].data)[:, 0]
    np.testing.assert_array_equal(q, [0, 2, 1, 3, 4, 6, 5, 7])  # 2 heads of 4
    np.testing.assert_array_equal(k, [0, 2, 1, 3])  # 1 key head
    np.testing.assert_array_equal(tensors["blk.0.attn_norm.weight"].data, np.full(8, 0.5))
    # unpermuted on request (a converter bug), and for qwen2 (no permutation in its converter)
    _keys, tensors = _read(write_gguf(_net(), tmp_path / "u.gguf", permute_qk=False))
    np.testing.assert_array_equal(np.asarray(tensors["blk.0.attn_q.weight"].data)[:, 0],
                                  np.arange(8))
    _keys, tensors = _read(write_gguf(_net("qwen2"), tmp_path / "q.gguf"))
    np.testing.assert_array_equal(np.asarray(tensors["blk.0.attn_q.weight"].data)[:, 0],
                                  np.arange(8))
    # no key-head count: k is permuted with the query heads' count
    _keys, tensors = _read(write_gguf(_net(kv=None), tmp_path / "n.gguf"))
    np.testing.assert_array_equal(np.asarray(tensors["blk.0.attn_k.weight"].data)[:, 0],
                                  [0, 2, 1, 3, 4, 6, 5, 7])


def test_gemma_norms_are_stored_as_one_plus_weight(tmp_path) -> None:
    _keys, tensors = _read(write_gguf(_net("gemma2"), tmp_path / "g.gguf"))
    np.testing.assert_array_equal(tensors["blk.0.attn_norm.weight"].data, np.full(8, 1.5))
    np.testing.assert_array_equal(tensors["output_norm.weight"].data, np.full(8, 1.25))
    np.testing.assert_array_equal(np.asarray(tensors["blk.0.attn_q.weight"].data)[:, 0],
                                  np.arange(8))


def test_q8_0_for_whole_blocks_only(tmp_path) -> None:
    net = _net()
    net.state_dict()["layers.0.self_attn.o_proj.weight"] = torch.ones(8, 40)  # not whole blocks
    _keys, tensors = _read(write_gguf(net, tmp_path / "q8.gguf", qtype="Q8_0"))
    types = {n: t.tensor_type.name for n, t in tensors.items()}
    assert types == {"blk.0.attn_q.weight": "Q8_0", "blk.0.attn_k.weight": "Q8_0",
                     "blk.0.attn_v.weight": "Q8_0", "blk.0.attn_output.weight": "F32",
                     "blk.0.attn_v.bias": "F32",
                     "blk.0.attn_norm.weight": "F32", "output_norm.weight": "F32"}
    q8 = gguf.GGMLQuantizationType.Q8_0
    v = gguf.quants.dequantize(tensors["blk.0.attn_v.weight"].data, q8)
    want = np.linspace(-1, 1, 128).reshape(4, 32)
    # within Q8_0's rounding (half a step of max|x| / 127 per block, a float16 step)
    assert np.abs(v - want).max() <= 0.5 / 127 * 1.01
    with pytest.raises(ValueError) as err:
        write_gguf(net, tmp_path / "x.gguf", qtype="Q4_K")
    assert str(err.value) == "qtype must be one of ('F32', 'Q8_0'), got 'Q4_K'"
