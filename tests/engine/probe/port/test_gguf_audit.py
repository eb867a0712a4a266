"""The GGUF port audit on tiny files written in the test (the gguf package's writer): a correct
file (float32 or Q8_0) has no finding; each planted port bug gives exactly its own finding, with
its factor as llama.cpp's source computes it (the formulas transcribed by hand here)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("gguf")
pytest.importorskip("transformers")

from engine.errors import ConfigError
from engine.probe.audit import audit_ids
from engine.probe.port.gguf_audit import audit_gguf, compare_meta
from engine.probe.port.gguf_meta import read_gguf
from engine.probe.port.gguf_write import write_gguf
from engine.probe.port.onnx_audit import PortConfig
from engine.probe.port.roundtrip import zoo_model
from engine.probe.zoo import zoo_ids
from engine.snapshots import last_result


def _audit(path, loaded):
    return last_result(audit_gguf(PortConfig(str(path)), loaded, ids=zoo_ids()), "the audit")


def _row(res, key):
    rows = res.metadata if hasattr(res, "metadata") else res
    return next(r for r in rows if r.key.startswith(key))


def _meta_findings(path, loaded, source):
    """The metadata rows of ``path`` against ``loaded``'s config and its (shared) source audit."""
    rows = compare_meta(read_gguf(path), loaded.model.config, source)
    return rows, [r.finding for r in rows if r.finding]


@pytest.fixture(scope="module")
def gemma2():
    """Gemma 2 as 2B/9B have it: query_pre_attn_scalar = head_dim (8), cap 50."""
    return zoo_model("Gemma 2", {"query_pre_attn_scalar": 8})


@pytest.fixture(scope="module")
def llama():
    return zoo_model("Llama", {"num_key_value_heads": 2})


def test_correct_files_have_no_finding(tmp_path, gemma2, llama) -> None:
    """Gemma 2 (soft-caps), Llama with GQA, and Llama with YaRN x4 (the cos/sin factor squared on
    every logit, as the source's rotary applies it)."""
    yarn = zoo_model("Llama, YaRN x4")
    for name, loaded in (("gemma2", gemma2), ("llama", llama), ("yarn", yarn)):
        res = _audit(write_gguf(loaded.model, tmp_path / f"{name}.gguf"), loaded)
        assert res.findings == (), name
        assert [r.state for r in res.layers] == ["as the source"] * loaded.n_sites
        assert _row(res, "attention scale").factor == pytest.approx(1.0, rel=1e-6)


@pytest.fixture(scope="module")
def gemma2_source(gemma2):
    return audit_ids(gemma2, zoo_ids())


def test_soft_caps_as_llama_cpp_applies_them(tmp_path, gemma2, gemma2_source) -> None:
    """Gemma 2's graph caps with the file's keys, 50 / 30 by default (llama_hparams): a file
    without the key is capped as a source capping at 50; another cap is one finding naming its
    key with the factor."""
    path = write_gguf(gemma2.model, tmp_path / "nocap.gguf", drop=["attn_logit_softcapping"])
    rows, found = _meta_findings(path, gemma2, gemma2_source)
    assert found == [] and "default" in _row(rows, "attn_logit_softcapping").effect
    _rows, found = _meta_findings(write_gguf(gemma2.model, tmp_path / "a.gguf", override={
        "attn_logit_softcapping": 30.0}), gemma2, gemma2_source)
    assert len(found) == 1 and found[0].startswith("gemma2.attn_logit_softcapping: llama.cpp caps "
                                                   "the attention logits at 30")
    assert "the source at 50 (x0.6)" in found[0]
    _rows, found = _meta_findings(write_gguf(gemma2.model, tmp_path / "f.gguf", override={
        "final_logit_softcapping": 20.0}), gemma2, gemma2_source)
    assert len(found) == 1 and found[0].startswith("gemma2.final_logit_softcapping") \
        and "(x0.6667)" in found[0]


def test_a_file_without_the_soft_cap_key_of_a_source_capping_elsewhere(tmp_path) -> None:
    """A source capping at 40: the file without the key gets llama.cpp's default 50 (x1.25)."""
    loaded = zoo_model("Gemma 2", {"query_pre_attn_scalar": 8, "attn_logit_softcapping": 40.0})
    source = audit_ids(loaded, zoo_ids())
    _rows, found = _meta_findings(write_gguf(loaded.model, tmp_path / "ok.gguf"), loaded, source)
    assert found == []
    path = write_gguf(loaded.model, tmp_path / "nocap.gguf", drop=["attn_logit_softcapping"])
    _rows, found = _meta_findings(path, loaded, source)
    assert found == ["gemma2.attn_logit_softcapping: llama.cpp caps the attention logits at 50 "
                     "(llama.cpp's default: the file has no key), the source at 40 (x1.25)"]


def test_query_pre_attn_scalar_not_in_the_file_gives_the_scale_finding(tmp_path) -> None:
    """The zoo's Gemma 2 scales by query_pre_attn_scalar 12 with head_dim 8 (as 27B does); a
    2-block file gets llama.cpp's 1/sqrt(key_length 8): logits x sqrt(12 / 8) (llama.cpp #8444)."""
    loaded = zoo_model("Gemma 2")
    res = _audit(write_gguf(loaded.model, tmp_path / "g.gguf"), loaded)
    assert len(res.findings) == 1 and res.findings[0].startswith("attention scale")
    assert _row(res, "attention scale").factor == pytest.approx(math.sqrt(12 / 8), rel=1e-5)
    # attention.scale cannot repair it: llama.cpp does not read the key for gemma2
    source = audit_ids(loaded, zoo_ids())
    fixed = write_gguf(loaded.model, tmp_path / "g2.gguf", override={"attention.scale": 12**-0.5})
    rows, found = _meta_findings(fixed, loaded, source)
    assert len(found) == 1 and "not read for gemma" in _row(rows, "attention scale").file


def test_attention_scale_is_read_for_granite_and_ignored_for_llama(tmp_path, llama) -> None:
    """Granite's attention_multiplier 0.25 travels as attention.scale (llama.cpp reads it for
    granite); without it llama.cpp applies 1/sqrt(8): logits x sqrt(2). A Llama file's
    attention.scale is not read."""
    granite = zoo_model("Granite")
    source = audit_ids(granite, zoo_ids())
    _rows, found = _meta_findings(write_gguf(granite.model, tmp_path / "g.gguf"), granite, source)
    assert found == []
    path = write_gguf(granite.model, tmp_path / "g0.gguf", drop=["attention.scale"])
    rows, found = _meta_findings(path, granite, source)
    assert len(found) == 1 and found[0].startswith("attention scale")
    assert _row(rows, "attention scale").factor == pytest.approx(math.sqrt(2), rel=1e-4)
    lsrc = audit_ids(llama, zoo_ids())
    path = write_gguf(llama.model, tmp_path / "l.gguf", override={"attention.scale": 0.25})
    rows, found = _meta_findings(path, llama, lsrc)
    assert found == [] and "not read for llama" in _row(rows, "attention scale").file


def _deepseek(mscale: float = 1.0):
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
                         "original_max_position_embeddings": 16, "mscale_all_dim": mscale,
                         "mscale": mscale, "beta_fast": 32, "beta_slow": 1})
    torch.manual_seed(0)
    net = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 2 and "embed" not in name:
                p.copy_(torch.randn(p.shape) * 0.5)
    return wrap_model(net, info_from_config(net.config, "tiny DeepSeek-V3"))


@pytest.mark.parametrize("mscale", [1.0, 0.707])
def test_a_deepseek_file_without_yarn_log_multiplier(tmp_path, mscale) -> None:
    """DeepSeek-V3 (mscale = mscale_all_dim = 1) and V2-Lite's 0.707, f = 40. Without the key,
    llama.cpp's deepseek2 graph keeps kq_scale at (1 + 0.1 ln 40)^2 / sqrt(d) and its rotary dims'
    cos/sin carry 1 + 0.1 ln 40: their part of the logits x (0.1 ln 40 + 1)^2 = 1.874; where the
    source's own factor is (1 + 0.0707 ln 40)^2, the whole logit is also x1.874 / 1.590."""
    loaded = _deepseek(mscale)
    source = audit_ids(loaded, zoo_ids())
    _rows, found = _meta_findings(write_gguf(loaded.model, tmp_path / "ds.gguf"), loaded, source)
    assert found == []
    path = write_gguf(loaded.model, tmp_path / "ds_bad.gguf",
                      drop=["rope.scaling.yarn_log_multiplier"])
    rows, found = _meta_findings(path, loaded, source)
    ln40 = math.log(40)
    rotary = _row(rows, "rotary magnitude")
    assert rotary.factor == pytest.approx((0.1 * ln40 + 1) ** 2, rel=1e-5)
    assert rotary.finding.endswith("x1.874")
    scale = _row(rows, "attention scale")
    assert scale.factor == pytest.approx(((1 + 0.1 * ln40) / (1 + 0.1 * mscale * ln40)) ** 2,
                                         rel=1e-4)
    assert len(found) == (1 if mscale == 1.0 else 2)


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
