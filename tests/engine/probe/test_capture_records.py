"""capture, capture_sites, prepare and forward_kwargs without a transformers model: the probe's
per-layer arrays packed from records written by hand, the toy model of toy_attention.py routed
through the tap (its q, k and weights recomputed from its Linear weights), and each refusal with
the model type it names (docs/testing.md, mutation testing)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.errors import Cancelled, ConfigError  # noqa: E402
from engine.probe import capture as cap_mod  # noqa: E402
from engine.probe.capture import (  # noqa: E402
    DISCOVERY_TOKENS,
    MLA,
    _one_line,
    _params,
    capture,
    capture_sites,
    forward_kwargs,
    has_attention,
    last_hidden,
    prepare,
    run_forward,
)
from engine.probe.sites import MAX_FIT_ROWS, SiteRecord  # noqa: E402
from engine.probe.tap import IMPLEMENTATION, Modifier  # noqa: E402
from tests.engine.probe.toy_attention import HEADS, D, Toy  # noqa: E402

# -- forward_kwargs ------------------------------------------------------------------------------


def _net(forward, **config):
    return SimpleNamespace(forward=forward, config=SimpleNamespace(**config))


def test_forward_kwargs_of_a_decoder_with_and_without_a_cache_argument() -> None:
    def fwd(input_ids, attention_mask=None, use_cache=None):
        pass

    kw = forward_kwargs(_net(fwd), [5, 6, 7])
    assert set(kw) == {"input_ids", "attention_mask", "use_cache"} and kw["use_cache"] is False
    assert kw["input_ids"].tolist() == [[5, 6, 7]] and kw["input_ids"].dtype == torch.long
    assert kw["attention_mask"].tolist() == [[1, 1, 1]]
    assert kw["attention_mask"].dtype == torch.long
    kw = forward_kwargs(_net(fwd), [5, 6, 7], [1, 1, 0])
    assert kw["attention_mask"].tolist() == [[1, 1, 0]] and kw["attention_mask"].dtype == torch.long
    # NumPy ids and a boolean mask reach the model as int64 all the same
    kw = forward_kwargs(_net(fwd), np.array([5, 6], np.int32), [True, False])
    assert kw["input_ids"].dtype == torch.long and kw["attention_mask"].dtype == torch.long
    assert kw["attention_mask"].tolist() == [[1, 0]]

    def plain(input_ids, attention_mask=None):
        pass

    assert set(forward_kwargs(_net(plain), [1])) == {"input_ids", "attention_mask"}


def test_an_encoder_decoder_reads_the_text_shifted_right_after_its_start_token() -> None:
    def fwd(input_ids, attention_mask=None, decoder_input_ids=None):
        pass

    kw = forward_kwargs(_net(fwd, is_encoder_decoder=True, decoder_start_token_id=9,
                             pad_token_id=0), [5, 6, 7])
    assert kw["decoder_input_ids"].tolist() == [[9, 5, 6]]
    assert kw["decoder_input_ids"].dtype == torch.long
    kw = forward_kwargs(_net(fwd, is_encoder_decoder=True, decoder_start_token_id=None,
                             pad_token_id=3), [5, 6])
    assert kw["decoder_input_ids"].tolist() == [[3, 5]]
    kw = forward_kwargs(_net(fwd, is_encoder_decoder=True, decoder_start_token_id="x",
                             pad_token_id=None), [5, 6])
    assert kw["decoder_input_ids"].tolist() == [[0, 5]]
    kw = forward_kwargs(_net(fwd, is_encoder_decoder=True), [5, 6])
    assert kw["decoder_input_ids"].tolist() == [[0, 5]]
    assert "decoder_input_ids" not in forward_kwargs(_net(fwd, is_encoder_decoder=False), [5])
    assert "decoder_input_ids" not in forward_kwargs(_net(fwd), [5])


def test_the_forward_signature_is_read_once_per_model() -> None:
    class Net:
        config = SimpleNamespace()
        calls = 0

        def forward(self, input_ids, use_cache=None):
            pass

    net = Net()
    real = inspect.signature
    seen = []

    def spy(f):
        seen.append(f)
        return real(f)

    inspect.signature = spy
    try:
        assert _params(net) == {"input_ids", "use_cache"}
        assert _params(net) == {"input_ids", "use_cache"}
    finally:
        inspect.signature = real
    assert len(seen) == 1 and net._attention_lab_params == {"input_ids", "use_cache"}
    # an object that refuses new attributes is read each time, not refused
    class Frozen:
        __slots__ = ()

        def forward(self, input_ids):
            pass

    assert _params(Frozen()) == {"input_ids"}


def test_last_hidden_is_the_named_state_or_the_first_output() -> None:
    assert last_hidden(SimpleNamespace(last_hidden_state=7)) == 7
    assert last_hidden((3, 4)) == 3

    class Out(tuple):
        last_hidden_state = None

    assert last_hidden(Out((5, 6))) == 5


def test_one_line_is_the_first_line_cut_at_200_characters() -> None:
    assert _one_line(ValueError("  bad\nsecond")) == "bad"
    assert _one_line(ValueError("x" * 300)) == "x" * 200
    assert _one_line(KeyError()) == "KeyError"
    assert _one_line(ValueError("  \n ")) == "ValueError"


# -- capture: records packed as the probe's arrays ----------------------------------------------


def _rec(site: int, h: int = 2, hkv: int = 1, n: int = 4, d: int = 2, scaling=None,
         q_ratio=None, k_ratio=None, bias=None, softcap=None, sinks=None, causal=True,
         q_position=None, seed=0) -> SiteRecord:
    rng = np.random.default_rng(seed + site)
    vis = np.tril(np.ones((n, n), bool)) if causal else np.ones((n, n), bool)
    p = rng.uniform(0.1, 1, (h, n, n)) * vis
    p /= p.sum(-1, keepdims=True)
    return SiteRecord(site, rng.normal(0, 1, (h, n, d)).astype(np.float32),
                      rng.normal(0, 1, (hkv, n, d)).astype(np.float32),
                      np.arange(h) // max(1, h // hkv), np.arange(n), p.astype(np.float32), vis,
                      bias, sinks, softcap, scaling, q_ratio, k_ratio, False, causal, None, None,
                      (), q_position)


def _loaded(records, monkeypatch, seen=None):
    loaded = SimpleNamespace()

    def fake(got, ids, mask=None, modifiers=None, max_rows=MAX_FIT_ROWS, cancelled=None):
        assert got is loaded
        if seen is not None:
            seen.append((list(ids), mask, max_rows))
        return records, 0.125, None

    monkeypatch.setattr(cap_mod, "capture_sites", fake)
    return loaded


def test_capture_packs_q_k_per_query_head_and_the_scale_per_site(monkeypatch) -> None:
    recs = [_rec(0, scaling=0.5, q_ratio=np.array([2.0, 4.0]), k_ratio=np.array([3.0])),
            _rec(1, softcap=30.0, causal=False)]
    seen = []
    c = capture(_loaded(recs, monkeypatch, seen), [5, 6, 7, 8])
    assert seen == [([5, 6, 7, 8], None, None)]  # every row kept
    np.testing.assert_array_equal(c.q, np.stack([r.q for r in recs]))
    # the key heads expanded to the query heads: both read key head 0
    np.testing.assert_array_equal(c.k[0], np.stack([recs[0].k[0], recs[0].k[0]]))
    np.testing.assert_array_equal(c.model_attn, np.stack([r.probs for r in recs]))
    # scale: site 0 passed 0.5 and its q.k carries median(2 x 3, 4 x 3) = 9; site 1 passed none:
    # 1/sqrt(d_k) = 1/sqrt(2)
    np.testing.assert_allclose(c.scale, [0.5 * 9.0, 2**-0.5])
    assert c.scale.dtype == np.float64
    np.testing.assert_array_equal(c.softcap[1], 30.0)
    assert np.isnan(c.softcap[0])
    assert c.bias is None and c.sinks is False and c.causal is True
    np.testing.assert_array_equal(c.pair_masks[0], np.tril(np.ones((4, 4), bool)))
    np.testing.assert_array_equal(c.pair_masks[1], np.ones((4, 4), bool))
    np.testing.assert_array_equal(c.pair_mask, c.pair_masks[0])
    np.testing.assert_array_equal(c.valid_positions, [0, 1, 2, 3])
    assert c.forward_s == 0.125
    np.testing.assert_array_equal(c.masked_mass, np.zeros((2, 2)))
    assert c.masked_mass.dtype == np.float64
    # the median over heads, not the mean: three heads at 1, 1, 7
    recs = [_rec(0, h=3, hkv=3, scaling=1.0, q_ratio=np.array([1.0, 1.0, 7.0]),
                 k_ratio=np.ones(3))]
    np.testing.assert_allclose(capture(_loaded(recs, monkeypatch), [1] * 4).scale, [1.0])
    # no site causal: not causal; sinks at one site: sinks
    recs = [_rec(0, causal=False), _rec(1, causal=False, sinks=np.zeros(2))]
    c = capture(_loaded(recs, monkeypatch), [1] * 4)
    assert c.causal is False and c.sinks is True


def test_padding_is_dropped_and_the_weight_on_it_reported(monkeypatch) -> None:
    n = 5
    recs = [_rec(0, n=n), _rec(1, n=n)]
    seen = []
    capture(_loaded(recs, monkeypatch, seen), [1, 0, 2, 3, 4], [1, 0, 1, 1, 1])
    assert seen == [([1, 0, 2, 3, 4], [1, 0, 1, 1, 1], None)]  # the mask reaches the model
    # the model puts 0.3 on key 1 of row 3 at site 1 (a padding key it should have hidden)
    vis = np.tril(np.ones((n, n), bool))
    vis[:, 1] = False
    p = recs[1].probs.copy()
    p[:, :, 1] = 0.0
    p[:, 3, 1] = 0.3
    p[1, 4, 1] = 0.45
    recs[1] = SiteRecord(**{**recs[1].__dict__, "visible": vis, "probs": p})
    c = capture(_loaded(recs, monkeypatch), [1, 0, 2, 3, 4], [1, 0, 1, 1, 1])
    pos = [0, 2, 3, 4]
    np.testing.assert_array_equal(c.valid_positions, pos)
    np.testing.assert_array_equal(c.q[1], recs[1].q[:, pos])
    np.testing.assert_array_equal(c.k[1], recs[1].k[recs[1].kv_head][:, pos])
    np.testing.assert_array_equal(c.model_attn[1], p[:, pos][:, :, pos])
    np.testing.assert_array_equal(c.pair_masks[1], vis[pos][:, pos])
    np.testing.assert_allclose(c.masked_mass, [[0.0, 0.0], [0.3, 0.45]], rtol=1e-6)
    # a masked key seen only from a padding row is no weight of a valid row
    p2 = recs[1].probs.copy()
    p2[:, :, 1] = 0.0
    p2[0, 1, 1] = 0.9  # row 1 is padding
    recs[1] = SiteRecord(**{**recs[1].__dict__, "probs": p2})
    c = capture(_loaded(recs, monkeypatch), [1, 0, 2, 3, 4], [1, 0, 1, 1, 1])
    np.testing.assert_array_equal(c.masked_mass, np.zeros((2, 2)))


def test_bias_is_stacked_per_site_zero_where_a_site_has_none(monkeypatch) -> None:
    n = 4
    b0 = np.arange(n * n, dtype=np.float32).reshape(1, n, n)  # one for every head
    recs = [_rec(0, bias=b0), _rec(1)]
    c = capture(_loaded(recs, monkeypatch), [1, 2, 3, 4], [1, 1, 0, 1])
    pos = [0, 1, 3]
    assert c.bias.shape == (2, 2, 3, 3)
    for head in range(2):
        np.testing.assert_array_equal(c.bias[0, head], b0[0][pos][:, pos])
    np.testing.assert_array_equal(c.bias[1], np.zeros((2, 3, 3)))
    assert c.bias.dtype == np.float32
    # one site with a bias
    c = capture(_loaded([_rec(0, bias=b0)], monkeypatch), [1, 2, 3, 4])
    assert c.bias.shape == (1, 2, 4, 4) and c.bias.dtype == np.float32


def test_a_position_factor_is_put_back_on_q(monkeypatch) -> None:
    f = np.array([1.0, 1.5, np.nan, 2.0])
    recs = [_rec(0, q_position=f)]
    c = capture(_loaded(recs, monkeypatch), [1, 2, 3, 4])
    want = recs[0].q * np.array([1.0, 1.5, 1.0, 2.0])[None, :, None]
    np.testing.assert_allclose(c.q[0], want, rtol=1e-6)
    assert c.q.dtype == np.float32


def test_capture_refuses_a_bad_mask_no_token_and_mixed_shapes(monkeypatch) -> None:
    loaded = _loaded([_rec(0), _rec(1, h=4, hkv=4)], monkeypatch)
    with pytest.raises(ValueError, match=r"^attention_mask must have one entry per token$"):
        capture(loaded, [1, 2, 3], [1, 1])
    with pytest.raises(ValueError, match=r"^no valid token$"):
        capture(loaded, [1, 2], [0, 0])
    with pytest.raises(ConfigError) as err:
        capture(loaded, [1, 2, 3, 4])
    assert err.value.field == "model"
    assert err.value.message == ("its attention sites differ in heads, head width or length; the "
                                 "probe's per-layer grids need one shape (the audit handles it)")
    # the query length alone, or the key length alone, differing
    r = _rec(1)
    for change in ({"q": np.concatenate([r.q, r.q[:, :1]], axis=1)},
                   {"k": np.concatenate([r.k, r.k[:, :1]], axis=1)}):
        with pytest.raises(ConfigError):
            capture(_loaded([_rec(0), SiteRecord(**{**r.__dict__, **change})], monkeypatch),
                    [1, 2, 3, 4])
    for other in (_rec(1, d=4), _rec(1, n=5)):
        with pytest.raises(ConfigError):
            capture(_loaded([_rec(0), other], monkeypatch), [1, 2, 3, 4])
    # one valid token is enough
    c = capture(_loaded([_rec(0)], monkeypatch), [1, 2, 3, 4], [0, 0, 1, 0])
    assert c.q.shape == (1, 2, 1, 2)


# -- the toy model through prepare and capture_sites ---------------------------------------------


@pytest.fixture
def toy_loaded():  # (per test: a mutation run credits a fixture's code to the tests that ran it)
    net = Toy()
    tap = prepare(net, "toy")
    return SimpleNamespace(model=net, tap=tap, sites=tap.sites, qk_norm_sites=frozenset({1}),
                           mla_sites=frozenset({3}))


def test_prepare_routes_the_toy_through_the_capture_and_numbers_its_sites(toy_loaded) -> None:
    net, tap = toy_loaded.model, toy_loaded.tap
    assert net.config._attn_implementation == IMPLEMENTATION
    assert [s.name for s in tap.sites] == ["a", "shared", "shared", "cross"]
    assert [s.cross for s in tap.sites] == [False, False, False, True]
    assert has_attention(net)
    assert DISCOVERY_TOKENS == 4


def test_capture_sites_records_every_site_from_the_projections(toy_loaded) -> None:
    ids = [3, 1, 4, 1, 5, 9, 2]
    records, elapsed, out = capture_sites(toy_loaded, ids, max_rows=3)
    assert [r.site for r in records] == [0, 1, 2, 3] and elapsed > 0
    net = toy_loaded.model
    with torch.no_grad():
        e = net.embed(torch.tensor([ids]))
    # site 0's q is the q projection of the embeddings (its scaling 0.25 passed, not on q)
    q = (e[0] @ net.a.q_proj.weight.T).numpy().reshape(len(ids), HEADS, D).transpose(1, 0, 2)
    np.testing.assert_allclose(records[0].q, q, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(records[0].rows, [0, 3, 6])
    assert records[0].scaling == 0.25 and records[0].softcap == 3.0 and records[0].causal
    # the labels from the loaded model's norm and MLA sites, and the cross flag
    assert records[1].q_ratio is not None  # matched: the norm label is not used
    assert records[3].features[0] == "cross-attention (all source tokens)"
    assert out.last_hidden_state.shape == (1, len(ids), 8)
    # an unmatched site takes its label from the loaded model's sets
    n = len(ids)
    hidden_q = []

    def norm_q(_m, _a, o):
        hidden_q.append(o)
        o = o.view(*o.shape[:-1], HEADS, D)  # q per head and token unit norm: QK-norm
        return (o / o.norm(dim=-1, keepdim=True)).flatten(-2)

    hooks = [net.shared.q_proj.register_forward_hook(norm_q),
             net.cross.q_proj.register_forward_hook(norm_q)]
    try:
        records, _t, _o = capture_sites(toy_loaded, ids)
    finally:
        for h in hooks:
            h.remove()
    # (site 1 is a norm site of the loaded model, site 2, the same module's next call, is not)
    assert records[1].features == ("bidirectional", "QK-norm")
    assert records[2].features == ("bidirectional", "q/k not a projection's output")
    assert MLA in records[3].features and "QK-norm" not in records[3].features
    assert records[0].q_ratio is not None
    assert records[1].rows.tolist() == list(range(n))


def test_capture_sites_passes_the_mask_times_the_pass_and_needs_no_mla_set(toy_loaded,
                                                                          monkeypatch) -> None:
    clock = iter([10.0, 10.5])
    monkeypatch.setattr(cap_mod, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    loaded = SimpleNamespace(**{k: v for k, v in toy_loaded.__dict__.items() if k != "mla_sites"})
    records, elapsed, _out = capture_sites(loaded, [3, 1, 4], [1, 1, 0])
    assert elapsed == 0.5 and len(records) == 4
    assert toy_loaded.model.seen[1].tolist() == [[1, 1, 0]]
    assert not any(MLA in r.features for r in records)


def test_capture_sites_applies_modifiers_and_stops_when_cancelled(toy_loaded) -> None:
    ids = [3, 1, 4, 1]
    plain, _t, _o = capture_sites(toy_loaded, ids)
    got, _t, _o = capture_sites(toy_loaded, ids, modifiers={2: Modifier(w_factor=0.5)})
    np.testing.assert_allclose(got[2].probs, 0.5 * plain[2].probs, rtol=1e-6)
    np.testing.assert_allclose(got[1].probs, plain[1].probs, rtol=1e-6)
    with pytest.raises(Cancelled):
        capture_sites(toy_loaded, ids, cancelled=lambda: True)
    # a site that does not run this time is refused by number
    real = toy_loaded.model.cross.forward
    toy_loaded.model.cross.forward = lambda h, key_value_states=None: h * 0
    try:
        with pytest.raises(ConfigError) as err:
            capture_sites(toy_loaded, ids)
    finally:
        toy_loaded.model.cross.forward = real
    assert err.value.field == "model" and "site 3 did not run" in err.value.message


def test_run_forward_is_without_gradients_and_passes_the_mask() -> None:
    net = Toy().requires_grad_(True)
    out = run_forward(net, [1, 2], [1, 0])
    assert not out.last_hidden_state.requires_grad
    assert net.seen[0].tolist() == [[1, 2]] and net.seen[1].tolist() == [[1, 0]]
    run_forward(net, [1, 2])
    assert net.seen[1].tolist() == [[1, 1]]


def test_prepare_refuses_by_model_type() -> None:
    with pytest.raises(ConfigError) as err:
        prepare(Toy(), "rwkv")
    assert err.value.field == "model" and err.value.message.startswith("rwkv has no softmax")
    assert "linear recurrence" in err.value.message
    net = Toy()
    net.main_input_name = "pixel_values"
    with pytest.raises(ConfigError) as err:
        prepare(net, "toy")
    assert err.value.field == "model"
    assert err.value.message == ("toy reads pixel_values (audio or images), not token ids; the "
                                 "audit runs text models")
    # no way to switch the implementation: a setter set to None, or none at all
    net = Toy()
    net.set_attn_implementation = None
    with pytest.raises(ConfigError) as err:
        prepare(net, "toy")
    assert err.value.field == "model"
    assert err.value.message == "toy cannot switch its attention implementation"
    no_switch = type("NoSwitch", (Toy,), {"set_attn_implementation": property(_no_attr)})()
    with pytest.raises(ConfigError) as err:
        prepare(no_switch, "toy")
    assert err.value.message == "toy cannot switch its attention implementation"

    # the switch itself refused: its first line, and transformers' logging level restored
    from transformers.utils import logging as hf_logging

    def refuse(_name):
        raise ValueError("not supported here\nmore")

    level = hf_logging.get_verbosity()
    net = Toy()
    net.set_attn_implementation = refuse
    with pytest.raises(ConfigError) as err:
        prepare(net, "toy")
    assert err.value.message == ("toy: cannot route its attention through the lab's capture "
                                 "(not supported here)")
    assert err.value.field == "model"
    assert hf_logging.get_verbosity() == level
    # a forward pass that fails on token ids
    net = Toy()
    net.forward = lambda input_ids, attention_mask=None: 1 / 0
    with pytest.raises(ConfigError) as err:
        prepare(net, "toy")
    assert err.value.field == "model"
    assert err.value.message == ("toy: a forward pass on token ids failed (division by zero); "
                                 "the audit runs text models")


def test_prepare_refuses_a_model_whose_attention_the_tap_cannot_see() -> None:
    net = Toy()
    net.set_attn_implementation = lambda name: None  # stays on its own eager code
    with pytest.raises(ConfigError) as err:
        prepare(net, "toy")
    assert err.value.field == "model"
    assert err.value.message == ("toy computes attention inside its own modules, outside "
                                 "transformers' attention interface, and the lab has no adapter "
                                 "for it: its q.k cannot be seen")
    with pytest.raises(ConfigError) as err:
        prepare(net, "xlnet")
    assert "uses two-stream relative attention of its own" in err.value.message

    class Mixer(torch.nn.Module):  # no attention at all
        main_input_name = "input_ids"

        def __init__(self):
            super().__init__()
            self.config = SimpleNamespace()
            self.mix = torch.nn.Linear(2, 2)

        def set_attn_implementation(self, name):
            pass

        def forward(self, input_ids, attention_mask=None):
            return input_ids

    assert not has_attention(Mixer())
    with pytest.raises(ConfigError) as err:
        prepare(Mixer(), "mamba")
    assert err.value.field == "model"
    assert err.value.message == ("mamba has no attention (no attention module, no query and key "
                                 "projections): there is no attention scale to audit")


def test_an_attention_module_is_known_by_its_projections_or_its_class_name() -> None:
    class Bare(torch.nn.Module):
        pass

    net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    assert not has_attention(net)
    named = torch.nn.Sequential(type("XLNetRelativeAttention", (torch.nn.Module,), {})())
    assert has_attention(named)
    named = torch.nn.Sequential(type("SelfAttn", (torch.nn.Module,), {})())
    assert has_attention(named)
    assert not has_attention(torch.nn.Sequential(Bare()))


def _no_attr(self):
    raise AttributeError("set_attn_implementation")


def test_prepare_uses_the_architectures_adapter_and_discovers_on_four_tokens(monkeypatch) -> None:
    from engine.probe import adapters
    from engine.probe.tap import register

    seen = []

    def install(tap, net):
        seen.append((tap, net))
        register()
        net.set_attn_implementation(IMPLEMENTATION)  # (the adapter's own routing)
        tap.mark_adapter(net.a, "toy adapter")
        return 1

    monkeypatch.setattr(adapters, "adapter_for", lambda t: install if t == "toy" else None)
    net = Toy()
    tap = prepare(net, "toy")
    assert seen == [(tap, net)]
    assert [s.adapter for s in tap.sites] == ["toy adapter", None, None, None]
    # the discovery pass: token ids 1 to DISCOVERY_TOKENS
    assert net.seen[0].tolist() == [[1, 2, 3, 4]]


def test_keys_are_expanded_to_their_query_heads_in_groups(monkeypatch) -> None:
    """4 query heads over 2 key heads: heads 0, 1 read key head 0, heads 2, 3 key head 1."""
    rec = _rec(0, h=4, hkv=2)
    np.testing.assert_array_equal(rec.kv_head, [0, 0, 1, 1])
    c = capture(_loaded([rec], monkeypatch), [1, 2, 3, 4])
    for head, kv in enumerate([0, 0, 1, 1]):
        np.testing.assert_array_equal(c.k[0, head], rec.k[kv])
    assert not np.array_equal(c.k[0, 0], c.k[0, 2])
