"""The BERT family's adapter (engine/probe/adapters_bert.py) reports, per call, q and k as the
module's own projections made them (split into heads here by hand), the mask, the additive term
and the factor, whose softmax is the model's own probabilities; the planted factors reach q.k
and the weights; the probabilities come back only when asked; the refusals name what they
refuse. One tiny model per family, built once.

By hand: every family divides q.k by sqrt(head size) = sqrt(8) (ConvBERT's head_ratio 2 leaves 2
heads of 8); the projections' outputs are (batch, tokens, heads x 8), SqueezeBERT's
(batch, heads x 8, tokens) and Longformer's (tokens, batch, heads x 8).
"""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

from engine.errors import ConfigError  # noqa: E402
from engine.probe import adapters_bert as ab  # noqa: E402
from engine.probe.loader import info_from_config, wrap_model  # noqa: E402
from engine.probe.sweep import sharpen  # noqa: E402
from engine.probe.tap import Modifier  # noqa: E402
from tests.engine.probe.adapter_calls import (  # noqa: E402
    BERT_SIZES,
    LOW,
    assert_softmax,
    calls,
    factor_on_q,
    heads,
    seen_in_pass,
)

B = BERT_SIZES
XLM = dict(vocab_size=64, emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=64)
PAD = [[1] * 9, [1] * 7 + [0, 0]]  # (the second text padded by two tokens)
#: family -> (config, heads, the feature of its additive term or None)
FAMILIES = {
    "megatron-bert": (lambda: transformers.MegatronBertConfig(**B), 4, None),
    "rembert": (lambda: transformers.RemBertConfig(**B, input_embedding_size=32,
                                                   output_embedding_size=32), 4, None),
    "tapas": (lambda: transformers.TapasConfig(**B), 4, None),
    "convbert": (lambda: transformers.ConvBertConfig(**B, embedding_size=32, head_ratio=2), 2,
                 None),
    "big_bird": (lambda: transformers.BigBirdConfig(**B, block_size=2, num_random_blocks=1), 4,
                 None),
    "roformer": (lambda: transformers.RoFormerConfig(**B, embedding_size=32), 4, None),
    "mpnet": (lambda: transformers.MPNetConfig(**B), 4, "relative position bias"),
    "luke": (lambda: transformers.LukeConfig(**B, entity_vocab_size=16, entity_emb_size=32), 4,
             None),
    "ibert": (lambda: transformers.IBertConfig(**B), 4, None),
    "squeezebert": (lambda: transformers.SqueezeBertConfig(**B, embedding_size=32), 4, None),
    "xlm": (lambda: transformers.XLMConfig(**XLM), 4, None),
    "xlm causal": (lambda: transformers.XLMConfig(**XLM, causal=True), 4, None),
    "nystromformer": (lambda: transformers.NystromformerConfig(**B), 4, None),
    "longformer": (lambda: transformers.LongformerConfig(**B, attention_window=4), 4, None),
    "funnel": (lambda: transformers.FunnelConfig(
        vocab_size=64, d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1],
        architectures=["FunnelBaseModel"]), 4, "relative position and token-type terms"),
}
#: family -> (its q and k projections' names, layout: "batch", "conv" or "time")
PROJ = {"mpnet": ("q", "k"), "ibert": ("query_activation", "key_activation"),
        "xlm": ("q_lin", "k_lin"), "xlm causal": ("q_lin", "k_lin"),
        "funnel": ("q_head", "k_head")}


def _build(name):
    import torch

    torch.manual_seed(0)
    net = transformers.AutoModel.from_config(FAMILIES[name][0]())
    net.eval()
    loaded = wrap_model(net, info_from_config(net.config, "tiny"))
    sharpen(loaded, 0.3, 1)  # (std 0.02 leaves a tiny model's softmax nearly uniform)
    return loaded


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    return request.param, _build(request.param)


def _inputs(asked=False):
    import torch

    ids = torch.tensor([[5, 9, 3, 17, 22, 8, 30, 12, 7], [11, 4, 27, 6, 19, 25, 13, 0, 0]])
    return {"input_ids": ids, "attention_mask": torch.tensor(PAD), "output_attentions": asked}


def _raw(name, loaded, inputs):
    """{id(module): (q, k) by hand} from its projections' outputs in one plain pass."""
    qn, kn = PROJ.get(name, ("query", "key"))
    mods = loaded.tap.unique_modules()
    seen = seen_in_pass(loaded, inputs, {(id(m), p): getattr(m, p) for m in mods
                                         for p in (qn, kn)})
    h = FAMILIES[name][1]
    out = {}
    for m in mods:
        q, k = (seen[(id(m), p)] for p in (qn, kn))
        if name == "squeezebert":  # (batch, channels, tokens)
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        elif name == "longformer":  # (tokens, batch, width)
            q, k = q.transpose(0, 1), k.transpose(0, 1)
        out[id(m)] = heads(q, h), heads(k, h)
    return out


def _rows(name, n):
    """The query rows to compare: Longformer's own padding (to a multiple of its window) and
    the second text's padding are rows with no key."""
    import torch

    rows = torch.ones(n, dtype=torch.bool)
    if name == "longformer":
        rows[7:] = False
    return rows


def test_each_call_reports_q_k_and_the_models_probabilities(family) -> None:
    import torch

    name, loaded = family
    inputs = _inputs()
    raw = _raw(name, loaded, inputs)
    got, out, _outs = calls(loaded, inputs)
    mods = loaded.tap.unique_modules()
    assert [c.site for c in got] == list(range(len(got))) and len(got) == loaded.n_sites
    assert {s.adapter for s in loaded.sites} == {name.split()[0]}
    for c in got:
        assert c.module in mods
        q, k = raw[id(c.module)]
        if name in ("roformer",):  # (rotated by the encoder's sinusoidal positions)
            assert c.query.shape == q.shape and not torch.allclose(c.query, q)
            torch.testing.assert_close(c.query.norm(dim=-1), q.norm(dim=-1))
            torch.testing.assert_close(c.key.norm(dim=-1), k.norm(dim=-1))
        elif name == "funnel" and c.site == 1:  # (the second block pools its queries)
            torch.testing.assert_close(c.key, k)
        else:
            torch.testing.assert_close(c.query, q)
            torch.testing.assert_close(c.key, k)
        kind = FAMILIES[name][2]
        want = {"scaling": pytest.approx(8**-0.5)}
        if kind:
            want["bias_kind"] = kind
        assert c.extra == want
        assert (c.bias is None) == (kind is None)
        assert_softmax(c, rows=_rows(name, c.weights.shape[-2]))
        if name != "longformer":  # (every query of the text sees none of the padding)
            assert float(c.weights[1, :, :7, -2:].abs().max()) < 1e-6
            assert c.mask is not None and float(c.mask[1].max()) == 0.0
            assert float(c.mask[1, ..., :7, -2:].max()) <= LOW / 2
    with torch.no_grad():
        plain = loaded.model(**inputs)
    assert torch.equal(plain.last_hidden_state, out.last_hidden_state)
    assert getattr(out, "attentions", None) is None


def test_the_output_is_the_modules_and_the_probabilities_come_back_when_asked(family) -> None:
    import torch

    name, loaded = family
    got, out, outs = calls(loaded, _inputs(asked=True))
    with torch.no_grad():
        plain = loaded.model(**_inputs(asked=True))
    assert len(out.attentions) == len(plain.attentions) > 0
    for a, b in zip(plain.attentions, out.attentions):
        assert torch.equal(a, b)
    for c in got:
        own = outs[id(c.module)]
        own = own[0] if isinstance(own, tuple) else next(iter(own.values()))
        own = own[0] if isinstance(own, tuple) else own
        assert torch.equal(c.output, own), name


def test_planted_factors_reach_q_k_and_the_weights(family) -> None:
    import torch

    name, loaded = family
    inputs = _inputs()
    n = 12 if name == "longformer" else 9  # (Longformer pads to a multiple of its window)
    plain, plain_out, _got = factor_on_q(loaded, inputs, rows=_rows(name, n))
    for f in (0.5, 2.0):
        got, _o, _ = calls(loaded, inputs, {0: Modifier(w_factor=f)})
        torch.testing.assert_close(got[0].weights, f * plain[0].weights)
        assert not torch.allclose(got[0].output, plain[0].output, atol=1e-4)
        if name not in ("nystromformer", "funnel", "convbert"):  # (the output: weights @ v)
            torch.testing.assert_close(got[0].output, f * plain[0].output)
    last = loaded.n_sites - 1
    got, _o, _ = calls(loaded, inputs, {last: Modifier(q_factor=0.5)})
    torch.testing.assert_close(got[0].weights, plain[0].weights)  # (site 0 untouched)
    assert_softmax(got[last], factor=0.5, rows=_rows(name, got[last].weights.shape[-2]))
    with torch.no_grad():  # (outside the tap the hooks change nothing)
        again = loaded.model(**inputs)
    assert torch.equal(again.last_hidden_state, plain_out.last_hidden_state)


def test_the_families_and_their_refusals_by_name() -> None:
    adapters = ab.bert_adapters()
    assert set(adapters) == {
        "megatron-bert", "rembert", "tapas", "convbert", "big_bird", "roformer", "mpnet", "luke",
        "ibert", "squeezebert", "xlm", "flaubert", "funnel", "nystromformer", "longformer",
        "deberta", "deberta-v2"}
    assert ab.FAMILIES["flaubert"] is ab.FAMILIES["xlm"]
    assert adapters["big_bird"] is ab.install_big_bird
    assert ab.FAMILIES["xlm"].keep_mask and not ab.FAMILIES["mpnet"].keep_mask
    assert set(ab.NO_SOFTMAX_BERT) == {"yoso", "mra"}
    assert ab.NO_SOFTMAX_BERT["mra"] == (
        "approximates softmax attention by multi-resolution block averages of exp(q.k) (MRA), "
        "its weights no exact softmax over q.k")
    assert ab.NO_SOFTMAX_BERT["yoso"].startswith("approximates attention by LSH collision ")


def test_an_approximated_softmax_is_refused_with_its_numbers() -> None:
    import torch

    torch.manual_seed(0)
    net = transformers.NystromformerModel(transformers.NystromformerConfig(**B, num_landmarks=8))
    with pytest.raises(ConfigError) as err:
        wrap_model(net, info_from_config(net.config, "tiny"))
    assert err.value.message == (
        "nystromformer has no softmax attention: it approximates it by the Nystrom method (8 "
        "landmarks for segment_means_seq_len 64), its weights no softmax over q.k; there is "
        "no attention scale to audit")
    net = transformers.IBertModel(transformers.IBertConfig(**B, quant_mode=True))
    with pytest.raises(ConfigError, match=r"^model: ibert has no softmax attention: in quant_mode"):
        wrap_model(net, info_from_config(net.config, "tiny"))


def test_what_the_adapter_does_not_read_is_refused() -> None:
    import torch

    longformer = _build("longformer")
    glob = torch.zeros(2, 9, dtype=torch.long)
    glob[:, 0] = 1
    with pytest.raises(ConfigError, match=r"^model: longformer's global attention tokens are not "
                                          r"audited \(its sliding-window attention is\)"):
        calls(longformer, {**_inputs(), "global_attention_mask": glob})
    luke = _build("luke")
    with pytest.raises(ConfigError, match=r"^model: LUKE's entity-aware attention \(four query "):
        calls(luke, {**_inputs(), "entity_ids": torch.tensor([[1, 2], [3, 4]]),
                     "entity_attention_mask": torch.ones(2, 2, dtype=torch.long),
                     "entity_position_ids": torch.tensor([[[1, -1], [2, -1]]] * 2)})
    bird = _build("big_bird")
    assert [s.name for s in bird.sites] == [f"encoder.layer.{i}.attention.self"
                                            for i in range(2)]
    bird.model.set_attention_type("block_sparse")
    ids = torch.arange(3, 35)[None]  # (32 tokens: over 7 blocks of 2, sparse)
    with pytest.raises(ConfigError, match=r"^model: big_bird's block-sparse attention \(a text longer"):
        with torch.no_grad(), bird.tap.active(lambda call: None):  # (its modules replaced)
            bird.model(input_ids=ids)


def test_xlms_one_zero_mask_reads_as_additive() -> None:
    """(bs, klen) and (bs, qlen, klen): 0 where the key is seen, float32's minimum where not."""
    import torch

    keep = torch.tensor([[1, 1, 0], [1, 0, 0]])
    got = ab._additive(keep, 2)
    assert got.shape == (2, 1, 2, 3)
    want = torch.where(keep.bool(), 0.0, LOW)[:, None, None, :].expand(2, 1, 2, 3)
    assert torch.equal(got, want)
    causal = torch.tensor([[[1, 0], [1, 1]]])
    got = ab._additive(causal, 2)
    assert torch.equal(got, torch.tensor([[[[0.0, LOW], [0.0, 0.0]]]]))
