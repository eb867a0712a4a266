"""DeBERTa's adapter hooks (engine/probe/adapters_deberta.py) on a hand-made stand-in of its
``DisentangledSelfAttention``: the same submodules (v1's fused ``in_proj`` with ``q_bias`` and
``v_bias``, v2's three projections called again on the position embeddings), the same arguments
and call order, float64 and 2 heads of width 4, milliseconds per test (the tiny transformers
models of test_adapters_deberta.py are built once per file, so each hook reached only the first
test that built it). The hooks are installed in every test.

By hand: with c2p and p2c the factor is 1/sqrt(3 x 4), with one of them 1/sqrt(2 x 4); q, k and
v per head from the weights' rows (v1: head i's rows 12i..12i+3 are q, 12i+4.. k, 12i+8.. v); the
relative terms by a loop over (i, j): c2p = q_i . pos_key[clip(i - j + 4)], p2c = k_j .
pos_query[clip(j - i + 4)], both over sqrt(4 f) (v1's q already carries it).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from engine.errors import ConfigError  # noqa: E402
from engine.probe import adapters_deberta as ad  # noqa: E402
from engine.probe.tap import Modifier, Tap  # noqa: E402
from tests.engine.probe.adapter_calls import LOW, assert_softmax  # noqa: E402

H, D, N, B, P = 2, 4, 5, 2, 4  # heads, head width, tokens, batch, relative distances kept
W = H * D
BOTH = ("c2p", "p2c")


class DisentangledSelfAttention(torch.nn.Module):
    """DeBERTa's attention in miniature (transformers' forward, shortened)."""

    def __init__(self, v1: bool, relative: bool = True, kinds: tuple[str, ...] = BOTH,
                 talking: bool = False) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(7)

        def lin(out: int) -> torch.nn.Linear:
            layer = torch.nn.Linear(W, out, bias=not v1, dtype=torch.float64)
            with torch.no_grad():
                layer.weight.copy_(torch.randn(out, W, generator=gen, dtype=torch.float64))
                if layer.bias is not None:
                    layer.bias.copy_(torch.randn(out, generator=gen, dtype=torch.float64))
            return layer

        self.v1, self.num_attention_heads = v1, H
        self.relative_attention, self.pos_att_type = relative, list(kinds)
        self.dropout = torch.nn.Dropout(0.0)
        if v1:
            self.in_proj = lin(3 * W)
            self.q_bias = torch.nn.Parameter(torch.randn(W, generator=gen, dtype=torch.float64))
            self.v_bias = torch.nn.Parameter(torch.randn(W, generator=gen, dtype=torch.float64))
            self.pos_proj, self.pos_q_proj = lin(W), lin(W)
            self.head_logits_proj = torch.nn.Linear(H, H) if talking else None
        else:
            self.query_proj, self.key_proj, self.value_proj = lin(W), lin(W), lin(W)
        self.probs = None  #: the probabilities of the last call, as the model computed them

    def transpose_for_scores(self, x):
        return x.view(*x.shape[:-1], H, -1).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask, output_attentions=False, query_states=None,
                relative_pos=None, rel_embeddings=None):
        f = 1 + len(self.pos_att_type)
        b, n, _ = hidden_states.shape
        if self.v1:
            q, k, v = self.transpose_for_scores(self.in_proj(hidden_states)).chunk(3, dim=-1)
            q = (q + self.transpose_for_scores(self.q_bias[None, None])) / math.sqrt(D * f)
            v = v + self.transpose_for_scores(self.v_bias[None, None])
            scores = q @ k.transpose(-1, -2)
            if self.relative_attention and rel_embeddings is not None and relative_pos is not None:
                scores = scores + self.disentangled_att_bias(q, k, relative_pos, rel_embeddings, f)
        else:
            q = self.transpose_for_scores(self.query_proj(
                hidden_states if query_states is None else query_states))
            k = self.transpose_for_scores(self.key_proj(hidden_states))
            v = self.transpose_for_scores(self.value_proj(hidden_states))
            scores = q @ k.transpose(-1, -2) / math.sqrt(D * f)
            if self.relative_attention and rel_embeddings is not None:
                rel = self.disentangled_attention_bias(q.reshape(b * H, n, D),
                                                       k.reshape(b * H, n, D), relative_pos,
                                                       rel_embeddings, f)
                if not isinstance(rel, int):
                    scores = scores + rel.view(b, H, n, n)
        mask = attention_mask if attention_mask.dim() == 4 else attention_mask[:, None]
        scores = scores.masked_fill(~mask.bool(), torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        self.probs = probs.detach().clone()
        probs = self.dropout(probs)
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(b, n, W)
        return ctx, (probs if output_attentions else None)

    @staticmethod
    def _index(relative_pos, n):
        if relative_pos is None:
            relative_pos = torch.arange(n)[:, None] - torch.arange(n)[None]
        return (relative_pos + P).clamp(0, 2 * P - 1)

    def disentangled_att_bias(self, q, k, relative_pos, rel_embeddings, f):
        """v1: q already divided by sqrt(d f), the position queries divided here."""
        idx = self._index(relative_pos, q.shape[-2]).expand(*q.shape[:-1], q.shape[-2])
        pk = self.transpose_for_scores(self.pos_proj(rel_embeddings[None]))
        pq = self.transpose_for_scores(self.pos_q_proj(rel_embeddings[None])) / math.sqrt(D * f)
        score = 0
        if "c2p" in self.pos_att_type:
            score = score + torch.gather(q @ pk.transpose(-1, -2), -1, idx)
        if "p2c" in self.pos_att_type:
            score = score + torch.gather(k @ pq.transpose(-1, -2), -1, idx).transpose(-1, -2)
        return score

    def disentangled_attention_bias(self, q, k, relative_pos, rel_embeddings, f):
        """v2: (batch x heads, tokens, d); the position keys and queries are the same
        projections, called again (share_att_key)."""
        if not self.pos_att_type:
            return 0
        n = q.shape[-2]
        idx = self._index(relative_pos, n).expand(q.shape[0], n, n)
        pk = self.transpose_for_scores(self.key_proj(rel_embeddings[None]))
        pq = self.transpose_for_scores(self.query_proj(rel_embeddings[None]))
        reps = q.shape[0] // H
        pk, pq = pk.repeat(reps, 1, 1, 1).flatten(0, 1), pq.repeat(reps, 1, 1, 1).flatten(0, 1)
        scale = math.sqrt(D * f)
        score = 0
        if "c2p" in self.pos_att_type:
            score = score + torch.gather(q @ pk.transpose(-1, -2) / scale, -1, idx)
        if "p2c" in self.pos_att_type:
            score = score + torch.gather(k @ pq.transpose(-1, -2) / scale, -1, idx
                                         ).transpose(-1, -2)
        return score


class Net(torch.nn.Module):
    def __init__(self, att: DisentangledSelfAttention) -> None:
        super().__init__()
        self.att = att

    def forward(self, *args, **kwargs):
        return self.att(*args, **kwargs)


def _inputs(mask_dims: int = 4, relative_pos: bool = True, rel: bool = True) -> dict:
    gen = torch.Generator().manual_seed(11)
    keep = torch.tensor([[1] * N, [1] * (N - 2) + [0, 0]], dtype=torch.bool)
    mask = keep[:, None, :].expand(B, N, N)
    return {"hidden_states": torch.randn(B, N, W, generator=gen, dtype=torch.float64),
            "attention_mask": mask[:, None] if mask_dims == 4 else mask,
            "relative_pos": (torch.arange(N)[:, None] - torch.arange(N)[None]).clamp(-3, 3)
            if relative_pos else None,
            "rel_embeddings": torch.randn(2 * P, W, generator=gen, dtype=torch.float64)
            if rel else None}


def _hooked(att: DisentangledSelfAttention, inputs: dict) -> tuple[Net, Tap]:
    net = Net(att)
    tap = Tap(net)
    assert ad.install_deberta(tap, net) == 1 and tap.sites == []
    tap.discover(lambda: net(**inputs))
    assert len(tap.sites) == 1 and tap.sites[0].adapter == "deberta"
    return net, tap


def _run(net: Net, tap: Tap, inputs: dict, modifier: Modifier | None = None, *args):
    seen: list = []
    with torch.no_grad(), tap.active(seen.append, None if modifier is None else {0: modifier}):
        out = net(*args, **inputs)
    assert len(seen) == 1
    return seen[0], out


def _by_hand(att: DisentangledSelfAttention, x, xq=None):
    """q, k (batch, heads, tokens, d) from the weights' rows, head by head."""
    xq = x if xq is None else xq
    q, k = (torch.zeros(B, H, N, D, dtype=torch.float64) for _ in range(2))
    for h in range(H):
        if att.v1:
            w = att.in_proj.weight
            q[:, h] = xq @ w[3 * D * h:3 * D * h + D].T + att.q_bias[D * h:D * h + D]
            k[:, h] = x @ w[3 * D * h + D:3 * D * h + 2 * D].T
        else:
            rows = slice(D * h, D * h + D)
            q[:, h] = xq @ att.query_proj.weight[rows].T + att.query_proj.bias[rows]
            k[:, h] = x @ att.key_proj.weight[rows].T + att.key_proj.bias[rows]
    return q.detach(), k.detach()


def _bias_by_hand(att: DisentangledSelfAttention, q, k, relative_pos, rel, kinds=BOTH):
    """c2p + p2c by a loop over (i, j), for q.k's factor on k (``k`` as the product used it)."""
    f = 1 + len(att.pos_att_type)
    if att.v1:
        pk, pq = rel @ att.pos_proj.weight.T, rel @ att.pos_q_proj.weight.T
    else:
        pk = rel @ att.key_proj.weight.T + att.key_proj.bias
        pq = rel @ att.query_proj.weight.T + att.query_proj.bias
    out = torch.zeros(B, H, N, N, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            cols = slice(D * h, D * h + D)
            for i in range(N):
                for j in range(N):
                    r = int(relative_pos[i, j]) if relative_pos is not None else i - j
                    c2p = q[b, h, i] @ pk[min(max(r + P, 0), 2 * P - 1), cols]
                    r = int(relative_pos[j, i]) if relative_pos is not None else j - i
                    p2c = k[b, h, j] @ pq[min(max(r + P, 0), 2 * P - 1), cols]
                    out[b, h, i, j] = (c2p * ("c2p" in kinds)
                                       + p2c * ("p2c" in kinds)) / math.sqrt(D * f)
    return out.detach()


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
@pytest.mark.parametrize("kinds", [BOTH, ("c2p",), ("p2c",)], ids="|".join)
def test_each_call_reports_q_k_the_relative_terms_and_the_models_probabilities(v1, kinds):
    att = DisentangledSelfAttention(v1, kinds=kinds)
    inputs = _inputs()
    net, tap = _hooked(att, inputs)
    call, out = _run(net, tap, inputs)
    q, k = _by_hand(att, inputs["hidden_states"])
    torch.testing.assert_close(call.query, q, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(call.key, k, rtol=1e-12, atol=1e-12)
    f = 1 + len(kinds)
    assert call.extra == {"scaling": pytest.approx((D * f) ** -0.5, rel=1e-15), "bias_kind": "disentangled c2p/p2c terms"}
    torch.testing.assert_close(call.bias, _bias_by_hand(att, q, k, inputs["relative_pos"],
                                                        inputs["rel_embeddings"], kinds),
                               rtol=1e-12, atol=1e-12)
    assert call.mask.shape == (B, 1, N, N) and call.mask.dtype == torch.float32
    assert float(call.mask.max()) == 0.0 and float(call.mask[1, ..., -2:].max()) == LOW
    assert float(call.mask[0].min()) == 0.0
    assert torch.equal(call.weights, att.probs) and torch.equal(call.output, out[0])
    assert call.site == 0 and call.module is att
    assert_softmax(call, atol=1e-12)


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
def test_a_factor_on_q_reaches_k_and_the_p2c_term_only(v1):
    """f = 1/3 (not a float32 number): the product's q.k and p2c carry it exactly in float64,
    c2p (q with the position keys, v2's second key_proj call) does not."""
    att = DisentangledSelfAttention(v1)
    inputs = _inputs()
    net, tap = _hooked(att, inputs)
    plain, plain_out = _run(net, tap, inputs)
    f = 1 / 3
    call, _out = _run(net, tap, inputs, Modifier(q_factor=f))
    q, k = _by_hand(att, inputs["hidden_states"])
    torch.testing.assert_close(call.query, q, rtol=1e-12, atol=1e-12)  # (before the factor)
    torch.testing.assert_close(call.key, k, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(call.bias, _bias_by_hand(att, q, f * k, inputs["relative_pos"],
                                                        inputs["rel_embeddings"]),
                               rtol=1e-12, atol=1e-12)
    assert torch.equal(call.weights, att.probs)
    assert not torch.allclose(call.weights, plain.weights, atol=1e-3)
    assert_softmax(call, factor=f, atol=1e-12)
    # the model itself, recomputed from q, f k and the terms by hand
    s = f * (q @ k.transpose(-1, -2)) / math.sqrt(3 * D) + call.bias
    s = s.masked_fill(call.mask < 0, -math.inf)
    torch.testing.assert_close(att.probs, torch.softmax(s, -1), rtol=0, atol=1e-13)
    with torch.no_grad():  # (outside the tap the hooks change nothing)
        again = net(**inputs)
    assert torch.equal(again[0], plain_out[0])


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
@pytest.mark.parametrize("f", [1 / 3, 2.0])
def test_a_factor_on_the_weights_multiplies_the_output_v_bias_included(v1, f):
    att = DisentangledSelfAttention(v1)
    inputs = _inputs()
    net, tap = _hooked(att, inputs)
    plain, plain_out = _run(net, tap, inputs)
    call, out = _run(net, tap, inputs, Modifier(w_factor=f))
    torch.testing.assert_close(call.weights, f * plain.weights, rtol=1e-14, atol=0)
    torch.testing.assert_close(out[0], f * plain_out[0], rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(call.output, out[0], rtol=0, atol=0)
    torch.testing.assert_close(call.query, plain.query, rtol=0, atol=0)
    torch.testing.assert_close(call.key, plain.key, rtol=0, atol=0)
    torch.testing.assert_close(att.probs, plain.weights, rtol=1e-14, atol=0)  # (q.k untouched)
    # both factors at once: q's on k's columns, the weights' on v's
    both, out2 = _run(net, tap, inputs, Modifier(q_factor=2.0, w_factor=f))
    qf, _o = _run(net, tap, inputs, Modifier(q_factor=2.0))
    torch.testing.assert_close(both.weights, f * qf.weights, rtol=1e-14, atol=0)
    torch.testing.assert_close(out2[0], f * _o[0], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
def test_positional_arguments_are_read_by_their_names(v1):
    att = DisentangledSelfAttention(v1)
    inputs = _inputs()
    net, tap = _hooked(att, inputs)
    by_name, _o = _run(net, tap, inputs)
    order = ("hidden_states", "attention_mask", "output_attentions", "query_states",
             "relative_pos", "rel_embeddings")
    args = {**inputs, "output_attentions": False, "query_states": None}
    by_place, _o = _run(net, tap, {}, None, *(args[k] for k in order))
    for a, b in ((by_name.bias, by_place.bias), (by_name.mask, by_place.mask),
                 (by_name.weights, by_place.weights), (by_name.query, by_place.query)):
        assert torch.equal(a, b)
    # half by place, half by name
    mixed, _o = _run(net, tap, {"relative_pos": inputs["relative_pos"],
                                "rel_embeddings": inputs["rel_embeddings"]}, None,
                     inputs["hidden_states"], inputs["attention_mask"])
    assert torch.equal(mixed.bias, by_name.bias)


def test_v1s_enhanced_mask_decoder_is_refused_v2_reads_its_query_states():
    inputs = _inputs()
    att = DisentangledSelfAttention(True)
    net, tap = _hooked(att, inputs)
    qs = torch.randn(B, N, W, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    with pytest.raises(ConfigError) as err, tap.active(lambda c: None):
        net(**inputs, query_states=qs)
    assert (err.value.field, err.value.message) == (
        "model", "DeBERTa's query_states path (its enhanced mask decoder) is not audited")
    with pytest.raises(ConfigError):  # (by place too)
        with tap.active(lambda c: None):
            net(inputs["hidden_states"], inputs["attention_mask"], False, qs)
    att = DisentangledSelfAttention(False)
    net, tap = _hooked(att, inputs)
    call, _o = _run(net, tap, {**inputs, "query_states": qs})
    q, k = _by_hand(att, inputs["hidden_states"], qs)
    torch.testing.assert_close(call.query, q, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(call.key, k, rtol=1e-12, atol=1e-12)
    assert torch.equal(call.weights, att.probs)


def test_talking_heads_are_refused_only_under_the_tap():
    att = DisentangledSelfAttention(True, talking=True)
    net = Net(att)
    tap = Tap(net)
    ad.install_deberta(tap, net)
    inputs = _inputs()
    with torch.no_grad():
        net(**inputs)  # (no tap: nothing to refuse)
    with pytest.raises(ConfigError) as err:
        tap.discover(lambda: net(**inputs))
    assert (err.value.field, err.value.message) == (
        "model", "this DeBERTa uses talking heads (head_logits_proj mixes the heads' logits): no "
        "per-head softmax of q.k to audit")


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
def test_the_relative_terms_only_where_the_model_computes_them(v1):
    """v1 adds them only given relative positions; v2 makes its own positions when none are
    given (i - j here); neither without position embeddings or relative attention; v2 with no
    kind named returns the int 0, no term."""
    inputs = _inputs(relative_pos=False)
    att = DisentangledSelfAttention(v1)
    net, tap = _hooked(att, inputs)
    call, _o = _run(net, tap, inputs, Modifier(q_factor=2.0))
    if v1:
        assert call.bias is None
    else:
        q, k = _by_hand(att, inputs["hidden_states"])
        torch.testing.assert_close(call.bias, _bias_by_hand(att, q, 2.0 * k, None,
                                                            inputs["rel_embeddings"]),
                                   rtol=1e-12, atol=1e-12)
    assert torch.equal(call.weights, att.probs)
    assert_softmax(call, factor=2.0, atol=1e-12)
    for att, inputs in ((DisentangledSelfAttention(v1), _inputs(rel=False)),
                        (DisentangledSelfAttention(v1, relative=False), _inputs())):
        net, tap = _hooked(att, inputs)
        call, _o = _run(net, tap, inputs)
        assert call.bias is None and torch.equal(call.weights, att.probs)
        assert_softmax(call, atol=1e-12)
    if not v1:
        att = DisentangledSelfAttention(False, kinds=())
        net, tap = _hooked(att, _inputs())
        call, _o = _run(net, tap, _inputs(), Modifier(q_factor=2.0))
        assert call.bias is None and call.extra["scaling"] == pytest.approx(D**-0.5, rel=1e-15)
        assert_softmax(call, factor=2.0, atol=1e-12)


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
def test_a_three_dimensional_mask_gets_a_head_axis(v1):
    att = DisentangledSelfAttention(v1)
    net, tap = _hooked(att, _inputs(mask_dims=3))
    call, _o = _run(net, tap, _inputs(mask_dims=3))
    four, _o = _run(net, tap, _inputs(mask_dims=4))
    assert call.mask.shape == (B, 1, N, N) and torch.equal(call.mask, four.mask)
    assert_softmax(call, atol=1e-12)


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
def test_outside_the_tap_and_without_factors_the_model_is_unchanged(v1):
    inputs = _inputs()
    bare = DisentangledSelfAttention(v1)
    with torch.no_grad():
        want = bare(**inputs)[0]
    att = DisentangledSelfAttention(v1)
    net, tap = _hooked(att, inputs)
    with torch.no_grad():
        assert torch.equal(net(**inputs)[0], want)
    _call, out = _run(net, tap, inputs)
    assert torch.equal(out[0], want)
    with tap.active(lambda c: None):  # a projection called outside a call is left alone
        x = inputs["hidden_states"]
        proj = att.in_proj if v1 else att.key_proj
        with torch.no_grad():
            assert torch.equal(proj(x), torch.nn.functional.linear(x, proj.weight, proj.bias))
