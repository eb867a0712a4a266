"""The scale controls in training: softcap, sink, sigmoid and yarn in the model's attention (the
same math as the simulation's), QK-clip's weight-space clip after each step, and what is logged."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.rules import RULE_REGISTRY, RuleParams  # noqa: E402
from engine.training.config import TrainingConfig  # noqa: E402
from engine.training.model import attend, causal_mask, padding_mask, scale_scores  # noqa: E402
from engine.training.qk_clip import head_max_logits, row_is_real  # noqa: E402
from engine.training.tasks import make_batch, stream_seed  # noqa: E402
from engine.training.trainer import Trainer  # noqa: E402

SMALL = TrainingConfig(task="retrieval", d_model=32, heads=4, layers=2, items_min=3, items_max=8,
                       batch=16, steps=6, log_every=2, probe_size=8, hist_bins=40, device="cpu",
                       scalings=("sqrt",))


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _qkv(b=3, h=2, t=6, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, t, d, generator=g, dtype=torch.float64) * 2.5 for _ in range(3))


@pytest.mark.parametrize("masking", ["none", "causal", "padding"])
@pytest.mark.parametrize("rule", ["softcap", "sink", "sigmoid", "yarn"])
def test_model_attention_weights_are_the_rules_numpy_weights(rule, masking):
    q, k, v = _qkv()
    t = q.shape[-2]
    mask = {"none": None, "causal": causal_mask(t),
            "padding": padding_mask(torch.tensor([6, 3, 4]), t)}[masking]
    sink = torch.tensor([1.5, -0.5], dtype=torch.float64).view(2, 1, 1)
    _, logits, w = attend(q, k, v, rule, mask, n_ref=4, softcap=2.0, sink=sink)
    pre = scale_scores(q, k, rule, mask=mask, n_ref=4)  # the logits before the cap
    spec = RULE_REGISTRY[rule]
    full = torch.ones(1, 1, t, t, dtype=torch.bool) if mask is None else mask
    m = full.expand(3, 2, t, t).numpy()
    n = m.sum(-1, keepdims=True)
    params = RuleParams(8, log_n=np.log(n), softcap=2.0,
                        sink=np.broadcast_to(sink.numpy()[None], (3, 2, t, 1)))
    z = pre.numpy()
    expect = spec.row_metrics(np.where(m, logits.numpy(), -1e300), params,
                              z if spec.cap else None).weights
    np.testing.assert_allclose(w.numpy(), expect, rtol=1e-12, atol=1e-300)
    assert np.all(w.numpy()[~m] == 0)  # masked keys get nothing, whatever the rule
    if rule == "softcap":
        assert logits.abs().max() <= 2.0 and pre.abs().max() > 2.0


def test_sink_logit_is_learned_per_head_and_logged():
    cfg = SMALL.replace(scalings=("sqrt", "sink"), lr=0.05)
    t = Trainer(cfg)
    snap = list(t.iterate())[-1]
    sink = t.runs[1].model.blocks[0].attn.sink
    assert sink.shape == (4, 1, 1) and not torch.all(sink == 0)  # it moved from 0
    r = snap.run_index("sink")
    np.testing.assert_allclose(snap.heads["sink_logit"][-1, r, 0], sink.detach().view(-1).numpy(),
                               rtol=1e-6)
    assert np.all(snap.heads["sink_weight"][:, r] > 0) and np.all(snap.heads["sink_weight"][:, 0] == 0)
    np.testing.assert_allclose(snap.heads["key_mass"][:, r] + snap.heads["sink_weight"][:, r], 1.0,
                               rtol=1e-12)
    rows = snap.metrics_rows()
    assert all(row["sink_logit"] == "" for row in rows if row["scaling"] == "sqrt")
    assert all(isinstance(row["sink_weight_mean"], float) for row in rows)
    # the probe weights are the sink's: rows sum to the key mass, below 1
    assert np.all(snap.probe_weights[r].sum(-1) < 1) and np.all(snap.probe_weights[r].sum(-1) > 0)


def test_sigmoid_key_mass_is_the_sum_of_the_models_own_weights():
    cfg = SMALL.replace(scalings=("sigmoid",), steps=1)
    t = Trainer(cfg)
    capture: list = []  # the weights at init: what the log at step 0 describes
    with torch.no_grad():
        t.runs[0].model(t.probe.inputs, t.probe.readout, t.probe.mask, capture)
    t.advance()
    snap = t.snapshot()
    lengths = t.probe.lengths.numpy()
    for layer, cap in enumerate(capture):
        w = cap.weights.numpy()  # (B, H, T, T)
        real = np.arange(w.shape[2])[None, :] < lengths[:, None]  # rows that count (>= 2 keys)
        per_head = [w[:, h].sum(-1)[real].mean() for h in range(cfg.heads)]
        np.testing.assert_allclose(snap.heads["key_mass"][0, 0, layer], per_head, rtol=1e-5)


# -- QK-clip --------------------------------------------------------------------------------------
def _batch0(cfg: TrainingConfig):
    """The first training batch (the one the first update is made on)."""
    return make_batch(cfg, cfg.batch, torch.Generator().manual_seed(stream_seed(cfg.seed, 1)))


def _brute_max_logits(logits: torch.Tensor, mask, lengths) -> torch.Tensor:
    """(H,) the largest signed logit per head, by a plain loop over the logits that count: a
    real query row (i < length of its example) to a key the mask lets it see (K2's S_max)."""
    b, h, t, s = logits.shape
    values = logits.tolist()
    seen = mask.expand(b, 1, t, s).tolist() if mask is not None else None
    out = [-math.inf] * h
    for ex in range(b):
        for head in range(h):
            for i in range(int(lengths[ex])):
                for j in range(s):
                    if seen is None or seen[ex][0][i][j]:
                        out[head] = max(out[head], values[ex][head][i][j])
    return torch.tensor(out, dtype=logits.dtype)


def _layer_max_logits(model, batch) -> list[torch.Tensor]:
    """(H,) largest sqrt logit per head of every layer on ``batch`` (the clip's definition),
    computed here by a loop, not by the clip's own ``head_max_logits``."""
    out = []
    capture: list = []
    with torch.no_grad():
        model(batch.inputs, batch.readout, batch.mask, capture)
    for cap in capture:
        out.append(_brute_max_logits(cap.logits, batch.mask, batch.lengths))
    return out


def test_head_max_logits_is_the_largest_signed_logit_of_the_rows_that_count():
    """Hand-made logits (2 examples, 2 heads, 3 queries, 3 keys): the largest |logit| is a
    negative one (-50), a padded query row and a masked key hold larger values than anything
    that counts, so the answer is only right for the signed maximum over real rows and visible
    keys."""
    logits = torch.zeros(2, 2, 3, 3)
    logits[0, 0] = torch.tensor([[1.0, -50.0, 2.0], [0.5, 3.0, 99.0], [0.0, 0.0, 0.0]])
    logits[1, 0] = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0], [77.0, 77.0, 77.0]])
    logits[0, 1] = torch.tensor([[-7.0, -8.0, -40.0], [-9.0, -6.5, 88.0], [-1.0, -1.0, -1.0]])
    logits[1, 1] = torch.tensor([[-30.0, -20.0, -10.0], [-3.0, -2.5, -2.0], [66.0, 66.0, 66.0]])
    lengths = torch.tensor([3, 2])  # example 1's third query is padding
    mask = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    mask[0, 0, 1, 2] = False  # query 1 does not see key 2 (the 99 and the 88)
    # head 0: example 0 rows 0-2 (row 1 without key 2): max(1, -50, 2, 0.5, 3, 0, 0, 0) = 3;
    # example 1 rows 0-1: -1 at most -> 3. head 1: -6.5 (ex 0, row 1, key 1) vs -1 (ex 0, row 2)
    # vs -2 (ex 1, row 1, key 2 is masked: -2.5 then) -> -1
    got = head_max_logits(logits, mask, lengths)
    assert got.tolist() == [3.0, -1.0]
    assert _brute_max_logits(logits, mask, lengths).tolist() == [3.0, -1.0]
    # without a mask the masked keys count: 99 (head 0), 88 (head 1); padding never does
    assert head_max_logits(logits, None, lengths).tolist() == [99.0, 88.0]
    # a head whose logits that count are all negative has a negative S_max (|logit| would be 40)
    only = logits[:1, 1:, :1]  # example 0, head 1, query 0: -7, -8, -40
    assert head_max_logits(only, None, torch.tensor([1])).tolist() == [-7.0]


def test_real_rows_are_made_on_the_device_of_the_lengths():
    """The (B, 1, T, 1) mask of real query rows, by hand, and on the lengths' device: torch's
    "meta" device stands in for a GPU (an arange left on the CPU cannot meet lengths there)."""
    got = row_is_real(torch.tensor([1, 3]), 3)
    assert got.shape == (2, 1, 3, 1)
    assert got[:, 0, :, 0].tolist() == [[True, False, False], [True, True, True]]
    on_meta = row_is_real(torch.tensor([1, 3], device="meta"), 3)
    assert on_meta.device.type == "meta" and on_meta.shape == (2, 1, 3, 1)


def test_qk_clip_brings_the_clipped_heads_back_to_tau_and_leaves_the_others_alone():
    base = SMALL.replace(lr=0.05, qk_init=3.0)
    # after one update of the unclipped run: the heads' largest logits on that batch
    ref = Trainer(base)
    ref.advance()
    before = _layer_max_logits(ref.runs[0].model, _batch0(base))[0]
    tau = float(before.sort().values[1:3].mean())  # two heads of layer 0 above tau, two below
    cfg = base.replace(scalings=("sqrt", "qkclip"), qk_clip_tau=tau)
    t = Trainer(cfg)
    t.advance()
    plain, clipped = (run.model.blocks[0].attn for run in t.runs)
    over = before > tau
    assert 0 < int(over.sum()) < cfg.heads
    d = plain.d_k
    for h in range(cfg.heads):
        rows = slice(h * d, (h + 1) * d)
        for name in ("w_q", "w_k"):
            mine = getattr(clipped, name).weight[rows]
            theirs = getattr(plain, name).weight[rows]
            if over[h]:
                gamma = math.sqrt(tau / float(before[h]))
                torch.testing.assert_close(mine, theirs * gamma, rtol=1e-6, atol=0)
            else:  # untouched: the same update as sqrt's, bit for bit
                assert torch.equal(mine, theirs)
    # after the step, on that batch, every head's largest logit is at most tau, and exactly tau
    # (float tolerance) for the heads that were clipped, in every layer
    after = _layer_max_logits(t.runs[1].model, _batch0(cfg))
    clipped_heads = int(t.runs[1].clip_since_log.sum())
    assert clipped_heads >= int(over.sum())
    for layer in after:
        assert float(layer.max()) <= tau * (1 + 1e-5)
    torch.testing.assert_close(after[0][over], torch.full((int(over.sum()),), tau), rtol=1e-5,
                               atol=0)
    assert t.runs[1].clipped_per_step == [clipped_heads]
    # a tau below every head of both layers: each layer is clipped on the output of the clipped
    # layers below it, so every head of every layer ends exactly at tau
    low = Trainer(base.replace(scalings=("qkclip",), qk_clip_tau=10.0))
    low.advance()
    for layer in _layer_max_logits(low.runs[0].model, _batch0(cfg)):
        torch.testing.assert_close(layer, torch.full((cfg.heads,), 10.0), rtol=1e-5, atol=0)
    assert low.runs[0].clipped_per_step == [cfg.layers * cfg.heads]


def test_qk_clip_is_reproducible_bit_for_bit_and_logged_per_step():
    cfg = SMALL.replace(scalings=("qkclip",), lr=0.05, qk_init=3.0, qk_clip_tau=2.0)
    a, b = Trainer(cfg), Trainer(cfg)
    sa, sb = list(a.iterate())[-1], list(b.iterate())[-1]
    for (ka, va), (kb, vb) in zip(a.runs[0].model.state_dict().items(),
                                  b.runs[0].model.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    assert sa.metrics_rows() == sb.metrics_rows()
    per_step = sa.clipped_per_step[0]
    assert per_step.shape == (cfg.steps,) and per_step.sum() > 0  # tau = 2 is reached
    rows = sa.metrics_rows()
    # clipped_heads at a log = mean heads clipped per update since the previous log
    steps = [row["step"] for row in rows]
    for prev, row in zip([0, *steps[:-1]], rows):
        if row["step"] > prev:
            expect = per_step[prev:row["step"]].mean()
            assert row["clipped_heads"] == pytest.approx(expect)
    heads = sa.head_rows()
    assert sum(row["clip_count"] for row in heads) == per_step.sum()
    assert sa.histogram_arrays()["clipped_heads_per_step"].shape == (1, cfg.steps)


def test_rules_without_the_clip_log_no_clips():
    snap = list(Trainer(SMALL.replace(scalings=("sqrt", "softcap"))).iterate())[-1]
    assert all(row["clipped_heads"] == "" for row in snap.metrics_rows())
    assert not snap.clipped_per_step.any()


def test_qknorm_gain_is_qknorm_times_its_learned_per_head_gain():
    """Logits = g * LN(q).LN(k) / sqrt(d_k), LN without affine (by hand), g = 1 / exp(log_t)
    per head: 1 at init (the same logits as gainless qknorm), and above sqrt(d_k) once g > 1,
    which gainless qknorm can never reach (|LN(q).LN(k)| <= d_k by Cauchy-Schwarz)."""
    q, k, _v = _qkv(h=2, d=8)

    def ln(x):
        x = x - x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)

    by_hand = ln(q) @ ln(k).transpose(-1, -2) / math.sqrt(8)
    torch.testing.assert_close(scale_scores(q, k, "qknorm_gain", 1.0), by_hand)
    torch.testing.assert_close(scale_scores(q, k, "qknorm"), by_hand)
    gain = torch.tensor([3.0, 0.5], dtype=torch.float64).view(2, 1, 1)
    torch.testing.assert_close(scale_scores(q, k, "qknorm_gain", 1.0 / gain), by_hand * gain)
    assert by_hand.abs().max() <= math.sqrt(8) + 1e-9
    assert (by_hand * gain).abs().max() > math.sqrt(8)
    cfg = SMALL.replace(scalings=("qknorm", "qknorm_gain"), lr=0.05)
    t = Trainer(cfg)
    gained = t.runs[1].model.blocks[0].attn.log_t
    assert gained.shape == (4, 1, 1) and torch.all(gained == 0)  # g = 1 at init
    assert t.runs[0].model.blocks[0].attn.log_t is None  # gainless qknorm learns no scale
    list(t.iterate())
    assert not torch.all(gained == 0)  # the gain trained
