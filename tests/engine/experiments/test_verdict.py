"""The ends_of_axis verdict: the two ends where the metric is monotone along the axis; every point
(few) or the best and worst points (many) with their intervals where it is not, and whether the
ends represent the rest."""

from __future__ import annotations

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
