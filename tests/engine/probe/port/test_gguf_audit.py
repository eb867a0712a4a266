"""The GGUF port audit on tiny files written in the test (the gguf package's writer): a correct
file has no finding; each planted port bug gives exactly its own finding, with its factor."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("gguf")
pytest.importorskip("transformers")

from engine.errors import ConfigError
from engine.probe.port.gguf_audit import audit_gguf
from engine.probe.port.gguf_write import write_gguf
from engine.probe.port.onnx_audit import PortConfig
from engine.probe.port.roundtrip import zoo_model
from engine.probe.zoo import zoo_ids
from engine.snapshots import last_result


def _audit(path, loaded):
    return last_result(audit_gguf(PortConfig(str(path)), loaded, ids=zoo_ids()), "the audit")


def _row(res, key):
    return next(r for r in res.metadata if r.key == key)


@pytest.fixture(scope="module")
def gemma2():
    """Gemma 2 as 2B/9B have it: query_pre_attn_scalar = head_dim (8), cap 50."""
    return zoo_model("Gemma 2", {"query_pre_attn_scalar": 8})


@pytest.fixture(scope="module")
def llama():
    return zoo_model("Llama", {"num_key_value_heads": 2})


def test_correct_files_have_no_finding(tmp_path, gemma2, llama) -> None:
    for name, loaded in (("gemma2", gemma2), ("llama", llama)):
        res = _audit(write_gguf(loaded.model, tmp_path / f"{name}.gguf"), loaded)
        assert res.findings == (), name
        assert [r.state for r in res.layers] == ["as the source"] * loaded.n_sites
        assert _row(res, "attention scale").factor == pytest.approx(1.0, rel=1e-6)


def test_a_file_without_the_soft_cap_key_gives_that_finding_only(tmp_path, gemma2) -> None:
    path = write_gguf(gemma2.model, tmp_path / "nocap.gguf", drop=["attn_logit_softcapping"])
    res = _audit(path, gemma2)
    assert len(res.findings) == 1
    assert res.findings[0].startswith("gemma2.attn_logit_softcapping: the source caps the "
                                      "attention logits at 50, the file has no key")


def test_query_pre_attn_scalar_not_in_the_file_gives_the_scale_finding(tmp_path) -> None:
    """The zoo's Gemma 2 scales by query_pre_attn_scalar 12 with head_dim 8 (as 27B does); a
    2-block file gets llama.cpp's 1/sqrt(key_length 8): logits x sqrt(12 / 8) (llama.cpp #8444)."""
    loaded = zoo_model("Gemma 2")
    res = _audit(write_gguf(loaded.model, tmp_path / "g.gguf"), loaded)
    assert len(res.findings) == 1 and res.findings[0].startswith("attention scale")
    assert _row(res, "attention scale").factor == pytest.approx(math.sqrt(12 / 8), rel=1e-5)
    # the same file declaring the source's scale in attention.scale agrees
    fixed = write_gguf(loaded.model, tmp_path / "g2.gguf", override={"attention.scale": 12**-0.5})
    assert _audit(fixed, loaded).findings == ()


def _deepseek():
    import torch
    import transformers

    from engine.probe.loader import info_from_config, wrap_model

    cfg = transformers.DeepseekV3Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=2,
        n_shared_experts=1, num_experts_per_tok=1, first_k_dense_replace=2, kv_lora_rank=16,
        q_lora_rank=None, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8, n_group=1,
        topk_group=1, max_position_embeddings=640,
        rope_parameters={"rope_type": "yarn", "factor": 40.0, "rope_theta": 10000.0,
                         "original_max_position_embeddings": 16, "mscale_all_dim": 1.0,
                         "mscale": 1.0, "beta_fast": 32, "beta_slow": 1})
    torch.manual_seed(0)
    net = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 2 and "embed" not in name:
                p.copy_(torch.randn(p.shape) * 0.5)
    return wrap_model(net, info_from_config(net.config, "tiny DeepSeek-V3"))


def test_a_deepseek_file_without_yarn_log_multiplier_loses_the_mscale(tmp_path) -> None:
    loaded = _deepseek()
    ok = _audit(write_gguf(loaded.model, tmp_path / "ds.gguf"), loaded)
    assert ok.findings == ()
    bad = _audit(write_gguf(loaded.model, tmp_path / "ds_bad.gguf",
                            drop=["rope.scaling.yarn_log_multiplier"]), loaded)
    assert len(bad.findings) == 1 and bad.findings[0].startswith("attention scale")
    # (0.1 ln 40 + 1)^2 = 1.874 by hand: the file's logits are short by that factor
    assert _row(bad, "attention scale").factor == pytest.approx(1 / (0.1 * math.log(40) + 1) ** 2,
                                                                rel=1e-5)


def test_unpermuted_q_k_rows_show_in_the_weights(tmp_path, llama) -> None:
    res = _audit(write_gguf(llama.model, tmp_path / "perm.gguf", permute_qk=False), llama)
    assert res.findings and all("differs from the source's" in f for f in res.findings)
    assert {f.split(":")[0] for f in res.findings} == {"layer 0", "layer 1"}


def test_without_a_source_only_the_file_is_read(tmp_path, llama) -> None:
    path = write_gguf(llama.model, tmp_path / "l.gguf")
    res = last_result(audit_gguf(PortConfig(str(path))), "the audit")
    assert res.findings == () and res.layers == []
    assert _row(res, "attention scale").file.startswith("1 x 1/sqrt(d_k)")


def test_a_file_that_is_not_gguf_is_refused_in_one_line(tmp_path) -> None:
    path = tmp_path / "x.gguf"
    path.write_text("not a gguf file")
    with pytest.raises(ConfigError) as err:
        last_result(audit_gguf(PortConfig(str(path))), "the audit")
    assert "is not a GGUF file" in str(err.value) and "\n" not in str(err.value)
