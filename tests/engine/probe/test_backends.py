"""Eager against SDPA, layer by layer: agreement within float tolerance, and a deliberately
broken SDPA path flagged in exactly the layer it breaks."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from engine.probe.backends import REL_TOL, compare_backends
from engine.probe.zoo import ZOO, build, zoo_ids

BY_NAME = {e.name: e for e in ZOO}


@pytest.fixture(scope="module")
def llama():
    return build(BY_NAME["Llama"])


def test_sdpa_agrees_with_eager_in_every_layer(llama) -> None:
    rep = compare_backends(llama, zoo_ids(), ["sdpa"])
    assert rep.compared == ("sdpa",) and rep.flagged() == []
    assert len(rep.sites) == 2
    assert all(s.output_rel_diff < REL_TOL / 10 for s in rep.sites), rep.sites
    # the model is back on the capture afterwards: an audit still works
    from engine.probe.audit import audit_ids
    from engine.probe.tap import IMPLEMENTATION

    assert llama.model.config._attn_implementation == IMPLEMENTATION
    assert audit_ids(llama, zoo_ids()).mismatched_layers() == []


def test_a_broken_sdpa_path_is_flagged_with_its_layer_and_size(llama, monkeypatch) -> None:
    """SDPA monkeypatched to scale layer 1's logits 10% too much: flagged there, not in
    layer 0, with a difference far above float rounding."""
    from transformers import AttentionInterface

    real = AttentionInterface._global_mapping["sdpa"]

    def broken(module, query, key, value, attention_mask, scaling=None, **kwargs):
        if getattr(module, "layer_idx", None) == 1:
            scaling = (scaling or query.shape[-1] ** -0.5) * 1.1
        return real(module, query, key, value, attention_mask, scaling=scaling, **kwargs)

    monkeypatch.setitem(AttentionInterface._global_mapping, "sdpa", broken)
    rep = compare_backends(llama, zoo_ids(), ["sdpa"])
    flagged = rep.flagged()
    assert [(s.backend, s.site) for s in flagged] == [("sdpa", 1)], rep.sites
    assert flagged[0].output_rel_diff > 100 * REL_TOL
    assert rep.sites[0].output_rel_diff < REL_TOL


def test_a_backend_the_model_does_not_support_is_reported_not_compared() -> None:
    gemma = build(BY_NAME["Gemma 2"])
    rep = compare_backends(gemma, zoo_ids(), ["sdpa"])
    assert rep.compared == () and "sdpa" in rep.unavailable and rep.sites == ()
    neo = build(BY_NAME["GPT-Neo"])
    rep = compare_backends(neo, zoo_ids(), ["sdpa"])
    assert "outside the interface" in rep.unavailable["sdpa"]
