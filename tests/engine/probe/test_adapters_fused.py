"""Falcon (through transformers' attention interface since 5.25; an adapter before) and MPT
(attention computed inline from a fused q/k/v projection, through its adapter): audited at their
documented scale, and a scale planted in their own code is found. The expected scales are the documented ones, written here by hand:
1/sqrt(head_dim) with head_dim = 32 / 4 = 8 (s * sqrt(d_k) = 1), or MPT's
``attn_config.softmax_scale`` (0.1 * sqrt(8) = 0.2828).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")

from engine.probe.audit import audit_tokens, run_audit  # noqa: E402
from engine.probe.loader import info_from_config, wrap_model  # noqa: E402

IDS = list(range(3, 40))
FALCON = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)
MPT = dict(vocab_size=64, d_model=32, n_layers=2, n_heads=4, max_seq_len=64)


def _load(cfg):
    import torch

    torch.manual_seed(0)
    net = transformers.AutoModel.from_config(cfg)  # (sdpa by default: the tap makes it eager)
    return wrap_model(net, info_from_config(net.config, "tiny"))


def _audit(loaded, bugs=None):
    return run_audit(audit_tokens(loaded, IDS, (), bugs or {}))


CORRECT = [
    ("falcon rotary MQA", lambda: transformers.FalconConfig(**FALCON), "RoPE", 1.0),
    # (its ALiBi term comes inside the mask since 5.25: read as an additive term of the mask)
    ("falcon ALiBi", lambda: transformers.FalconConfig(**FALCON, alibi=True), "additive bias",
     1.0),
    ("falcon multi-head", lambda: transformers.FalconConfig(**FALCON, multi_query=False),
     "RoPE", 1.0),
    ("falcon new decoder", lambda: transformers.FalconConfig(
        **FALCON, new_decoder_architecture=True, num_kv_heads=2), "RoPE", 1.0),
    ("mpt", lambda: transformers.MptConfig(**MPT), "ALiBi", 1.0),
    ("mpt softmax_scale", lambda: transformers.MptConfig(
        **MPT, attn_config={"softmax_scale": 0.1}), "ALiBi", 0.1 * math.sqrt(8)),
]


@pytest.mark.parametrize("name, make, feature, x", CORRECT, ids=[c[0] for c in CORRECT])
def test_a_correct_model_is_audited_as_declared(name: str, make, feature: str, x: float) -> None:
    res = _audit(_load(make()))
    assert res.n_layers == 2 and res.d_k == 8
    assert res.mismatched_layers() == [] and res.unknown_layers() == []
    np.testing.assert_allclose(res.layer_scale_x_sqrt_dk(), x, rtol=1e-3)
    np.testing.assert_allclose(res.declared_scale * math.sqrt(8), x, rtol=1e-9)
    assert all(any(feature in f for f in s.features) for s in res.sites), res.sites[0].features


def test_the_tap_leaves_the_models_output_unchanged() -> None:
    import torch

    from engine.probe.capture import run_forward

    for cfg in (transformers.FalconConfig(**FALCON, alibi=True), transformers.MptConfig(**MPT)):
        loaded = _load(cfg)
        plain = run_forward(loaded.model, IDS).last_hidden_state
        with loaded.tap.active(lambda call: None):
            tapped = run_forward(loaded.model, IDS).last_hidden_state
        assert torch.equal(plain, tapped)


def _doubled_scale(loaded, kind: str) -> None:
    """Plant "scale doubled" in layer 1's own code (layer 0 stays intact)."""
    if kind == "mpt":
        loaded.model.blocks[1].attn.softmax_scale *= 2
    else:  # Falcon passes its ``scaling`` (1/sqrt(head_dim), set at init) to the interface
        loaded.model.h[1].self_attention.scaling *= 2


@pytest.mark.parametrize("kind, make", [
    ("falcon rotary", lambda: transformers.FalconConfig(**FALCON)),
    ("falcon ALiBi", lambda: transformers.FalconConfig(**FALCON, alibi=True)),
    ("mpt", lambda: transformers.MptConfig(**MPT)),
])
def test_a_doubled_scale_in_the_models_code_is_a_mismatch_in_exactly_its_layer(
        kind: str, make) -> None:
    loaded = _load(make())
    _doubled_scale(loaded, kind)
    res = _audit(loaded)
    assert res.mismatched_layers() == [1], [s.mismatch for s in res.sites]
    np.testing.assert_allclose(res.layer_scale_x_sqrt_dk(), [1.0, 2.0], rtol=1e-3)
    assert "2 x the declared scale" in res.sites[1].mismatch


@pytest.mark.parametrize("make", [lambda: transformers.FalconConfig(**FALCON),
                                  lambda: transformers.MptConfig(**MPT)], ids=["falcon", "mpt"])
def test_injected_bugs_reach_the_adapted_layers(make) -> None:
    """The lab's planted bugs go through the tap's (Falcon) or the adapter's (MPT) modifiers: "twice" (a factor on q) makes
    layer 0 1/d_k, "after_softmax" (a factor on the weights, carried by v) is named."""
    res = _audit(_load(make()), {0: "twice", 1: "after_softmax"})
    assert res.mismatched_layers() == [0, 1]
    assert res.layer_scale_x_sqrt_dk()[0] == pytest.approx(8**-0.5, rel=1e-3)
    assert "after the softmax" in res.sites[1].mismatch
