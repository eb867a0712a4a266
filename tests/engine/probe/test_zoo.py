"""The zoo: every architecture's documented scale, measured in every layer, and its features;
planted bugs found in exactly their layer; the generated table of docs/architectures.md."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.errors import ConfigError
from engine.probe.zoo import ZOO, cached_audits, generated_tables, splice

ROOT = Path(__file__).resolve().parents[3]
BY_NAME = {e.name: e for e in ZOO}


@pytest.fixture(scope="module")
def audits():
    return cached_audits()


def test_the_zoo_has_the_architectures_the_audit_must_read() -> None:
    configs = {e.config for e in ZOO}
    for cfg in ("BertConfig", "GPT2Config", "LlamaConfig", "Qwen2Config", "MistralConfig",
                "OPTConfig", "T5Config", "GPTNeoConfig", "Gemma2Config", "Qwen3Config",
                "GptOssConfig", "BloomConfig"):
        assert cfg in configs
    assert len(ZOO) >= 12


@pytest.mark.parametrize("name", [e.name for e in ZOO])
def test_every_layer_applies_the_documented_scale_and_reports_its_features(audits,
                                                                           name: str) -> None:
    entry = BY_NAME[name]
    r = audits(name, {})
    assert r.n_layers >= 2 and len(r.sites) == r.n_layers
    sq = math.sqrt(r.d_k)
    blocks = {s.block for s in r.sites}
    assert blocks == set(entry.features), (blocks, entry.features)
    for layer, site in enumerate(r.sites):
        hf, lf = r.head_fits[layer], r.layer_fits[layer]
        assert hf.identifiable.all(), (layer, hf.identifiable)
        want = entry.documented_at(layer) / sq
        # every head, and the layer's joint fit, within the fit's own tolerance
        assert np.all(np.abs(np.log(hf.scale / want)) <= hf.tol_log), (layer, hf.scale * sq)
        assert abs(math.log(lf.scale[0] / want)) <= lf.tol_log[0], (layer, lf.scale * sq)
        assert site.matches_declared, (layer, site.mismatch)
        assert abs(r.declared_scale[layer] * sq / entry.documented_at(layer) - 1) < 1e-9
        for feature in entry.features[site.block]:
            assert any(f.startswith(feature) for f in site.features), (layer, site.features)
    assert r.mismatched_layers() == []


def test_grouped_query_heads_name_their_key_head(audits) -> None:
    r = audits("Qwen2", {})
    assert r.sites[0].kv_head.tolist() == [0, 0, 1, 1]
    assert audits("Mistral", {}).sites[0].kv_head.tolist() == [0, 0, 0, 0]


def test_opt_reads_as_standard_although_it_calls_attention_with_scale_1(audits) -> None:
    """OPT multiplies q by 1/sqrt(d_k) after q_proj and passes scaling=1.0: measured against
    the projections it is standard, not unscaled (a capture at the interface alone reads it
    as unscaled)."""
    r = audits("OPT", {})
    assert r.layer_verdicts == ["1/sqrt(d_k)"] * 2
    assert all("q pre-scaled x0.3536" in s.features for s in r.sites)


def test_gemma2_cap_is_fitted_and_the_scale_below_it_is_query_pre_attn_scalar(audits) -> None:
    r = audits("Gemma 2", {})
    for site in r.sites:
        assert site.softcap_declared == 50.0
        caps = site.softcap
        assert caps is not None and np.all(np.isfinite(caps)), caps
        assert np.all(np.abs(caps / 50.0 - 1) < 1e-3), caps
        assert site.softcap_reach > 25  # the logits bend: the cap is measured, not assumed
    # query_pre_attn_scalar = d_model / heads (as Gemma 2 27B): as declared, not a bug's name
    assert r.layer_verdicts == ["as declared (query_pre_attn_scalar 12)"] * 2


def test_sliding_and_local_windows_are_measured_from_the_mask(audits) -> None:
    assert "sliding window 8" in audits("Mistral", {}).sites[0].features
    neo = audits("GPT-Neo", {})
    assert "causal" in neo.sites[0].features and "sliding window 8" in neo.sites[1].features
    gemma = audits("Gemma 2", {})  # alternating sliding and global layers
    assert "sliding window 8" in gemma.sites[0].features and "causal" in gemma.sites[1].features


@pytest.mark.parametrize("name, layer, kind", [
    ("Llama", 1, "twice"), ("Llama", 0, "dmodel"), ("Llama", 1, "none"),
    ("Llama", 0, "after_softmax"),
    ("T5", 0, "twice"), ("T5", 3, "after_softmax"), ("T5", 4, "dmodel"),
    ("Gemma 2", 1, "head_dim"), ("Gemma 2", 0, "softcap_off"), ("Gemma 2", 1, "twice"),
    ("Gemma 2", 0, "none"),
])
def test_an_injected_bug_is_found_in_exactly_its_layer(audits, name: str, layer: int,
                                                       kind: str) -> None:
    r = audits(name, {layer: kind})
    assert r.mismatched_layers() == [layer], [s.mismatch for s in r.sites]
    assert r.inject == {layer: kind}


@pytest.mark.slow
@pytest.mark.parametrize("name", [e.name for e in ZOO])
def test_every_bug_kind_works_on_every_architecture(audits, name: str) -> None:
    """Each kind in layer 1, on every architecture: found there and only there, or refused in
    one line where it would change nothing (no scale to remove, no cap to drop, one width)."""
    from engine.probe.audit import audit_ids
    from engine.probe.inject import BUG_KINDS
    from engine.probe.zoo import build, zoo_ids

    loaded = build(BY_NAME[name])
    found, refused = [], []
    for kind in BUG_KINDS:
        try:
            r = audit_ids(loaded, zoo_ids(), {1: kind})
        except ConfigError as exc:
            assert exc.field == "inject" and "layer 1" in exc.message, exc.message
            refused.append(kind)
            continue
        assert r.mismatched_layers() == [1], (kind, [s.mismatch for s in r.sites])
        found.append(kind)
    assert {"twice", "dmodel", "after_softmax"} <= set(found), (found, refused)
    assert ("softcap_off" in found) == (name == "Gemma 2")


def test_a_no_op_bug_is_refused(audits) -> None:
    from engine.probe.audit import audit_ids
    from engine.probe.zoo import build, zoo_ids

    loaded = build(BY_NAME["T5"])
    with pytest.raises(ConfigError, match="already applies no scale"):
        audit_ids(loaded, zoo_ids(), {0: "none"})
    with pytest.raises(ConfigError, match="no soft-cap"):
        audit_ids(loaded, zoo_ids(), {0: "softcap_off"})


@pytest.mark.slow
def test_the_docs_table_is_the_zoo_measured_here(audits) -> None:
    """docs/architectures.md carries the tables this code generates (regenerate with
    ``python -m engine.probe.zoo --write docs/architectures.md``)."""
    doc = (ROOT / "docs" / "architectures.md").read_text(encoding="utf-8")
    assert splice(doc, generated_tables(audits)) == doc
