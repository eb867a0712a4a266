"""The BERT family's inline attention (and DeBERTa's) through their adapters: each tiny model is
audited at its documented scale, a bug planted in one layer is found in exactly that layer, and
the hooks leave the model's output as it was.

Main refused all of them ("computes attention outside the interface"). The expected scales are
the documented ones, written here by hand: every family divides q.k by sqrt(head size), so
s * sqrt(d_k) = 1 with d_k = 32 / 4 = 8 (ConvBERT: head_ratio 2 leaves 2 heads of
(32 / 2) / 2 = 8; Funnel's d_head 8); DeBERTa divides by sqrt(d_k * (1 + its relative terms)): 1/sqrt(3) with c2p
and p2c, 1/sqrt(2) with c2p alone (the paper's 1/sqrt(3d)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")

from engine.errors import ConfigError  # noqa: E402
from engine.probe.audit import audit_ids  # noqa: E402
from engine.probe.loader import info_from_config, wrap_model  # noqa: E402
from engine.probe.sweep import sharpen  # noqa: E402

IDS = list(range(3, 27))
B = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
         intermediate_size=64, max_position_embeddings=64)
XLM = dict(vocab_size=64, emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=64)
REL = dict(relative_attention=True, pos_att_type=["c2p", "p2c"])

CASES = [  # (id, config, adapter, s * sqrt(d_k), a feature every site shows)
    ("megatron-bert", lambda: transformers.MegatronBertConfig(**B), "megatron-bert", 1.0, None),
    ("rembert", lambda: transformers.RemBertConfig(**B, input_embedding_size=32,
                                                   output_embedding_size=32), "rembert", 1.0, None),
    ("tapas", lambda: transformers.TapasConfig(**B), "tapas", 1.0, None),
    ("convbert", lambda: transformers.ConvBertConfig(**B, embedding_size=32, head_ratio=2),
     "convbert", 1.0, None),
    # (block-sparse by default: BigBird swaps in full attention for a text this short)
    ("big_bird", lambda: transformers.BigBirdConfig(**B), "big_bird", 1.0, None),
    ("roformer", lambda: transformers.RoFormerConfig(**B, embedding_size=32), "roformer", 1.0,
     "RoPE"),
    ("mpnet", lambda: transformers.MPNetConfig(**B), "mpnet", 1.0, "relative position bias"),
    ("luke", lambda: transformers.LukeConfig(**B, entity_vocab_size=16, entity_emb_size=32),
     "luke", 1.0, None),
    ("ibert", lambda: transformers.IBertConfig(**B), "ibert", 1.0, None),
    ("squeezebert", lambda: transformers.SqueezeBertConfig(**B, embedding_size=32),
     "squeezebert", 1.0, None),
    ("xlm", lambda: transformers.XLMConfig(**XLM), "xlm", 1.0, "bidirectional"),
    ("xlm causal", lambda: transformers.XLMConfig(**XLM, causal=True), "xlm", 1.0, "causal"),
    # (exact softmax when num_landmarks == segment_means_seq_len, as by default: q and k each
    # divided by d ** 0.25 inside)
    ("nystromformer", lambda: transformers.NystromformerConfig(**B), "nystromformer", 1.0, None),
    # (window 10: each token sees 5 keys either side; the text is padded from 24 to 30 tokens)
    ("longformer", lambda: transformers.LongformerConfig(**B, attention_window=10),
     "longformer", 1.0, None),
    # (two blocks of one layer: the second pools its queries to half the keys; r_w_bias, the
    # relative position and token-type scores are the additive term)
    ("funnel", lambda: transformers.FunnelConfig(
        vocab_size=64, d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1],
        architectures=["FunnelBaseModel"]), "funnel", 1.0, "token-type"),  # (no decoder)
    ("deberta c2p p2c", lambda: transformers.DebertaConfig(**B, **REL, max_relative_positions=16),
     "deberta", 3**-0.5, "disentangled"),
    ("deberta-v2 c2p p2c", lambda: transformers.DebertaV2Config(
        **B, **REL, position_buckets=8, share_att_key=True), "deberta", 3**-0.5, "disentangled"),
    ("deberta-v2 c2p", lambda: transformers.DebertaV2Config(
        **B, relative_attention=True, pos_att_type=["c2p"], share_att_key=False), "deberta",
     2**-0.5, "disentangled"),
]


def _load(cfg):
    import torch

    torch.manual_seed(0)
    net = transformers.AutoModel.from_config(cfg)
    net.eval()
    loaded = wrap_model(net, info_from_config(net.config, "tiny"))
    sharpen(loaded, 0.3, 1)  # (std 0.02 leaves a tiny model's softmax nearly uniform)
    return loaded


@pytest.mark.parametrize("name, make, adapter, x, feature", CASES, ids=[c[0] for c in CASES])
def test_audited_as_declared_and_a_planted_bug_is_found_in_exactly_its_layer(
        name, make, adapter, x, feature) -> None:
    loaded = _load(make())
    assert [s.adapter for s in loaded.sites] == [adapter, adapter]
    res = audit_ids(loaded, IDS)
    assert res.n_layers == 2 and res.d_k == 8
    assert res.mismatched_layers() == [] and res.unknown_layers() == [], \
        [s.mismatch for s in res.sites]
    np.testing.assert_allclose(res.layer_scale_x_sqrt_dk(), x, rtol=1e-3)
    np.testing.assert_allclose(res.declared_scale * math.sqrt(8), x, rtol=1e-9)
    if feature:
        assert all(any(feature in f for f in s.features) for s in res.sites), res.sites[0].features
    bugged = audit_ids(loaded, IDS, {1: "twice"})
    assert bugged.mismatched_layers() == [1], [s.mismatch for s in bugged.sites]
    np.testing.assert_allclose(bugged.layer_scale_x_sqrt_dk(), [x, x / math.sqrt(8)], rtol=1e-3)


@pytest.mark.parametrize("name", ["xlm", "deberta-v2 c2p p2c"])
def test_weights_scaled_after_the_softmax_are_named(name) -> None:
    """The factor on the weights travels with the values (the same hook for every family; XLM
    reads the probabilities it returns, DeBERTa its own hooks)."""
    make = next(c[1] for c in CASES if c[0] == name)
    res = audit_ids(_load(make()), IDS, {0: "after_softmax"})
    assert res.mismatched_layers() == [0]
    assert "after the softmax" in res.sites[0].mismatch


@pytest.mark.parametrize("name", ["xlm", "deberta c2p p2c", "big_bird", "longformer"])
def test_the_tap_leaves_the_models_output_unchanged(name) -> None:
    """Hooks only look (XLM is asked for its probabilities and hands back what it was asked;
    BigBird's hooks join the module it swaps in; Longformer divides its query in place)."""
    import torch

    from engine.probe.capture import run_forward

    loaded = _load(next(c[1] for c in CASES if c[0] == name)())
    plain = run_forward(loaded.model, IDS)
    with loaded.tap.active(lambda call: None):
        tapped = run_forward(loaded.model, IDS)
    assert torch.equal(plain.last_hidden_state, tapped.last_hidden_state)
    assert getattr(tapped, "attentions", None) is None


def test_talking_heads_are_refused() -> None:
    """DeBERTa's talking heads mix the heads' logits: no per-head softmax of q.k is left."""
    with pytest.raises(ConfigError, match="talking heads"):
        _load(transformers.DebertaConfig(**B, talking_head=True))


def test_the_longformer_window_is_what_the_weights_show() -> None:
    """Window 10 (5 keys each side), as the band the adapter unfolds: key 0 is seen by queries
    0..5 only; a planted bug is found in its layer only (above)."""
    from engine.probe.capture import capture_sites

    loaded = _load(transformers.LongformerConfig(**B, attention_window=10))
    records, _s, _o = capture_sites(loaded, IDS)
    vis = records[0].visible
    assert vis.shape == (30, 30)  # (padded to a multiple of the window)
    assert vis[:6, 0].all() and not vis[6:, 0].any()
    assert not vis[:, 24:].any()  # (padding is no key)
    p = records[0].probs
    assert np.allclose(p[:, :24].sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: transformers.NystromformerConfig(**B, num_landmarks=8),
    # (its integer softmax read as a softmax: "weights scaled after the softmax" in every layer)
    lambda: transformers.IBertConfig(**B, quant_mode=True)], ids=["nystrom", "ibert quant"])
def test_an_approximated_softmax_is_refused_as_no_softmax(make) -> None:
    with pytest.raises(ConfigError, match=r"has no softmax attention: .*approximat"):
        _load(make())
