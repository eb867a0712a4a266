"""The decoder and seq2seq adapters (engine/probe/adapters_seq.py) report, per call, q and k as
the model's own projections made them (split into heads here by hand), the mask, the additive
term and the factor, whose softmax is the model's own probabilities; the planted factors reach
q.k and the weights; the probabilities come back only when the caller asked. One tiny model per
type (the shrinker's config), built once.

By hand: XGLM, MVP, TrOCR, LED and FSMT multiply ``q_proj``'s output by head_dim ** -0.5 = 8 ** -0.5
(the product's factor then 1; FSMT's tensors are time-first); OpenAI GPT divides by
sqrt(head_dim) when its ``scale`` flag is set (1 otherwise); GPT-NeoX-Japanese by its
``norm_factor``; CPM-Ant by sqrt(dim_head) and adds its position bias.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

pytest.importorskip("transformers")

from engine.probe import adapters_seq
from engine.probe import sweep as sw
from engine.probe.capture import forward_kwargs
from engine.probe.loader import info_from_config, wrap_model
from engine.probe.shrink import build, tiny_model
from engine.probe.tap import Modifier
from tests.engine.probe.adapter_calls import assert_softmax, calls, heads, seen_in_pass

IDS = [int(i) for i in np.random.default_rng(3).integers(5, 100, size=9)]
MASK = [1] * 7 + [0, 0]  # (two padding tokens at the end: keys no query may see)
TYPES = ("xglm", "mvp", "trocr", "led", "fsmt", "openai-gpt", "gpt_neox_japanese", "cpmant")
SCALE = 8**-0.5


@pytest.fixture(scope="module", params=TYPES)
def model(request):
    import torch

    torch.manual_seed(0)
    net = build(tiny_model(request.param).config)
    net.eval()
    loaded = wrap_model(net, info_from_config(net.config, request.param))
    sw.sharpen(loaded, sw.QK_STD, 1)
    if request.param == "openai-gpt":  # (layer 1 without its scale flag: a factor of 1)
        loaded.tap.unique_modules()[1].scale = False
    return request.param, loaded


def _inputs(net, asked=False):
    """Two texts (a batch of 2: FSMT's time-first layout differs from batch-first only then),
    both padded at the end."""
    import torch

    one, two = forward_kwargs(net, IDS, MASK), forward_kwargs(net, IDS[::-1], MASK)
    kw = {k: torch.cat([v, two[k]]) if isinstance(v, torch.Tensor) else v
          for k, v in one.items()}
    return {**kw, "output_attentions": asked}


def _raw(loaded, kind, inputs):
    """{id(module): (q, k) by hand} from its projections' own outputs in one plain pass."""
    parts = {"openai-gpt": ("c_attn",), "gpt_neox_japanese": ("query_key_value",),
             "cpmant": ("project_q", "project_k")}.get(kind, ("q_proj", "k_proj"))
    flat = seen_in_pass(loaded, inputs, {(id(m), p): getattr(m, p)
                                         for m in loaded.tap.unique_modules() for p in parts})
    seen: dict[int, dict[str, object]] = {}
    for (mid, p), x in flat.items():
        seen.setdefault(mid, {})[p] = x
    out = {}
    for mid, got in seen.items():
        if kind == "openai-gpt":
            x = got["c_attn"]
            out[mid] = heads(x[..., :32], 4), heads(x[..., 32:64], 4)
        elif kind == "gpt_neox_japanese":
            out[mid] = None  # (rotated inside the forward before _attn: checked by the softmax)
        elif kind == "cpmant":
            out[mid] = heads(got["project_q"], 4), heads(got["project_k"], 4)
        elif kind == "fsmt":  # (tokens, batch, width)
            out[mid] = tuple(heads(got[p].transpose(0, 1), 4) for p in ("q_proj", "k_proj"))
        else:
            out[mid] = heads(got["q_proj"], 4), heads(got["k_proj"], 4)
    return out


def test_each_call_reports_q_k_and_the_models_probabilities(model) -> None:
    import torch

    kind, loaded = model
    inputs = _inputs(loaded.model)
    raw = _raw(loaded, kind, inputs)
    got, out, _outs = calls(loaded, inputs)
    assert len(got) == loaded.n_sites and [c.site for c in got] == list(range(len(got)))
    assert {s.adapter for s in loaded.sites} == {kind}
    for c in got:
        scale = c.extra["scaling"]
        if kind in adapters_seq.PROJECTION_TYPES:
            q, k = raw[id(c.module)]
            torch.testing.assert_close(c.query, q * SCALE)  # (q as the product receives it)
            torch.testing.assert_close(c.key, k)
            assert c.extra == {"scaling": 1.0} and c.bias is None
        elif kind == "openai-gpt":
            q, k = raw[id(c.module)]
            torch.testing.assert_close(c.query, q)
            torch.testing.assert_close(c.key, k)
            want = SCALE if c.module is loaded.tap.unique_modules()[0] else 1.0
            assert c.extra == {"scaling": pytest.approx(want)} and c.bias is None
        elif kind == "gpt_neox_japanese":
            assert c.extra == {"scaling": pytest.approx(SCALE)} and c.bias is None
        else:  # cpmant
            q, k = raw[id(c.module)]
            torch.testing.assert_close(c.query, q)
            torch.testing.assert_close(c.key, k)
            assert c.extra == {"scaling": pytest.approx(SCALE),
                               "bias_kind": "relative position bias"}
            n = c.query.shape[2]  # (CPM-Ant puts its prompt tokens before the text)
            assert n >= 9 and c.bias.shape == (2, 4, n, n)
            assert c.mask.dtype == torch.float32
        assert scale > 0
        assert_softmax(c)
        # (padding: no token of the text sees the last two keys, in the model's probabilities
        # and so in the reported mask; CPM-Ant reads no attention_mask: its own from the ids)
        assert kind == "cpmant" or float(c.weights[..., :-2, -2:].abs().max()) < 1e-6
    with torch.no_grad():
        plain = loaded.model(**inputs)
    for a, b in zip(plain.to_tuple(), out.to_tuple()):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)


def test_the_probabilities_come_back_only_when_asked(model) -> None:
    import torch

    kind, loaded = model
    with torch.no_grad():
        plain = loaded.model(**_inputs(loaded.model, asked=True))
    _got, asked, _o = calls(loaded, _inputs(loaded.model, asked=True))
    _got, not_asked, _o = calls(loaded, _inputs(loaded.model, asked=False))
    names = [n for n in ("attentions", "decoder_attentions", "encoder_attentions",
                         "cross_attentions") if getattr(plain, n, None) is not None]
    assert names, kind
    for n in names:
        for a, b in zip(getattr(plain, n), getattr(asked, n)):
            assert torch.equal(a, b), n
        assert getattr(not_asked, n, None) is None, n


def test_planted_factors_reach_q_k_and_the_weights(model) -> None:
    import torch

    _kind, loaded = model
    inputs = _inputs(loaded.model)
    last = loaded.n_sites - 1
    plain, plain_out, _ = calls(loaded, inputs)
    got, _o, _ = calls(loaded, inputs, {0: Modifier(q_factor=2.0)})
    torch.testing.assert_close(got[0].query, plain[0].query)  # (q before the factor)
    torch.testing.assert_close(got[0].key, plain[0].key)
    assert_softmax(got[0], factor=2.0)
    got, _o, _ = calls(loaded, inputs, {last: Modifier(w_factor=0.5)})
    torch.testing.assert_close(got[last].weights, 0.5 * plain[last].weights)
    assert_softmax(got[last], weight=0.5)
    assert not torch.allclose(got[last].output, plain[last].output, atol=1e-4)
    with torch.no_grad():  # (outside the tap the hooks change nothing)
        again = loaded.model(**inputs)
    torch.testing.assert_close(again.to_tuple()[0], plain_out.to_tuple()[0], rtol=0, atol=0)


def test_declared_names_each_helpers_convention() -> None:
    """By hand: 1/sqrt(8) with OpenAI GPT's flag, 1 without; 1/norm_factor; 1/sqrt(dim_head)."""
    ns = types.SimpleNamespace
    assert adapters_seq.declared("openai-gpt", ns(scale=True), 16) == (
        0.25, "1/sqrt(head_dim) (OpenAI GPT's scale flag)")
    assert adapters_seq.declared("openai-gpt", ns(scale=False), 16) == (
        1.0, "none (OpenAI GPT's scale flag off)")
    assert adapters_seq.declared("gpt_neox_japanese", ns(norm_factor=4.0), 64) == (
        0.25, "1/norm_factor (GPT-NeoX-Japanese)")
    assert adapters_seq.declared("cpmant", ns(), 64) == (0.125, "1/sqrt(dim_head) (CPM-Ant)")
    assert adapters_seq.declared("xglm", ns(scaling=0.5), 16) is None
