"""The tap on a toy model (tests/engine/probe/toy_attention.py, milliseconds to build): sites
numbered in call order with their names, shared calls and cross-attention; each call's q, k,
weights and projections as the Linear weights give them by hand; the modifiers' factors, nested
blocks, cancellation, and what is left after the block and after close (docs/testing.md,
mutation testing)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.errors import Cancelled, ConfigError  # noqa: E402
from engine.probe import tap as tap_mod  # noqa: E402
from engine.probe.tap import (  # noqa: E402
    IDENTITY,
    IMPLEMENTATION,
    Modifier,
    SiteInfo,
    Tap,
    _is_projection,
    active_for,
    active_tap,
    eager_function,
    register,
)
from tests.engine.probe.toy_attention import (  # noqa: E402
    HEADS,
    WIDTH,
    D,
    Toy,
    ToyAttention,
    eager_attention_forward,
)

IDS = torch.tensor([[3, 1, 4, 1, 5]])
N = IDS.shape[1]


def _fresh_register() -> None:
    """Register the capture anew in this process (a process that registered it already, as a
    forked mutation run, would keep its first wrapper and its cached eager functions)."""
    tap_mod._registered.discard(IMPLEMENTATION)
    tap_mod._eager_cache.clear()
    register()


@pytest.fixture
def toy():
    """The toy on the capture, sites discovered (per test: a mutation run credits a fixture's
    code to the tests that ran it, and the toy takes milliseconds)."""
    net = Toy()
    _fresh_register()
    net.set_attn_implementation(IMPLEMENTATION)
    tap = Tap(net)
    sites = tap.discover(lambda: net(IDS))
    return net, tap, sites


def _heads(x: torch.Tensor) -> np.ndarray:
    return x.detach().double().numpy().reshape(1, -1, HEADS, D).transpose(0, 2, 1, 3)


def _hidden(net: Toy, site: int) -> tuple[np.ndarray, np.ndarray]:
    """(input, key source) of a site, by running the toy's layers by hand in float64."""
    with torch.no_grad():
        e = net.embed(IDS)
        h = e + net.a(e, attention_mask=torch.full((N, N), torch.finfo(torch.float32).min)
                      .triu(1)[None, None])
        h1 = h + net.shared(h)
        h2 = h1 + net.shared(h1)
    return {0: (e, e), 1: (h, h), 2: (h1, h1), 3: (h2, e)}[site]


def test_sites_are_numbered_in_call_order_with_names_calls_and_cross(toy) -> None:
    _net, tap, sites = toy
    assert sites == [SiteInfo(0, "a", False, None, 0, None),
                     SiteInfo(1, "shared", False, None, 0, None),
                     SiteInfo(2, "shared", False, None, 1, 1),
                     SiteInfo(3, "cross", True, None, 0, None)]
    assert tap.sites == sites and sites is not tap.sites
    net = toy[0]
    assert tap.modules() == [net.a, net.shared, net.shared, net.cross]
    assert tap.unique_modules() == [net.a, net.shared, net.cross]
    assert {id(net.a), id(net.shared), id(net.cross), id(net)} <= tap.ran


def test_each_call_is_seen_as_its_projections_give_it(toy) -> None:
    net, tap, _sites = toy
    calls = []
    with tap.active(calls.append):
        out = net(IDS).last_hidden_state
    assert [c.site for c in calls] == [0, 1, 2, 3]
    assert [c.module for c in calls] == [net.a, net.shared, net.shared, net.cross]
    for c in calls:
        x, src = _hidden(net, c.site)
        mod = c.module
        wq = mod.q_proj.weight.detach().double().numpy()
        wk = mod.k_proj.weight.detach().double().numpy()
        q = _heads(x @ mod.q_proj.weight.T)
        k = _heads(src @ mod.k_proj.weight.T)
        np.testing.assert_allclose(c.query.numpy(), q, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(c.key.numpy(), k, rtol=1e-5, atol=1e-5)
        # the weights: softmax of the scaled (capped, masked) q.k, from the Linear weights
        xd, sd = x.detach().double().numpy()[0], src.detach().double().numpy()[0]
        qd = (xd @ wq.T).reshape(N, HEADS, D).transpose(1, 0, 2)
        kd = (sd @ wk.T).reshape(N, HEADS, D).transpose(1, 0, 2)
        s = {0: 0.25, 1: D**-0.5, 2: D**-0.5, 3: 0.5}[c.site]
        z = np.einsum("hid,hjd->hij", qd, kd) * s
        if c.site == 0:
            z = 3.0 * np.tanh(z / 3.0)
            z = np.where(np.tril(np.ones((N, N), bool)), z, -np.inf)
        w = np.exp(z - z.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        np.testing.assert_allclose(c.weights.numpy()[0], w, rtol=1e-4, atol=1e-6)
        assert c.extra == {"position_bias": None, "softcap": 3.0 if c.site == 0 else None,
                           "s_aux": None, "sliding_window": None,
                           "scaling": {0: 0.25, 3: 0.5}.get(c.site)}
        assert c.bias is None and (c.mask is None) is (c.site != 0)
        # the projections of this call, in call order: q, k, v with their inputs
        assert len(c.projections) == 3
        for (o, i), lin, inp in zip(c.projections, (mod.q_proj, mod.k_proj, mod.v_proj),
                                    (x, src, src)):
            np.testing.assert_allclose(i.numpy(), inp.numpy(), rtol=1e-6)
            np.testing.assert_allclose(o.numpy(), (inp @ lin.weight.T).detach().numpy(),
                                       rtol=1e-5, atol=1e-6)
        assert c.output.shape == (1, N, HEADS, D)
    # observing changes nothing: the same output as the plain eager toy
    plain = Toy()
    with torch.no_grad():
        np.testing.assert_allclose(out.numpy(), plain(IDS).last_hidden_state.numpy(), rtol=1e-6)
    # the next pass keeps no projection of this one
    assert tap._proj == {}


def test_a_second_block_counts_the_calls_from_zero_again(toy) -> None:
    net, tap, _sites = toy
    for _ in range(2):
        seen = []
        with tap.active(lambda c, seen=seen: seen.append(c.site)):
            net(IDS)
        assert seen == [0, 1, 2, 3]


def test_modifiers_scale_q_and_the_weights_and_drop_the_soft_cap(toy) -> None:
    net, tap, _sites = toy
    base = []
    with tap.active(base.append):
        net(IDS)
    # site 1 (the shared module's first call): q x 2 on the product only
    got = []
    with tap.active(got.append, {1: Modifier(q_factor=2.0)}):
        net(IDS)
    torch.testing.assert_close(got[1].query, base[1].query)  # the query as the module made it
    x, _src = _hidden(net, 1)
    mod = net.shared
    q = (x @ mod.q_proj.weight.T).detach().double().numpy()[0].reshape(N, HEADS, D)
    k = (x @ mod.k_proj.weight.T).detach().double().numpy()[0].reshape(N, HEADS, D)
    z = np.einsum("ihd,jhd->hij", 2 * q, k) * D**-0.5
    w = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(got[1].weights.numpy()[0], w / w.sum(-1, keepdims=True),
                               rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(got[0].weights, base[0].weights)  # site 0 untouched
    # w x 2 at site 2: weights and output doubled there
    got = []
    with tap.active(got.append, {2: Modifier(w_factor=2.0)}):
        net(IDS)
    torch.testing.assert_close(got[2].weights, 2 * base[2].weights)
    # w x 0.5 at site 3 (the last): weights and output halved there
    got = []
    with tap.active(got.append, {3: Modifier(w_factor=0.5)}):
        net(IDS)
    torch.testing.assert_close(got[3].weights, 0.5 * base[3].weights)
    torch.testing.assert_close(got[3].output, 0.5 * base[3].output)
    # the soft-cap off at site 0: the weights are the uncapped softmax, the call still shows 3.0
    got = []
    with tap.active(got.append, {0: Modifier(softcap_off=True)}):
        net(IDS)
    assert got[0].extra["softcap"] == 3.0
    x, _src = _hidden(net, 0)
    q = (x @ net.a.q_proj.weight.T).detach().double().numpy()[0].reshape(N, HEADS, D)
    k = (x @ net.a.k_proj.weight.T).detach().double().numpy()[0].reshape(N, HEADS, D)
    z = np.einsum("ihd,jhd->hij", q, k) * 0.25
    z = np.where(np.tril(np.ones((N, N), bool)), z, -np.inf)
    w = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(got[0].weights.numpy()[0], w / w.sum(-1, keepdims=True),
                               rtol=1e-4, atol=1e-6)
    assert not np.allclose(got[0].weights.numpy(), base[0].weights.numpy(), atol=1e-3)
    # soft-cap off where the call passes none: no soft-cap argument is added
    with tap.active(None, {1: Modifier(softcap_off=True)}):
        net(IDS)


def test_nested_blocks_combine_their_modifiers_and_restore_them(toy) -> None:
    _net, tap, _sites = toy
    assert tap.modifier(1) is IDENTITY
    outer = Modifier(q_factor=2.0, w_factor=0.5)
    with tap.active(None, {1: outer, 2: Modifier(softcap_off=True)}):
        assert tap.modifier(1) == outer
        with tap.active(None, {1: Modifier(q_factor=3.0, w_factor=0.25, softcap_off=True)}):
            assert tap.modifier(1) == Modifier(6.0, 0.125, True)
            assert tap.modifier(2) == Modifier(1.0, 1.0, True)
            assert tap.modifier(0) is IDENTITY
        assert tap.modifier(1) == outer
    assert tap.modifier(1) is IDENTITY and tap.modifier(2) is IDENTITY
    assert tap._observer is None
    assert Modifier(2.0, 3.0, False).combined(Modifier(5.0, 7.0, False)) == Modifier(10, 21, False)
    assert Modifier(softcap_off=True).combined(IDENTITY).softcap_off
    assert IDENTITY.combined(Modifier(softcap_off=True)).softcap_off
    assert IDENTITY == Modifier(1.0, 1.0, False)


def test_cancel_stops_the_pass_at_the_next_site(toy) -> None:
    net, tap, _sites = toy
    seen = []
    with pytest.raises(Cancelled), tap.active(lambda c: seen.append(c.site),
                                                cancelled=lambda: len(seen) >= 2):
        net(IDS)
    assert seen == [0, 1]
    # after the block: not cancelled any more, and no tap is active
    assert not tap._cancelled()
    assert active_tap() is None and active_for(tap) is None
    with tap.active(None):
        assert active_tap() is tap and active_for(tap) is tap
        assert active_for(Tap(torch.nn.Linear(1, 1))) is None
    # the block's modifiers, observer and projections are gone after an exception too
    assert tap.modifier(0) is IDENTITY and tap._observer is None and tap._proj == {}


def test_a_new_attention_call_after_discovery_is_refused(toy) -> None:
    net, tap, _sites = toy
    with pytest.raises(ConfigError) as err, tap.active(None):
        e = net.embed(IDS)
        net.shared(net.shared(net.shared(e)))  # a third call of the shared module
    assert err.value.field == "model"
    assert err.value.message == ("an attention module (ToyAttention) ran that the first pass did "
                                 "not see; this model's attention changes between passes and "
                                 "cannot be audited")
    # a pass started by the model resets the count: the same model runs again
    with tap.active(None):
        net(IDS)


def test_without_an_active_tap_the_wrapper_calls_the_eager_function(toy) -> None:
    net, tap, _sites = toy
    with torch.no_grad():
        out = net(IDS).last_hidden_state  # no active block: no site counted or numbered
    assert tap._calls == {} and len(tap.sites) == 4
    with torch.no_grad():
        np.testing.assert_allclose(out.numpy(), Toy()(IDS).last_hidden_state.numpy(), rtol=1e-6)


def test_close_removes_every_hook_and_discovery_removes_its_own() -> None:
    net = Toy()
    _fresh_register()
    net.set_attn_implementation(IMPLEMENTATION)
    tap = Tap(net)
    assert len(net._forward_pre_hooks) == 1
    tap.discover(lambda: net(IDS))
    # discovery's pre-hooks on every module are gone; the pass hook, one reset hook per site
    # module and one hook per projection stay
    assert sum(len(m._forward_pre_hooks) for m in net.modules()) == 1 + 3
    assert sum(len(m._forward_hooks) for m in net.modules()) == 9
    assert len(tap._hooks) == 1 + 3 + 9
    tap.close()
    assert tap._hooks == []
    assert sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in net.modules()) == 0


def test_projection_hooks_come_first_and_see_the_projections_own_output() -> None:
    net = Toy()
    _fresh_register()
    net.set_attn_implementation(IMPLEMENTATION)
    # an adapter's hook, registered before discovery, that plants a factor in q_proj's output
    net.shared.q_proj.register_forward_hook(lambda _m, _a, out: out * 2.0)
    tap = Tap(net)
    tap.discover(lambda: net(IDS))
    calls = []
    with tap.active(calls.append):
        net(IDS)
    (o, i), = [p for p in calls[1].projections if p[0].shape == (1, N, WIDTH)][:1]
    np.testing.assert_allclose(o.numpy(), (i @ net.shared.q_proj.weight.T).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(calls[1].query.numpy(), 2 * _heads(o), rtol=1e-5, atol=1e-6)


def test_register_is_once_per_name_and_the_mask_function_follows_inner() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    _fresh_register()
    assert IMPLEMENTATION in tap_mod._registered
    assert ALL_MASK_ATTENTION_FUNCTIONS[IMPLEMENTATION] is ALL_MASK_ATTENTION_FUNCTIONS["eager"]
    fn = AttentionInterface._global_mapping[IMPLEMENTATION]
    assert register() == IMPLEMENTATION
    assert AttentionInterface._global_mapping[IMPLEMENTATION] is fn  # not registered again
    # inner: the registered function the wrapper calls, and its mask format
    seen = []

    def marked(module, query, key, value, attention_mask, **kw):
        seen.append(kw.get("scaling"))
        return eager_attention_forward(module, query, key, value, attention_mask, **kw)

    AttentionInterface.register("lab_test_inner", marked)
    ALL_MASK_ATTENTION_FUNCTIONS.register("lab_test_inner", ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    inner = "attention_lab_test_inner"
    try:
        register(inner, "lab_test_inner")
        mod = ToyAttention(scaling=0.5).requires_grad_(False)
        mod.impl = inner
        mod(torch.randn(1, 3, WIDTH))
        assert seen == [0.5]
        assert ALL_MASK_ATTENTION_FUNCTIONS[inner] is ALL_MASK_ATTENTION_FUNCTIONS["sdpa"]
    finally:
        tap_mod._registered.discard(inner)
        for m in (AttentionInterface._global_mapping, ALL_MASK_ATTENTION_FUNCTIONS._global_mapping):
            m.pop(inner, None)
            m.pop("lab_test_inner", None)
    name = "attention_lab_test_sdpa"
    try:
        assert register(name, "sdpa") == name
        assert ALL_MASK_ATTENTION_FUNCTIONS[name] is ALL_MASK_ATTENTION_FUNCTIONS["sdpa"]
        # the wrapper calls SDPA: same output as the toy's eager attention without a mask
        mod = ToyAttention().requires_grad_(False)
        x = torch.randn(1, 4, WIDTH)
        with torch.no_grad():
            want = mod(x)
            mod.impl = name
            got = mod(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    finally:
        tap_mod._registered.discard(name)
        AttentionInterface._global_mapping.pop(name, None)
        ALL_MASK_ATTENTION_FUNCTIONS._global_mapping.pop(name, None)


class _Calls(torch.nn.Module):
    """``att`` called ``times`` times in a row: one attention module shared by its calls."""

    def __init__(self, att: torch.nn.Module, times: int = 1) -> None:
        super().__init__()
        self.att = att
        self.times = times

    def forward(self, x):
        for _ in range(self.times):
            x = self.att(x)
        return x


class _Stray(torch.nn.Module):
    pass


_Stray.__module__ = "engine.errors"  # a file without an eager_attention_forward


def test_the_eager_function_is_the_modules_files_own_or_a_base_classes() -> None:
    from tests.engine.probe import toy_attention

    tap_mod._eager_cache.clear()
    assert eager_function(ToyAttention()) is toy_attention.eager_attention_forward
    assert tap_mod._eager_cache[ToyAttention] is toy_attention.eager_attention_forward
    # the cache is read: a class found once is not looked up again
    tap_mod._eager_cache[ToyAttention] = len
    try:
        assert eager_function(ToyAttention()) is len
    finally:
        tap_mod._eager_cache.clear()
    sub = type("Sub", (ToyAttention,), {"__module__": "engine.errors"})
    assert eager_function(sub()) is toy_attention.eager_attention_forward
    with pytest.raises(ConfigError) as err:
        eager_function(_Stray())
    assert err.value.field == "model"
    assert err.value.message == ("_Stray calls the attention interface but its file has no "
                                 "eager_attention_forward to wrap")
    assert _Stray not in tap_mod._eager_cache


def test_a_projection_is_a_linear_or_gpt2s_conv1d() -> None:
    assert _is_projection(torch.nn.Linear(2, 3))
    assert not _is_projection(torch.nn.Embedding(2, 3))
    assert not _is_projection(torch.nn.LayerNorm(3))
    conv = type("Conv1D", (torch.nn.Module,), {})()
    conv.weight = torch.nn.Parameter(torch.zeros(2, 3))
    assert _is_projection(conv)
    flat = type("Conv1D", (torch.nn.Module,), {})()
    flat.weight = torch.nn.Parameter(torch.zeros(3))
    assert not _is_projection(flat)
    other = type("Conv2D", (torch.nn.Module,), {})()
    other.weight = torch.nn.Parameter(torch.zeros(2, 3))
    assert not _is_projection(other)
    assert not _is_projection(type("Conv1D", (torch.nn.Module,), {})())


def test_projections_are_kept_per_call_only_inside_an_observing_block() -> None:
    net = Toy()
    _fresh_register()
    net.set_attn_implementation(IMPLEMENTATION)
    one = _Calls(net.shared)
    tap = Tap(one)
    # discovery by calling the attention module itself (not the model): counted from zero
    e = net.embed(IDS)
    sites = tap.discover(lambda: one.att(e))
    assert [(s.name, s.call) for s in sites] == [("att", 0)]
    # a projection run outside its module's call is not part of the module's next call
    calls = []
    with tap.active(calls.append):
        net.shared.q_proj(e)
        one(e)
    assert len(calls) == 1 and len(calls[0].projections) == 3
    assert tap._proj == {}
    # nothing is kept outside a block, nor inside a block without an observer
    net.shared.q_proj(e)
    one(e)
    assert tap._proj == {}
    with tap.active(None):
        one(e)
        assert tap._proj == {}


def test_positional_arguments_reach_the_function_by_name_and_weights_may_be_none() -> None:
    """A module passing dropout and scaling positionally; an inner function (SDPA's kind) that
    returns no weights, under a weight factor; a position bias passed on to the call."""
    from transformers import AttentionInterface

    seen = []

    def inner_fn(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
        seen.append((dropout, scaling, kw.get("position_bias")))
        out, _w = eager_attention_forward(module, query, key, value, attention_mask, 0.0,
                                          scaling, **kw)
        return out, None

    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register("lab_test_noweights", inner_fn)
    ALL_MASK_ATTENTION_FUNCTIONS.register("lab_test_noweights", ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    name = "attention_lab_test_noweights"
    try:
        register(name, "lab_test_noweights")
        att = ToyAttention(scaling=0.5, positional=True).requires_grad_(False)
        att.impl = name
        x = torch.randn(1, 3, WIDTH)
        bias = torch.randn(1, HEADS, 3, 3)
        att.position_bias = bias
        calls = []
        tap = Tap(att)
        tap.discover(lambda: att(x))
        with tap.active(calls.append, {0: Modifier(w_factor=0.5)}):
            att(x)
        assert seen[-1][0] == 0.0 and seen[-1][1] == 0.5 and seen[-1][2] is bias
        assert calls[0].weights is None and calls[0].bias is bias
        assert calls[0].extra["position_bias"] is bias and calls[0].extra["scaling"] == 0.5
        # dropout passed positionally reaches the function as dropout
        real = att.forward

        def fwd(hidden):
            b, n, _ = hidden.shape
            q = att.q_proj(hidden).view(b, n, HEADS, D).transpose(1, 2)
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

            return ALL_ATTENTION_FUNCTIONS[name](att, q, q, q, None, 0.25, 0.125)

        att.forward = fwd
        att(x)
        assert seen[-1][:2] == (0.25, 0.125)
        att.forward = real
    finally:
        tap_mod._registered.discard(name)
        for m in (AttentionInterface._global_mapping, ALL_MASK_ATTENTION_FUNCTIONS._global_mapping):
            m.pop(name, None)
            m.pop("lab_test_noweights", None)


def test_a_site_is_named_by_its_path_or_its_class_and_marked_with_its_adapter() -> None:
    class Bare(torch.nn.Module):
        """Attention of the input itself: no projection inside."""

        def forward(self, x):
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

            q = x.view(1, -1, HEADS, D).transpose(1, 2)
            return ALL_ATTENTION_FUNCTIONS[IMPLEMENTATION](self, q, q, q, None)[0]

    Bare.__module__ = ToyAttention.__module__  # (its eager function is the toy's)

    class Holder(torch.nn.Module):
        """Calls one attention module and the other by forward() (its hooks do not run)."""

        def __init__(self, first, direct):
            super().__init__()
            self.first = first
            self.direct = direct

        def forward(self, x):
            return self.direct.forward(self.first(x)).reshape(x.shape)

    _fresh_register()
    a, b = ToyAttention().requires_grad_(False), Bare()
    a.impl = IMPLEMENTATION
    model = Holder(a, b)
    tap = Tap(model)
    tap.mark_adapter(b, "toy adapter")
    x = torch.randn(1, 3, WIDTH)
    sites = tap.discover(lambda: model(x))
    assert [(s.name, s.adapter) for s in sites] == [("first", None), ("direct", "toy adapter")]
    calls = []
    with tap.active(calls.append):
        model(x)
    assert len(calls[0].projections) == 3  # a's hooks ran
    assert calls[1].projections == []  # b ran by forward(), no projection: an empty list


def test_every_later_call_of_a_shared_module_shares_with_its_first() -> None:
    _fresh_register()
    att = ToyAttention().requires_grad_(False)
    att.impl = IMPLEMENTATION
    model = _Calls(att, times=3)
    tap = Tap(model)
    sites = tap.discover(lambda: model(torch.randn(1, 3, WIDTH)))
    assert [(s.index, s.call, s.shares_with) for s in sites] == [(0, 0, None), (1, 1, 0),
                                                                 (2, 2, 0)]
