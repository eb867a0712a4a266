"""The science on a real training run (fixed seed), reproducibility, pause/reset, divergence."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.sampling import cuda_available  # noqa: E402
from engine.training.config import TrainingConfig  # noqa: E402
from engine.training.presets import preset  # noqa: E402
from engine.training.trainer import CSV_COLUMNS, Trainer, run_training  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # deterministic and polite on shared cores
    yield
    torch.set_num_threads(before)


def _step0(cfg: TrainingConfig):
    t = Trainer(cfg.replace(steps=1, device="cpu"))
    t.advance()
    return t.snapshot()


def test_entropy_at_step0_is_ordered_none_sqrt_dk_at_large_dk():
    snap = _step0(preset("demo").config.replace(scalings=("none", "sqrt", "dk")))
    ent = {r: snap.final("entropy_norm", r) for r in snap.rules}
    assert ent["none"] < ent["sqrt"] < ent["dk"]
    assert ent["none"] < 0.2 and ent["dk"] > 0.95  # near one-hot vs near uniform
    std = {r: snap.final("logit_std", r) for r in snap.rules}
    # unit-variance q, k: the logit std is ~sqrt(d_k), ~1 and ~1/sqrt(d_k) (docs/SCIENCE.md)
    d = snap.config.head_dim
    assert 0.7 * math.sqrt(d) < std["none"] < 1.3 * math.sqrt(d)
    assert 0.7 < std["sqrt"] < 1.3
    assert 0.7 / math.sqrt(d) < std["dk"] < 1.3 / math.sqrt(d)
    jac = {r: snap.final("jacobian_fro", r) for r in snap.rules}
    assert jac["none"] < jac["sqrt"]  # the saturated softmax passes less gradient
    sat = {r: snap.final("saturated_frac", r) for r in snap.rules}
    assert sat["none"] > sat["sqrt"] >= sat["dk"]


def test_the_gap_grows_with_head_width():
    """Without scaling, entropy at init falls as d_k grows; with sqrt it does not."""
    base = preset("demo").config.replace(scalings=("none", "sqrt"))
    small = _step0(base.replace(d_model=64, heads=8))  # d_k = 8
    large = _step0(base)  # d_k = 256
    assert large.final("entropy_norm", "none") < small.final("entropy_norm", "none") - 0.2
    assert abs(large.final("entropy_norm", "sqrt") - small.final("entropy_norm", "sqrt")) < 0.15


@pytest.mark.parametrize("name,steps", [("demo", 60), ("recall", 400)])
@pytest.mark.slow
def test_sqrt_reaches_high_accuracy_in_the_presets(name, steps):
    cfg = preset(name).config.replace(scalings=("sqrt",), steps=steps, log_every=20,
                                      device="cpu")
    _, snap = run_training(cfg)
    assert snap.final("probe_accuracy", "sqrt") >= 0.9
    assert snap.final("accuracy", "sqrt") >= 0.9


@pytest.mark.slow
def test_without_scaling_the_demo_stalls_where_sqrt_has_learned():
    cfg = preset("demo").config.replace(scalings=("none", "sqrt"), steps=40, log_every=40,
                                        device="cpu")
    _, snap = run_training(cfg)
    assert snap.final("probe_accuracy", "sqrt") >= 0.9
    assert snap.final("probe_accuracy", "none") < 0.5


SMALL = TrainingConfig(d_model=32, heads=2, layers=2, mlp=True, items_max=6, classes=4,
                       scalings=("none", "sqrt", "cosine", "scale_after_softmax"), steps=12,
                       log_every=4, probe_size=8, batch=8, device="cpu")


def _arrays(snap):
    return [snap.log_steps, snap.valid, *snap.scalars.values(), *snap.heads.values(),
            snap.logit_hist, snap.logit_percentiles, snap.probe_weights]


def _assert_same(a, b):
    for x, y in zip(_arrays(a), _arrays(b), strict=False):
        np.testing.assert_array_equal(x, y)


def test_same_seed_same_metrics_and_other_seed_differs():
    _, a = run_training(SMALL)
    _, b = run_training(SMALL)
    _assert_same(a, b)
    _, c = run_training(SMALL.replace(seed=1))
    assert not np.array_equal(a.scalars["loss"], c.scalars["loss"])


def test_pause_resume_and_reset_reproduce_the_uninterrupted_run():
    _, ref = run_training(SMALL)
    t = Trainer(SMALL)
    seen = []
    for snap in t.iterate(cancelled=lambda: len(seen) >= 1):
        seen.append(snap)
    assert not t.done and t.step > 0  # paused mid-way
    t.advance(force_log=False)  # a single step while paused
    last = list(t.iterate())[-1]
    assert last.done
    _assert_same(last, ref)
    t.reset()
    assert t.step == 0 and t.snapshot().n_logs == 0
    _assert_same(list(t.iterate())[-1], ref)


def test_snapshot_shapes_logs_and_csv_rows():
    _, snap = run_training(SMALL)
    n, r = len(SMALL.log_steps), len(SMALL.scalings)
    assert list(snap.log_steps) == [0, 4, 8, 12]
    assert snap.heads["entropy_norm"].shape == (n, r, 2, 2)
    assert snap.logit_hist.shape == (n, r, 2, 2, SMALL.hist_bins)
    # every counted logit is inside or outside the edges: the totals match across logs
    totals = snap.logit_hist.sum(-1) + snap.logit_outside.sum(-1)
    assert np.all(totals == totals[0, 0, 0, 0])
    assert snap.has_temperature.tolist() == [False, False, True, False]
    t = snap.heads["temperature"][:, 2]
    assert np.allclose(t[0], SMALL.cosine_temperature) and np.all(t > 0)
    rows = snap.metrics_rows()
    assert len(rows) == n * r and set(CSV_COLUMNS) <= set(rows[0])
    for row in rows:
        assert all(not isinstance(v, float) or math.isfinite(v) for v in row.values())
    w = snap.probe_weights
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-9)  # rows of the softmax output


def test_a_diverged_run_stops_and_the_others_go_on():
    t = Trainer(SMALL)
    with torch.no_grad():
        t.runs[1].model.head.weight.fill_(float("nan"))
    snap = list(t.iterate())[-1]
    assert snap.done and snap.diverged_step.tolist() == [-1, 0, -1, -1]
    assert not snap.valid[:, 1].any() and snap.valid[:, [0, 2, 3]].all()
    assert all(np.all(np.isfinite(a)) for a in _arrays(snap))
    assert {row["scaling"] for row in snap.metrics_rows()} == {"none", "cosine",
                                                              "scale_after_softmax"}


def test_entropy_collapse_is_marked_for_the_saturated_head():
    cfg = preset("demo").config.replace(scalings=("none", "dk"), steps=2, log_every=1,
                                        collapse_threshold=0.2, collapse_logs=3, device="cpu")
    _, snap = run_training(cfg)
    assert snap.collapse_step[0, 0, 0] == 0  # none: below 0.2 at steps 0, 1 and 2
    assert snap.collapse_step[1, 0, 0] == -1  # dk: near uniform


def test_the_two_bugs_at_step0():
    """sqrt_twice is 1/d_k in disguise (too uniform); scale_after_softmax's softmax sees the raw
    q.k, so it saturates exactly like no scaling."""
    snap = _step0(preset("demo").config.replace(
        scalings=("none", "dk", "sqrt_twice", "scale_after_softmax")))
    ent = {r: snap.final("entropy_norm", r) for r in snap.rules}
    assert ent["sqrt_twice"] == pytest.approx(ent["dk"], abs=1e-6)
    assert ent["scale_after_softmax"] == pytest.approx(ent["none"], abs=1e-6)
    assert ent["scale_after_softmax"] < 0.2 < 0.95 < ent["sqrt_twice"]


def test_an_inf_gradient_at_a_log_step_marks_the_run_diverged(monkeypatch):
    """A finite loss with an Inf/NaN gradient must not reach the snapshot (nor the next update)."""
    t = Trainer(SMALL)
    real = t._grad_norms

    def poisoned(model):
        out = real(model)
        if model is t.runs[2].model and t.next_iter == 4:
            out["grad_norm_k"][0, 0] = float("inf")
        return out

    monkeypatch.setattr(t, "_grad_norms", poisoned)
    snap = list(t.iterate())[-1]
    assert snap.diverged_step.tolist() == [-1, -1, 4, -1]
    assert snap.valid[:, 2].tolist() == [True, False, False, False]
    assert all(np.all(np.isfinite(a)) for a in _arrays(snap))
    for row in snap.metrics_rows():
        assert all(not isinstance(v, float) or math.isfinite(v) for v in row.values())


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="no CUDA device here")
def test_cuda_path_runs_and_agrees_with_the_cpu_at_step0():  # pragma: no cover - needs a GPU
    """device auto = CUDA when available; the tensors live there; step-0 observations (same
    initial weights, same probe) agree with the CPU run up to float32 rounding."""
    cfg = SMALL.replace(device="auto")
    gpu, cpu = Trainer(cfg), Trainer(cfg.replace(device="cpu"))
    assert gpu.device == "cuda" and gpu.probe.inputs.is_cuda
    assert all(p.is_cuda for run in gpu.runs for p in run.model.parameters())
    gpu.advance()
    cpu.advance()
    a, b = gpu.snapshot(), cpu.snapshot()
    assert a.device == "cuda" and a.valid.all()
    for name in ("entropy_norm", "logit_std", "jacobian_fro", "grad_norm_q"):
        np.testing.assert_allclose(a.heads[name], b.heads[name], rtol=1e-3, atol=1e-5)
    _, done = run_training(cfg.replace(steps=20, log_every=10))
    assert done.done and all(np.all(np.isfinite(x)) for x in _arrays(done))
    assert isinstance(Trainer(cfg).state_dicts()["sqrt"]["head.weight"], torch.Tensor)
    assert not Trainer(cfg).state_dicts()["sqrt"]["head.weight"].is_cuda  # export on the CPU


def test_sgd_trains_from_the_same_start_as_adam():
    """Same initial weights and batches: step 0 agrees; after updates the optimizers differ."""
    _, adam = run_training(SMALL)
    _, sgd = run_training(SMALL.replace(optimizer="sgd", lr=0.1))
    np.testing.assert_array_equal(adam.heads["entropy_norm"][0], sgd.heads["entropy_norm"][0])
    assert not np.array_equal(adam.heads["entropy_norm"][-1], sgd.heads["entropy_norm"][-1])
    assert sgd.valid.all()


def test_the_fixed_logit_bins_resolve_every_rule_at_step0():
    """One set of edges serves no scaling (logit std ~16) and 1/d_k (std ~0.06) at d_k = 256:
    each run's step-0 logits spread over many bins, and few fall outside."""
    snap = _step0(preset("demo").config)
    for r, rule in enumerate(snap.rules):
        counts = snap.logit_hist[0, r, 0, 0]
        assert np.count_nonzero(counts) >= 40, rule
        assert snap.logit_outside[0, r, 0, 0].sum() <= 0.01 * counts.sum(), rule


def test_evaluation_at_other_lengths_is_logged_and_changes_nothing_else():
    """eval_lengths adds accuracy_len{N} / entropy_norm_len{N} per log (no gradient): the
    training curves are those of the same run without it."""
    from engine.training.lengths import evaluate_lengths

    base = TrainingConfig(d_model=32, items_max=8, classes=8, key_dim=8, steps=6, log_every=3,
                          batch=16, probe_size=8, scalings=("sqrt", "logn", "ssmax"))
    cfg = base.replace(eval_lengths=(32, 128), eval_size=24)
    _, plain = run_training(base)
    _, snap = run_training(cfg)
    for name in ("loss", "accuracy", "probe_loss"):
        np.testing.assert_array_equal(snap.scalars[name], plain.scalars[name])
    assert snap.csv_columns[-4:] == ("accuracy_len32", "entropy_norm_len32",
                                     "accuracy_len128", "entropy_norm_len128")
    rows = snap.metrics_rows()
    assert len(rows) == 3 * 3 and all(set(snap.csv_columns) <= set(r) for r in rows)
    for r in rows:
        for n in (32, 128):
            acc = r[f"accuracy_len{n}"]
            assert 0.0 <= acc <= 1.0 and acc * 24 == pytest.approx(round(acc * 24))
            assert 0.0 < r[f"entropy_norm_len{n}"] <= 1.0 + 1e-9
    # at init (step 0) the logged values are those of the model's own evaluation, recomputed
    model = Trainer(cfg).runs[1].model  # logn, initial weights
    again = evaluate_lengths(model, cfg, "cpu")
    r0 = next(r for r in rows if r["scaling"] == "logn" and r["step"] == 0)
    assert again["accuracy_len32"] == r0["accuracy_len32"]
    assert again["entropy_norm_len128"] == pytest.approx(r0["entropy_norm_len128"], rel=1e-9)


def test_eval_lengths_is_validated():
    from engine.errors import ConfigError

    for bad in ({"eval_lengths": (0,)}, {"eval_lengths": (64, 64)},
                {"eval_lengths": (64,), "task": "recall", "positions": "none"}):  # > classes
        with pytest.raises(ConfigError) as exc:
            TrainingConfig(**bad)
        assert exc.value.field == "eval_lengths"
    with pytest.raises(ConfigError) as exc:  # recall: learned positions end at the trained length
        TrainingConfig(task="recall", eval_lengths=(16,))
    assert exc.value.field == "positions"


def test_ssmax_logs_its_learned_s_per_head():
    cfg = TrainingConfig(d_model=32, heads=2, items_max=8, classes=8, key_dim=8, steps=4,
                         log_every=2, batch=16, probe_size=8, scalings=("sqrt", "ssmax"), lr=0.01)
    _, snap = run_training(cfg)
    s = snap.heads["ssmax_s"][:, 1]  # (logs, layers, heads)
    np.testing.assert_allclose(s[0], 1 / math.log(cfg.seq_len), rtol=1e-6)  # sqrt at init
    assert not np.allclose(s[-1], s[0])  # learned
    rows = snap.metrics_rows()
    assert all(r["ssmax_s"] == "" for r in rows if r["scaling"] == "sqrt")
    assert all(isinstance(r["ssmax_s"], float) for r in rows if r["scaling"] == "ssmax")
