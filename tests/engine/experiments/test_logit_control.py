"""The learning-rate experiment has a real optimum: on a reduced grid of the built-in
``logit_control`` experiment (one seed, three rates), sqrt learns the task well at the middle rate
and worse at both ends, so its learning-rate sensitivity measures a basin, not a slope."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

from engine.experiments.builtin import builtin
from engine.experiments.job import run_job


@pytest.mark.slow
def test_sqrt_loss_at_the_middle_rate_is_below_both_ends():
    spec = builtin("logit_control")
    lrs = next(a.values for a in spec.axes if a.field == "lr")
    low, mid, high = lrs[0], 0.01, lrs[-1]
    assert low < mid < high and mid in lrs
    base = spec.base.replace(scalings=("sqrt",), seed=0, device="cpu")
    loss = {}
    for lr in (low, mid, high):
        res = run_job(base.replace(lr=lr).to_dict(), spec.target)
        assert res["error"] is None
        final = res["rules"]["sqrt"]["final_loss"]
        loss[lr] = math.inf if final is None else final  # a diverged run has no final loss
    assert loss[mid] < loss[low] and loss[mid] < loss[high], loss
    chance = math.log(base.classes)
    assert loss[mid] <= chance / 2  # the best rate learns the task
    assert min(loss[low], loss[high]) > chance / 2  # both ends fail at this budget
