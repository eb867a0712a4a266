"""DeBERTa's adapter (engine/probe/adapters_deberta.py) reports, per call, q and k as the
projections made them (v1: the fused ``in_proj`` with ``q_bias``; v2: ``query_proj`` and
``key_proj``; split into heads here by hand), the relative terms, the mask and the factor
1/sqrt(d (1 + terms)), whose softmax is the model's own probabilities; the planted factors reach
q.k and the weights (the output exactly f times, v1's ``v_bias`` included). One tiny model per
version, built once.

By hand: d = 32 / 4 = 8; with c2p and p2c the factor is 1/sqrt(3 x 8), with c2p alone
1/sqrt(2 x 8), without relative attention 1/sqrt(8) (the paper's section 3.1).
"""

from __future__ import annotations

import types

import pytest

transformers = pytest.importorskip("transformers")

from engine.errors import ConfigError  # noqa: E402
from engine.probe import adapters_deberta as ad  # noqa: E402
from engine.probe.loader import info_from_config, wrap_model  # noqa: E402
from engine.probe.sweep import sharpen  # noqa: E402
from engine.probe.tap import Modifier  # noqa: E402
from tests.engine.probe import adapter_calls as ac  # noqa: E402
from tests.engine.probe.adapter_calls import assert_softmax, calls, heads  # noqa: E402

B = ac.BERT_SIZES
LOW = ac.LOW
REL = dict(relative_attention=True, pos_att_type=["c2p", "p2c"])
PAD = [[1] * 9, [1] * 7 + [0, 0]]
#: version -> (config, terms in pos_att_type, relative attention)
VERSIONS = {
    "v1 c2p p2c": (lambda: transformers.DebertaConfig(**B, **REL, max_relative_positions=16), 2,
                   True),
    "v1 plain": (lambda: transformers.DebertaConfig(**B), 0, False),
    "v2 c2p p2c": (lambda: transformers.DebertaV2Config(**B, **REL, position_buckets=8,
                                                        share_att_key=True), 2, True),
    "v2 c2p": (lambda: transformers.DebertaV2Config(
        **B, relative_attention=True, pos_att_type="c2p", share_att_key=False), 1, True),
}


@pytest.fixture(scope="module", params=sorted(VERSIONS))
def version(request):
    import torch

    torch.manual_seed(0)
    net = transformers.AutoModel.from_config(VERSIONS[request.param][0]())
    net.eval()
    loaded = wrap_model(net, info_from_config(net.config, "tiny"))
    sharpen(loaded, 0.3, 1)
    gen = torch.Generator().manual_seed(1)
    for m in loaded.tap.unique_modules():  # (v1's biases, zero at init, as a trained model's)
        if hasattr(m, "v_bias"):
            with torch.no_grad():
                m.q_bias.copy_(torch.randn(32, generator=gen))
                m.v_bias.copy_(torch.randn(32, generator=gen))
    return request.param, loaded


def _inputs(asked=False):
    import torch

    ids = torch.tensor([[5, 9, 3, 17, 22, 8, 30, 12, 7], [11, 4, 27, 6, 19, 25, 13, 0, 0]])
    return {"input_ids": ids, "attention_mask": torch.tensor(PAD), "output_attentions": asked}


def _raw(loaded, inputs):
    """{id(module): (q, k) by hand} from the projections' outputs in one plain pass."""
    mods = loaded.tap.unique_modules()
    if hasattr(mods[0], "in_proj"):
        seen = ac.seen_in_pass(loaded, inputs, {id(m): m.in_proj for m in mods})
        out = {}
        for m in mods:
            per = heads(seen[id(m)], 4)  # (q_i, k_i, v_i) side by side per head
            out[id(m)] = per[..., :8] + heads(m.q_bias[None, None], 4), per[..., 8:16]
        return out
    seen = ac.seen_in_pass(loaded, inputs, {(id(m), p): getattr(m, p) for m in mods
                                         for p in ("query_proj", "key_proj")})
    return {id(m): (heads(seen[(id(m), "query_proj")], 4), heads(seen[(id(m), "key_proj")], 4))
            for m in mods}


def test_each_call_reports_q_k_the_relative_terms_and_the_models_probabilities(version) -> None:
    import torch

    name, loaded = version
    inputs = _inputs()
    raw = _raw(loaded, inputs)
    got, out, outs = calls(loaded, inputs)
    assert [c.site for c in got] == [0, 1] and {s.adapter for s in loaded.sites} == {"deberta"}
    terms, relative = VERSIONS[name][1:]
    for c in got:
        q, k = raw[id(c.module)]
        torch.testing.assert_close(c.query, q)
        torch.testing.assert_close(c.key, k)
        assert c.extra == {"scaling": pytest.approx((8 * (1 + terms)) ** -0.5),
                           "bias_kind": "disentangled c2p/p2c terms"}
        assert (c.bias is not None) == relative
        if relative:
            assert c.bias.shape == (2, 4, 9, 9)
        assert c.mask.shape[-2:] in ((9, 9), (1, 9))
        assert float(c.mask[1].max()) == 0.0 and float(c.mask[1, ..., -2:].max()) <= LOW / 2
        assert_softmax(c)
        own = outs[id(c.module)]
        assert torch.equal(c.output, own[0])
    with torch.no_grad():
        plain = loaded.model(**inputs)
    assert torch.equal(plain.last_hidden_state, out.last_hidden_state)


def test_planted_factors_reach_q_k_and_the_weights(version) -> None:
    import torch

    _name, loaded = version
    inputs = _inputs()
    # (p2c, k's term, carries the factor on q.k: the reported bias does)
    plain, plain_out, got = ac.factor_on_q(loaded, inputs)
    assert not torch.allclose(got[0].weights, plain[0].weights, atol=1e-3)
    for f in (0.5, 2.0, 3.0):  # (probabilities x f on their way to the values: output x f)
        got, _o, _ = calls(loaded, inputs, {0: Modifier(w_factor=f)})
        torch.testing.assert_close(got[0].weights, f * plain[0].weights)
        torch.testing.assert_close(got[0].query, plain[0].query)
        torch.testing.assert_close(got[0].output, f * plain[0].output, rtol=1e-5, atol=1e-5)
    got, _o, _ = calls(loaded, inputs, {1: Modifier(w_factor=2.0)})
    torch.testing.assert_close(got[0].weights, plain[0].weights)
    torch.testing.assert_close(got[1].weights, 2.0 * plain[1].weights)
    with torch.no_grad():  # (outside the tap the hooks change nothing)
        again = loaded.model(**inputs)
    assert torch.equal(again.last_hidden_state, plain_out.last_hidden_state)


def test_the_relative_terms_are_the_ones_the_product_used_with_a_factor_on_q(version) -> None:
    """With f on q.k, the c2p term (q's) is the model's own, p2c (k's) carries f: the reported
    logits' softmax is the model's probabilities only with both."""
    name, loaded = version
    if not VERSIONS[name][2]:
        pytest.skip("no relative terms")
    got, _o, _ = calls(loaded, _inputs(), {0: Modifier(q_factor=2.0)})
    c = got[0]
    import torch

    logits = 2.0 * c.extra["scaling"] * (c.query.double() @ c.key.double().transpose(-1, -2))
    want = torch.softmax((logits + c.bias.double() + torch.where(
        c.mask.double() > LOW / 2, 0.0, LOW)).clamp(min=LOW), -1)
    assert float((want - c.weights.double()).abs().max()) < 1e-5


def test_scale_factor_counts_the_relative_terms_as_the_module_does() -> None:
    ns = types.SimpleNamespace
    assert ad.scale_factor(ns(pos_att_type=["c2p", "p2c"])) == 3
    assert ad.scale_factor(ns(pos_att_type="p2c|c2p")) == 3
    assert ad.scale_factor(ns(pos_att_type=" C2P ")) == 2
    assert ad.scale_factor(ns(pos_att_type="p2p")) == 1
    assert ad.scale_factor(ns(pos_att_type=None)) == 1
    assert ad.scale_factor(ns()) == 1
    assert ad.declared(ns(pos_att_type=["c2p", "p2c"]), 8) == (
        pytest.approx(24**-0.5), "1/sqrt(3 x head_dim) (DeBERTa: 1 + 2 relative terms in "
        "pos_att_type)")
    assert ad.declared(ns(pos_att_type=["c2p"]), 8)[1] == (
        "1/sqrt(2 x head_dim) (DeBERTa: 1 + 1 relative terms in pos_att_type)")
    assert ad.declared(ns(), 16) == (0.25, "1/sqrt(head_dim) (DeBERTa)")


def test_talking_heads_are_refused() -> None:
    import torch

    torch.manual_seed(0)
    net = transformers.DebertaModel(transformers.DebertaConfig(**B, talking_head=True))
    with pytest.raises(ConfigError) as err:
        wrap_model(net, info_from_config(net.config, "tiny"))
    assert err.value.message == ("this DeBERTa uses talking heads (head_logits_proj mixes the "
                                 "heads' logits): no per-head softmax of q.k to audit")
