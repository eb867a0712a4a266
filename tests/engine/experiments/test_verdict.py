"""The ends_of_axis verdict: the two ends where the metric is monotone along the axis; every point
(few) or the best and worst points (many) with their intervals where it is not, and whether the
ends represent the rest."""

from __future__ import annotations

import pytest

from engine.experiments.figures import verdict
from engine.experiments.sensitivity import Sensitivity
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


# -- the lr_sensitivity verdict: each rule against the first, at 2 combined SE -------------------
def _sens(rule: str, mean: float, se: float, n: int = 2, best: float = 0.01) -> Sensitivity:
    return Sensitivity(rule, mean, se, n, best, 0.5, 0.1, ())


#: the reference: 3 +- 1; a rule's SE of 0.75 makes the combined SE hypot(0.75, 1) = 1.25 exactly
REF = _sens("none", 3.0, 1.0)


@pytest.mark.parametrize(("mean", "top", "top_ref", "line"), [
    (0.4, None, None, "sqrt widens the basin (-2.6 ± 1.2)"),
    (0.5, None, None, "sqrt does not change the basin measurably (-2.5 ± 1.2)"),  # (-2 SE: not)
    (0.7, None, None, "sqrt does not change the basin measurably (-2.3 ± 1.2)"),
    (5.0, None, None, "sqrt does not change the basin measurably (+2 ± 1.2)"),
    (5.5, None, None, "sqrt does not change the basin measurably (+2.5 ± 1.2)"),
    (5.6, None, None, "sqrt narrows the basin (+2.6 ± 1.2)"),
    (5.6, (10.0, 0.75), None, "sqrt narrows the basin (+2.6 ± 1.2)"),
    (0.4, None, (13.0, 1.0), "sqrt widens the basin (-2.6 ± 1.2)"),
    # the largest |logit|: bounded below 2 combined SE (1.25 again) of the reference's
    (0.4, (10.0, 0.75), (13.0, 1.0), "sqrt widens the basin (-2.6 ± 1.2) and bounds the logit "
     "(largest |logit| at lr 0.1 10 ± 0.75 vs 13 ± 1)"),
    *((0.4, (10.0, 0.75), (ref, 1.0), "sqrt widens the basin (-2.6 ± 1.2) without bounding the "
       f"logit (largest |logit| at lr 0.1 10 ± 0.75 vs {ref:g} ± 1)")
      for ref in (12.5, 12.0, 11.0)),  # (-2.5 at -2 SE is not bounded; nor are -2 and -1)
    (2.0, (9.5, 0.75), (13.0, 1.0), "sqrt does not change the basin measurably (-1 ± 1.2): it "
     "only bounds the logit (largest |logit| at lr 0.1 9.5 ± 0.75 vs 13 ± 1)"),
    (2.0, (13.0, 0.75), (13.0, 1.0), "sqrt does not change the basin measurably (-1 ± 1.2) and "
     "does not bound the logit (largest |logit| at lr 0.1 13 ± 0.75 vs 13 ± 1)"),
])
def test_a_rule_against_the_reference_at_two_combined_standard_errors(mean, top, top_ref, line):
    from engine.experiments.figures import _basin_judgment

    assert _basin_judgment("sqrt", _sens("sqrt", mean, 0.75), REF, top, top_ref,
                           "lr 0.1") == line


def _sensitivity_spec() -> ExperimentSpec:
    return ExperimentSpec("fake", TrainingConfig(scalings=("none", "sqrt", "dk", "qknorm")),
                          (Axis("lr", (1e-3, 1e-2, 1e-1)), Axis("seed", (0, 1))),
                          verdict=VerdictSpec("lr_sensitivity", "final_accuracy", "lr"))


def test_the_sensitivity_verdict_line(monkeypatch):
    import engine.experiments.figures as figures

    sens = {"none": REF, "sqrt": _sens("sqrt", 0.4, 0.75, best=0.1),
            "dk": _sens("dk", 2.0, 0.75, n=3), "qknorm": None}

    def stub(results, rule, over, metric="final_loss"):
        assert (over, metric) == ("lr", "final_accuracy")
        return sens[rule]

    monkeypatch.setattr(figures, "lr_sensitivity", stub)
    spec = _sensitivity_spec()
    # the largest |logit| at lr 0.1 (the largest rate): none 13 +- 1, sqrt 10 +- 0.75, dk none;
    # 100 at the other rates
    at_top = {"none": (12.0, 14.0), "sqrt": (9.25, 10.75)}
    results = []
    for job in spec.jobs():
        top = job.values["lr"] == 1e-1
        rules = {r: {"final_loss": 1.0, "max_logit_abs": at_top[r][job.values["seed"]]
                     if top else 100.0} for r in at_top}
        rules["dk"] = {"final_loss": 1.0}
        results.append({"index": job.index, "key": job.key, "values": job.values,
                        "error": None, "rules": rules, "rows": []})
    assert verdict(spec, results) == (
        "learning-rate sensitivity (Wortsman et al.) of the final training accuracy over lr "
        "0.001-0.1 (mean ± SE over 3 seeds; lower = a wider basin of good rates): none 3 ± 1 "
        "(best lr 0.01: 0.5 ± 0.1); sqrt 0.4 ± 0.75 (best lr 0.1: 0.5 ± 0.1); dk 2 ± 0.75 "
        "(best lr 0.01: 0.5 ± 0.1). Against none (a difference counts beyond 2 combined SE): "
        "sqrt widens the basin (-2.6 ± 1.2) and bounds the logit (largest |logit| at lr 0.1 10 "
        "± 0.75 vs 13 ± 1); dk does not change the basin measurably (-1 ± 1.2)")
    # no rule with a curve: no seeds, no judgment
    monkeypatch.setattr(figures, "lr_sensitivity", lambda *a, **k: None)
    assert verdict(spec, results) == (
        "learning-rate sensitivity (Wortsman et al.) of the final training accuracy over lr "
        "0.001-0.1 (mean ± SE over 0 seeds; lower = a wider basin of good rates): ")


# -- the transfer verdict's line, from stand-in curves and fits ---------------------------------
def test_the_transfer_verdict_line(monkeypatch):
    import engine.experiments.transfer as transfer
    from engine.experiments.transfer import Optimum, Shift

    spec = ExperimentSpec("fake", TrainingConfig(scalings=("dk", "sqrt", "none")),
                          (Axis("d_model", (128, 32, 64)), Axis("lr", (1e-3, 1e-2, 1e-1)),
                           Axis("seed", (0, 1))),
                          verdict=VerdictSpec("transfer", "final_accuracy", "lr",
                                              width="d_model"))

    def curve(spec, results, rule, over, where, metric="final_loss"):
        assert (over, metric) == ("lr", "final_accuracy")
        width = where["d_model"]
        return None if rule == "dk" and width == 128 else (rule, width)

    def optimum(c):
        rule, width = c  # (None is no curve)
        return Optimum(-3.0 if width == 32 else -2.0, 0.1, -3.2, -2.8,
                       not (rule == "none" and width == 128), 2)

    monkeypatch.setattr(transfer, "curve", curve)
    monkeypatch.setattr(transfer, "optimum", optimum)
    # a shift of 1 in log10 lr, SE 0.5, on a grid of 0.5 per step: +2 +- 1 grid steps, x10
    monkeypatch.setattr(transfer, "shift", lambda n, w: Shift(1.0, 0.5, 0.2, 1.8, 0.5))
    monkeypatch.setattr(transfer, "fixed_lr_comparison", lambda n, w: (0.001, -0.05, 0.02))
    assert verdict(spec, [{"index": 0, "key": "k", "values": {}, "error": None, "rules": {"sqrt": {}},
                           "rows": []}]) == (
        "best lr, d_model 32 -> 128 (parabola vertex in log lr of the final training accuracy; ± "
        "bootstrap SE over seeds; widest at the narrowest's best lr: its final training accuracy "
        "minus the narrowest's, ± SE): dk: not enough runs yet; sqrt 0.001 -> 0.01, +2.0 ± 1.0 "
        "grid steps (x10), widest at 0.001 -0.05 ± 0.02; none 0.001 -> 0.01, +2.0 ± 1.0 grid "
        "steps (x10) (at the grid's end: may move further), widest at 0.001 -0.05 ± 0.02")


# -- the data of a vs_axis and an lr_sensitivity figure, whole ------------------------------------
def test_a_vs_axis_and_a_sensitivity_figure_whole(monkeypatch):
    import engine.experiments.figures as figures
    from engine.experiments.figures import MEAN_ERROR, RATE_ERROR, FigureData, Series, figure_data
    from engine.experiments.spec import FigureSpec

    spec = ExperimentSpec(
        "fake", TrainingConfig(scalings=("none", "sqrt")),
        (Axis("heads", (1, 2)), Axis("layers", (2,)), Axis("lr", (1e-3, 1e-1)),
         Axis("seed", (0, 1))),
        figures=(FigureSpec("vs_axis", "final_loss", "Loss", x="lr", x_log=True, y_log=True),
                 FigureSpec("vs_axis", "success", "Rate", x="lr"),
                 FigureSpec("lr_sensitivity", "final_accuracy", "Sens", x="lr", y_log=True),
                 FigureSpec("lr_sensitivity", "final_accuracy", "Own", x="lr", y_label="mine")))
    # none's final loss: heads 1 at lr 0.001 seeds 0 and 10 (5 +- 5: its lower end 0 is drawn
    # at the mean on the log axis), at 0.1 4 and 4; heads 2: 0.5 and 8; sqrt 1 everywhere
    loss = {(1, 1e-3): (0.0, 10.0), (1, 1e-1): (4.0, 4.0), (2, 1e-3): (0.5, 0.5),
            (2, 1e-1): (8.0, 8.0)}
    results = []
    for job in spec.jobs():
        h, lr, seed = job.values["heads"], job.values["lr"], job.values["seed"]
        results.append({"index": job.index, "key": job.key, "values": job.values, "error": None,
                        "rows": [], "rules": {
                            "none": {"final_loss": loss[h, lr][seed], "steps_to_target": None},
                            "sqrt": {"final_loss": 1.0, "steps_to_target": 10}}})
    sens = {"none": _sens("none", 0.5, 0.75), "sqrt": None}

    def stub(results, rule, over, metric="final_loss"):
        assert (over, metric) == ("lr", "final_accuracy")
        return sens[rule]

    monkeypatch.setattr(figures, "lr_sensitivity", stub)
    loss_fig, rate_fig, sens_fig, own_fig = figure_data(spec, results)
    one = (1e-3, 1e-1)
    assert loss_fig == FigureData(
        "fake_1_final_loss", "vs_axis", "Loss", "learning rate", "final training loss", True,
        True, (Series("none, heads=1, layers=2", "none", one, (5.0, 4.0), (5.0, 4.0), (10.0, 4.0), (2, 2)),
               Series("none, heads=2, layers=2", "none", one, (0.5, 8.0), (0.5, 8.0), (0.5, 8.0), (2, 2)),
               Series("sqrt, heads=1, layers=2", "sqrt", one, (1.0, 1.0), (1.0, 1.0), (1.0, 1.0), (2, 2)),
               Series("sqrt, heads=2, layers=2", "sqrt", one, (1.0, 1.0), (1.0, 1.0), (1.0, 1.0), (2, 2))),
        MEAN_ERROR)
    assert (rate_fig.id, rate_fig.y_label, rate_fig.error, rate_fig.x_log, rate_fig.y_log) == \
        ("fake_2_success", "reached the target (rate)", RATE_ERROR, False, False)
    assert rate_fig.series[2].y == (1.0, 1.0) and rate_fig.series[0].y == (0.0, 0.0)
    assert sens_fig == FigureData(
        "fake_3_final_accuracy", "by_rule", "Sens", "scaling rule",
        "learning-rate sensitivity (Wortsman et al.) of the final training accuracy", False, True,
        (Series("none", "none", (0.0,), (0.5,), (0.5,), (1.25,), (2,)),  # (lower end -0.25: y)
         Series("sqrt", "sqrt", (), (), (), (), ())),
        MEAN_ERROR, ((0.0, "none"), (1.0, "sqrt")))
    assert own_fig.y_label == "mine" and own_fig.y_log is False
    assert own_fig.series[0].lo == (-0.25,)


def test_graded_colours_spread_darkest_first_and_numbers_as_printed():
    from engine.experiments.figures import _fmt, graded_colours

    viridis = ["#440154", "#414487", "#2A788E", "#22A884", "#7AD151", "#B5DE2B"]
    assert graded_colours(0) == [] and graded_colours(1) == ["#440154"]
    assert graded_colours(2) == ["#440154", "#B5DE2B"]
    assert graded_colours(3) == ["#440154", "#2A788E", "#B5DE2B"]  # (5 / 2 = 2.5 rounds to 2)
    assert graded_colours(6) == viridis
    assert [_fmt(v) for v in (100.0, 0.1 + 0.2, 1e-4, 3, "sp", True)] == \
        ["100", "0.3", "0.0001", "3", "sp", "True"]
