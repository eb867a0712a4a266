"""GPT-Neo's and Bloom's adapters (engine/probe/adapters.py) report what the model computes: q and
k as the projections make them (computed here from the weights), the band and padding mask, the
ALiBi term and the factor on q.k, whose softmax is the model's own probabilities; the planted
factors reach q.k and the weights; the refusals of the families without an adapter.

Expected values by hand: GPT-Neo applies no factor (1.0) and its local layers see the
``window_size`` last keys; Bloom's logits are ``inv_norm_factor * q.k + beta * alibi`` with the
ALiBi slopes 2^-2, 2^-4, 2^-6, 2^-8 of 4 heads times the key's position.
"""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

from engine.errors import ConfigError  # noqa: E402
from engine.probe import adapters  # noqa: E402
from engine.probe.loader import info_from_config, wrap_model  # noqa: E402
from engine.probe.sweep import QK_STD, sharpen  # noqa: E402
from engine.probe.tap import Modifier  # noqa: E402
from tests.engine.probe.adapter_calls import LOW, assert_softmax, calls, heads, seen_in_pass  # noqa: E402

WINDOW = 3
#: two texts of 7 tokens, the second right-padded by 2 (no query row without a visible key)
PAD = [[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]]


def _inputs():
    import torch

    ids = torch.tensor([[5, 9, 3, 17, 22, 8, 30], [11, 4, 27, 6, 19, 0, 0]])
    return {"input_ids": ids, "attention_mask": torch.tensor(PAD), "use_cache": False}


def _wrap(net, name):
    net.eval()
    loaded = wrap_model(net, info_from_config(net.config, name))
    sharpen(loaded, QK_STD, 1)  # (std 0.02 leaves a tiny model's softmax nearly uniform)
    return loaded


@pytest.fixture(scope="module")
def neo():
    import torch

    torch.manual_seed(0)
    cfg = transformers.GPTNeoConfig(
        vocab_size=64, hidden_size=32, num_layers=2, num_heads=4, max_position_embeddings=32,
        attention_types=[[["global", "local"], 1]], window_size=WINDOW, bos_token_id=0,
        eos_token_id=0)
    return _wrap(transformers.GPTNeoModel(cfg), "tiny-gpt-neo")


@pytest.fixture(scope="module")
def bloom():
    import torch

    torch.manual_seed(0)
    cfg = transformers.BloomConfig(vocab_size=64, hidden_size=32, n_layer=2, n_head=4)
    loaded = _wrap(transformers.BloomModel(cfg), "tiny-bloom")
    attn = loaded.model.h[1].self_attention
    attn.beta, attn.inv_norm_factor = 0.5, 0.25  # (layer 1 off the defaults 1 and 1/sqrt(8))
    return loaded


def _module_inputs(loaded, inputs):
    """{id(attention module): its hidden_states input} of one plain forward pass."""
    return seen_in_pass(loaded, inputs, {id(m): m for m in loaded.tap.unique_modules()},
                        inputs_of=True)


def _visible(n, window=None, pad=PAD):
    """visible[b, i, j]: key j seen by query i (causal, a window, padding), by hand."""
    import torch

    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    vis = j <= i
    if window is not None:
        vis &= i - j < window
    return vis[None] & torch.tensor(pad, dtype=torch.bool)[:, None, :]


# -- GPT-Neo ---------------------------------------------------------------------------------------

def test_gpt_neo_reports_q_k_its_band_and_no_factor(neo) -> None:
    import torch

    inputs = _inputs()
    x = _module_inputs(neo, inputs)
    got, out, _outs = calls(neo, inputs)
    mods = neo.tap.unique_modules()
    assert [c.site for c in got] == [0, 1] and [s.adapter for s in neo.sites] == ["gpt_neo"] * 2
    for c, mod, window in zip(got, mods, (None, WINDOW)):
        assert c.module is mod
        h = x[id(mod)]
        torch.testing.assert_close(c.query, heads(h @ mod.q_proj.weight.T, 4))
        torch.testing.assert_close(c.key, heads(h @ mod.k_proj.weight.T, 4))
        assert c.extra == {"scaling": 1.0} and c.bias is None
        assert c.mask.dtype == torch.float32 and c.mask.shape[-2:] == (7, 7)
        assert torch.equal(c.mask[:, 0] > LOW / 2, _visible(7, window)), window
        assert (c.mask[:, 0][_visible(7, window)] == 0).all()  # (a visible key: 0 added)
        assert c.mask.min().item() == LOW  # (clamped at float32's minimum, never -inf)
        assert_softmax(c)
        v = heads(h @ mod.v_proj.weight.T, 4)  # (the output _attn returns: weights @ v)
        torch.testing.assert_close(c.output, c.weights @ v)
    plain = neo.model(**inputs).last_hidden_state
    assert torch.equal(plain, out.last_hidden_state)


def test_gpt_neo_without_a_mask_still_reports_its_band(neo) -> None:
    import torch

    got, _out, _o = calls(neo, {"input_ids": torch.tensor([[5, 9, 3, 17, 22]]),
                                "use_cache": False})
    for c, window in zip(got, (None, WINDOW)):
        vis = _visible(5, window, [[1] * 5])[0]
        assert torch.equal(c.mask[0, 0] > LOW / 2, vis)
        assert_softmax(c)


def test_gpt_neo_planted_factors_reach_q_k_and_the_weights(neo) -> None:
    import torch

    inputs = _inputs()
    plain, _o, _ = calls(neo, inputs)
    got, _out, _o = calls(neo, inputs, {0: Modifier(q_factor=2.0)})
    torch.testing.assert_close(got[0].query, plain[0].query)  # (q before the factor)
    torch.testing.assert_close(got[0].key, plain[0].key)
    assert_softmax(got[0], factor=2.0)
    # (layer 0 untouched: layer 1 sees the same input; its weights and output carry 0.5)
    got, _out, _o = calls(neo, inputs, {1: Modifier(w_factor=0.5)})
    assert_softmax(got[1], weight=0.5)
    torch.testing.assert_close(got[1].weights, 0.5 * plain[1].weights)
    torch.testing.assert_close(got[1].output, 0.5 * plain[1].output)


# -- Bloom -----------------------------------------------------------------------------------------

def _alibi(beta):
    """beta x slope_h x the key's position (positions count real tokens only), (2, 4, 1, 7)."""
    import torch

    slopes = torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])
    mask = torch.tensor(PAD, dtype=torch.float64)
    pos = (mask.cumsum(-1) - 1) * mask
    return beta * slopes[None, :, None, None] * pos[:, None, None, :]


def test_bloom_reports_interleaved_q_k_alibi_and_inv_norm_factor(bloom) -> None:
    import torch

    inputs = _inputs()
    x = _module_inputs(bloom, inputs)
    got, _out, outs = calls(bloom, inputs)
    assert [s.adapter for s in bloom.sites] == ["bloom"] * 2
    for c, mod, beta, scale in zip(got, bloom.tap.unique_modules(), (1.0, 0.5),
                                   (8**-0.5, 0.25)):
        assert c.module is mod
        w = mod.query_key_value.weight.view(4, 3, 8, 32)  # (heads, q/k/v, d, width)
        b = mod.query_key_value.bias.view(4, 3, 8)
        q = torch.einsum("bnw,hdw->bhnd", x[id(mod)], w[:, 0]) + b[None, :, None, 0]
        k = torch.einsum("bnw,hdw->bhnd", x[id(mod)], w[:, 1]) + b[None, :, None, 1]
        torch.testing.assert_close(c.query, q, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(c.key, k, rtol=1e-5, atol=1e-5)
        assert c.extra == {"scaling": pytest.approx(scale), "bias_kind": "ALiBi"}
        assert c.bias.shape == (2, 4, 7, 7)
        torch.testing.assert_close(c.bias.double(), _alibi(beta).expand(2, 4, 7, 7))
        assert_softmax(c)
        assert torch.equal(c.output, outs[id(mod)][0])


def test_bloom_planted_factors_reach_q_k_and_the_weights(bloom) -> None:
    import torch

    inputs = _inputs()
    plain, plain_out, _ = calls(bloom, inputs)
    assert torch.equal(plain_out.last_hidden_state, bloom.model(**inputs).last_hidden_state)
    got, _out, _o = calls(bloom, inputs, {0: Modifier(q_factor=2.0)})
    torch.testing.assert_close(got[0].query, plain[0].query)  # (q before the factor)
    torch.testing.assert_close(got[0].key, plain[0].key)
    assert_softmax(got[0], factor=2.0)
    for f in (0.5, 2.0):  # (the weights the values see, and so the output, carry f)
        got, _out, _o = calls(bloom, inputs, {1: Modifier(w_factor=f)})
        assert_softmax(got[1], weight=f)
        torch.testing.assert_close(got[1].weights, f * plain[1].weights)
        assert not torch.allclose(got[1].output, plain[1].output, atol=1e-3)
    # a factor on the weights alone leaves q.k; one on q alone leaves the weights' sum
    one, _o, _ = calls(bloom, inputs, {0: Modifier(w_factor=3.0)})
    torch.testing.assert_close(one[0].weights, 3.0 * plain[0].weights)
    two, _o, _ = calls(bloom, inputs, {1: Modifier(q_factor=0.5)})
    assert_softmax(two[1], factor=0.5)
    torch.testing.assert_close(two[0].weights, plain[0].weights)


def test_bloom_without_a_tap_computes_as_before(bloom) -> None:
    """The hooks stay on the model: outside the tap they change nothing and keep nothing."""
    import torch

    inputs = _inputs()
    with torch.no_grad():
        first = bloom.model(**inputs).last_hidden_state
    calls(bloom, inputs, {0: Modifier(q_factor=2.0)})
    with torch.no_grad():
        again = bloom.model(**inputs).last_hidden_state
    assert torch.equal(first, again)
    site = next(iter(_sites(bloom)))
    assert site.state == {}


def _sites(loaded):
    """The _BloomSite objects the adapter hooked (bound methods of its hooks)."""
    mod = loaded.tap.unique_modules()[0]
    return {h.__self__ for h in mod._forward_pre_hooks.values() if hasattr(h, "__self__")
            and type(h.__self__).__name__ == "_BloomSite"}


# -- which families have an adapter, and the refusals of the others ------------------------------

def test_adapter_for_names_every_adapted_family() -> None:
    from engine.probe import adapters_bert, adapters_deberta, adapters_fused

    assert adapters.adapter_for("gpt_neo") is adapters.install_gpt_neo
    assert adapters.adapter_for("bloom") is adapters.install_bloom
    assert adapters.adapter_for("falcon") is None  # (the attention interface since 5.25)
    assert adapters.adapter_for("mpt") is adapters_fused.install_mpt
    assert adapters.adapter_for("deberta-v2") is adapters_deberta.install_deberta
    assert adapters.adapter_for("big_bird") is adapters_bert.install_big_bird
    for mt in ("xglm", "mvp", "trocr", "led", "fsmt", "openai-gpt", "gpt_neox_japanese",
               "cpmant", "xlm", "flaubert", "roformer", "funnel", "longformer"):
        assert callable(adapters.adapter_for(mt)), mt
    assert adapters.adapter_for("bert") is None and adapters.adapter_for("xlnet") is None


#: the words of each refusal, by hand (docs/architectures.md), and the model types they name
REFUSED = (
    ("computes attention inline in its own module", ("openai-gpt", "xglm", "xlm", "flaubert")),
    ("uses two-stream relative attention of its own", ("xlnet",)),
    ("uses n-gram (main and predict stream) self-attention of its own", ("prophetnet",)),
    ("uses disentangled (content/position) attention of its own", ("deberta", "deberta-v2")),
    ("uses relative attention of its own with pooling", ("funnel",)),
    ("uses LSH attention", ("reformer",)),
    ("uses sliding-window plus global attention of its own", ("longformer",)),
    ("uses block-sparse attention of its own", ("big_bird",)),
)


def test_a_family_without_an_adapter_is_refused_with_what_it_does() -> None:
    assert adapters.BYPASSING == {mt: why for why, types in REFUSED for mt in types}
    assert set(adapters.NO_SOFTMAX) == {"rwkv", "yoso", "mra"}
    assert adapters.NO_SOFTMAX["rwkv"] == ("mixes tokens by a linear recurrence (RWKV's time "
                                           "mixing: receptance, key, value)")


def test_a_model_type_of_no_softmax_is_refused_before_anything_runs() -> None:
    from engine.probe.capture import prepare

    with pytest.raises(ConfigError) as err:
        prepare(object(), "rwkv")
    assert err.value.message == (
        "rwkv has no softmax attention: it mixes tokens by a linear recurrence (RWKV's time "
        "mixing: receptance, key, value); there is no attention scale to audit")
