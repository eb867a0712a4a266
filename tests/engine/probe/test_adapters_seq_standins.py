"""The decoder and seq2seq adapters (engine/probe/adapters_seq.py) on hand-made stand-in modules:
small torch modules with the attention classes' names and call conventions (no transformers
model built: milliseconds per test, so mutation testing can rerun them per mutant).

Every expected value is computed here from the stand-ins' own weights: q and k split into heads
by slicing, the softmax in float64 with the mask written out entry by entry. The sizes are all
different (batch 2, heads 3, queries 4, head_dim 5, keys 6) so that a swapped dimension shows.
test_adapters_seq_calls.py checks the same adapters on the real tiny models.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from engine.probe import adapters_seq  # noqa: E402
from engine.probe.tap import Modifier, Tap  # noqa: E402

B, H, NQ, D, NK = 2, 3, 4, 5, 6
W = H * D
LOW = -3.4028234663852886e38  # float32's minimum
SCALING = 0.75  # a projection module's own factor on q (not 1/sqrt(D): it must be read)


def split(x: Any) -> Any:
    """(batch, heads, tokens, D) of a (batch, tokens, H * D) tensor: head i is columns i*D..."""
    return torch.stack([x[..., i * D:(i + 1) * D] for i in range(H)], dim=1)


def merge(x: Any) -> Any:
    """(batch, tokens, H * D) of (batch, heads, tokens, D)."""
    return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1)


def lin(layer: Any, x: Any) -> Any:
    """A linear layer by hand in float64."""
    return x.double() @ layer.weight.double().T + layer.bias.double()


def probs(scores: Any, mask: Any) -> Any:
    """softmax over the keys in float64, -inf-free: the mask is additive, float32's LOW hides."""
    return torch.softmax((scores + mask.double()).clamp(min=LOW), dim=-1)


def _linears(n: int, width: int = W) -> list[Any]:
    return [torch.nn.Linear(W, width) for _ in range(n)]


class _BatchAttn(torch.nn.Module):
    """XGLM/MVP/TrOCR/LED: q_proj(x) * scaling, an additive 4-D mask, (output, weights, cache)."""

    def __init__(self) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = _linears(4)
        self.num_heads, self.head_dim, self.scaling = H, D, SCALING
        self.cached: Any = None  # (k, v) of an earlier call: k_proj is then not called

    def attend(self, hidden_states: Any, key_value_states: Any, attention_mask: Any,
               want: bool) -> tuple[Any, Any, str]:
        kv = hidden_states if key_value_states is None else key_value_states
        q = split(self.q_proj(hidden_states) * self.scaling)
        k, v = self.cached or (split(self.k_proj(kv)), split(self.v_proj(kv)))
        s = q @ k.transpose(-1, -2)
        if attention_mask is not None:
            s = s + attention_mask.to(s.dtype)
        p = torch.softmax(s, dim=-1)
        return self.out_proj(merge(p @ v)), (p if want else None), "cache"

    def forward(self, hidden_states: Any, key_value_states: Any = None, attention_mask: Any = None,
                output_attentions: bool = False) -> tuple[Any, Any, str]:
        return self.attend(hidden_states, key_value_states, attention_mask, output_attentions)


class _BatchAttnKw(_BatchAttn):
    """XGLM in transformers 5: no ``output_attentions`` parameter, the weights always returned."""

    def forward(self, hidden_states: Any, key_value_states: Any = None, attention_mask: Any = None,
                **kwargs: Any) -> tuple[Any, Any, str]:
        return self.attend(hidden_states, key_value_states, attention_mask, True)


class _TimeAttn(torch.nn.Module):
    """FSMT: time-first (tokens, batch, width), an additive (nq, nk) ``attn_mask`` and a boolean
    (batch, nk) ``key_padding_mask`` (True: padding)."""

    def __init__(self) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = _linears(4)
        self.num_heads, self.head_dim, self.scaling = H, D, SCALING

    def forward(self, query: Any, key: Any, key_padding_mask: Any = None, layer_state: Any = None,
                attn_mask: Any = None, output_attentions: bool = False) -> tuple[Any, Any]:
        kv = query if key is None else key
        q = split((self.q_proj(query) * self.scaling).transpose(0, 1))
        k, v = (split(p(kv).transpose(0, 1)) for p in (self.k_proj, self.v_proj))
        s = q @ k.transpose(-1, -2)
        if attn_mask is not None:
            s = s + attn_mask.to(s.dtype)
        if key_padding_mask is not None:
            s = s.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        p = torch.softmax(s, dim=-1)
        return self.out_proj(merge(p @ v)).transpose(0, 1), (p if output_attentions else None)


class _GPTAttn(torch.nn.Module):
    """OpenAI GPT: ``_attn(q, k^T, v, mask, output_attentions)`` (its code), a causal buffer."""

    def __init__(self, scale: bool, n_ctx: int = 7) -> None:
        super().__init__()
        self.c_attn = torch.nn.Linear(W, 3 * W)
        self.scale = scale
        self.pass_asked = True  # (False: _attn called without output_attentions)
        self.register_buffer("bias", torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx))

    def _attn(self, q: Any, k: Any, v: Any, attention_mask: Any = None,
              output_attentions: bool = False) -> list[Any]:
        w = torch.matmul(q, k)
        if self.scale:
            w = w / math.sqrt(v.size(-1))
        b = self.bias[:, :, : w.size(-2), : w.size(-1)]
        w = w * b + -1e4 * (1 - b)
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.softmax(w, dim=-1)
        return [torch.matmul(w, v), w] if output_attentions else [torch.matmul(w, v)]

    def forward(self, x: Any, attention_mask: Any = None, output_attentions: bool = False) -> list[Any]:
        q, k, v = self.c_attn(x).split(W, dim=2)
        asked = (output_attentions,) if self.pass_asked else ()
        outs = self._attn(split(q), split(k).transpose(-1, -2), split(v), attention_mask, *asked)
        return [merge(outs[0])] + outs[1:]


class _NeoXJpAttn(torch.nn.Module):
    """GPT-NeoX-Japanese: ``_attn(q, k, v, mask)`` -> (output, weights), q.k / norm_factor."""

    def __init__(self) -> None:
        super().__init__()
        self.query_key_value = torch.nn.Linear(W, 3 * W)
        self.norm_factor = 2.0  # (not sqrt(D): the adapter must read it)

    def _attn(self, query: Any, key: Any, value: Any, attention_mask: Any = None) -> tuple[Any, Any]:
        s = query @ key.transpose(-1, -2) / self.norm_factor
        if attention_mask is not None:
            s = s + attention_mask.to(s.dtype)
        p = torch.softmax(s, dim=-1)
        return p @ value, p

    def forward(self, x: Any, attention_mask: Any = None) -> tuple[Any, Any]:
        q, k, v = (split(t) for t in self.query_key_value(x).split(W, dim=2))
        out, w = self._attn(q, k, v, attention_mask)
        return merge(out), w


class _CpmAntAttn(torch.nn.Module):
    """CPM-Ant: q.k / sqrt(dim_head) + position_bias, a boolean mask, ``self.softmax``."""

    def __init__(self) -> None:
        super().__init__()
        self.project_q, self.project_k, self.project_v, self.attention_out = _linears(4)
        self.softmax = torch.nn.Softmax(dim=-1)
        self.num_heads, self.dim_head = H, D

    def forward(self, hidden_q: Any, hidden_kv: Any, attention_mask: Any, position_bias: Any,
                output_attentions: bool = False) -> tuple[Any, Any, Any]:
        b, nq, nk = hidden_q.shape[0], hidden_q.shape[1], hidden_kv.shape[1]
        q, k, v = split(self.project_q(hidden_q)), split(self.project_k(hidden_kv)), \
            split(self.project_v(hidden_kv))
        score = q @ k.transpose(-1, -2) / math.sqrt(self.dim_head) + position_bias.float()
        hidden = attention_mask.view(b, 1, nq, nk) == 0
        score = self.softmax(score.masked_fill(hidden, float("-inf"))).masked_fill(hidden, 0.0)
        return self.attention_out(merge(score @ v)), (score if output_attentions else None), None


def _named(cls: type, name: str) -> type:
    """``cls`` under the class name an adapter looks for."""
    return type(name, (cls,), {})


class _Net(torch.nn.Module):
    """Two attention layers called with the same arguments (sites 0 and 1)."""

    def __init__(self, *layers: Any) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, *args: Any, **kw: Any) -> list[Any]:
        return [layer(*args, **kw) for layer in self.layers]


def _tapped(kind: str, *layers: Any, args: tuple = (), kw: dict | None = None) -> tuple[Any, Any, int]:
    """(net, tap, the installer's count): installed by ``installers()[kind]``, sites discovered."""
    torch.manual_seed(0)
    net = _Net(*layers)
    tap = Tap(net)
    count = adapters_seq.installers()[kind](tap, net)
    with torch.no_grad():
        tap.discover(lambda: net(*args, **(kw or {})))
    return net, tap, count


def _run(net: Any, tap: Any, args: tuple = (), kw: dict | None = None,
         modifiers: dict | None = None) -> tuple[list[Any], list[Any]]:
    seen: list[Any] = []
    with torch.no_grad(), tap.active(seen.append, modifiers):
        out = net(*args, **(kw or {}))
    return seen, out


def _close(got: Any, want: Any) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    torch.testing.assert_close(got.double(), want.double(), rtol=1e-5, atol=1e-6)


def _batch_mask(nk: int = NQ) -> Any:
    """An additive float64 (B, 1, NQ, nk) mask: the last key hidden from row 0 of text 0 (LOW),
    every key of text 1 but the first pushed down by -2."""
    m = torch.zeros(B, 1, NQ, nk, dtype=torch.float64)
    m[0, 0, 0, -1] = LOW
    m[1, 0, :, 1:] = -2.0
    return m


# -- separate projections, batch first -----------------------------------------------------------

@pytest.mark.parametrize(("kind", "name"), [
    ("xglm", "XGLMAttention"), ("mvp", "MvpAttention"), ("trocr", "TrOCRAttention"),
    ("led", "LEDDecoderAttention")])
def test_a_batch_first_call_reports_the_scaled_q_its_k_mask_and_weights(kind: str, name: str) -> None:
    """Site 0 with q x 2, site 1 with the weights x 2: q as the product receives it (the
    module's 0.75 on q_proj's output, before the planted factor), the mask as float32, the
    weights the softmax of 2 q.k + mask (2 x it), the output out_proj((2 P) v)."""
    x, kv = torch.randn(B, NQ, W), torch.randn(B, NK, W)
    kw = {"key_value_states": kv, "attention_mask": _batch_mask(NK)}
    net, tap, count = _tapped(kind, _named(_BatchAttn, name)(), _named(_BatchAttn, name)(),
                              args=(x,), kw=kw)
    assert count == 2
    assert [(s.index, s.adapter) for s in tap.sites] == [(0, kind), (1, kind)]
    mods = {0: Modifier(q_factor=2.0), 1: Modifier(w_factor=2.0)}
    seen, out = _run(net, tap, (x,), kw, mods)
    assert [c.site for c in seen] == [0, 1]
    for c, layer, o, f, w in zip(seen, net.layers, out, (2.0, 1.0), (1.0, 2.0)):
        q = split(lin(layer.q_proj, x)) * SCALING
        k, v = split(lin(layer.k_proj, kv)), split(lin(layer.v_proj, kv))
        p = probs(f * (q @ k.transpose(-1, -2)), _batch_mask(NK))
        assert c.module is layer and c.bias is None and c.extra == {"scaling": 1.0}
        _close(c.query, q)
        _close(c.key, k)
        assert c.mask.dtype == torch.float32
        _close(c.mask, _batch_mask(NK).float())
        _close(c.weights, w * p)
        _close(c.output, lin(layer.out_proj, merge(w * p @ v)))
        assert c.output is o[0]
        assert o[1] is None and o[2] == "cache"  # (not asked: the weights go back hidden)


def test_the_weights_come_back_as_the_caller_asked() -> None:
    """By keyword or position, True or False: the caller gets what it asked for; a False passed
    positionally is kept (no weights: nothing to report)."""
    x = torch.randn(B, NQ, W)
    net, tap, _ = _tapped("xglm", _named(_BatchAttn, "XGLMAttention")(), args=(x,))
    layer = net.layers[0]
    p = probs(split(lin(layer.q_proj, x)) * SCALING @ split(lin(layer.k_proj, x)).transpose(-1, -2),
              torch.zeros(1))
    seen, out = _run(net, tap, (x,), {"output_attentions": True})
    assert len(seen) == 1 and out[0][1] is seen[0].weights
    _close(out[0][1], p)
    seen, out = _run(net, tap, (x, None, None, True))
    assert len(seen) == 1 and out[0][1] is seen[0].weights
    assert seen[0].mask is None
    seen, out = _run(net, tap, (x, None, None, False))
    assert seen == [] and out[0][1] is None
    for args in ((x,), (x, None), (x, None, None)):  # (output_attentions by keyword, False)
        seen, out = _run(net, tap, args, {"output_attentions": False})
        assert len(seen) == 1 and out[0][1] is None and out[0][2] == "cache", len(args)
        _close(seen[0].weights, p)
    seen, out = _run(net, tap, (x,))  # (not passed: False)
    assert len(seen) == 1 and out[0][1] is None


def test_a_forward_without_output_attentions_reports_and_hides_the_weights() -> None:
    x = torch.randn(B, NQ, W)
    net, tap, _ = _tapped("xglm", _named(_BatchAttnKw, "XGLMAttention")(), args=(x,))
    seen, out = _run(net, tap, (x,), {"attention_mask": _batch_mask()})
    assert len(seen) == 1 and out[0][1] is None and out[0][2] == "cache"
    assert seen[0].weights.shape == (B, H, NQ, NQ)


def test_a_call_without_keys_or_outside_the_tap_reports_nothing_and_changes_nothing() -> None:
    """Cached keys (k_proj not called) report nothing; another tap's pass, or none, sees the
    module's own output, its weights as asked."""
    x = torch.randn(B, NQ, W)
    net, tap, _ = _tapped("mvp", _named(_BatchAttn, "MvpAttention")(), args=(x,))
    layer = net.layers[0]
    with torch.no_grad():
        plain = layer.attend(x, None, None, False)
        layer.cached = (split(layer.k_proj(x)), split(layer.v_proj(x)))
        seen, _out = _run(net, tap, (x,), {"output_attentions": False},
                         {0: Modifier(q_factor=3.0, w_factor=4.0)})
        assert seen == []
        layer.cached = None
        other = Tap(_Net(_named(_BatchAttn, "MvpAttention")()))
        for block in (lambda: other.active(lambda c: None), torch.no_grad):
            with block():
                got = net(x)
            assert torch.equal(got[0][0], plain[0]) and got[0][1] is None
            with block():
                got = net(x, output_attentions=True)
            assert got[0][1] is not None
    assert tap.modifier(0) == Modifier()


def test_a_module_without_q_proj_is_not_adapted() -> None:
    class Bare(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x

    net = _Net(_named(Bare, "LEDDecoderAttention")(), _named(_BatchAttn, "LEDDecoderAttention")())
    assert adapters_seq.installers()["led"](Tap(net), net) == 1


# -- separate projections, time first (FSMT) -------------------------------------------------

def test_a_time_first_call_reports_heads_batch_first_and_its_masks() -> None:
    """Cross-attention, 4 queries on 6 keys: q and k batch first; the mask 0 + attn_mask, LOW
    where it was -inf and on text 1's padded last two keys; the output stays time first."""
    x, kv = torch.randn(NQ, B, W), torch.randn(NK, B, W)
    attn = torch.zeros(NQ, NK, dtype=torch.float64)
    attn[0, 3:] = float("-inf")
    attn[:, 1] = -1.5
    pad = torch.zeros(B, NK, dtype=torch.bool)
    pad[1, -2:] = True
    want = torch.zeros(B, 1, NQ, NK, dtype=torch.float64)
    for b in range(B):
        for i in range(NQ):
            for j in range(NK):
                hidden = (i == 0 and j >= 3) or (b == 1 and j >= NK - 2)
                want[b, 0, i, j] = LOW if hidden else (-1.5 if j == 1 else 0.0)
    kw = {"key_padding_mask": pad, "attn_mask": attn}
    net, tap, count = _tapped("fsmt", _named(_TimeAttn, "Attention")(), args=(x, kv), kw=kw)
    assert count == 1 and tap.sites[0].adapter == "fsmt"
    layer = net.layers[0]
    seen, out = _run(net, tap, (x, kv), kw, {0: Modifier(w_factor=0.5)})
    (c,) = seen
    q = split(lin(layer.q_proj, x).transpose(0, 1)) * SCALING
    k, v = (split(lin(p, kv).transpose(0, 1)) for p in (layer.k_proj, layer.v_proj))
    p = probs(q @ k.transpose(-1, -2), want)
    _close(c.query, q)
    _close(c.key, k)
    assert c.mask.dtype == torch.float32 and bool((c.mask >= LOW).all())
    _close(c.mask, want)
    _close(c.weights, 0.5 * p)
    _close(c.output, lin(layer.out_proj, merge(0.5 * p @ v)).transpose(0, 1))
    assert out[0][1] is None and c.extra == {"scaling": 1.0}


def test_a_time_first_call_without_masks_reports_zeros() -> None:
    x = torch.randn(NQ, B, W)
    net, tap, _ = _tapped("fsmt", _named(_TimeAttn, "Attention")(), args=(x, None))
    seen, _out = _run(net, tap, (x, None))
    (c,) = seen
    assert c.mask.dtype == torch.float32 and torch.equal(c.mask, torch.zeros(B, 1, NQ, NQ))
    layer = net.layers[0]
    _close(c.key, split(lin(layer.k_proj, x).transpose(0, 1)))


# -- a wrapped _attn helper ------------------------------------------------------------------

def _gpt_mask(pad: Any) -> Any:
    """OpenAI GPT's reported mask by hand: LOW above the diagonal and on padded keys (one row
    of masks for the batch without padding)."""
    want = torch.zeros(1 if pad is None else B, 1, NQ, NQ, dtype=torch.float64)
    for b in range(want.shape[0]):
        for i in range(NQ):
            for j in range(NQ):
                if j > i or (pad is not None and pad[b, 0, 0, j] < 0):
                    want[b, 0, i, j] = LOW
    return want


@pytest.mark.parametrize("padded", [False, True])
def test_openai_gpt_reports_q_k_the_causal_band_and_its_scale_flag(padded: bool) -> None:
    """Layer 0 with its scale flag (1/sqrt(5)), q x 2; layer 1 without (1), weights x 0.5."""
    x = torch.randn(B, NQ, W)
    pad = None
    if padded:
        pad = torch.zeros(B, 1, 1, NQ)
        pad[1, ..., -1] = LOW  # (text 1's last key is padding)
    net, tap, count = _tapped("openai-gpt", _named(_GPTAttn, "Attention")(True),
                              _named(_GPTAttn, "Attention")(False), args=(x, pad))
    assert count == 2 and [s.adapter for s in tap.sites] == ["openai-gpt"] * 2
    seen, out = _run(net, tap, (x, pad), {}, {0: Modifier(q_factor=2.0), 1: Modifier(w_factor=0.5)})
    assert [c.site for c in seen] == [0, 1]
    for c, layer, o, scale, f, w in zip(seen, net.layers, out, (5**-0.5, 1.0), (2.0, 1.0),
                                        (1.0, 0.5)):
        q, k, v = (split(t) for t in lin(layer.c_attn, x).split(W, dim=2))
        _close(c.query, q)
        _close(c.key, k)
        assert c.mask.dtype == torch.float32 and bool((c.mask >= LOW).all())
        _close(c.mask, _gpt_mask(pad))
        assert c.bias is None and c.extra == {"scaling": pytest.approx(scale, rel=1e-12)}
        p = probs(f * scale * (q @ k.transpose(-1, -2)), _gpt_mask(pad))
        _close(c.weights, w * p)
        _close(c.output, w * p @ v)
        assert len(o) == 1 and c.module is layer
        _close(o[0], merge(w * p @ v))
    seen, out = _run(net, tap, (x, pad), {"output_attentions": True})
    assert len(seen) == 2 and [len(o) for o in out] == [2, 2]
    assert out[1][1] is seen[1].weights
    net.layers[0].pass_asked = False  # (the helper's own default: no weights)
    seen, out = _run(net, tap, (x, pad), {"output_attentions": True})
    assert len(seen) == 2 and [len(o) for o in out] == [1, 2]


def test_openai_gpt_outside_the_tap_is_the_modules_own_call() -> None:
    x = torch.randn(B, NQ, W)
    net, _tap, _ = _tapped("openai-gpt", _named(_GPTAttn, "Attention")(True), args=(x,))
    layer = net.layers[0]
    pad = torch.zeros(B, 1, 1, NQ)
    pad[0, ..., -1] = LOW
    with torch.no_grad():
        q, k, v = (split(t) for t in layer.c_attn(x).split(W, dim=2))
        for asked in (False, True):
            got = layer._attn(q, k.transpose(-1, -2), v, pad, asked)
            want = type(layer)._attn(layer, q, k.transpose(-1, -2), v, pad, asked)
            assert len(got) == len(want) == 1 + asked
            for a, b in zip(got, want):
                assert torch.equal(a, b)


def test_a_helper_module_without_attn_is_not_wrapped() -> None:
    class Bare(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x

    net = _Net(_named(Bare, "Attention")(), _named(_GPTAttn, "Attention")(True))
    assert adapters_seq.installers()["openai-gpt"](Tap(net), net) == 1
    assert "_attn" not in vars(net.layers[0]) and "_attn" in vars(net.layers[1])


def test_gpt_neox_japanese_reports_q_k_its_mask_and_one_over_norm_factor() -> None:
    x = torch.randn(B, NQ, W)
    mask = _batch_mask()
    net, tap, count = _tapped("gpt_neox_japanese", _named(_NeoXJpAttn, "GPTNeoXJapaneseAttention")(),
                              _named(_NeoXJpAttn, "GPTNeoXJapaneseAttention")(), args=(x, mask))
    assert count == 2 and tap.sites[1].adapter == "gpt_neox_japanese"
    seen, out = _run(net, tap, (x, mask), {}, {0: Modifier(q_factor=2.0), 1: Modifier(w_factor=0.5)})
    assert [c.site for c in seen] == [0, 1]
    for c, layer, o, f, w in zip(seen, net.layers, out, (2.0, 1.0), (1.0, 0.5)):
        assert c.module is layer
        q, k, v = (split(t) for t in lin(layer.query_key_value, x).split(W, dim=2))
        p = probs(f * 0.5 * (q @ k.transpose(-1, -2)), mask)
        _close(c.query, q)
        _close(c.key, k)
        assert c.mask.dtype == torch.float32
        _close(c.mask, mask)
        assert c.bias is None and c.extra == {"scaling": 0.5}
        _close(c.weights, w * p)
        _close(c.output, w * p @ v)
        _close(o[0], merge(w * p @ v))
        assert o[1] is c.weights
    seen, _out = _run(net, tap, (x, None))
    assert [c.mask for c in seen] == [None, None]
    with torch.no_grad():  # (outside the tap: the module's own call)
        q, k, v = (split(t) for t in net.layers[0].query_key_value(x).split(W, dim=2))
        got = net.layers[0]._attn(q, k, v, mask)
        want = _NeoXJpAttn._attn(net.layers[0], q, k, v, mask)
    assert isinstance(got, tuple) and all(torch.equal(a, b) for a, b in zip(got, want))


# -- CPM-Ant ---------------------------------------------------------------------------------

def test_cpmant_reports_q_k_the_boolean_mask_the_position_bias_and_the_weights() -> None:
    """4 queries on 6 keys; the bias (1, heads, 4, 6) in float64 expanded to the batch as
    float32; the mask LOW where the boolean mask is 0; a factor 2 on the weights at the
    softmax (the output (2 P) v)."""
    x, kv = torch.randn(B, NQ, W), torch.randn(B, NK, W)
    keep = torch.ones(B, NQ, NK, dtype=torch.int64)
    keep[0, :, -1] = 0
    keep[1, 2, 1:] = 0
    bias = torch.randn(1, H, NQ, NK, dtype=torch.float64)
    want = torch.where(keep.view(B, 1, NQ, NK) > 0, 0.0, LOW).double()
    args = (x, kv, keep, bias)
    net, tap, count = _tapped("cpmant", _named(_CpmAntAttn, "CpmAntAttention")(),
                              _named(_CpmAntAttn, "CpmAntAttention")(), args=args)
    assert count == 2 and [s.adapter for s in tap.sites] == ["cpmant"] * 2
    seen, out = _run(net, tap, args, {}, {0: Modifier(q_factor=2.0), 1: Modifier(w_factor=2.0)})
    assert [c.site for c in seen] == [0, 1]
    for c, layer, o, f, w in zip(seen, net.layers, out, (2.0, 1.0), (1.0, 2.0)):
        assert c.module is layer
        q, k, v = split(lin(layer.project_q, x)), split(lin(layer.project_k, kv)), \
            split(lin(layer.project_v, kv))
        p = probs(f * D**-0.5 * (q @ k.transpose(-1, -2)) + bias, want)
        _close(c.query, q)
        _close(c.key, k)
        assert c.mask.dtype == torch.float32 and c.bias.dtype == torch.float32
        _close(c.mask, want)
        _close(c.bias, bias.expand(B, H, NQ, NK))
        assert c.extra == {"scaling": pytest.approx(D**-0.5, rel=1e-12),
                           "bias_kind": "relative position bias"}
        _close(c.weights, w * p)
        assert c.output is o[0]
        _close(o[0], lin(layer.attention_out, merge(w * p @ v)))
        assert o[1] is None
    with torch.no_grad():  # (outside the tap: the module's own output)
        again = net(*args)
    _close(again[0][0], lin(net.layers[0].attention_out, merge(
        probs(D**-0.5 * (split(lin(net.layers[0].project_q, x))
                         @ split(lin(net.layers[0].project_k, kv)).transpose(-1, -2)) + bias, want)
        @ split(lin(net.layers[0].project_v, kv)))))


def test_installers_cover_each_type_once() -> None:
    assert set(adapters_seq.installers()) == {"xglm", "mvp", "trocr", "led", "fsmt", "openai-gpt",
                                              "gpt_neox_japanese", "cpmant"}
    assert {k: v[1] for k, v in adapters_seq.PROJECTION_TYPES.items()} == {
        "xglm": "batch", "mvp": "batch", "trocr": "batch", "led": "batch", "fsmt": "time"}
