"""The training model's attention against a plain loop over rows, written from each rule's formula.

The reference below computes every logit, weight and output one row at a time in NumPy from the
rule's published formula (sqrt: q.k / sqrt(d_k), logn: times max(1, ln n / ln n_ref), softcap:
c tanh(z / c), sink: one more logit in the softmax, sigmoid: sigmoid(z - ln n), ...), never with
``engine.rules`` or the model's own functions; the whole model (embedding, pre-LN blocks, MLP,
readout) is rebuilt the same way from its weights. Sizes are tiny (under a second in all).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.training.config import TRAINING_RULES, TrainingConfig  # noqa: E402
from engine.training.model import (  # noqa: E402
    AttentionModel,
    SelfAttention,
    attend,
    causal_mask,
    padding_mask,
    scale_scores,
    scale_similarity,
    similarity,
    sinusoidal_positions,
)
from engine.training.tasks import input_features, make_batch, vocab_size  # noqa: E402

#: parameters of the reference cases, all away from 1 and from each other
T_RULE, S_SSMAX, CAP, SINK, N_REF = 0.7, 0.6, 2.0, 0.4, 3
YARN_S = 4.0  # the yarn rule's documented context-extension factor (Qwen2.5's factor 4)


def _ln(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Layer norm without affine, by hand: (x - mean) / sqrt(biased variance + eps)."""
    mu = sum(x) / len(x)
    var = sum((xi - mu) ** 2 for xi in x) / len(x)
    return (x - mu) / math.sqrt(var + eps)


def _row_logits(rule: str, q: np.ndarray, keys: np.ndarray, n: int, temp: float, s: float,
                n_ref: int, cap: float) -> np.ndarray:
    """Logits of one query row against every key (masked ones too), from the rule's formula;
    ``n`` is the number of keys the row attends to."""
    d = len(q)
    if rule == "cosine":
        sim = np.array([q @ k / (np.linalg.norm(q) * np.linalg.norm(k)) for k in keys])
    elif rule in ("qknorm", "qknorm_gain"):
        sim = np.array([_ln(q) @ _ln(k) for k in keys])
    else:
        sim = np.array([q @ k for k in keys])
    root = math.sqrt(d)
    if rule in ("none", "scale_after_softmax"):
        return sim
    if rule in ("dk", "sqrt_twice"):
        return sim / d
    if rule in ("temperature", "cosine"):
        return sim / temp
    if rule == "qknorm_gain":
        return sim / root / temp
    if rule == "logn":
        return sim / root * max(1.0, math.log(n) / math.log(n_ref))
    if rule == "ssmax":
        return sim / root * s * math.log(n)
    if rule == "yarn":
        return sim / root * (0.1 * math.log(YARN_S) + 1) ** 2
    if rule == "yarn_dynamic":
        return sim / root * ((0.1 * math.log(n / n_ref) + 1) ** 2 if n > n_ref else 1.0)
    if rule == "softcap":
        return cap * np.tanh(sim / root / cap)
    assert rule in ("sqrt", "qknorm", "sink", "sigmoid", "qkclip"), rule
    return sim / root


def _row_weights(rule: str, z: np.ndarray, visible: np.ndarray, n: int, sink: float) -> np.ndarray:
    """Weights of one row from its logits: masked keys get 0."""
    if rule == "sigmoid":
        return np.array([1 / (1 + math.exp(-(zj - math.log(n)))) if v else 0.0
                         for zj, v in zip(z, visible, strict=True)])
    e = np.array([math.exp(zj) if v else 0.0 for zj, v in zip(z, visible, strict=True)])
    total = e.sum() + (math.exp(sink) if rule == "sink" else 0.0)
    return e / total


def reference_attention(rule, q, k, v, mask=None, temp=T_RULE, s=S_SSMAX, n_ref=N_REF, cap=CAP,
                        sink=SINK):
    """(out, logits, weights) of (B, H, T, d) arrays; ``mask`` broadcast to (B, H, T, S) or
    None; ``temp``, ``s``, ``sink`` scalars or per-head lists."""
    q, k, v = (np.asarray(a.detach(), dtype=np.float64) for a in (q, k, v))
    b, h, t, d = q.shape
    full = np.ones((b, h, t, k.shape[2]), bool) if mask is None else \
        np.broadcast_to(np.asarray(mask), (b, h, t, k.shape[2]))
    out, logits, weights = np.zeros_like(q), np.zeros(full.shape), np.zeros(full.shape)
    per_head = lambda x, hh: x[hh] if isinstance(x, (list, tuple)) else x  # noqa: E731
    for bi in range(b):
        for hi in range(h):
            for i in range(t):
                vis = full[bi, hi, i]
                n = int(vis.sum())
                z = _row_logits(rule, q[bi, hi, i], k[bi, hi], n, per_head(temp, hi),
                                per_head(s, hi), n_ref, cap)
                w = _row_weights(rule, z, vis, n, per_head(sink, hi))
                logits[bi, hi, i], weights[bi, hi, i] = z, w
                used = w / math.sqrt(d) if rule == "scale_after_softmax" else w
                out[bi, hi, i] = sum(used[j] * v[bi, hi, j] for j in range(len(used)))
    return out, logits, weights


def _qkv(b=2, h=2, t=6, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, t, d, generator=g, dtype=torch.float64) for _ in range(3))


MASKS = {
    "none": lambda t: None,
    "causal": causal_mask,  # row i sees i + 1 keys: n = 1..6, across n_ref = 3
    "padding": lambda t: padding_mask(torch.tensor([t, 2]), t),  # n = 6 and 2
}


@pytest.mark.parametrize("masking", list(MASKS))
@pytest.mark.parametrize("rule", TRAINING_RULES)
def test_every_rule_equals_its_formula_row_by_row(rule, masking):
    q, k, v = _qkv()
    q = q * 2.5  # logits of several units: the cap at 2 and the sink at 0.4 both matter
    mask = MASKS[masking](6)
    out, logits, weights = attend(q, k, v, rule, mask, temperature=T_RULE, n_ref=N_REF,
                                  ssmax_s=S_SSMAX, softcap=CAP, sink=SINK)
    r_out, r_logits, r_weights = reference_attention(rule, q, k, v, mask)
    np.testing.assert_allclose(logits.numpy(), r_logits, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(weights.numpy(), r_weights, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(out.numpy(), r_out, rtol=1e-9, atol=1e-12)


def test_the_defaults_are_the_rules_documented_parameters():
    """Without arguments: T 1, n_ref 8, s 0.43, cap 50 (Gemma 2's), sink logit 0."""
    q, k, v = _qkv(t=10, d=16)
    q = q * 30.0  # logits up to about 100: Gemma 2's cap of 50 bends them
    mask = causal_mask(10)  # n = 1..10 across n_ref = 8
    for rule in ("temperature", "logn", "ssmax", "softcap", "sink", "yarn_dynamic"):
        out, logits, weights = attend(q, k, v, rule, mask)
        r_out, r_logits, r_weights = reference_attention(rule, q, k, v, mask, temp=1.0, s=0.43,
                                                         n_ref=8, cap=50.0, sink=0.0)
        np.testing.assert_allclose(logits.numpy(), r_logits, rtol=1e-9, atol=1e-9, err_msg=rule)
        np.testing.assert_allclose(weights.numpy(), r_weights, rtol=1e-9, atol=1e-12, err_msg=rule)
        np.testing.assert_allclose(out.numpy(), r_out, rtol=1e-9, atol=1e-9, err_msg=rule)


def test_per_head_learned_parameters_broadcast_over_heads():
    """(H, 1, 1) tensors of T, s and the sink logit: head h uses its own."""
    q, k, v = _qkv(h=3, t=5)
    mask = padding_mask(torch.tensor([5, 3]), 5)
    temps, ss, sinks = [0.5, 1.5, 3.0], [0.2, 0.9, 1.7], [-1.0, 0.5, 2.0]
    col = lambda xs: torch.tensor(xs, dtype=torch.float64).view(3, 1, 1)  # noqa: E731
    for rule in ("cosine", "ssmax", "sink", "qknorm_gain"):
        out, logits, weights = attend(q, k, v, rule, mask, temperature=col(temps), n_ref=N_REF,
                                      ssmax_s=col(ss), sink=col(sinks))
        r = reference_attention(rule, q, k, v, mask, temp=temps, s=ss, sink=sinks)
        for got, want in zip((out, logits, weights), r, strict=True):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-12, err_msg=rule)


def test_the_tap_sees_the_similarity_the_capped_logits_the_weights_and_the_mask():
    q, k, v = _qkv(t=4)
    mask = causal_mask(4)
    seen = []
    attend(q * 3, k, v, "softcap", mask, softcap=CAP, tap=lambda *xs: seen.append(xs))
    assert len(seen) == 1
    tq, sim, logits, weights, tmask = seen[0]
    assert torch.equal(tq, q * 3) and tmask is mask
    raw = np.einsum("bhid,bhjd->bhij", (q * 3).numpy(), k.numpy())  # q.k, not yet scaled
    np.testing.assert_allclose(sim.numpy(), raw, rtol=1e-12)
    _, r_logits, r_weights = reference_attention("softcap", q * 3, k, v, mask)
    np.testing.assert_allclose(logits.detach().numpy(), r_logits, rtol=1e-9)
    np.testing.assert_allclose(weights.detach().numpy(), r_weights, rtol=1e-9, atol=1e-14)


def test_similarities_by_hand_including_a_short_vector_and_a_near_constant_one():
    """cos: a vector of length 0.05 is still a unit direction; LN: a near-constant vector's
    variance (1e-6) is below the eps 1e-5, which then dominates its scale."""
    q = torch.tensor([[0.03, -0.04, 0.0, 0.0], [1.0, 1.001, 0.999, 1.0], [2.0, -1.0, 0.5, 3.0]],
                     dtype=torch.float64)
    k = torch.tensor([[1.0, 2.0, -2.0, 0.5], [0.5, 0.5001, 0.4999, 0.5]], dtype=torch.float64)
    for needs in ("dot", "cos", "ln"):
        got = similarity(q, k, needs).numpy()
        for i, qi in enumerate(q.numpy()):
            for j, kj in enumerate(k.numpy()):
                if needs == "dot":
                    want = qi @ kj
                elif needs == "cos":
                    want = qi @ kj / (np.linalg.norm(qi) * np.linalg.norm(kj))
                else:
                    want = _ln(qi) @ _ln(kj)
                assert got[i, j] == pytest.approx(want, rel=1e-9, abs=1e-12), (needs, i, j)
    # the near-constant rows: LN(x) = (x - mean) / sqrt(1e-6 / 2 + 1e-5), far below unit scale
    assert abs(similarity(q[1:2], k[1:2], "ln").item()) < 0.1


def test_masks_by_hand():
    assert causal_mask(3).tolist() == [[[[True, False, False], [True, True, False],
                                          [True, True, True]]]]
    pad = padding_mask(torch.tensor([2, 3, 1]), 3)
    assert pad.shape == (3, 1, 1, 3) and pad.dtype == torch.bool
    assert pad.view(3, 3).tolist() == [[True, True, False], [True, True, True],
                                       [True, False, False]]


@pytest.mark.parametrize("d", [6, 5])
def test_sinusoidal_positions_by_hand(d):
    """Entry 2i is sin(pos / 10000^(2i / d)), entry 2i + 1 the cos at that frequency; an odd
    width ends on a sin."""
    pe = sinusoidal_positions(7, d)
    assert pe.shape == (7, d) and pe.dtype == torch.float32
    for pos in range(7):
        for j in range(d):
            angle = pos / 10000 ** ((j - j % 2) / d)
            want = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert pe[pos, j].item() == pytest.approx(want, abs=2e-6), (pos, j)


# -- the whole model, rebuilt from its weights ----------------------------------------------------

def _np(t):
    return t.detach().double().numpy()


def _layer_norm(x, mod):
    if isinstance(mod, torch.nn.Identity):
        return x
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + mod.eps) * _np(mod.weight) + _np(mod.bias)


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def reference_model(model: AttentionModel, inputs, readout, mask):
    """Class logits (B, C) and each layer's (B, H, T, T) weights, from the weights alone."""
    cfg = model.cfg
    if model.embed is not None:
        x = _np(inputs) @ _np(model.embed.weight).T + _np(model.embed.bias)
    else:
        ids = inputs.numpy()
        x = _np(model.tok.weight)[ids]
        t = ids.shape[1]
        if cfg.positions == "learned":
            x = x + _np(model.pos.weight)[:t][None]
        elif cfg.positions == "sinusoidal":
            pe = np.zeros((t, cfg.d_model))
            for pos in range(t):
                for j in range(cfg.d_model):
                    angle = pos / 10000 ** ((j - j % 2) / cfg.d_model)
                    pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            x = x + pe[None]
    all_w = []
    b, t, _ = x.shape
    for blk in model.blocks:
        a = blk.attn
        hdn = _layer_norm(x, blk.ln1)

        def heads(w, hdn=hdn, a=a):  # (B, T, d) @ W^T -> (B, H, T, d_k)
            return torch.from_numpy(
                (hdn @ _np(w).T).reshape(b, t, a.heads, a.d_k).transpose(0, 2, 1, 3))

        rule = a.rule
        temp = cfg.temperature
        if a.log_t is not None:
            temp = list(np.exp(_np(a.log_t).ravel()))
        s = list(_np(a.ssmax_s).ravel()) if a.ssmax_s is not None else 0.43
        sink = list(_np(a.sink).ravel()) if a.sink is not None else 0.0
        out, _, w = reference_attention(rule, heads(a.w_q.weight), heads(a.w_k.weight),
                                        heads(a.w_v.weight), mask, temp=temp, s=s,
                                        n_ref=cfg.seq_len, cap=cfg.softcap, sink=sink)
        all_w.append(w)
        x = x + out.transpose(0, 2, 1, 3).reshape(b, t, a.heads * a.d_k) @ _np(a.w_o.weight).T
        if blk.mlp is not None:
            hid = _gelu(_layer_norm(x, blk.ln2) @ _np(blk.mlp.fc.weight).T + _np(blk.mlp.fc.bias))
            x = x + hid @ _np(blk.mlp.proj.weight).T + _np(blk.mlp.proj.bias)
    x = _layer_norm(x, model.ln_f)
    picked = x[np.arange(b), readout.numpy()]
    return picked @ _np(model.head.weight).T + _np(model.head.bias), all_w


def _model(rule, seed=3, **changes):
    cfg = TrainingConfig(**{"d_model": 12, "heads": 2, "d_k": 5, "layers": 2, "items_max": 5,
                            "key_dim": 4, "classes": 3, "pairs": 3, "temperature": 1.7,
                            "softcap": 1.5, "cosine_temperature": 0.3, **changes})
    m = AttentionModel(cfg, rule, input_features(cfg), vocab_size(cfg)).double()
    m.init_weights(torch.Generator().manual_seed(seed))
    with torch.no_grad():  # the learned parameters off their starting values, one per head
        a = m.blocks[0].attn
        for p in (a.log_t, a.ssmax_s, a.sink):
            if p is not None:
                p.add_(torch.tensor([0.3, -0.2]).view(2, 1, 1))
        for blk in m.blocks:  # LayerNorm gains and biases away from 1 and 0
            for ln in (blk.ln1, blk.ln2, m.ln_f):
                if isinstance(ln, torch.nn.LayerNorm):
                    ln.weight.uniform_(0.5, 1.5)
                    ln.bias.uniform_(-0.3, 0.3)
    return cfg, m


def _atol(cfg):
    """The sinusoidal code is computed in float32 (angles to about 1e-7), the rest in float64."""
    return 1e-6 if cfg.task == "recall" and cfg.positions == "sinusoidal" else 1e-11


def _batch(cfg, size=3, seed=4):
    batch = make_batch(cfg, size, torch.Generator().manual_seed(seed))
    inputs = batch.inputs.double() if batch.inputs.is_floating_point() else batch.inputs
    return batch, inputs


@pytest.mark.parametrize("rule, changes", [
    ("sqrt", {"mlp": True}),
    ("temperature", {"layernorm": False}),
    ("cosine", {"mlp": True}),
    ("qknorm_gain", {}),
    ("ssmax", {"task": "recall", "mlp": True}),
    ("sink", {"task": "recall", "positions": "sinusoidal"}),
    ("softcap", {"task": "recall", "positions": "none", "layernorm": False, "mlp": True}),
    ("sigmoid", {}),
    ("logn", {"task": "recall", "d_model": 11, "positions": "sinusoidal"}),
])
def test_the_model_equals_its_layers_rebuilt_by_hand(rule, changes):
    """Embedding, pre-LN blocks with the MLP and the final LayerNorm, the class read at the
    readout position; each layer's weights are the captured ones."""
    cfg, m = _model(rule, **changes)
    batch, inputs = _batch(cfg)
    caps = []
    with torch.no_grad():
        got = m(inputs, batch.readout, batch.mask, capture=caps)
    want, weights = reference_model(m, inputs, batch.readout, batch.mask)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=_atol(cfg))
    assert len(caps) == cfg.layers
    for cap, w in zip(caps, weights, strict=True):
        np.testing.assert_allclose(cap.weights.numpy(), w, rtol=1e-9, atol=100 * _atol(cfg))


def test_a_capture_holds_the_capped_logits_the_logits_before_the_cap_the_mask_and_the_sink():
    for rule in ("softcap", "sink", "sqrt"):
        cfg, m = _model(rule, task="recall", layers=1)
        batch, inputs = _batch(cfg)
        a = m.blocks[0].attn
        x = m.embed_inputs(inputs)
        caps = []
        with torch.no_grad():
            a(m.blocks[0].ln1(x), batch.mask, capture=caps)
            q, k = a.project_qk(m.blocks[0].ln1(x))
        (cap,) = caps
        b, t = inputs.shape
        raw = np.einsum("bhid,bhjd->bhij", q.numpy(), k.numpy()) / math.sqrt(cfg.head_dim)
        if rule == "softcap":  # the cap's c tanh(z / c) after the sqrt logits kept before it
            np.testing.assert_allclose(cap.pre_logits.numpy(), raw, rtol=1e-10)
            np.testing.assert_allclose(cap.logits.numpy(), 1.5 * np.tanh(raw / 1.5), rtol=1e-10)
        else:
            assert cap.pre_logits is None
            np.testing.assert_allclose(cap.logits.numpy(), raw, rtol=1e-10)
        if rule == "sink":
            np.testing.assert_allclose(cap.sink.numpy(), [0.3, -0.2])
        else:
            assert cap.sink is None
        assert cap.mask.shape == (b, 1, t, t)  # recall: causal, no mask given
        assert not any(x.requires_grad for x in (cap.logits, cap.weights, cap.mask))
    # no mask given: every key visible in the capture's (B, 1, T, T) mask
    cfg, m = _model("softcap", task="recall", layers=1)
    batch, inputs = _batch(cfg)
    caps = []
    with torch.no_grad():
        m.blocks[0].attn(m.embed_inputs(inputs), None, capture=caps)
    assert caps[0].mask.shape == (3, 1, cfg.seq_len, cfg.seq_len) and bool(caps[0].mask.all())


def test_project_qk_gives_each_heads_slice_of_w_q_and_w_k():
    cfg, m = _model("sqrt")
    a = m.blocks[0].attn
    x = torch.randn(2, 4, cfg.d_model, generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64)
    q, k = a.project_qk(x)
    assert q.shape == k.shape == (2, cfg.heads, 4, cfg.head_dim)
    for h in range(cfg.heads):
        rows = slice(h * cfg.head_dim, (h + 1) * cfg.head_dim)
        np.testing.assert_allclose(q[:, h].detach().numpy(), _np(x) @ _np(a.w_q.weight[rows]).T)
        np.testing.assert_allclose(k[:, h].detach().numpy(), _np(x) @ _np(a.w_k.weight[rows]).T)


def test_the_learned_parameters_start_where_documented():
    """cosine: T = cosine_temperature; qknorm_gain: gain 1; ssmax: s = 1 / ln(training length);
    sink: logit 0; one per head. A training length of 2 keys still gives n_ref 2."""
    cfg = TrainingConfig(d_model=9, heads=3, items_min=1, items_max=1, cosine_temperature=0.25)  # seq_len 2
    start = {"cosine": ("log_t", math.log(0.25)), "qknorm_gain": ("log_t", 0.0),
             "ssmax": ("ssmax_s", 1 / math.log(2)), "sink": ("sink", 0.0)}
    for rule in TRAINING_RULES:
        a = SelfAttention(cfg, rule)
        assert a.n_ref == 2
        for name in ("log_t", "ssmax_s", "sink"):
            p = getattr(a, name)
            if rule in start and start[rule][0] == name:
                assert p.shape == (3, 1, 1) and p.requires_grad, (rule, name)
                np.testing.assert_allclose(p.detach().numpy(), start[rule][1], rtol=1e-6)
            else:
                assert p is None, (rule, name)
    fixed = SelfAttention(cfg.replace(temperature=2.5), "temperature")
    assert fixed.temperature() == 2.5
    learned = SelfAttention(cfg, "cosine").temperature()
    np.testing.assert_allclose(learned.detach().numpy(), 0.25, rtol=1e-6)
    assert SelfAttention(TrainingConfig(d_model=8, items_max=40), "logn").n_ref == 41


@pytest.mark.parametrize("task", ["retrieval", "recall"])
def test_init_draws_every_weight_in_order_with_its_documented_std(task):
    """Replays the generator: embedding (1 / sqrt(in) for features, 1 for tokens and learned
    positions), per block W_Q, W_K at qk_init / sqrt(d), W_V at 1 / sqrt(d), W_O at
    1 / sqrt(H d_k), the MLP at 1 / sqrt(d) and 1 / sqrt(4 d), the head at 1 / sqrt(d); biases 0."""
    cfg = TrainingConfig(task=task, d_model=12, heads=2, d_k=5, layers=2, mlp=True, qk_init=0.5,
                         key_dim=4, classes=3, pairs=3, items_max=5)
    m = AttentionModel(cfg, "sqrt", input_features(cfg), vocab_size(cfg))
    m.init_weights(torch.Generator().manual_seed(11))
    g = torch.Generator().manual_seed(11)
    d = 12

    def draw(p, std):
        return torch.randn(p.shape, generator=g) * std

    expected = []
    if task == "retrieval":
        expected.append((m.embed.weight, draw(m.embed.weight, 1 / math.sqrt(4 + 3 + 1))))
        expected.append((m.embed.bias, torch.zeros(d)))
    else:
        expected.append((m.tok.weight, draw(m.tok.weight, 1.0)))
        expected.append((m.pos.weight, draw(m.pos.weight, 1.0)))
    for blk in m.blocks:
        a = blk.attn
        expected += [(a.w_q.weight, draw(a.w_q.weight, 0.5 / math.sqrt(d))),
                     (a.w_k.weight, draw(a.w_k.weight, 0.5 / math.sqrt(d))),
                     (a.w_v.weight, draw(a.w_v.weight, 1 / math.sqrt(d))),
                     (a.w_o.weight, draw(a.w_o.weight, 1 / math.sqrt(2 * 5))),
                     (blk.mlp.fc.weight, draw(blk.mlp.fc.weight, 1 / math.sqrt(d))),
                     (blk.mlp.fc.bias, torch.zeros(4 * d)),
                     (blk.mlp.proj.weight, draw(blk.mlp.proj.weight, 1 / math.sqrt(4 * d))),
                     (blk.mlp.proj.bias, torch.zeros(d))]
    expected += [(m.head.weight, draw(m.head.weight, 1 / math.sqrt(d))),
                 (m.head.bias, torch.zeros(3))]
    for i, (param, want) in enumerate(expected):
        assert param.shape == want.shape and torch.equal(param.detach(), want), f"tensor {i}"


def test_learned_positions_refuse_a_longer_sequence_naming_the_way_out():
    cfg, m = _model("sqrt", task="recall", positions="learned")  # 7 positions
    tokens = torch.zeros(1, 8, dtype=torch.long)
    with pytest.raises(ValueError, match=r"^8 tokens, but learned positions exist only for 7: "
                                         r"use positions sinusoidal or none$"):
        m.embed_inputs(tokens)
    assert m.embed_inputs(tokens[:, :7]).shape == (1, 7, cfg.d_model)  # 7 fit exactly


@pytest.mark.parametrize("rule, changes, rows, masked", [
    ("logn", {"task": "recall", "positions": "sinusoidal"}, 2, "none"),
    ("sink", {"task": "recall", "mlp": True}, 3, "full"),
    ("ssmax", {"mlp": True}, 2, "padding"),
    ("sigmoid", {}, 4, "padding"),
    ("softcap", {"task": "recall", "positions": "none", "layernorm": False}, 1, "causal"),
])
def test_the_streamed_forward_equals_the_rebuilt_model_and_keeps_the_readout_rows(
        rule, changes, rows, masked):
    """Query rows in chunks: the class logits of the whole model, and each layer's weights of
    each example's readout row (a readout at a chunk's first, middle and last row)."""
    cfg, m = _model(rule, **changes)
    batch, inputs = _batch(cfg)
    t = inputs.shape[1]
    readout = torch.tensor([t - 1, 1, 2])  # examples end their chunks at other rows
    mask, causal = None, False
    if masked == "padding":
        mask = batch.mask
    elif masked == "full":  # a (B, 1, T, T) causal mask given whole
        mask = causal_mask(t).expand(3, 1, t, t)
    elif masked == "causal":
        causal = True  # built chunk by chunk
    elif cfg.task == "recall":
        causal = True
    with torch.no_grad():
        got, sink = m.forward_streamed(inputs, readout, mask, rows, causal=causal)
    ref_mask = causal_mask(t) if causal else mask
    want, weights = reference_model(m, inputs, readout, ref_mask)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=_atol(cfg))
    assert len(sink) == cfg.layers
    for picked, w in zip(sink, weights, strict=True):
        assert picked.shape == (3, cfg.heads, t)
        for b in range(3):
            np.testing.assert_allclose(picked[b].numpy(), w[b, :, readout[b].item()], rtol=1e-9,
                                       atol=100 * _atol(cfg))


def test_the_gradient_taps_see_each_layer_in_order():
    cfg, m = _model("sqrt", layers=2)
    batch, inputs = _batch(cfg)

    class Taps:
        def __init__(self):
            self.layers, self.seen = 0, []

        def next_layer(self):
            self.layers += 1
            return self.layers - 1

        def watch(self, layer, *tensors):
            self.seen.append((layer, len(tensors), tensors[-1]))

    taps = Taps()
    m(inputs, batch.readout, batch.mask, taps=taps)
    assert [(layer, n) for layer, n, _ in taps.seen] == [(0, 5), (1, 5)]
    assert all(mask is batch.mask for *_, mask in taps.seen)


def test_the_documented_defaults_of_the_public_functions():
    """attend's rule is sqrt; T is 1 where a caller leaves it out."""
    q, k, v = _qkv()
    out, _, _ = attend(q, k, v)
    r_out, _, _ = reference_attention("sqrt", q, k, v)
    np.testing.assert_allclose(out.numpy(), r_out, rtol=1e-9, atol=1e-12)
    raw = np.einsum("bhid,bhjd->bhij", q.numpy(), k.numpy())
    np.testing.assert_allclose(scale_scores(q, k, "temperature").numpy(), raw, rtol=1e-12)
    np.testing.assert_allclose(scale_similarity(torch.from_numpy(raw), "temperature", 8).numpy(),
                               raw, rtol=0)


def test_without_a_mask_n_is_the_number_of_keys_not_of_query_rows():
    """3 query rows against 7 keys (a chunk of rows): every row sees n = 7 > n_ref 3."""
    q, _, _ = _qkv(t=3)
    _, k, v = _qkv(t=7, seed=1)
    for rule in ("logn", "ssmax", "yarn_dynamic", "sigmoid"):
        out, logits, weights = attend(q, k, v, rule, None, n_ref=N_REF, ssmax_s=S_SSMAX)
        r = reference_attention(rule, q, k, v)
        for got, want in zip((out, logits, weights), r, strict=True):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-12, err_msg=rule)


def test_everything_is_made_on_the_inputs_device():
    """On the meta device (no storage) a tensor made on the CPU instead fails as it would on a
    GPU: masks, position codes, the sink's column, the captured mask, the streamed rows."""
    meta = torch.device("meta")
    assert sinusoidal_positions(5, 4, meta).device == meta
    assert causal_mask(3, meta).device == meta
    assert padding_mask(torch.tensor([2, 3], device=meta), 3).device == meta
    q = torch.randn(2, 2, 4, 8, device=meta)
    for rule in ("sink", "sigmoid", "softcap", "logn"):
        assert attend(q, q, q, rule, causal_mask(4, meta))[0].device == meta
        assert attend(q, q, q, rule)[0].device == meta
    from torch.fx.experimental import _config as fx_config

    for changes in ({"positions": "learned"}, {"positions": "sinusoidal"}):
        cfg, m = _model("sink", task="recall", **changes)
        batch, inputs = _batch(cfg)
        m = m.to(meta)
        caps = []
        out = m(inputs.to(meta), batch.readout.to(meta), None, capture=caps)
        assert out.device == meta and caps[0].mask.device == meta
        with fx_config.patch(meta_nonzero_assume_all_nonzero=True):  # nonzero() on meta
            out, rows = m.forward_streamed(inputs.to(meta), batch.readout.to(meta), None, 2,
                                           causal=True)
        assert out.device == meta and rows[0].device == meta


def test_a_capture_holds_the_mask_the_layer_used_as_booleans():
    cfg, m = _model("sqrt", layers=1)  # retrieval: a padding mask
    batch, inputs = _batch(cfg)
    caps = []
    with torch.no_grad():
        m(inputs, batch.readout, batch.mask, capture=caps)
        m(inputs, batch.readout, None, capture=caps)
    t = inputs.shape[1]
    lengths = batch.lengths.tolist()
    assert caps[0].mask.dtype == caps[1].mask.dtype == torch.bool
    assert caps[0].mask.shape == caps[1].mask.shape == (3, 1, t, t)
    for b, n in enumerate(lengths):
        assert caps[0].mask[b, 0].tolist() == [[j < n for j in range(t)]] * t
    assert bool(caps[1].mask.all())


def test_the_streamed_defaults_are_not_causal_and_a_padding_mask_adds_to_causality():
    cfg, m = _model("logn", mlp=True)  # retrieval: padded sets
    batch, inputs = _batch(cfg)
    t = inputs.shape[1]
    readout = torch.tensor([t - 1, 3, 0])
    with torch.no_grad():
        got, _ = m.forward_streamed(inputs, readout, batch.mask, 2)  # causal left out
        x = m.blocks[0].ln1(m.embed_inputs(inputs))
        one = m.blocks[0].attn.forward_streamed(x, None, 3, readout, [])
        block = m.blocks[0].forward_streamed(m.embed_inputs(inputs), None, 3, readout, [])
        both, _ = m.forward_streamed(inputs, readout, batch.mask, 2, causal=True)
    np.testing.assert_allclose(got.numpy(), reference_model(m, inputs, readout, batch.mask)[0],
                               rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(one.numpy(), m.blocks[0].attn(x, None).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(block.numpy(),
                               m.blocks[0](m.embed_inputs(inputs), None).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    padded_and_causal = batch.mask & causal_mask(t)
    np.testing.assert_allclose(both.numpy(), reference_model(m, inputs, readout,
                                                             padded_and_causal)[0],
                               rtol=1e-9, atol=1e-11)


def test_the_streamed_pass_computes_each_query_row_once(monkeypatch):
    cfg, m = _model("sqrt")
    batch, inputs = _batch(cfg)
    rows_seen = []
    real = SelfAttention._attend

    def spy(self, q, k, v, mask, tap=None):
        rows_seen.append(q.shape[2])
        return real(self, q, k, v, mask, tap)

    monkeypatch.setattr(SelfAttention, "_attend", spy)
    with torch.no_grad():
        m.forward_streamed(inputs, batch.readout, batch.mask, 4)
    t = inputs.shape[1]  # 6 rows in chunks of 4, in each of 2 layers
    assert t == 6 and rows_seen == [4, 2, 4, 2]


@pytest.mark.parametrize("positions", ["sinusoidal", "none"])
def test_only_learned_positions_are_parameters(positions):
    cfg = TrainingConfig(task="recall", d_model=16, heads=2, pairs=3, classes=3,
                         positions=positions)
    m = AttentionModel(cfg, "dk", input_features(cfg), vocab_size(cfg))
    assert m.pos is None and m.embed is None and m.rule == "dk"  # (muP's plan reads the rule)
    assert sum(p.numel() for p in m.parameters()) == cfg.n_params
