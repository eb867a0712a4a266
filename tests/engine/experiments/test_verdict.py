"""The ends_of_axis verdict: the two ends where the metric is monotone along the axis; every point
(few) or the best and worst points (many) with their intervals where it is not, and whether the
ends represent the rest."""

from __future__ import annotations

import pytest

from engine.experiments.figures import verdict
from engine.experiments.spec import Axis, ExperimentSpec, VerdictSpec
from engine.training.config import TrainingConfig


def _spec(axis: str, values: tuple, metric: str, seeds: int = 4) -> ExperimentSpec:
    return ExperimentSpec("fake", TrainingConfig(scalings=("none", "sqrt")),
                          (Axis(axis, values), Axis("seed", tuple(range(seeds)))),
                          verdict=VerdictSpec("ends_of_axis", metric, axis))


def _results(spec: ExperimentSpec, outcome) -> list[dict]:
    """``outcome(rule, axis value, seed)`` -> (reached the target, final loss) of each run."""
    axis = spec.verdict.over
    out = []
    for job in spec.jobs():
        res = {"index": job.index, "key": job.key, "values": job.values, "error": None,
               "rules": {}, "rows": []}
        for rule in spec.rules:
            hit, loss = outcome(rule, job.values[axis], job.values["seed"])
            res["rules"][rule] = {"final_loss": loss, "steps_to_target": 50 if hit else None,
                                  "final_accuracy": 0.95 if hit else 0.2}
        out.append(res)
    return out


HEAD_WIDTH = _spec("d_k", (16, 64, 256, 512), "success")


def test_head_width_names_every_point_where_the_rate_peaks_inside():
    """The issue's case: none 0/4 -> 0/4 hid the 4/4 at d_k 64."""
    none_hits = {16: 0, 64: 4, 256: 2, 512: 0}
    text = verdict(HEAD_WIDTH, _results(HEAD_WIDTH, lambda rule, d, seed:
                                        (rule == "sqrt" or seed < none_hits[d], 1.0)))
    none = text.split("; sqrt ")[0]
    for part in ("0/4 = 0.00 (95 % CI 0.00-0.49) at d_k 16", "4/4 = 1.00 (95 % CI 0.51-1.00), "
                 "median 50 steps at d_k 64", "2/4", "at d_k 256", "at d_k 512"):
        assert part in none, (part, none)
    assert "the ends are not representative" in none
    # sqrt is 4/4 everywhere: monotone, the two ends say it all
    sqrt = text.split("; sqrt ")[1]
    assert sqrt.count("4/4") == 2 and " -> " in sqrt and "d_k 64" not in sqrt
    assert "not monotone" not in sqrt


def test_a_wobble_within_the_uncertainty_is_said_so():
    none_hits = {16: 1, 64: 2, 256: 1, 512: 2}
    text = verdict(HEAD_WIDTH, _results(HEAD_WIDTH, lambda rule, d, seed:
                                        (rule == "sqrt" or seed < none_hits[d], 1.0)))
    assert "not monotone, within the uncertainty" in text
    assert "not representative" not in text


def test_many_points_name_the_best_and_worst_with_their_intervals():
    """Five learning rates, the loss lowest in the middle: best (lowest loss) and worst named,
    with the ends and a note."""
    spec = _spec("lr", (1e-4, 1e-3, 1e-2, 3e-2, 1e-1), "final_loss", seeds=3)
    loss = {1e-4: 2.0, 1e-3: 1.0, 1e-2: 0.2, 3e-2: 0.8, 1e-1: 2.5}
    text = verdict(spec, _results(spec, lambda rule, lr, seed: (False, loss[lr] + 0.01 * seed)))
    none = text.split("; sqrt ")[0]
    assert "best 0.21 ± 0.0058 (n=3) at lr 0.01" in none
    assert "worst 2.51 ± 0.0058 (n=3) at lr 0.1" in none
    assert "ends 2.01 ± 0.0058 (n=3) -> 2.51 ± 0.0058 (n=3)" in none
    assert "the ends are not representative" in none


def test_a_monotone_metric_keeps_the_two_ends():
    spec = _spec("lr", (1e-4, 1e-3, 1e-2, 3e-2, 1e-1), "final_loss", seeds=3)
    loss = {1e-4: 2.0, 1e-3: 1.0, 1e-2: 0.5, 3e-2: 0.5, 1e-1: 0.2}
    text = verdict(spec, _results(spec, lambda rule, lr, seed: (False, loss[lr] + 0.01 * seed)))
    assert text.startswith("final training loss, lr 0.0001 -> 0.1: none 2.01 ± 0.0058 (n=3) -> "
                           "0.21 ± 0.0058 (n=3); sqrt")
    assert "best" not in text and "not monotone" not in text


# -- exact lines, where the best and the worst differ from the highest and lowest bounds ----------
def _along(metric: str, values: dict[float, tuple[float, float]]) -> str:
    """The ends_of_axis verdict of one rule (sqrt) over lr, two seeds, whose metric (a result, or
    a metrics.csv column at step 0) is ``values[lr][seed]``."""
    spec = ExperimentSpec("fake", TrainingConfig(scalings=("sqrt",)),
                          (Axis("lr", tuple(values)), Axis("seed", (0, 1))),
                          verdict=VerdictSpec("ends_of_axis", metric, "lr"))
    out = []
    for job in spec.jobs():
        v = values[job.values["lr"]][job.values["seed"]]
        out.append({"index": job.index, "key": job.key, "values": job.values, "error": None,
                    "rules": {"sqrt": {"final_loss": v, "final_accuracy": v, "max_logit_abs": v,
                                       "steps_to_target": None, "diverged_step": None}},
                    "rows": [{"scaling": "sqrt", "step": 0, "loss": v, "accuracy": v}]})
    return verdict(spec, out)


#: means 3, 5, 7, 5, 2.5 with their +- 1 SE intervals [3, 3], [-2, 12], [4, 10], [5, 5], [1, 4]:
#: the highest mean (0.01) has neither the highest lower end (0.03) nor the highest upper end
#: (0.001); the lowest mean (0.1) has neither the lowest lower end (0.001) nor the lowest upper
#: end (0.0001)
FIVE = {1e-4: (3, 3), 1e-3: (-2, 12), 1e-2: (4, 10), 3e-2: (5, 5), 1e-1: (1, 4)}
HIGH = "7 ± 3 (n=2) at lr 0.01"
LOW = "2.5 ± 1.5 (n=2) at lr 0.1"
ENDS = "ends 3 ± 0 (n=2) -> 2.5 ± 1.5 (n=2) (not monotone: the ends are not representative)"


@pytest.mark.parametrize(("metric", "what", "line"), [
    ("final_loss", "final training loss", f"best {LOW}, worst {HIGH}"),
    ("loss@0", "training loss at init (step 0)", f"best {LOW}, worst {HIGH}"),
    ("final_accuracy", "final training accuracy", f"best {HIGH}, worst {LOW}"),
    ("accuracy@0", "training accuracy at init (step 0)", f"best {HIGH}, worst {LOW}"),
    ("max_logit_abs", "largest |logit| over the run", f"highest {HIGH}, lowest {LOW}"),
])
def test_best_and_worst_by_the_mean_named_by_the_metrics_direction(metric, what, line):
    assert _along(metric, FIVE) == f"{what}, lr 0.0001 -> 0.1: sqrt {line}; {ENDS}"


def test_three_points_that_turn_are_each_named():
    text = _along("final_loss", {1e-3: (1, 1), 1e-2: (3, 3), 1e-1: (2, 2)})
    assert text == ("final training loss, lr 0.001 -> 0.1: sqrt 1 ± 0 (n=2) at lr 0.001, "
                    "3 ± 0 (n=2) at lr 0.01, 2 ± 0 (n=2) at lr 0.1 (not monotone: the ends are "
                    "not representative)")


def test_monotone_means_keep_the_ends_whatever_their_lower_ends_do():
    # means 1, 1.1, 1.2; the middle one +- 0.5: its lower end 0.6 is below both others
    text = _along("final_loss", {1e-3: (1, 1), 1e-2: (0.6, 1.6), 1e-1: (1.2, 1.2)})
    assert text == "final training loss, lr 0.001 -> 0.1: sqrt 1 ± 0 (n=2) -> 1.2 ± 0 (n=2)"


def test_a_turn_inside_the_ends_span_is_within_the_uncertainty():
    text = _along("final_loss", {1e-4: (1, 1), 1e-3: (1.5, 1.5), 1e-2: (1.2, 1.2),
                                 1e-1: (2, 2)})
    assert text == ("final training loss, lr 0.0001 -> 0.1: sqrt 1 ± 0 (n=2) at lr 0.0001, "
                    "1.5 ± 0 (n=2) at lr 0.001, 1.2 ± 0 (n=2) at lr 0.01, 2 ± 0 (n=2) at lr 0.1 "
                    "(not monotone, within the uncertainty)")


def test_monotone_takes_ties_and_steps_below_one():
    from engine.experiments.figures import _monotone

    assert _monotone([0.2, 0.5, 0.7]) and _monotone([1.0, 1.0, 2.0])
    assert _monotone([3.0, 2.0, 2.0]) and _monotone([0.7, 0.5, 0.2])
    assert not _monotone([1.0, 2.0, 1.0]) and not _monotone([2.0, 1.0, 1.5])


def _pts(*intervals):
    return [(i, (y, lo, hi, 2), "") for i, (y, lo, hi) in enumerate(intervals)]


def test_the_ends_represent_an_inner_interval_touching_their_span():
    from engine.experiments.figures import _ends_represent

    first, last = (1, 0.8, 1.2), (3, 2.8, 3.2)  # span [0.8, 3.2]
    assert _ends_represent(_pts(first, (0.7, 0.6, 0.8), last))  # touches 0.8 from below
    assert _ends_represent(_pts(first, (3.3, 3.2, 3.4), last))  # touches 3.2 from above
    assert not _ends_represent(_pts(first, (0.5, 0.4, 0.79), last))
    assert not _ends_represent(_pts(first, (3.4, 3.21, 3.6), last))
    # an interval reaching past the span's top but starting inside it still overlaps
    assert _ends_represent(_pts(first, (3.3, 3.1, 3.5), last))
    # the span is the lowest lower end and the highest upper end, whichever end holds them
    assert _ends_represent(_pts(first, (0.9, 0.7, 1.0), last))
    assert _ends_represent(_pts(last, (0.9, 0.7, 1.0), first))
    # every inner point counts, the one before the last too
    assert not _ends_represent(_pts(first, (2, 1.9, 2.1), (5, 4.5, 5.5), last))
