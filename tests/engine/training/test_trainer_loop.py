"""The training loop against a plain torch loop written here: the same initial weights and
batches, Adam stepped by hand with the warmup's rate, each log's training means over its own
window of batches, the probe's loss and accuracy, the per-head gradient norms sliced by hand, the
attention statistics of the probe; then the loop's bookkeeping (snapshot steps, cancel, the
snapshot rate limit, divergence, qkclip's counts, the optimizers) on tiny configs."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.nn import functional as F  # noqa: E402

from engine.training.config import TrainingConfig  # noqa: E402
from engine.training.gradients import GradTaps  # noqa: E402
from engine.training.lengths import evaluate_lengths  # noqa: E402
from engine.training.observe import head_stats, logit_edges  # noqa: E402
from engine.training.tasks import make_batch, stream_seed  # noqa: E402
from engine.training.trainer import Trainer, run_training  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

#: logs at 0, 3 and 5: windows of 1, 3 and 2 training batches; warmup over the first 2 updates
TINY = TrainingConfig(d_model=16, heads=2, layers=2, items_min=3, items_max=5, key_dim=4,
                      classes=4, batch=8, probe_size=6, steps=5, log_every=3, warmup=2,
                      lr=0.02, hist_bins=16, softcap=1.5,
                      scalings=("sqrt", "cosine", "ssmax", "sink", "softcap"),
                      eval_lengths=(6,), eval_size=8, eval_every=2, device="cpu")


def _by_hand(cfg: TrainingConfig, models: list) -> dict:
    """The loop written out: every iteration s = 0..steps runs batch s; at a log step the
    window's mean loss and accuracy, the probe, the gradient norms and head statistics are
    recorded before update s (Adam, lr * (s + 1) / warmup during the warmup)."""
    gen = torch.Generator().manual_seed(stream_seed(cfg.seed, 1))
    probe = make_batch(cfg, cfg.probe_size, torch.Generator().manual_seed(stream_seed(cfg.seed, 2)))
    opts = [torch.optim.Adam(m.parameters(), lr=cfg.lr, foreach=True) for m in models]
    edges = logit_edges(cfg.hist_range, cfg.hist_bins)
    d_k = cfg.head_dim
    logs = {0, 3, 5}
    out: dict = {"loss": [], "accuracy": [], "probe_loss": [], "probe_accuracy": [], "heads": [],
                 "lengths": []}
    window: list[list[tuple[float, float]]] = [[] for _ in models]
    for s in range(cfg.steps + 1):
        batch = make_batch(cfg, cfg.batch, gen)
        rows: dict = {"loss": [], "accuracy": [], "probe_loss": [], "probe_accuracy": [],
                      "heads": [], "lengths": []}
        for r, (model, opt) in enumerate(zip(models, opts, strict=True)):
            model.train()
            taps = GradTaps(cfg.layers, cfg.heads) if s in logs else None
            logits = model(batch.inputs, batch.readout, batch.mask, taps=taps)
            loss = F.cross_entropy(logits, batch.targets)
            opt.zero_grad()
            loss.backward()
            window[r].append((loss.item(), (logits.argmax(1) == batch.targets).double().mean().item()))
            if s in logs:
                rows["loss"].append(np.mean([v[0] for v in window[r]]))
                rows["accuracy"].append(np.mean([v[1] for v in window[r]]))
                window[r] = []
                model.eval()
                capture: list = []
                with torch.no_grad():
                    p = model(probe.inputs, probe.readout, probe.mask, capture)
                rows["probe_loss"].append(F.cross_entropy(p, probe.targets).item())
                rows["probe_accuracy"].append((p.argmax(1) == probe.targets).double().mean().item())
                per: dict = {name: np.zeros((cfg.layers, cfg.heads)) for name in
                             ("grad_norm_q", "grad_norm_k", "grad_norm_v", "grad_norm_o")}
                for layer, blk in enumerate(model.blocks):
                    for name in "qkvo":
                        g = getattr(blk.attn, f"w_{name}").weight.grad.double()
                        for h in range(cfg.heads):
                            part = g[:, h * d_k:(h + 1) * d_k] if name == "o" else g[h * d_k:(h + 1) * d_k]
                            per[f"grad_norm_{name}"][layer, h] = math.sqrt(float((part ** 2).sum()))
                per.update(taps.metrics())
                per["stats"] = [head_stats(
                    c.logits.double().numpy(), c.mask.numpy(), probe.lengths.numpy(), edges,
                    cfg.saturation_threshold, model.rule,
                    sink=None if c.sink is None else c.sink.double().numpy(),
                    pre_logits=None if c.pre_logits is None else c.pre_logits.double().numpy(),
                    softcap=1.5) for c in capture]
                per["temperature"] = [None if b.attn.log_t is None else
                                      b.attn.log_t.detach().exp().view(-1).double().numpy()
                                      for b in model.blocks]
                per["ssmax_s"] = [None if b.attn.ssmax_s is None else
                                  b.attn.ssmax_s.detach().view(-1).double().numpy()
                                  for b in model.blocks]
                per["sink"] = [None if c.sink is None else c.sink.double().numpy() for c in capture]
                rows["heads"].append(per)
                rows["lengths"].append(evaluate_lengths(model, cfg, "cpu") if s in (0, 5) else None)
            if s < cfg.steps:
                for group in opt.param_groups:
                    group["lr"] = cfg.lr * ((s + 1) / 2 if s < 2 else 1.0)
                opt.step()
        if s in logs:
            for key, value in rows.items():
                out[key].append(value)
    out["weights"] = [copy.deepcopy(m.state_dict()) for m in models]
    return out


def test_the_loop_matches_a_plain_torch_loop():
    """One run of TINY beside the hand loop, every check on it (one test, not a fixture shared
    by several: mutmut attributes a shared fixture's calls to the first test alone)."""
    with torch.random.fork_rng():
        t = Trainer(TINY)
        models = [copy.deepcopy(run.model) for run in t.runs]  # the initial weights
        snaps = list(t.iterate())
        ref = _by_hand(TINY, models)
    tiny = (t, snaps, ref)
    for check in (_the_logged_means_are_those_of_each_window_of_batches,
                  _the_gradient_norms_and_taps_are_those_of_the_log_steps_batch,
                  _the_head_statistics_are_those_of_the_probe_with_each_layers_weights,
                  _the_lengths_are_evaluated_every_other_log_and_at_the_end,
                  _the_weights_after_the_run_are_those_of_adam_with_the_warmup,
                  _each_snapshot_is_taken_after_its_log_with_the_updates_done):
        check(tiny)


def _the_logged_means_are_those_of_each_window_of_batches(tiny):
    _, snaps, ref = tiny
    snap = snaps[-1]
    assert snap.log_steps.tolist() == [0, 3, 5] and snap.valid.all()
    for name in ("loss", "accuracy", "probe_loss", "probe_accuracy"):
        np.testing.assert_allclose(snap.scalars[name], np.array(ref[name]), rtol=1e-5, atol=1e-7,
                                   err_msg=name)
    # the accuracy is a fraction of 8 examples per batch, and of 6 probe examples
    assert np.allclose(snap.scalars["probe_accuracy"] * 6, np.round(snap.scalars["probe_accuracy"] * 6))


def _the_gradient_norms_and_taps_are_those_of_the_log_steps_batch(tiny):
    _, snaps, ref = tiny
    snap = snaps[-1]
    for i in range(3):
        for r in range(len(TINY.scalings)):
            per = ref["heads"][i][r]
            for name in ("grad_norm_q", "grad_norm_k", "grad_norm_v", "grad_norm_o",
                         "grad_norm_attn", "grad_norm_logits", "grad_norm_scores",
                         "grad_norm_query", "softmax_gain"):
                np.testing.assert_allclose(snap.heads[name][i, r], per[name], rtol=1e-5,
                                           atol=1e-9, err_msg=f"{name} log {i} run {r}")
    assert np.all(snap.heads["grad_norm_q"] > 0)


def _the_head_statistics_are_those_of_the_probe_with_each_layers_weights(tiny):
    _, snaps, ref = tiny
    snap = snaps[-1]
    fields = {"entropy_norm": "entropy_norm", "logit_mean": "logit_mean",
              "logit_std": "logit_std", "logit_max_abs": "logit_max_abs",
              "top_weight": "top_weight", "saturated_frac": "saturated_frac",
              "jacobian_fro": "jacobian_fro", "key_mass": "key_mass",
              "sink_weight": "sink_weight"}
    for i in range(3):
        for r, rule in enumerate(TINY.scalings):
            per = ref["heads"][i][r]
            for layer in range(TINY.layers):
                st = per["stats"][layer]
                for key, attr in fields.items():
                    np.testing.assert_allclose(snap.heads[key][i, r, layer], getattr(st, attr),
                                               rtol=1e-5, atol=1e-5, err_msg=f"{key} {rule}")
                np.testing.assert_array_equal(snap.logit_hist[i, r, layer], st.hist_counts)
                np.testing.assert_array_equal(snap.logit_outside[i, r, layer], st.hist_outside)
                np.testing.assert_allclose(snap.logit_percentiles[i, r, layer], st.percentiles,
                                           rtol=1e-5, atol=1e-5)  # (logits ~10)
                want_t = per["temperature"][layer]
                if want_t is None:
                    assert np.all(snap.heads["temperature"][i, r, layer] == 0)
                else:
                    np.testing.assert_allclose(snap.heads["temperature"][i, r, layer], want_t,
                                               rtol=1e-6)
                want_s = per["ssmax_s"][layer]
                got_s = snap.heads["ssmax_s"][i, r, layer]
                assert np.all(got_s == 0) if want_s is None else np.allclose(got_s, want_s, rtol=1e-6)
                want_sink = per["sink"][layer]
                got_sink = snap.heads["sink_logit"][i, r, layer]
                assert np.all(got_sink == 0) if want_sink is None else \
                    np.allclose(got_sink, want_sink, rtol=1e-6)
    # the probe weights are the last log's, of probe example 0 (its own length)
    for r in range(len(TINY.scalings)):
        for layer in range(TINY.layers):
            np.testing.assert_allclose(snap.probe_weights[r, layer],
                                       ref["heads"][2][r]["stats"][layer].probe_weights, rtol=1e-5,
                                       atol=1e-5)
    assert snap.has_temperature.tolist() == [False, True, False, False, False]
    # the learned parameters moved: a log taken before the updates would not see it
    assert not np.allclose(snap.heads["temperature"][2, 1], snap.heads["temperature"][0, 1])
    assert not np.allclose(snap.heads["ssmax_s"][2, 2], snap.heads["ssmax_s"][0, 2])
    assert not np.allclose(snap.heads["sink_logit"][2, 3], snap.heads["sink_logit"][0, 3])


def _the_lengths_are_evaluated_every_other_log_and_at_the_end(tiny):
    _, snaps, ref = tiny
    snap = snaps[-1]
    assert snap.length_evaluated.tolist() == [True, False, True]
    for i in (0, 2):
        for r in range(len(TINY.scalings)):
            for key, value in ref["lengths"][i][r].items():
                assert snap.scalars[key][i, r] == pytest.approx(value, rel=1e-5), (key, i, r)
    assert np.all(snap.scalars["accuracy_len6"][1] == 0)
    assert np.all(snap.scalars["entropy_norm_len6"][1] == 0)
    assert np.all(snap.scalars["entropy_norm_len6"][[0, 2]] > 0)
    assert snap.length_logs(0).tolist() == [0, 2]


def _the_weights_after_the_run_are_those_of_adam_with_the_warmup(tiny):
    t, _, ref = tiny
    for run, state in zip(t.runs, ref["weights"], strict=True):  # 5 updates, none after the end
        for key, value in run.model.state_dict().items():
            np.testing.assert_allclose(value.numpy(), state[key].numpy(), rtol=1e-5, atol=1e-7,
                                       err_msg=key)
        assert run.opt.param_groups[0]["lr"] == TINY.lr  # the warmup is over at update 2
        assert type(run.opt) is torch.optim.Adam and run.opt.defaults["foreach"] is True


def _each_snapshot_is_taken_after_its_log_with_the_updates_done(tiny):
    t, snaps, _ = tiny
    assert [s.step for s in snaps] == [1, 4, 5]  # the update after the log is done
    assert [s.log_steps.tolist() for s in snaps] == [[0], [0, 3], [0, 3, 5]]
    assert [s.done for s in snaps] == [False, False, True]
    assert [s.progress for s in snaps] == [pytest.approx(0.2), pytest.approx(0.8), 1.0]
    assert snaps[0].valid.shape == (1, 5) and snaps[0].scalars["loss"].shape == (1, 5)
    last = snaps[-1]
    assert last.rules == TINY.scalings and last.device == "cpu" and last.config is TINY
    assert last.elapsed_s > 0 and last.steps_per_s * last.elapsed_s == pytest.approx(6)
    assert t.step == 5 and t.done and t.next_iter == 6
    assert last.diverged_step.tolist() == [-1] * 5 and last.diverged_step.dtype == np.int64
    assert last.collapse_step.tolist() == np.full((5, 2, 2), -1).tolist()
    assert last.clipped_per_step.shape == (5, 5) and not last.clipped_per_step.any()
    assert last.clipped_per_step.dtype == np.int64
    dtypes = {"log_steps": np.int64, "valid": bool, "logit_hist": np.int32,
              "logit_outside": np.int64, "logit_percentiles": np.float64,
              "collapse_step": np.int64, "length_evaluated": bool}
    assert {k: getattr(last, k).dtype for k in dtypes} == {k: np.dtype(v) for k, v in dtypes.items()}
    assert {a.dtype for a in (*last.scalars.values(), *last.heads.values())} == {np.dtype(np.float64)}
    assert t.flush_denormal and Trainer(TINY, flush_denormal=False).flush_denormal is False
    np.testing.assert_array_equal(last.hist_edges, logit_edges(TINY.hist_range, TINY.hist_bins))
    # the earlier snapshots' arrays are not changed by later logs
    assert snaps[0].scalars["loss"][0].tolist() == last.scalars["loss"][0].tolist()
    assert not t.advance() and t.next_iter == 6  # done: nothing more


def _small(**kw) -> TrainingConfig:
    base = dict(d_model=8, heads=2, layers=1, items_min=2, items_max=3, key_dim=2, classes=2,
                batch=4, probe_size=3, steps=6, log_every=2, hist_bins=8, scalings=("sqrt",),
                device="cpu")
    return TrainingConfig(**{**base, **kw})


def test_cancel_is_checked_before_every_iteration():
    calls = []
    t = Trainer(_small())
    assert list(t.iterate(cancelled=lambda: calls.append(1) or True)) == []
    assert t.next_iter == 0 and calls == [1]
    t = Trainer(_small())
    snaps = list(t.iterate(cancelled=lambda: calls.append(1) or len(calls) > 4))  # 3 iterations
    assert t.next_iter == 3 and t.step == 3 and not t.done
    assert [s.step for s in snaps] == [1, 3]  # logs at 0 and 2
    trainer, snap = run_training(_small(), cancelled=lambda: True)
    assert trainer.next_iter == 0 and snap.n_logs == 0 and snap.step == 0
    seen = []
    trainer, snap = run_training(_small(), on_snapshot=seen.append)
    assert [s.step for s in seen] == [1, 3, 5, 6] and seen[-1] is snap and snap.done


def test_the_rate_limit_yields_the_first_log_and_the_end():
    t = Trainer(_small())
    snaps = list(t.iterate(min_interval_s=1e9))
    assert [s.step for s in snaps] == [1, 6]
    t = Trainer(_small(steps=3, log_every=1))
    assert [s.step for s in t.iterate()] == [1, 2, 3, 3]  # the end once more


def test_a_forced_log_is_recorded_and_the_arrays_grow_past_their_first_capacity():
    t = Trainer(_small(steps=12, log_every=12))  # 2 logs planned: room for 6 at first
    first = None
    while not t.done:
        assert t.advance(force_log=True)
        first = first or t.snapshot()
    snap = t.snapshot()
    assert snap.log_steps.tolist() == list(range(13)) and snap.valid.all()
    assert first.log_steps.tolist() == [0] and first.scalars["loss"].shape == (1, 1)
    assert snap.scalars["loss"][0, 0] == first.scalars["loss"][0, 0]
    # each forced log's window is one batch: the losses differ from log to log
    assert len(set(snap.scalars["loss"][:, 0].tolist())) == 13
    assert snap.length_evaluated.tolist() == [False] * 13


def test_an_unobserved_trainer_logs_nothing_but_trains_the_same():
    seen = Trainer(_small(steps=3))
    blind = Trainer(_small(steps=3), observe=False)
    list(seen.iterate())
    assert list(blind.iterate())[-1].n_logs == 0
    for a, b in zip(seen.runs[0].model.parameters(), blind.runs[0].model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_run_that_diverges_later_keeps_its_earlier_logs_and_stops_updating():
    cfg = _small(scalings=("none", "sqrt"), steps=6, log_every=2)
    t = Trainer(cfg)
    healthy = Trainer(cfg)
    for _ in range(3):  # iterations 0, 1, 2 (logs at 0 and 2), updates 0, 1, 2 done
        t.advance()
    with torch.no_grad():
        t.runs[0].model.head.weight.fill_(float("nan"))
    frozen = {k: v.clone() for k, v in t.runs[0].model.state_dict().items()}
    snap = list(t.iterate())[-1]
    assert snap.diverged_step.tolist() == [3, -1]
    assert snap.valid[:, 0].tolist() == [True, True, False, False]
    assert snap.valid[:, 1].all() and snap.done and snap.step == 6
    for k, v in t.runs[0].model.state_dict().items():
        assert torch.equal(v, frozen[k]) or torch.isnan(v).all(), k
    # the run after it trained on every batch: as it does beside a healthy run (paired runs
    # share the batches, not the weights)
    ref = list(healthy.iterate())[-1]
    np.testing.assert_array_equal(snap.scalars["loss"][:, 1], ref.scalars["loss"][:, 1])
    for a, b in zip(t.runs[1].model.parameters(), healthy.runs[1].model.parameters(), strict=True):
        assert torch.equal(a, b)
    only = Trainer(_small(scalings=("none",)))
    with torch.no_grad():
        only.runs[0].model.head.weight.fill_(float("nan"))
    only.advance()
    assert only.done and only.step == 1  # no live run: done at once
    snaps = list(only.iterate())
    assert len(snaps) == 1 and snaps[0].n_logs == 1 and not snaps[0].valid.any()


def test_qkclip_counts_each_clipped_head_per_update_and_per_log():
    cfg = _small(scalings=("sqrt", "qkclip"), layers=2, qk_clip_tau=1e-6, steps=5, log_every=3)
    _, snap = run_training(cfg)
    per_step = snap.clipped_per_step
    assert per_step.shape == (2, 5) and not per_step[0].any()
    assert per_step[1].sum() >= 10 and per_step[1].max() <= 4  # most of 2 x 2 heads, each update
    counts = snap.heads["clip_count"][:, 1].sum(axis=(1, 2))
    # log 3 counts updates 0-2, log 5 updates 3-4 (nothing before log 0)
    want = [0, per_step[1, :3].sum(), per_step[1, 3:].sum()]
    assert counts.tolist() == want and not snap.heads["clip_count"][:, 0].any()
    rows = snap.metrics_rows()
    got = [r["clipped_heads"] for r in rows if r["scaling"] == "qkclip"]
    assert got == pytest.approx([0.0, want[1] / 3, want[2] / 2], rel=1e-12)
    assert {r["clipped_heads"] for r in rows if r["scaling"] == "sqrt"} == {""}
    assert snap.histogram_arrays()["clipped_heads_per_step"].tolist() == per_step.tolist()


@pytest.mark.parametrize("optimizer,decay,kind", [
    ("adam", 0.0, torch.optim.Adam), ("adam", 0.1, torch.optim.AdamW), ("sgd", 0.1, torch.optim.SGD)])
def test_the_optimizer_and_its_weight_decay(optimizer, decay, kind):
    t = Trainer(_small(optimizer=optimizer, weight_decay=decay, lr=0.05))
    opt = t.runs[0].opt
    assert type(opt) is kind and opt.defaults["lr"] == 0.05
    assert opt.defaults["weight_decay"] == decay
    assert opt.defaults.get("foreach") is (None if kind is torch.optim.SGD else True)


def test_sgd_with_a_gradient_clip_moves_the_weights_by_lr_times_the_clip():
    """Plain SGD, no decay: the update is -lr * g * clip / |g| when |g| > clip, so the weights
    move by exactly lr * clip in the norm over every parameter."""
    cfg = _small(optimizer="sgd", lr=0.5, grad_clip=1e-3, steps=1)
    t = Trainer(cfg)
    before = [p.detach().clone() for p in t.runs[0].model.parameters()]
    t.advance()
    clipped = math.sqrt(sum(float((p.grad.double() ** 2).sum())
                            for p in t.runs[0].model.parameters() if p.grad is not None))
    assert clipped == pytest.approx(cfg.grad_clip, rel=1e-4)
    # the logged norms are those before the clip: far above it
    assert np.sqrt((t.snapshot().heads["grad_norm_q"][0] ** 2).sum()) > 100 * cfg.grad_clip
    moved = math.sqrt(sum(float(((p.detach() - b).double() ** 2).sum())
                          for p, b in zip(t.runs[0].model.parameters(), before, strict=True)))
    assert moved == pytest.approx(cfg.lr * cfg.grad_clip, rel=1e-4)


def test_mup_groups_get_the_scheduled_rate_times_their_scale():
    cfg = _small(param="mup", warmup=4, lr=0.01, d_model=16, base_width=8)
    t = Trainer(cfg)
    scales = {g["lr_scale"] for g in t.runs[0].opt.param_groups}
    assert len(scales) > 1  # several groups, each with its own scale
    for s in range(3):
        t.advance()
        for g in t.runs[0].opt.param_groups:
            assert g["lr"] == pytest.approx(0.01 * (s + 1) / 4 * g["lr_scale"], rel=1e-12)


# -- the snapshot's tables from arrays written here ------------------------------------------------
def _hand_snapshot():
    """Four rules (a learned temperature, ssmax's s, a sink, qkclip), 1 layer of 2 heads, logs at
    steps 0, 4 and 10; run 1 diverged after its first log, run 3 never logged. Every value is
    distinct: head metric k at [log i, run r, head h] is 100 k + 10 i + r + h / 4."""
    from engine.training.observe import HEAD_METRICS, SCALARS
    from engine.training.trainer import TrainingSnapshot

    cfg = _small(scalings=("cosine", "ssmax", "sink", "qkclip"), eval_lengths=(4,), steps=10)
    n, r, h = 3, 4, 2
    valid = np.array([[True, True, True, False], [True, False, True, False],
                      [True, False, True, False]])
    grid = 10 * np.arange(n)[:, None] + np.arange(r)[None, :]
    scalars = {k: 1000 * (j + 1) + grid.astype(float)
               for j, k in enumerate((*SCALARS, "accuracy_len4", "entropy_norm_len4"))}
    heads = {k: (100 * j + grid)[:, :, None, None] + np.array([0.0, 0.25])[None, None, None, :]
             for j, k in enumerate(HEAD_METRICS)}
    heads["clip_count"] = np.zeros((n, r, 1, h))
    heads["clip_count"][:, 3] = [[[0, 0]], [[3, 2]], [[6, 6]]]
    heads["clip_count"][1, 0] = [[5, 7]]  # (not a qkclip run: never read)
    z = np.zeros
    snap = TrainingSnapshot(
        config=cfg, rules=cfg.scalings, step=7, done=False, elapsed_s=2.0, steps_per_s=4.0,
        device="cpu", log_steps=np.array([0, 4, 10]), valid=valid, scalars=scalars, heads=heads,
        hist_edges=np.arange(3.0), logit_hist=np.ones((n, r, 1, h, 2), dtype=np.int32),
        logit_outside=z((n, r, 1, h, 2), dtype=np.int64), logit_percentiles=z((n, r, 1, h, 9)) + 2,
        probe_weights=z((r, 1, h, 3, 3)) + 3, has_temperature=np.array([True, False, False, False]),
        diverged_step=np.array([-1, 4, -1, -1]), collapse_step=z((r, 1, h), dtype=np.int64) - 1,
        length_evaluated=np.array([True, False, True]), clipped_per_step=z((r, 7), dtype=np.int64))
    return snap, HEAD_METRICS


def test_the_csv_rows_take_each_column_from_its_own_array():
    snap, names = _hand_snapshot()
    k = {name: j for j, name in enumerate(names)}
    rows = snap.metrics_rows()
    assert [(row["scaling"], row["step"]) for row in rows] == [
        ("cosine", 0), ("cosine", 4), ("cosine", 10), ("ssmax", 0), ("sink", 0), ("sink", 4),
        ("sink", 10)]
    assert list(rows[0])[:2] == ["scaling", "step"] and set(snap.csv_columns) == set(rows[0])
    assert snap.csv_columns[-2:] == ("accuracy_len4", "entropy_norm_len4")
    # metrics.csv's name -> the head metric it is the mean of
    columns = {"entropy_norm_mean": "entropy_norm", "top_weight_mean": "top_weight",
               "jacobian_fro_mean": "jacobian_fro", "key_mass_mean": "key_mass",
               "sink_weight_mean": "sink_weight"}
    columns.update((c, c) for c in ("logit_std", "logit_mean", "saturated_frac", *(
        f"grad_norm_{w}" for w in ("q", "k", "v", "o", "attn", "logits", "scores", "query")),
        "softmax_gain"))
    for row in rows:
        r, i = snap.rules.index(row["scaling"]), [0, 4, 10].index(row["step"])
        for j, name in enumerate(("loss", "accuracy", "probe_loss", "probe_accuracy")):
            assert row[name] == 1000 * (j + 1) + 10 * i + r
        for column, metric in columns.items():  # the mean of heads 0 and 0.25 above
            assert row[column] == 100 * k[metric] + 10 * i + r + 0.125, column
        assert row["logit_max_abs"] == 100 * k["logit_max_abs"] + 10 * i + r + 0.25  # the max
        evaluated = i != 1
        assert row["accuracy_len4"] == (5000 + 10 * i + r if evaluated else "")
        assert row["entropy_norm_len4"] == (6000 + 10 * i + r if evaluated else "")
        want = {"temperature": r == 0, "ssmax_s": r == 1, "sink_logit": r == 2}
        for column, own in want.items():
            assert (row[column] == 100 * k[column] + 10 * i + r + 0.125) if own else row[column] == ""
        assert row["clipped_heads"] == ""  # qkclip never logged here
    assert snap.final("loss", "ssmax") == 1001.0  # its last valid log is the first
    assert snap.final("loss", "sink") == 1022.0
    assert snap.final("entropy_norm", "cosine") == 20.125  # a head metric: the heads' mean
    assert math.isnan(snap.final("loss", "qkclip"))
    assert snap.run_index("sink") == 2 and snap.n_logs == 3 and snap.progress == 0.7
    assert snap.length_logs(0).tolist() == [0, 2] and snap.length_logs(1).tolist() == [0]
    plain = dataclasses_replace(snap, length_evaluated=None)
    assert plain.length_logs(2).tolist() == [0, 1, 2]
    assert plain.metrics_rows()[1]["accuracy_len4"] == 5010.0


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


def test_the_clipped_heads_column_is_per_update_since_the_previous_log():
    snap, _ = _hand_snapshot()
    valid = snap.valid.copy()
    valid[:, 3] = True
    rows = dataclasses_replace(snap, valid=valid).metrics_rows()
    got = [row["clipped_heads"] for row in rows if row["scaling"] == "qkclip"]
    assert got == [0.0, 5 / 4, 12 / 6]  # steps 0, 4 and 10: windows of 0, 4 and 6 updates
    rows = dataclasses_replace(snap, valid=valid, log_steps=np.array([0, 1, 10])).metrics_rows()
    got = [row["clipped_heads"] for row in rows if row["scaling"] == "qkclip"]
    assert got == [0.0, 5.0, 12 / 9]  # a window of one update


def test_qkclip_clips_after_the_update_on_that_batch_with_its_padding_masked():
    """The update then the clip written out (Adam, then qk_clip.clip_heads on the same batch):
    every head is over a tau of 1e-6, and its factor depends on the largest logit over the real
    keys; with the padded keys counted the weights differ (checked here, so the test can tell)."""
    from engine.training.qk_clip import clip_heads

    cfg = _small(scalings=("qkclip",), layers=2, qk_clip_tau=1e-6, steps=2, batch=8,
                 items_min=1, items_max=4)
    t = Trainer(cfg)
    model = copy.deepcopy(t.runs[0].model)
    batch = make_batch(cfg, cfg.batch, torch.Generator().manual_seed(stream_seed(cfg.seed, 1)))
    assert not bool(batch.mask.all())  # some keys are padding
    t.advance()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, foreach=True)
    model.train()
    F.cross_entropy(model(batch.inputs, batch.readout, batch.mask), batch.targets).backward()
    opt.step()
    unmasked = copy.deepcopy(model)
    assert clip_heads(model, batch.inputs, batch.mask, batch.lengths, cfg.qk_clip_tau).all()
    clip_heads(unmasked, batch.inputs, None, batch.lengths, cfg.qk_clip_tau)
    got = t.runs[0].model.state_dict()
    far = 0.0
    for key, value in model.state_dict().items():
        np.testing.assert_allclose(got[key].numpy(), value.numpy(), rtol=1e-5, atol=1e-8,
                                   err_msg=key)
        far = max(far, float((unmasked.state_dict()[key] - value).abs().max()))
    assert far > 1e-4
    assert t.snapshot().clipped_per_step.tolist() == [[4]]  # 2 layers x 2 heads, 1 update done


def test_the_head_rows_one_per_layer_and_head_with_the_rules_own_columns():
    snap, names = _hand_snapshot()
    rows = snap.head_rows()
    assert len(rows) == 7 * 2
    assert [(row["scaling"], row["step"], row["layer"], row["head"]) for row in rows[:4]] == [
        ("cosine", 0, 0, 0), ("cosine", 0, 0, 1), ("cosine", 4, 0, 0), ("cosine", 4, 0, 1)]
    for row in rows:
        r, i = snap.rules.index(row["scaling"]), [0, 4, 10].index(row["step"])
        own = {"temperature": r == 0, "ssmax_s": r == 1, "sink_logit": r == 2, "clip_count": r == 3}
        for j, name in enumerate(names):
            want = 100 * j + 10 * i + r + 0.25 * row["head"]
            if name == "clip_count":
                want = float(snap.heads["clip_count"][i, r, 0, row["head"]])
            assert row[name] == (want if own.get(name, True) else ""), (name, row["scaling"])


def test_the_histogram_file_holds_every_array_under_its_name():
    snap, names = _hand_snapshot()
    out = snap.histogram_arrays()
    assert out["rules"].tolist() == list(snap.rules)
    pairs = {"log_steps": snap.log_steps, "valid": snap.valid, "logit_edges": snap.hist_edges,
             "logit_counts": snap.logit_hist, "logit_outside": snap.logit_outside,
             "logit_percentiles": snap.logit_percentiles, "probe_weights": snap.probe_weights,
             "diverged_step": snap.diverged_step, "collapse_step": snap.collapse_step,
             "length_evaluated": snap.length_evaluated,
             "clipped_heads_per_step": snap.clipped_per_step}
    for key, arr in pairs.items():
        assert out[key] is arr, key
    assert out["percentiles"].tolist() == [0.0, 6.68, 15.87, 30.85, 50.0, 69.15, 84.13, 93.32, 100.0]
    for key, arr in snap.scalars.items():
        assert out[key] is arr
    for key in names:
        assert out[f"head_{key}"] is snap.heads[key]
    assert len(out) == 13 + len(snap.scalars) + len(names)
    bare = dataclasses_replace(snap, length_evaluated=None, clipped_per_step=None).histogram_arrays()
    assert "length_evaluated" not in bare and "clipped_heads_per_step" not in bare


def test_a_blanked_run_is_zero_everywhere_and_the_others_are_kept():
    from engine.training.trainer import _LogRecord

    cfg = _small(layers=2, eval_lengths=(4,))
    log = _LogRecord(cfg, 3)
    arrays = (*log.scalars.values(), *log.heads.values(), log.hist, log.outside, log.pct)
    for a in arrays:
        a[...] = 7
    log.valid[:] = True
    assert log.finite(1)
    log.pct[1, 0, 0, 0] = math.inf
    assert not log.finite(1) and log.finite(0)
    log.pct[1, 0, 0, 0] = 7
    log.heads["top_weight"][1, 1, 1] = math.nan
    assert not log.finite(1)
    log.blank(1)
    assert log.valid.tolist() == [True, False, True]
    for a in arrays:
        assert not a[1].any() and (a[0] == 7).all() and (a[2] == 7).all()
    assert log.hist.shape == (3, 2, 2, cfg.hist_bins) and log.pct.shape == (3, 2, 2, 9)
    assert set(log.scalars) == {"loss", "accuracy", "probe_loss", "probe_accuracy",
                                "accuracy_len4", "entropy_norm_len4"}


def test_the_growable_rows_double_and_keep_old_views():
    from engine.training.trainer import _Growable

    g = _Growable((2,), np.int64, 0)
    assert g.data.shape == (1, 2) and g.view().shape == (0, 2)
    views = []
    for k in range(5):
        g.append(np.array([k, -k]))
        views.append(g.view())
    assert g.data.shape == (8, 2) and g.view().tolist() == [[k, -k] for k in range(5)]
    assert [v.shape[0] for v in views] == [1, 2, 3, 4, 5] and views[1].tolist() == [[0, 0], [1, -1]]
    assert g.data.dtype == np.int64


def test_collapse_is_the_first_log_of_a_run_below_the_threshold_lasting_enough_logs():
    from engine.training.trainer import _LogRecord

    cfg = _small(collapse_threshold=0.2, collapse_logs=2)
    t = Trainer(cfg)
    t._steps, t._valid = type(t._steps)((), np.int64, 8), type(t._valid)((1,), bool, 8)
    # head 0: below at 0, above at 2, below at 4 and 6; head 1: below at 0 and 2 then at the
    # threshold exactly (not below); a run not valid at a log is not below
    for s, ent, ok in ((0, (0.1, 0.1), True), (2, (0.5, 0.19), True), (4, (0.1, 0.2), True),
                       (6, (0.0, 0.1), True)):
        log = _LogRecord(cfg, 1)
        log.valid[0] = ok
        log.heads["entropy_norm"][0, 0] = ent
        t._append_log(s, log, False)
        if s == 2:
            assert t.snapshot().collapse_step[0, 0].tolist() == [-1, 0]  # 2 logs: lasted
    assert t.snapshot().collapse_step[0, 0].tolist() == [4, -1]
    log = _LogRecord(cfg, 1)
    log.heads["entropy_norm"][0, 0] = (0.0, 0.0)  # not valid: counts as not below
    t._append_log(8, log, False)
    assert t.snapshot().collapse_step[0, 0].tolist() == [-1, -1]


def test_the_weights_file_holds_the_config_the_step_and_every_runs_weights(tmp_path):
    t = Trainer(_small(scalings=("sqrt", "none"), steps=2))
    t.advance()
    path = tmp_path / "w.pt"
    t.save_weights(path)
    saved = torch.load(path, weights_only=True)
    assert saved["config"] == t.cfg.to_dict() and saved["step"] == 1
    assert set(saved["weights"]) == {"sqrt", "none"}
    for run in t.runs:
        state = run.model.state_dict()
        assert set(saved["weights"][run.rule]) == set(state)
        for key, value in state.items():
            assert torch.equal(saved["weights"][run.rule][key], value)
    copy_ = t.state_dicts()
    with torch.no_grad():
        t.runs[0].model.head.weight.add_(1.0)
    assert not torch.equal(copy_["sqrt"]["head.weight"], t.runs[0].model.head.weight)
    assert list(tmp_path.iterdir()) == [path]  # (written in one go: no temporary left)


def test_a_weight_without_a_gradient_has_norms_of_zero_and_batches_go_to_the_device(monkeypatch):
    import engine.training.trainer as trainer

    t = Trainer(_small(layers=2))
    norms = t._grad_norms(t.runs[0].model)  # no backward yet: every .grad is None
    assert set(norms) == {"grad_norm_q", "grad_norm_k", "grad_norm_v", "grad_norm_o"}
    for value in norms.values():
        assert value.shape == (2, 2) and not value.any()
    devices = []
    real = trainer.make_batch

    def spy(cfg, size, gen):
        batch = real(cfg, size, gen)
        real_to = batch.to

        def to(device):
            devices.append(device)
            return real_to(device)

        batch.to = to
        return batch

    monkeypatch.setattr(trainer, "make_batch", spy)
    t = Trainer(_small(steps=1))
    t.advance()
    assert devices == ["cpu", "cpu"]  # the probe, then the first training batch


def test_the_rate_is_iterations_over_the_time_spent_in_them(monkeypatch):
    """A scripted clock: each reading is 0.5 s after the one before, so each iteration (a start
    and an end reading) lasts 0.5 s whatever the machine does."""
    import engine.training.trainer as trainer

    class Clock:
        now = 0.0

        def perf_counter(self) -> float:
            self.now += 0.5
            return self.now

    monkeypatch.setattr(trainer, "time", Clock())
    t = Trainer(_small(steps=3))
    assert t.snapshot().steps_per_s == 0.0 and t.snapshot().elapsed_s == 0.0
    for _ in range(3):
        t.advance()
    snap = t.snapshot()
    assert (snap.elapsed_s, snap.steps_per_s) == (1.5, 2.0)


def _diverge_at_log_2(monkeypatch, t, how):
    """Make run 1 ("none") turn non-finite at the log of step 2 in one of the three ways the
    trainer checks: the probe's loss, a captured logit, a per-head statistic."""
    import engine.training.trainer as trainer

    real_probe, real_stats = t._probe, trainer.head_stats

    def probe(run):
        p_loss, p_acc, capture = real_probe(run)
        if run is t.runs[1] and t.next_iter == 2:
            if how == "loss":
                p_loss = math.nan
            elif how == "logit":
                capture[0].logits[0, 0, 0, 0] = math.inf
        return p_loss, p_acc, capture

    def stats(*args, **kw):
        st = real_stats(*args, **kw)
        if how == "stat" and args[5] == "none" and t.next_iter == 2:
            st.entropy_norm[0] = math.nan
        return st

    monkeypatch.setattr(t, "_probe", probe)
    monkeypatch.setattr(trainer, "head_stats", stats)


@pytest.mark.parametrize("how", ["loss", "logit", "stat"])
def test_a_run_turning_non_finite_at_a_log_diverges_there_and_is_blanked(monkeypatch, how):
    t = Trainer(_small(scalings=("sqrt", "none"), steps=4, log_every=2))
    _diverge_at_log_2(monkeypatch, t, how)
    snap = list(t.iterate())[-1]
    assert snap.diverged_step.tolist() == [-1, 2]
    assert snap.valid.tolist() == [[True, True], [True, False], [True, False]]
    assert not snap.heads["entropy_norm"][1, 1].any() and snap.heads["entropy_norm"][1, 0].all()
    assert all(np.isfinite(a).all() for a in (*snap.scalars.values(), *snap.heads.values()))


def test_the_lengths_are_evaluated_on_the_trainers_device(monkeypatch):
    import engine.training.trainer as trainer

    seen = []
    real = trainer.evaluate_lengths
    monkeypatch.setattr(trainer, "evaluate_lengths",
                        lambda model, cfg, device: seen.append(device) or real(model, cfg, device))
    t = Trainer(_small(steps=1, eval_lengths=(4,), eval_size=4))
    list(t.iterate())
    assert seen == ["cpu", "cpu"]  # steps 0 and 1
