"""The BERT family's hooks (engine/probe/adapters_bert.py) on hand-made stand-in modules: each
lays out its inline attention as one family does (projections batch first, as Conv1d channels,
or time first; probabilities through a dropout submodule or handed back only when asked), so a
test runs in milliseconds where a tiny transformers model per family takes seconds
(test_adapters_bert_calls.py checks the real ones).

By hand: 2 heads of d = 3 (width 6), so the product's factor is 1/sqrt(3); head i of a
projection is its columns (Conv1d: channels) 3i .. 3i + 2; the expected probabilities are a
float64 softmax written out here, never the adapter's.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from engine.errors import ConfigError
from engine.probe import adapters_bert as ab
from engine.probe.adapters_deberta import install_deberta
from engine.probe.tap import Modifier, Tap

W, H, D = 6, 2, 3
LOW = torch.finfo(torch.float32).min


def _split(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, tokens, d) of (batch, tokens, width) by hand: head i is columns 3i..3i+2."""
    return torch.stack([x[:, :, i * D:(i + 1) * D] for i in range(H)], dim=1)


def _softmax(q: torch.Tensor, k: torch.Tensor, add: torch.Tensor | float = 0.0,
             f: float = 1.0) -> torch.Tensor:
    """softmax(f q k^T / sqrt(3) + add) in float64, written out (exp over its row sum)."""
    s = f * (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(3.0)
    s = s + (add.double() if isinstance(add, torch.Tensor) else add)
    e = torch.exp(s - s.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


class _Toy(nn.Module):
    """softmax(q k^T / sqrt(d) + mask) v computed inline, in the layout its family names:
    ``layout`` "batch" (batch, tokens, width), "conv" (batch, channels, tokens: Conv1d
    projections) or "time" (tokens, batch, width; q divided in place, as Longformer does);
    ``pairs``: the projections return (output, scale) as I-BERT's quantizers do."""

    def __init__(self, fam: ab.Family, layout: str = "batch", pairs: bool = False,
                 skip_probs: bool = False, twice: bool = False, out_dict: bool = False) -> None:
        super().__init__()
        self.fam, self.layout, self.pairs = fam, layout, pairs
        self.skip_probs, self.twice, self.out_dict = skip_probs, twice, out_dict
        for name in (fam.q, fam.k, fam.v):
            proj = nn.Conv1d(W, W, 1) if layout == "conv" else nn.Linear(W, W)
            setattr(self, name, _Pair(proj) if pairs else proj)
        if fam.probs is not None:
            setattr(self, fam.probs, nn.Dropout(0.0))
        if "." in fam.heads:
            self.config = SimpleNamespace(n_head=H, d_head=D)
        else:
            setattr(self, fam.heads, H)
            setattr(self, fam.head_size, D)

    def proj(self, name: str, x: torch.Tensor) -> torch.Tensor:
        out = getattr(self, name)(x)
        return out[0] if self.pairs else out

    def attend(self, x: torch.Tensor, add: torch.Tensor | None, bias: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = (self.proj(n, x) for n in (self.fam.q, self.fam.k, self.fam.v))
        if self.twice:  # (a second call of the key projection, not part of the product)
            self.proj(self.fam.k, torch.zeros_like(x))
        if self.layout == "conv":
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        elif self.layout == "time":
            q /= math.sqrt(D)  # (in place, on the projection's own output)
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        s = _split(q) @ _split(k).transpose(-1, -2)
        if self.layout != "time":
            s = s / math.sqrt(D)
        if bias is not None:
            s = s + bias
        if add is not None:
            s = s + add
        p = torch.softmax(s, dim=-1)
        if self.fam.probs is None:
            p = nn.functional.dropout(p, 0.0, training=False)
        elif not self.skip_probs:
            p = getattr(self, self.fam.probs)(p)
        ctx = (p @ _split(v)).transpose(1, 2).reshape(q.shape)
        if self.layout == "conv":
            ctx = ctx.transpose(1, 2)
        elif self.layout == "time":
            ctx = ctx.transpose(0, 1)
        return ctx, p

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, **kwargs):
        ctx, p = self.attend(hidden_states, attention_mask, kwargs.get("position_bias"))
        out = (ctx, p) if output_attentions else (ctx,)
        return {"context": out if len(out) > 1 else ctx} if self.out_dict else out


class _Pair(nn.Module):
    def __init__(self, proj: nn.Module) -> None:
        super().__init__()
        self.proj = proj

    def forward(self, x):
        return self.proj(x), torch.tensor(0.5)


class _Xlm(_Toy):
    """XLM's layout: a 1/0 mask (1: the key is seen) as the second argument, probabilities
    handed back only when asked (functional dropout)."""

    def forward(self, input, mask, kv=None, cache=None, output_attentions=False, times=1.0):
        add = torch.where(_expand(mask, input.shape[1]) != 0, 0.0, LOW)
        ctx, p = self.attend(input, add, None)
        return (times * ctx, p) if output_attentions else (times * ctx,)


def _expand(mask: torch.Tensor, n: int) -> torch.Tensor:
    m = mask[:, None, None, :] if mask.dim() == 2 else mask[:, None]
    return m.expand(m.shape[0], 1, n, m.shape[-1])


class _Net(nn.Module):
    def __init__(self, *layers: nn.Module) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x, *args, **kwargs):
        outs = [layer(x, *args, **kwargs) for layer in self.layers]
        return outs


FAM = ab.Family("Toy", "toy")
XLM = ab.Family("Toy", "toy-xlm", q="q_lin", k="k_lin", v="v_lin", probs=None, heads="n_heads",
                head_size="head_dim", mask="mask", keep_mask=True)


def _site(fam: ab.Family = FAM, cls: type = _Toy, **kw) -> tuple[Tap, _Toy, ab._BertSite]:
    torch.manual_seed(0)
    mod = cls(fam, **kw)
    for p in mod.parameters():
        p.data.normal_(0.0, 1.0)
    net = _Net(mod)
    tap = Tap(net)
    return tap, mod, ab._BertSite(tap, mod, fam)


def _run(tap: Tap, *args, mods=None, **kwargs):
    """(the reports, the first layer's output) of one pass of the tap's model."""
    seen: list = []
    with torch.no_grad(), tap.active(seen.append, mods):
        out = tap.model(*args, **kwargs)
    return seen, out[0]


def _x(layout: str = "batch", b: int = 2, n: int = 4) -> torch.Tensor:
    torch.manual_seed(1)
    x = torch.randn(b, n, W)
    return {"batch": x, "conv": x.transpose(1, 2).contiguous(), "time": x.transpose(0, 1)}[layout]


def _by_hand(mod: _Toy, x: torch.Tensor, layout: str = "batch") -> tuple[torch.Tensor, ...]:
    """(q, k, v) heads of the projections' own outputs, split by hand."""
    with torch.no_grad():
        q, k, v = (mod.proj(n, x) for n in (mod.fam.q, mod.fam.k, mod.fam.v))
    if layout == "conv":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    elif layout == "time":
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    return _split(q), _split(k), _split(v)


def _pad_mask() -> torch.Tensor:
    """Additive (2, 1, 1, 4): the second text's last key is padding."""
    add = torch.zeros(2, 1, 1, 4)
    add[1, ..., 3] = LOW
    return add


@pytest.mark.parametrize("layout", ["batch", "conv", "time"])
def test_q_k_mask_factor_and_weights_by_hand_in_each_layout(layout) -> None:
    fam = ab.Family("Toy", "toy", seq_first=layout == "time", conv=layout == "conv",
                    probs=None if layout == "time" else "dropout")
    tap, mod, _ = _site(fam, layout=layout)
    x, add = _x(layout), _pad_mask()
    q, k, _v = _by_hand(mod, x, layout)
    tap.discover(lambda: tap.model(x, add))
    seen, out = _run(tap, x, add)
    assert len(seen) == 1
    c = seen[0]
    if layout != "conv":  # (the tap's own record of the projections: q as it came out)
        raw = x @ mod.query.weight.T + mod.query.bias
        torch.testing.assert_close(c.projections[0][0], raw)
    assert c.site == 0 and c.module is mod
    assert c.query.shape == c.key.shape == (2, 2, 4, 3)
    torch.testing.assert_close(c.query, q)  # (Longformer's in-place division not seen)
    torch.testing.assert_close(c.key, k)
    assert c.mask is add and c.bias is None
    assert c.extra == {"scaling": pytest.approx(1 / math.sqrt(3))}
    assert c.extra["scaling"] == 1.0 / math.sqrt(3)
    want = _softmax(q, k, add)
    torch.testing.assert_close(c.weights.double(), want, atol=1e-6, rtol=0)
    assert float(c.weights[1, :, :, 3].max()) == 0.0  # (padding)
    assert torch.equal(c.output, out[0]) and len(out) == 1


def test_the_second_call_of_a_projection_and_a_call_outside_are_not_kept() -> None:
    tap, mod, site = _site(twice=True)
    x = _x()
    q, k, _v = _by_hand(mod, x)
    for f in (1.0, 2.0):
        seen, _ = _run(tap, x, mods={0: Modifier(q_factor=f)})
        torch.testing.assert_close(seen[0].key, k)
        torch.testing.assert_close(seen[0].weights.double(), _softmax(q, k, f=f), atol=1e-6,
                                   rtol=0)
    # a projection called by itself under the tap: nothing kept, nothing scaled
    with torch.no_grad(), tap.active(lambda c: None, {0: Modifier(q_factor=2.0, w_factor=3.0)}):
        torch.testing.assert_close(mod.key(x), x @ mod.key.weight.T + mod.key.bias)
        torch.testing.assert_close(mod.value(x), x @ mod.value.weight.T + mod.value.bias)
        mod.dropout(torch.ones(2))
    assert site.state == {}


@pytest.mark.parametrize("f", [0.5, 2.0])
def test_a_factor_on_q_k_reaches_the_product_not_the_reported_q_and_k(f) -> None:
    tap, mod, _ = _site()
    x = _x()
    q, k, v = _by_hand(mod, x)
    seen, out = _run(tap, x, mods={0: Modifier(q_factor=f)})
    c = seen[0]
    torch.testing.assert_close(c.query, q)
    torch.testing.assert_close(c.key, k)
    want = _softmax(q, k, f=f)
    torch.testing.assert_close(c.weights.double(), want, atol=1e-6, rtol=0)
    ctx = (want @ v.double()).transpose(1, 2).reshape(2, 4, W)
    torch.testing.assert_close(out[0].double(), ctx, atol=1e-5, rtol=0)


@pytest.mark.parametrize("f", [0.5, 2.0, 3.0])
@pytest.mark.parametrize("pairs", [False, True])
def test_a_factor_on_the_weights_scales_them_and_the_output(f, pairs) -> None:
    tap, _mod, _ = _site(pairs=pairs)
    x = _x()
    plain, out0 = _run(tap, x)
    seen, out = _run(tap, x, mods={0: Modifier(w_factor=f)})
    torch.testing.assert_close(seen[0].weights, f * plain[0].weights)
    torch.testing.assert_close(out[0], f * out0[0])
    torch.testing.assert_close(seen[0].output, out[0])
    torch.testing.assert_close(seen[0].query, plain[0].query)


@pytest.mark.parametrize("f", [1.0, 2.0])
def test_a_projection_returning_a_pair_keeps_its_second_item(f) -> None:
    """(I-BERT's quantizers return (output, scale): the factor goes on the first only.)"""
    tap, mod, _ = _site(pairs=True)
    x = _x()
    q, k, _v = _by_hand(mod, x)
    got, values = [], []
    mod.key.register_forward_hook(lambda _m, _a, out: got.append(out))
    mod.value.register_forward_hook(lambda _m, _a, out: values.append(out))
    seen, _ = _run(tap, x, mods={0: Modifier(q_factor=f, w_factor=f)})
    assert isinstance(got[0], tuple) and len(got[0]) == 2 and float(got[0][1]) == 0.5
    assert isinstance(values[0], tuple) and len(values[0]) == 2 and float(values[0][1]) == 0.5
    torch.testing.assert_close(values[0][0],
                               f * (x @ mod.value.proj.weight.T + mod.value.proj.bias))
    torch.testing.assert_close(got[0][0], f * (x @ mod.key.proj.weight.T + mod.key.proj.bias))
    torch.testing.assert_close(seen[0].query, q)
    torch.testing.assert_close(seen[0].key, k)
    torch.testing.assert_close(seen[0].weights.double(), f * _softmax(q, k, f=f), atol=1e-6,
                               rtol=0)


def test_a_projection_under_the_tap_before_any_call_of_its_module_is_left_alone() -> None:
    tap, mod, site = _site()
    x = _x()
    with torch.no_grad(), tap.active(lambda c: None, {0: Modifier(q_factor=2.0, w_factor=3.0)}):
        torch.testing.assert_close(mod.key(x), x @ mod.key.weight.T + mod.key.bias)
        torch.testing.assert_close(mod.value(x), x @ mod.value.weight.T + mod.value.bias)
    assert site.state == {}


def test_outside_the_tap_nothing_changes_and_nothing_is_reported() -> None:
    tap, mod, site = _site()
    x = _x()
    with torch.no_grad():
        plain = mod(x)
    _run(tap, x)  # (the site is numbered)
    with torch.no_grad():
        again = mod(x)
        alone = mod.key(x)
    assert torch.equal(again[0], plain[0]) and site.state == {}
    torch.testing.assert_close(alone, x @ mod.key.weight.T + mod.key.bias)


def test_an_unread_probability_is_no_report_and_the_output_is_the_modules() -> None:
    tap, _mod, _ = _site(skip_probs=True)
    x = _x()
    seen, out = _run(tap, x)
    assert seen == [] and len(out) == 1
    seen, out = _run(tap, x, output_attentions=True)
    assert seen == [] and len(out) == 2


def test_a_dict_output_reports_its_first_value() -> None:
    tap, _mod, _ = _site(out_dict=True)
    x = _x()
    seen, out = _run(tap, x)
    assert torch.equal(seen[0].output, out["context"])
    seen, out = _run(tap, x, output_attentions=True)
    assert torch.equal(seen[0].output, out["context"][0])


def test_two_layers_are_two_sites_in_call_order() -> None:
    torch.manual_seed(0)
    a, b = _Toy(FAM), _Toy(FAM)
    net = _Net(a, b)
    tap = Tap(net)
    assert ab.install(tap, net, ab.Family("_Toy", "toy")) == 2
    seen, _ = _run(tap, _x())
    assert [c.site for c in seen] == [0, 1] and [c.module for c in seen] == [a, b]
    assert [(s.name, s.adapter) for s in tap.sites] == [("layers.0", "toy"), ("layers.1", "toy")]


# -- XLM: probabilities only when asked, a 1/0 mask ------------------------------------------------

@pytest.mark.parametrize("asked", [False, True])
@pytest.mark.parametrize("how", ["keyword", "positional", "after", "fourth"])
def test_xlm_asks_for_the_probabilities_and_strips_them(asked, how) -> None:
    """(``after``: an argument after output_attentions, positional too; ``fourth``: the four
    before it positional, output_attentions by keyword.)"""
    tap, mod, _ = _site(XLM, cls=_Xlm)
    x = _x()
    keep = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    q, k, _v = _by_hand(mod, x)
    args, kw = {"positional": ((x, keep, None, None, asked), {}),
                "after": ((x, keep, None, None, asked, 2.0), {}),
                "fourth": ((x, keep, None, None), {"output_attentions": asked}),
                "keyword": ((x, keep), {"output_attentions": asked})}[how]
    seen, out = _run(tap, *args, **kw)
    assert len(out) == (2 if asked else 1)
    c = seen[0]
    add = torch.zeros(2, 1, 4, 4)
    add[1, ..., 3] = LOW
    assert torch.equal(c.mask, add)
    want = _softmax(q, k, add)
    torch.testing.assert_close(c.weights.double(), want, atol=1e-6, rtol=0)
    torch.testing.assert_close(c.query, q)
    if asked:
        assert c.weights is out[1]
    with torch.no_grad():  # (the plain module: the same output)
        plain = mod(*args, **kw)
    assert torch.equal(plain[0], out[0]) and len(plain) == len(out)
    assert torch.equal(out[0], seen[0].output)


def test_xlm_with_a_factor_on_the_weights_hands_back_the_scaled_ones() -> None:
    tap, _mod, _ = _site(XLM, cls=_Xlm)
    x, keep = _x(), torch.ones(2, 4)
    plain, _o = _run(tap, x, keep)
    seen, out = _run(tap, x, keep, mods={0: Modifier(w_factor=2.0)})
    torch.testing.assert_close(seen[0].weights, 2.0 * plain[0].weights)
    assert len(out) == 1


def test_a_causal_xlm_mask_reads_per_query() -> None:
    tap, mod, _ = _site(XLM, cls=_Xlm)
    x = _x()
    causal = torch.tril(torch.ones(4, 4))[None].expand(2, 4, 4)
    q, k, _v = _by_hand(mod, x)
    seen, _ = _run(tap, x, causal)
    add = torch.where(torch.tril(torch.ones(4, 4)) != 0, 0.0, LOW)[None, None].expand(2, 1, 4, 4)
    assert torch.equal(seen[0].mask, add)
    torch.testing.assert_close(seen[0].weights.double(), _softmax(q, k, add), atol=1e-6, rtol=0)


def test_xlm_without_a_mask_reports_none() -> None:
    class NoMask(_Xlm):
        def forward(self, input, mask=None, output_attentions=False):
            ctx, p = self.attend(input, None, None)
            return (ctx, p) if output_attentions else (ctx,)

    torch.manual_seed(0)
    mod = NoMask(XLM)
    tap = Tap(_Net(mod))
    ab._BertSite(tap, mod, XLM)
    seen, _ = _run(tap, _x())
    assert seen[0].mask is None


# -- terms: the position bias, kwargs, dotted attributes -----------------------------------------

def test_a_position_bias_from_the_kwargs_is_the_additive_term() -> None:
    fam = ab.Family("Toy", "toy-mpnet", terms=ab._mpnet_bias)
    tap, mod, _ = _site(fam)
    x = _x()
    torch.manual_seed(2)
    bias = torch.randn(1, 2, 4, 4)
    q, k, _v = _by_hand(mod, x)
    seen, _ = _run(tap, x, position_bias=bias)
    c = seen[0]
    assert c.bias is bias and c.mask is None
    assert c.extra == {"scaling": 1 / math.sqrt(3), "bias_kind": "relative position bias"}
    torch.testing.assert_close(c.weights.double(), _softmax(q, k, bias), atol=1e-6, rtol=0)


def test_heads_and_head_size_read_through_a_dotted_path() -> None:
    fam = ab.Family("Toy", "toy-funnel", heads="config.n_head", head_size="config.d_head")
    tap, mod, _ = _site(fam)
    x = _x()
    q, _k, _v = _by_hand(mod, x)
    seen, _ = _run(tap, x)
    torch.testing.assert_close(seen[0].query, q)
    assert ab._attr(SimpleNamespace(a=SimpleNamespace(b=3.0)), "a.b") == 3
    assert type(ab._attr(SimpleNamespace(a=SimpleNamespace(b=3.0)), "a.b")) is int


def test_a_refusal_reads_the_bound_arguments_and_kwargs() -> None:
    fam = ab.Family("Toy", "toy-luke", refuse=ab._luke_refuse)
    tap, mod, _ = _site(fam)
    mod.use_entity_aware_attention = True
    x = _x()
    seen, _ = _run(tap, x)
    assert len(seen) == 1
    with pytest.raises(ConfigError, match=r"^model: LUKE's entity-aware attention \(four query "
                                          r"projections, one per word/entity pair\) is not "
                                          r"audited; audit the words alone$"):
        _run(tap, x, entity_hidden_states=torch.zeros(2, 1, W))
    with torch.no_grad():  # (outside the tap: no refusal)
        mod(x, entity_hidden_states=torch.zeros(2, 1, W))


# -- the families' own terms and refusals, called with stand-ins ----------------------------------

class _Rotary:
    def apply_rotary_position_embeddings(self, pos, q, k):
        return q + pos, k - pos, "v"


def test_rotary_turns_q_and_k_only_for_self_attention_with_positions() -> None:
    q, k, mask, w = torch.ones(1, 1, 2, 3), torch.full((1, 1, 2, 3), 2.0), object(), object()
    pos = torch.full((1, 1, 2, 3), 0.5)
    got = ab._rotary(_Rotary(), {"sinusoidal_pos": pos}, q, k, mask, w)
    assert torch.equal(got[0], q + 0.5) and torch.equal(got[1], k - 0.5)
    assert got[2:] == (mask, None, w, None)
    for args in ({}, {"sinusoidal_pos": pos, "encoder_hidden_states": torch.zeros(1)}):
        got = ab._rotary(_Rotary(), args, q, k, mask, w)
        assert got[0] is q and got[1] is k and got[2:] == (mask, None, w, None)
    got = ab._rotary(_Rotary(), {"sinusoidal_pos": pos, "encoder_hidden_states": None}, q, k,
                     mask, w)
    assert torch.equal(got[0], q + 0.5)


def test_mpnet_bias_passes_the_encoders_position_bias() -> None:
    q, k, mask, w, bias = (object() for _ in range(5))
    assert ab._mpnet_bias(None, {"position_bias": bias}, q, k, mask, w) == (
        q, k, mask, bias, w, "relative position bias")
    assert ab._mpnet_bias(None, {}, q, k, mask, w)[3] is None


class _Funnel:
    """Funnel's relative terms as stand-ins: each returns a constant and keeps its arguments."""

    scale = 0.25

    def __init__(self) -> None:
        self.r_w_bias = torch.tensor([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]])  # (heads, d)
        self.got: dict = {}

    def relative_positional_attention(self, pos, qh, klen, cls_mask):
        self.got["pos"] = (pos, qh.clone(), klen, cls_mask)
        return torch.full((1, 2, 3, 4), 10.0)

    def relative_token_type_attention(self, token_types, qh, cls_mask):
        self.got["tt"] = (token_types, qh.clone(), cls_mask)
        return torch.full((1, 2, 3, 4), 100.0)


@pytest.mark.parametrize("f", [1.0, 2.0])
def test_funnel_terms_by_hand(f) -> None:
    m = _Funnel()
    torch.manual_seed(3)
    q, k = torch.randn(1, 2, 3, 3), torch.randn(1, 2, 4, 3)  # (batch, heads, tokens, d)
    keep = torch.tensor([[1, 1, 0, 1]])
    w = torch.rand(1, 2, 3, 4)
    args = {"attention_inputs": ("P", "T", keep, "C")}
    got = ab._funnel_terms(m, args, q, k, None, w, f)
    assert got[0] is q and got[1] is k and got[4] is w
    assert got[5] == "relative position and token-type terms"
    pos, qh, klen, cls_mask = m.got["pos"]
    assert (pos, klen, cls_mask) == ("P", 4, "C") and m.got["tt"][0::2] == ("T", "C")
    want_qh = torch.stack([0.25 * q[0, :, i, :] for i in range(3)])[None]  # (1, tokens, heads, d)
    torch.testing.assert_close(qh, want_qh)
    torch.testing.assert_close(m.got["tt"][1], want_qh)
    want = torch.zeros(1, 2, 3, 4)
    for n in range(2):
        for j in range(4):
            rk = sum(float(m.r_w_bias[n, e]) * float(k[0, n, j, e]) for e in range(3))
            want[0, n, :, j] = 110.0 + 0.25 * f * rk
    torch.testing.assert_close(got[3], want)
    assert got[2].shape == (1, 1, 1, 4)
    assert got[2][0, 0, 0].tolist() == [0.0, 0.0, LOW, 0.0]
    plain = ab._funnel_terms(m, {"attention_inputs": ("P", "T", None, "C")}, q, k, None, w)
    assert plain[2] is None
    if f == 1.0:  # (the factor's default: none)
        torch.testing.assert_close(plain[3], want)


def test_longformers_band_unfolds_into_the_matrix_with_its_mask() -> None:
    b, n, h, half = 2, 5, 2, 1
    torch.manual_seed(4)
    band = torch.rand(b, n, h, 2 * half + 1, dtype=torch.float64) + 1.0  # (none of it 0)
    padded = torch.tensor([[False] * 5, [False, False, False, False, True]])
    got = ab._band(SimpleNamespace(one_sided_attn_window_size=half),
                   {"is_index_masked": padded}, "q", "k", None, band)
    assert got[:2] == ("q", "k") and got[3] is None and got[5] is None
    full, add = got[4], got[2]
    assert full.shape == (b, h, n, n) and full.dtype == torch.float64
    assert add.shape == (b, 1, n, n)
    for bi in range(b):
        for i in range(n):
            for j in range(n):
                near = abs(i - j) <= half
                for hi in range(h):
                    want = float(band[bi, i, hi, j - i + half]) if near else 0.0
                    assert float(full[bi, hi, i, j]) == want, (bi, hi, i, j)
                seen = near and not padded[bi, j] and not padded[bi, i]
                assert float(add[bi, 0, i, j]) == (0.0 if seen else LOW), (bi, i, j)


def test_the_refusals_by_their_words() -> None:
    ns = SimpleNamespace
    assert ab._ibert_refuse(ns(quant_mode=False), {}) is None
    assert ab._ibert_refuse(ns(), {}) is None
    assert ab._ibert_refuse(ns(quant_mode=True), {}) == (
        "ibert has no softmax attention: in quant_mode it computes an integer approximation "
        "(IntSoftmax: a polynomial exp, 8-bit probabilities on quantized q and k), its weights "
        "no softmax over q.k; there is no attention scale to audit (quant_mode false computes "
        "the exact softmax)")
    assert ab._nystrom_refuse(ns(num_landmarks=64, seq_len=64), {}) is None
    assert ab._nystrom_refuse(ns(num_landmarks=8, seq_len=16), {}) == (
        "nystromformer has no softmax attention: it approximates it by the Nystrom method (8 "
        "landmarks for segment_means_seq_len 16), its weights no softmax over q.k; there is no "
        "attention scale to audit")
    assert ab._longformer_refuse(None, {}) is None
    assert ab._longformer_refuse(None, {"is_global_attn": False}) is None
    assert ab._longformer_refuse(None, {"is_global_attn": True}) == (
        "longformer's global attention tokens are not audited (its sliding-window attention "
        "is): audit a text without global attention")
    e = torch.zeros(1)
    assert ab._luke_refuse(ns(), {"entity_hidden_states": e}) is None
    assert ab._luke_refuse(ns(use_entity_aware_attention=False), {"entity_hidden_states": e}) \
        is None
    assert ab._luke_refuse(ns(use_entity_aware_attention=True), {}) is None
    assert ab._luke_refuse(ns(use_entity_aware_attention=True), {"entity_hidden_states": e}) == (
        "LUKE's entity-aware attention (four query projections, one per word/entity pair) is "
        "not audited; audit the words alone")


def test_each_familys_pieces_by_name() -> None:
    """Where transformers' modules keep them (their modeling files, read by hand)."""
    fams = ab.FAMILIES
    plain = ("query", "key", "value", "dropout", "num_attention_heads", "attention_head_size",
             "attention_mask", False, False, False)
    for name, cls in (("megatron-bert", "MegatronBertSelfAttention"),
                      ("rembert", "RemBertSelfAttention"), ("tapas", "TapasSelfAttention"),
                      ("convbert", "ConvBertSelfAttention"), ("big_bird", "BigBirdSelfAttention"),
                      ("roformer", "RoFormerSelfAttention"), ("luke", "LukeSelfAttention"),
                      ("squeezebert", "SqueezeBertSelfAttention"),
                      ("nystromformer", "NystromformerSelfAttention")):
        f = fams[name]
        assert (f.cls, f.name) == (cls, name)
        want = plain if name != "squeezebert" else plain[:7] + (True, False, False)
        if name == "nystromformer":
            want = plain[:3] + (None,) + plain[4:]
        assert (f.q, f.k, f.v, f.probs, f.heads, f.head_size, f.mask, f.conv, f.keep_mask,
                f.seq_first) == want, name
    assert fams["roformer"].terms is ab._rotary and fams["mpnet"].terms is ab._mpnet_bias
    assert fams["luke"].refuse is ab._luke_refuse and fams["ibert"].refuse is ab._ibert_refuse
    assert fams["nystromformer"].refuse is ab._nystrom_refuse
    assert [fams[n].terms for n in ("megatron-bert", "luke", "xlm", "ibert")] == [None] * 4
    m = fams["mpnet"]
    assert (m.cls, m.q, m.k, m.v, m.probs) == ("MPNetSelfAttention", "q", "k", "v", "dropout")
    i = fams["ibert"]
    assert (i.cls, i.q, i.k, i.v) == ("IBertSelfAttention", "query_activation", "key_activation",
                                      "value_activation")
    x = fams["xlm"]
    assert (x.cls, x.name, x.q, x.k, x.v, x.probs, x.heads, x.head_size, x.mask, x.keep_mask) == (
        "MultiHeadAttention", "xlm", "q_lin", "k_lin", "v_lin", None, "n_heads", "head_dim",
        "mask", True)
    u = fams["funnel"]
    assert (u.cls, u.q, u.k, u.v, u.probs, u.heads, u.head_size, u.mask, u.terms) == (
        "FunnelRelMultiheadAttention", "q_head", "k_head", "v_head", "attention_dropout",
        "config.n_head", "config.d_head", "", ab._funnel_terms)
    lo = fams["longformer"]
    assert (lo.cls, lo.probs, lo.heads, lo.head_size, lo.seq_first, lo.terms, lo.refuse) == (
        "LongformerSelfAttention", None, "num_heads", "head_dim", True, ab._band,
        ab._longformer_refuse)


# -- the installers ----------------------------------------------------------------------------

def test_each_adapter_installs_its_own_family() -> None:
    adapters = ab.bert_adapters()
    assert adapters["deberta"] is install_deberta and adapters["deberta-v2"] is install_deberta
    for name in ("mpnet", "xlm", "flaubert", "tapas"):
        fam = ab.FAMILIES[name]
        cls = type(fam.cls, (_Toy,), {})
        torch.manual_seed(0)
        net = _Net(cls(fam), nn.Linear(W, W))
        tap = Tap(net)
        assert adapters[name](tap, net) == 1
        assert tap._adapters == {id(net.layers[0]): fam.name}


class BigBirdSelfAttention(_Toy):
    pass


class BigBirdBlockSparseAttention(_Toy):
    pass


class BigBirdAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.self = BigBirdSelfAttention(FAM)

    def forward(self, x, *args, **kwargs):
        return self.self(x, *args, **kwargs)


def _bird(n: int = 2) -> tuple[Tap, _Net]:
    torch.manual_seed(0)
    net = _Net(*(BigBirdAttention() for _ in range(n)))
    tap = Tap(net)
    assert ab.install_big_bird(tap, net) == n
    return tap, net


def test_big_bird_reads_whichever_full_attention_module_runs() -> None:
    tap, net = _bird()
    x = _x()
    with torch.no_grad():
        net(x)  # (outside the tap: nothing attached)
    assert tap._adapters == {}
    net.layers[1].self = BigBirdSelfAttention(FAM)  # (swapped, as set_attention_type does)
    tap.discover(lambda: net(x))
    inner = [layer.self for layer in net.layers]
    assert [(s.name, s.adapter) for s in tap.sites] == [
        ("layers.0.self", "big_bird"), ("layers.1.self", "big_bird")]
    assert tap._adapters == {id(m): "big_bird" for m in inner}
    for _ in range(2):  # (hooks attached once: one report per call)
        seen, _ = _run(tap, x)
        assert [c.module for c in seen] == inner
        q, k, _v = _by_hand(inner[1], x)
        torch.testing.assert_close(seen[1].query, q)
        torch.testing.assert_close(seen[1].weights.double(), _softmax(q, k), atol=1e-6, rtol=0)


def test_big_bird_outside_the_model_is_named_by_its_class() -> None:
    tap = Tap(_Net())
    late = BigBirdAttention()  # (a module the tap did not name)
    assert ab.install_big_bird(tap, late) == 1
    with torch.no_grad(), tap.active(lambda c: None):
        late(_x())
    assert [s.name for s in tap.sites] == ["BigBirdAttention.self"]


def test_big_birds_block_sparse_attention_is_refused_under_the_tap_only() -> None:
    tap, net = _bird(1)
    net.layers[0].self = BigBirdBlockSparseAttention(FAM)
    with torch.no_grad():
        net(_x())
    with pytest.raises(ConfigError) as err:
        _run(tap, _x())
    assert err.value.field == "model" and err.value.message == (
        "big_bird's block-sparse attention (a text longer than its full-attention limit) mixes "
        "random key blocks; the audit reads its full attention only: audit a shorter text")


def test_heads_split_by_hand() -> None:
    t = torch.arange(2 * 3 * W, dtype=torch.float32).reshape(2, 3, W)
    got = ab._heads(t, H, D, False)
    assert got.shape == (2, H, 3, D)
    assert got[1, 1, 2].tolist() == [t[1, 2, 3].item(), t[1, 2, 4].item(), t[1, 2, 5].item()]
    c = t.transpose(1, 2).contiguous()  # (batch, channels, tokens)
    got = ab._heads(c, H, D, True)
    assert got.shape == (2, H, 3, D)
    assert got[1, 1, 2].tolist() == [c[1, 3, 2].item(), c[1, 4, 2].item(), c[1, 5, 2].item()]


def test_the_terms_get_the_call_and_the_factor_on_q_k() -> None:
    """A family's terms see the module, the bound arguments, q and k as heads, the mask, the
    weights (already times a factor on them) and the factor on q.k; what they return is reported."""
    got: dict = {}
    bias = torch.zeros(2, 2, 4, 4)

    def terms(m, args, q, k, mask, w, f=1.0):
        got.update(m=m, args=args, q=q, k=k, mask=mask, w=w, f=f)
        return q, k, mask, bias, w * 0.5, "a term"

    fam = ab.Family("Toy", "toy-terms", terms=terms)
    tap, mod, _ = _site(fam)
    x, add = _x(), _pad_mask()
    q, k, _v = _by_hand(mod, x)
    plain, _o = _run(tap, x, add)
    seen, _o = _run(tap, x, add, mods={0: Modifier(q_factor=2.0, w_factor=3.0)})
    assert got["m"] is mod and got["mask"] is add and got["f"] == 2.0
    assert set(got["args"]) == {"hidden_states", "attention_mask"} and got["args"]["hidden_states"] is x
    torch.testing.assert_close(got["q"], q)
    torch.testing.assert_close(got["k"], k)
    torch.testing.assert_close(got["w"].double(), 3.0 * _softmax(q, k, add, f=2.0), atol=1e-5, rtol=0)
    c = seen[0]
    assert c.bias is bias and c.extra == {"scaling": 1 / math.sqrt(3), "bias_kind": "a term"}
    torch.testing.assert_close(c.weights, 0.5 * got["w"])
    assert plain[0].extra["bias_kind"] == "a term"
