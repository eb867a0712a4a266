"""Scales that depend on the query's position: Llama 4's attention temperature tuning and
Ministral 3's llama_4_scaling_beta are measured per bucket of positions, beside the declared law,
and a law that differs is flagged (main: "as declared", the position dependence hidden)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.probe.audit import audit_ids
from engine.probe.zoo import ZooEntry, build, zoo_ids

SMALL = {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64,
         "max_position_embeddings": 64}
LLAMA4 = {**SMALL, "intermediate_size_mlp": 64, "num_local_experts": 2, "use_qk_norm": False,
          "no_rope_layers": [1, 0], "attn_temperature_tuning": True, "floor_scale": 4,
          "attn_scale": 0.1}
MINISTRAL3 = {**SMALL, "rope_parameters": {
    "rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "beta_fast": 32.0,
    "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4, "llama_4_scaling_beta": 0.1}}


def _llama4_law(p: np.ndarray) -> np.ndarray:
    """Llama 4: q x (log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1), by hand."""
    return np.log(np.floor((p + 1) / 4) + 1) * 0.1 + 1


def _ministral3_law(p: np.ndarray, beta: float = 0.1) -> np.ndarray:
    """Ministral 3: q x (1 + beta * log(1 + floor(p / original_max_position_embeddings)))."""
    return 1 + beta * np.log(1 + np.floor(p / 4))


def _check_as_declared(site, law) -> None:
    assert site.matches_declared and site.declared_known, site.mismatch
    assert len(site.position) >= 4
    for b in site.position:
        assert abs(math.log(b.ratio)) <= b.tol, b
        rows = np.arange(b.first, b.last + 1)
        assert b.declared == pytest.approx(law(rows).mean(), rel=1e-9)
    assert site.position[-1].measured > 1.1 * site.position[0].measured  # it really grows


def test_llama4_temperature_tuning_is_measured_per_position_on_its_layers_without_rope() -> None:
    r = audit_ids(build(ZooEntry("Llama 4", "Llama4TextConfig", LLAMA4)), zoo_ids())
    assert r.mismatched_layers() == []
    assert r.sites[0].position == ()  # a RoPE layer: no tuning
    _check_as_declared(r.sites[1], _llama4_law)
    top = _llama4_law(np.arange(24)).max()
    assert f"q x1 to x{top:.4g} with the position" in r.sites[1].features


def test_a_llama4_layer_applying_another_temperature_is_flagged() -> None:
    """The module's attn_scale doubled (the config still says 0.1): flagged there, only."""
    loaded = build(ZooEntry("Llama 4", "Llama4TextConfig", LLAMA4))
    loaded.model.layers[1].self_attn.attn_scale = 0.2
    r = audit_ids(loaded, zoo_ids())
    assert r.mismatched_layers() == [1]
    assert "varies with the position otherwise than the declared law" in r.sites[1].mismatch


def test_ministral3_scaling_beta_is_measured_per_position_in_every_layer() -> None:
    r = audit_ids(build(ZooEntry("Ministral 3", "Ministral3Config", MINISTRAL3)), zoo_ids())
    assert r.mismatched_layers() == []
    for site in r.sites:
        _check_as_declared(site, _ministral3_law)


@pytest.mark.parametrize("beta_in_code", [0.2, 0.0])
def test_ministral3_code_applying_another_beta_is_flagged(beta_in_code: float) -> None:
    """The code's law with beta doubled, or with none, against the config's 0.1."""
    from transformers.models.ministral3 import modeling_ministral3 as m3

    loaded = build(ZooEntry("Ministral 3", "Ministral3Config", MINISTRAL3))
    real = m3.get_llama_4_attn_scale
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(m3, "get_llama_4_attn_scale", lambda p, _b, m: real(p, beta_in_code, m))
        r = audit_ids(loaded, zoo_ids())
    assert r.mismatched_layers() == [0, 1]
    assert all("varies with the position" in s.mismatch for s in r.sites)


def test_a_position_factor_no_config_declares_is_unknown_not_hidden() -> None:
    """The config declares beta 0 (no law) but the code multiplies q by a law: no mismatch the
    audit cannot back, but 'declared: unknown' naming the factor, and s(position) shown."""
    from transformers.models.ministral3 import modeling_ministral3 as m3

    cfg = {**MINISTRAL3, "rope_parameters": {**MINISTRAL3["rope_parameters"],
                                             "llama_4_scaling_beta": 0.0}}
    loaded = build(ZooEntry("Ministral 3", "Ministral3Config", cfg))
    real = m3.get_llama_4_attn_scale
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(m3, "get_llama_4_attn_scale", lambda p, _b, m: real(p, 0.1, m))
        r = audit_ids(loaded, zoo_ids())
    assert r.mismatched_layers() == []
    for site in r.sites:
        assert not site.declared_known and "with the position" in site.declared_note
        assert site.position and site.position[-1].measured > 1.1


def test_a_planted_constant_bug_on_a_position_law_is_the_scale_not_the_law() -> None:
    r = audit_ids(build(ZooEntry("Ministral 3", "Ministral3Config", MINISTRAL3)), zoo_ids(),
                  {1: "twice"})
    assert r.mismatched_layers() == [1]
    assert r.sites[1].mismatch.startswith("measured 0.3536 x the declared scale")
    assert r.layer_verdicts[1] == "scaled twice"


def test_the_probe_recomputes_a_position_law_models_attention() -> None:
    """probe-model puts the per-position factor back into q: its recomputation of the model's
    own attention stays at float32 rounding."""
    from engine.probe.analyze import analyze_capture, run_to_result
    from engine.probe.capture import capture
    from engine.probe.config import ProbeConfig

    loaded = build(ZooEntry("Ministral 3", "Ministral3Config", MINISTRAL3))
    cap = capture(loaded, zoo_ids())
    res = run_to_result(analyze_capture(ProbeConfig(text="x", bootstrap=0), loaded, cap,
                                        zoo_ids()))
    assert res.attn_max_abs_diff.max() < 1e-5
