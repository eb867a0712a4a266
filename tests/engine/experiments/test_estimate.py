"""The time estimate of a grid: every job shape is timed (a 16-head step costs about three times
a 1-head one at the same parameter count: timing one job said 9 s for the `heads` grid that took
29 s), the jobs are packed onto the workers, and the spread of the timed steps is carried."""

from __future__ import annotations

import concurrent.futures as cf
import sys
import threading
import types
from types import SimpleNamespace

import pytest

from engine.experiments import estimate as est_mod
from engine.experiments.builtin import builtin
from engine.experiments.estimate import Estimate, Timing, shape_of, timed_jobs
from engine.training.config import TrainingConfig


def test_the_heads_grid_times_one_job_of_each_head_count():
    spec = builtin("heads")
    timed = timed_jobs(spec)
    assert sorted(j.values["heads"] for j in timed) == [1, 2, 4, 8, 16]
    assert {j.values["seed"] for j in timed} == {0}  # the seed does not change the cost
    # lr or seed axes alone: one shape, one job timed
    assert len(timed_jobs(builtin("seeds"))) == 1
    assert len(timed_jobs(builtin("learning_rate"))) == 1


def test_many_shapes_time_the_cheapest_the_costliest_and_some_between():
    from engine.experiments.spec import Axis, ExperimentSpec

    spec = ExperimentSpec("wide", TrainingConfig(d_model=64),
                          (Axis("heads", (1, 2, 4, 8, 16, 32, 64)), Axis("seed", (0, 1))))
    heads = sorted(j.values["heads"] for j in timed_jobs(spec))
    assert len(heads) == 5 and heads[0] == 1 and heads[-1] == 64


def _estimate_for(spec, step_by_heads):
    timed = timed_jobs(spec)
    timings = tuple(Timing(step_by_heads[j.values["heads"]], 2 * step_by_heads[j.values["heads"]],
                           0.1, 0.8 * step_by_heads[j.values["heads"]],
                           1.5 * step_by_heads[j.values["heads"]]) for j in timed)
    return Estimate(tuple(j.config.to_dict() for j in timed), timings)


def test_each_job_takes_its_own_shapes_timing_and_the_grid_is_packed_on_the_workers():
    spec = builtin("heads")  # 15 jobs of 100 steps, log every 10
    steps = {1: 0.02, 2: 0.02, 4: 0.03, 8: 0.05, 16: 0.06}
    est = _estimate_for(spec, steps)
    by_heads = {j.values["heads"]: est.job_seconds(j.config) for j in spec.jobs()}
    logs = 100 // 10 + 2
    for h, step in steps.items():
        assert by_heads[h] == pytest.approx(0.1 + 100 * step + logs * step)
    # the slow 16-head jobs are not priced at the 1-head job's cost (the old estimate)
    assert by_heads[16] / by_heads[1] > 2.5
    total = sum(by_heads[j.values["heads"]] for j in spec.jobs())
    two = est.grid_seconds(spec, 2)
    assert total / 2 <= two <= total / 2 + max(by_heads.values())
    assert est.grid_seconds(spec, 1) == pytest.approx(total)
    lo, hi = est.grid_range(spec, 2)
    assert lo < two < hi


def test_an_untimed_shape_takes_the_slowest_timing():
    spec = builtin("heads")
    est = _estimate_for(spec, {1: 0.02, 2: 0.02, 4: 0.03, 8: 0.05, 16: 0.06})
    other = spec.base.replace(heads=32)
    assert shape_of(other) not in {shape_of(c) for c in est.configs}
    assert est.job_seconds(other) == pytest.approx(0.1 + spec.base.steps * 0.06
                                                   + (spec.base.steps // 10 + 2) * 0.06)



# --- the parts that time and spawn, with a scripted clock, a fake trainer and a fake pool ------

class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


def _fake_trainer(monkeypatch, clock, build_s=0.5, log_s=0.7, step_s=(9.0, 0.1, 0.4, 0.2, 0.3)):
    """A Trainer whose construction and steps move ``clock`` by scripted seconds: building
    ``build_s``, a logged step ``log_s``, the unlogged steps ``step_s`` in turn (then 1.0)."""
    made = []

    class Trainer:
        def __init__(self, cfg):
            self.cfg, self.calls, self.left = cfg, [], list(step_s)
            made.append(self)
            clock.now += build_s

        def advance(self, force_log):
            self.calls.append(force_log)
            clock.now += log_s if force_log else (self.left.pop(0) if self.left else 1.0)

    module = types.ModuleType("engine.training.trainer")
    module.Trainer = Trainer
    monkeypatch.setitem(sys.modules, "engine.training.trainer", module)
    monkeypatch.setattr(est_mod, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    return made


def test_time_steps_times_the_steps_after_a_warm_up_and_the_setup_and_a_log_apart(monkeypatch):
    """Build 0.5 s + step 0's log 0.7 s = setup 1.2 s; the warm-up step (9 s) is not timed; the
    four timed steps 0.1, 0.4, 0.2, 0.3: mean 0.25, fastest 0.1, slowest 0.4; the log 0.7 s."""
    made = _fake_trainer(monkeypatch, _Clock())
    out = est_mod.time_steps(TrainingConfig(steps=3, d_model=32).to_dict())
    assert out == pytest.approx({"step_s": 0.25, "log_s": 0.7, "setup_s": 1.2, "step_lo": 0.1,
                                 "step_hi": 0.4})
    (trainer,) = made
    assert trainer.calls == [True, False, False, False, False, False, True]  # TIMED_STEPS = 4
    # steps raised to the timed ones + 2 (a config of 3 steps would end mid-timing), on the CPU
    assert (trainer.cfg.steps, trainer.cfg.device, trainer.cfg.d_model) == (6, "cpu", 32)


def test_time_steps_keeps_a_longer_run_and_times_the_steps_asked(monkeypatch):
    made = _fake_trainer(monkeypatch, _Clock(), step_s=(1.0, 0.2, 0.6))
    out = est_mod.time_steps(TrainingConfig(steps=50, device="cuda").to_dict(), steps=2)
    assert out == pytest.approx({"step_s": 0.4, "log_s": 0.7, "setup_s": 1.2, "step_lo": 0.2,
                                 "step_hi": 0.6})
    assert made[0].calls == [True, False, False, False, True]
    assert (made[0].cfg.steps, made[0].cfg.device) == (50, "cpu")


def test_time_shapes_warms_the_process_once_then_times_each_config(monkeypatch):
    made = _fake_trainer(monkeypatch, _Clock())
    asked = []
    monkeypatch.setattr(est_mod, "time_steps", lambda c, s: asked.append((c, s)) or {"c": c})
    configs = [TrainingConfig(heads=h, steps=40).to_dict() for h in (1, 4)]
    assert est_mod.time_shapes(configs, 3) == [{"c": configs[0]}, {"c": configs[1]}]
    assert asked == [(configs[0], 3), (configs[1], 3)]
    (warm,) = made  # one warm-up trainer of the first config, one step, two logged advances
    assert (warm.cfg.heads, warm.cfg.steps, warm.cfg.device) == (1, 1, "cpu")
    assert warm.calls == [True, True]
    est_mod.time_shapes(configs)
    assert asked[-1] == (configs[1], 4)  # TIMED_STEPS by default


class _Pool:
    """A process pool that runs nothing: ``submit`` returns ``fut`` (or raises ``error``)."""

    def __init__(self, fut=None, error=None):
        self.fut, self.error, self.submitted = fut, error, []

    def submit(self, fn, *args):
        self.submitted.append((fn, *args))
        if self.error is not None:
            raise self.error
        return self.fut


def _fake_pool(monkeypatch, pool):
    from engine.experiments import pool as pool_mod

    made, stopped = [], []
    monkeypatch.setattr(pool_mod, "process_pool",
                        lambda *a, **k: made.append((a, k)) or pool)
    monkeypatch.setattr(pool_mod, "stop_executor", lambda *a: stopped.append(a))
    return made, stopped


TIMING = {"step_s": 0.25, "log_s": 0.7, "setup_s": 1.2, "step_lo": 0.1, "step_hi": 0.4}


def test_estimate_job_times_in_one_spawned_process_and_always_stops_it(monkeypatch):
    fut = cf.Future()
    fut.set_result([TIMING])
    pool = _Pool(fut)
    made, stopped = _fake_pool(monkeypatch, pool)
    cfg = TrainingConfig(heads=2)
    (est,) = list(est_mod.estimate_job(cfg, steps=3))  # one config, not a list of them
    assert est == Estimate((cfg.to_dict(),), (Timing(0.25, 0.7, 1.2, 0.1, 0.4),))
    assert made == [((1,), {"start_method": "spawn"})]
    assert pool.submitted == [(est_mod.time_shapes, [cfg.to_dict()], 3)]
    assert stopped == [(pool, True, [fut])]
    fut2 = cf.Future()
    fut2.set_result([TIMING, TIMING])
    pool.fut = fut2
    two = [TrainingConfig(heads=1), TrainingConfig(heads=4)]
    (est,) = list(est_mod.estimate_job(iter(two)))
    assert est.configs == tuple(c.to_dict() for c in two) and len(est.timings) == 2
    assert pool.submitted[-1] == (est_mod.time_shapes, [c.to_dict() for c in two], 4)


def test_estimate_job_waits_on_the_worker_and_a_cancel_kills_it_without_an_estimate(monkeypatch):
    fut = cf.Future()
    pool = _Pool(fut)
    _, stopped = _fake_pool(monkeypatch, pool)
    asked = []

    def finish_on_first_poll():  # the worker ends while the caller polls: the estimate comes
        asked.append(1)
        fut.set_result([TIMING])
        return False

    (est,) = list(est_mod.estimate_job(TrainingConfig(), finish_on_first_poll))
    assert asked == [1] and est.timings == (Timing(**TIMING),)
    running = cf.Future()
    pool.fut = running
    assert list(est_mod.estimate_job(TrainingConfig(), lambda: True)) == []
    assert stopped[-1] == (pool, True, [running])
    # no cancel flag: the loop waits until the worker is done (here: a timer ends it)
    late = cf.Future()
    pool.fut = late
    threading.Timer(0.05, lambda: late.set_result([TIMING])).start()
    assert len(list(est_mod.estimate_job(TrainingConfig()))) == 1


def test_a_cancel_during_a_long_timing_is_seen_at_the_next_poll(monkeypatch):
    """The worker never ends; the flag is raised after the first poll: the wait on the worker
    must wake up every POLL_S to see it (a wait without a timeout would block for ever)."""
    fut = cf.Future()
    _fake_pool(monkeypatch, _Pool(fut))
    polls, out = [], []

    def cancelled():
        polls.append(1)
        return len(polls) >= 2

    worker = threading.Thread(
        target=lambda: out.append(list(est_mod.estimate_job(TrainingConfig(), cancelled))),
        daemon=True)
    worker.start()
    worker.join(timeout=10)
    try:
        assert not worker.is_alive() and out == [[]] and len(polls) == 2
    finally:
        if not fut.done():  # let a stuck wait (a bug) end
            fut.set_result([TIMING])


def test_a_pool_that_fails_to_take_the_job_is_still_stopped(monkeypatch):
    pool = _Pool(error=RuntimeError("broken pool"))
    _, stopped = _fake_pool(monkeypatch, pool)
    with pytest.raises(RuntimeError, match="broken pool"):
        list(est_mod.estimate_job(TrainingConfig()))
    assert stopped == [(pool, True, [])]


def test_estimate_scales_the_timed_shapes_to_the_longest_job_and_the_packed_grid(monkeypatch):
    """The ``heads`` grid (15 jobs of 100 steps, log every 10: 12 logs) with one step 0.02 s,
    log 0.04 s, setup 0.1 s for every shape: a job 0.1 + 100 * 0.02 + 12 * 0.02 = 2.34 s; on 4
    workers, 15 equal jobs take 4 rounds: 9.36 s."""
    spec = builtin("heads")
    asked = []

    def fake(configs, cancelled, steps):
        asked.append((configs, cancelled, steps))
        yield Estimate(tuple(c.to_dict() for c in configs),
                       tuple(Timing(0.02, 0.04, 0.1, 0.01, 0.03) for _ in configs))

    monkeypatch.setattr(est_mod, "estimate_job", fake)
    flag = lambda: False  # noqa: E731
    assert est_mod.estimate(spec, 4, flag, steps=7) == pytest.approx((2.34, 9.36))
    ((configs, cancelled, steps),) = asked
    assert sorted(c.heads for c in configs) == [1, 2, 4, 8, 16] and (cancelled, steps) == (flag, 7)
    est_mod.estimate(spec, 4)
    assert asked[-1][1:] == (None, 4)
    monkeypatch.setattr(est_mod, "estimate_job", lambda *a: iter(()))
    assert est_mod.estimate(spec, 4) is None  # cancelled


def test_the_grid_is_packed_longest_job_first():
    """Jobs of 10, 10 and 20 s on 2 workers: the 20 s job on one, both 10 s jobs on the other,
    20 s in all (shortest first would give 10 + 20 = 30 s)."""
    spec = SimpleNamespace(jobs=lambda: [SimpleNamespace(config=TrainingConfig(steps=s, log_every=1))
                                         for s in (10, 10, 20)])
    est = Estimate((TrainingConfig().to_dict(),), (Timing(1.0, 1.0, 0.0, 0.5, 2.0),))
    assert est.grid_seconds(spec, 2) == pytest.approx(20.0)
    assert est.grid_seconds(spec, 2, "hi") == pytest.approx(40.0)
    assert est.grid_seconds(spec, 5) == pytest.approx(20.0)  # more workers than jobs
    assert est.grid_seconds(spec, 1, "lo") == pytest.approx(20.0)
    assert est.grid_seconds(spec, 0) == pytest.approx(40.0)  # at least one worker


def test_the_logs_are_counted_in_whole_intervals():
    """105 steps logged every 10: steps 10, ..., 100, plus step 0 and the end: 12 logs, not
    12.5; a log costs what it adds to a step (0.5 - 0.2 s)."""
    t = Timing(0.2, 0.5, 1.0, 0.1, 0.4)
    cfg = TrainingConfig(steps=105, log_every=10)
    assert t.seconds(cfg) == pytest.approx(1.0 + 105 * 0.2 + 12 * 0.3)
    assert t.seconds(cfg, 0.1) == pytest.approx(1.0 + 105 * 0.1 + 12 * 0.3)
    assert Timing(0.2, 0.1, 1.0, 0.1, 0.4).seconds(cfg) == pytest.approx(1.0 + 105 * 0.2)


def test_an_estimate_with_fewer_timings_than_configs_is_refused():
    est = Estimate((TrainingConfig(heads=1).to_dict(), TrainingConfig(heads=2).to_dict()),
                   (Timing(0.1, 0.1, 0.1, 0.1, 0.1),))
    with pytest.raises(ValueError):
        est.timing(TrainingConfig(heads=8))


def test_the_rough_cost_of_a_job_is_params_rules_heads_and_layers():
    def job(**kw):
        return SimpleNamespace(config=SimpleNamespace(**kw))

    assert est_mod._cost(job(n_params=10, scalings=("a", "b"), heads=1, layers=3)) == 60
    assert est_mod._cost(job(n_params=10, scalings=("a", "b", "c"), heads=4, layers=2)) == 240
    assert est_mod._cost(job(n_params=7, scalings=("a",), heads=0, layers=1)) == 7


@pytest.mark.parametrize(("s", "text"), [
    (0.4, "0 s"), (89.4, "89 s"), (90, "2 min"), (90.5, "2 min"), (3000, "50 min"),
    (5399, "90 min"), (5400, "1.5 h"), (5400.5, "1.5 h"), (3_600_000, "1000.0 h")])
def test_format_seconds_switches_units_at_90_s_and_90_min(s, text):
    assert est_mod.format_seconds(s) == text
