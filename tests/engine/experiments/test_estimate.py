"""The time estimate of a grid: every job shape is timed (a 16-head step costs about three times
a 1-head one at the same parameter count: timing one job said 9 s for the `heads` grid that took
29 s), the jobs are packed onto the workers, and the spread of the timed steps is carried."""

from __future__ import annotations

import pytest

from engine.experiments.builtin import builtin
from engine.experiments.estimate import Estimate, Timing, shape_of, timed_jobs


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
    from engine.training.config import TrainingConfig

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

