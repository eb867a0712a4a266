"""Every attention layer of a model is accounted for: audited, or listed as not seen with why;
a module called for several layers (shared weights) is audited once per call."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.probe.audit import audit_ids
from engine.probe.zoo import ZooEntry, build, zoo_ids

LONGT5 = {"vocab_size": 64, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2,
          "num_heads": 4, "decoder_start_token_id": 0, "encoder_attention_type": "local",
          "local_radius": 4}
ALBERT = {"vocab_size": 64, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 3,
          "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64}


def test_longt5_local_attention_is_listed_as_not_seen_with_why() -> None:
    """LongT5's encoder computes its local attention inline (2 layers), its decoder through
    the interface (2 self, 2 cross): 4 of 6 audited, the other 2 named (main: 4 layers reported
    without a word about the encoder)."""
    r = audit_ids(build(ZooEntry("LongT5", "LongT5Config", LONGT5)), zoo_ids())
    assert r.n_layers == 4 and r.n_attention == 6
    assert r.coverage_text() == "4 of 6 attention layers audited"
    assert [m.name for m in r.not_seen] == ["encoder.block.0.layer.0.LocalSelfAttention",
                                            "encoder.block.1.layer.0.LocalSelfAttention"]
    assert all(m.kind == "LongT5LocalAttention" and "computes attention inside its own forward"
               in m.why for m in r.not_seen)


def test_a_fully_seen_model_says_so() -> None:
    r = audit_ids(build(ZooEntry("T5", "T5Config", {**LONGT5, "encoder_attention_type": None})),
                  zoo_ids())
    assert r.not_seen == () and r.coverage_text() == "6 of 6 attention layers audited"


def test_albert_shared_layer_is_audited_once_per_call_and_says_it_shares_weights() -> None:
    """ALBERT calls one attention module for all its 3 layers (main: '1 layers')."""
    loaded = build(ZooEntry("ALBERT", "AlbertConfig", ALBERT, qk_std=0.3))
    r = audit_ids(loaded, zoo_ids())
    assert r.n_layers == 3 and len(loaded.tap.unique_modules()) == 1
    assert [s.shares_weights_with for s in r.sites] == [None, 0, 0]
    assert r.coverage_text() == ("3 of 3 attention layers audited (3 calls of 1 shared module: "
                                 "they share weights)")
    assert r.mismatched_layers() == []
    # each call is its own layer: the three see different inputs, a bug goes into one call only
    from engine.probe.capture import capture_sites

    records, _s, _o = capture_sites(loaded, zoo_ids())
    assert len(records) == 3
    assert not np.allclose(records[0].probs, records[1].probs)
    assert not np.allclose(records[1].probs, records[2].probs)
    bug = audit_ids(loaded, zoo_ids(), {1: "twice"})
    assert bug.mismatched_layers() == [1]


def test_albert_backends_are_compared_call_by_call() -> None:
    from engine.probe.backends import compare_backends

    rep = compare_backends(build(ZooEntry("ALBERT", "AlbertConfig", ALBERT, qk_std=0.3)),
                           zoo_ids(), ["sdpa"])
    assert [s.site for s in rep.sites] == [0, 1, 2] and rep.flagged() == []
    assert len({s.output_rel_diff for s in rep.sites}) == 3


def test_a_state_space_mixer_is_not_an_attention_module() -> None:
    """Mamba's mixer owns an in_proj (a fused-projection name) but no attention: a hybrid
    (Jamba) must not list its mixers as attention layers never seen."""
    transformers = pytest.importorskip("transformers")

    from engine.probe.capture import has_attention
    from engine.probe.coverage import attention_modules

    net = transformers.MambaModel(transformers.MambaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, state_size=4))
    assert attention_modules(net) == [] and not has_attention(net)
    bert = transformers.BertModel(transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64))
    assert len(attention_modules(bert)) == 2 and has_attention(bert)
