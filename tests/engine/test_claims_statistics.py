"""Every statistic a claim is judged by, at and around its edge, with values computed by hand
(the arithmetic is in the comments) or by SciPy: the rounding of a printed number, the tolerance
of a deterministic figure, the count behind a printed rate, the standard error of a standard
error, the Wilson overlap, the tie rule of a best value. A test that sits far from an edge cannot
tell a right rule from a slightly wrong one (sqrt(2n) for sqrt(2(n - 1)), int for round), so each
case here is placed where the two differ."""

from __future__ import annotations

import math

import pytest
from scipy.stats import binomtest

from engine.claims import Claim, _parse_published, judge, judge_experiment, published_count
from engine.experiments.select import Figure, _se_of_se

TINY = {"name": "tiny", "base": {"task": "retrieval", "d_model": 16, "heads": 1,
                                 "scalings": ["none", "sqrt"], "steps": 4, "log_every": 2,
                                 "batch": 8, "probe_size": 4},
        "axes": {"seed": [0, 1]}, "target": 0.2}


def _claim(published: str, kind: str = "simulate", measure: dict | None = None, **kw) -> Claim:
    params = {"spec": TINY} if kind == "experiment" else {}
    return Claim(id="c", where="test", text="t", kind=kind, params=params,
                 measure=measure or {}, published=published, **kw)


def _exp(measure: dict, published: str, fig: Figure, **kw) -> str:
    return judge_experiment(_claim(published, "experiment", measure, **kw), fig).status


# -- the printed number: its value and half a unit of its last digit ----------------------------
@pytest.mark.parametrize("text, expected", [
    ("0.526", ("=", 0.526, 0.0005)),
    ("2,460", ("=", 2460.0, 0.5)),
    ("1.6e3", ("=", 1600.0, 50.0)),
    ("0.0096", ("=", 0.0096, 0.00005)),
    ("3.35e-4", ("=", 0.000335, 0.0000005)),  # its last digit: 0.01e-4
    ("12", ("=", 12.0, 0.5)),
    ("-0.5", ("=", -0.5, 0.05)),
    (">0.5", (">", 0.5, 0.05)),
    ("< 0.05", ("<", 0.05, 0.005)),
    (">12", (">", 12.0, 0.5)),  # (every digit after the sign is the number's)
    ("< 345", ("<", 345.0, 0.5)),
    (" 1,234,567.5 ", ("=", 1234567.5, 0.05)),
    ("-2,460", ("=", -2460.0, 0.5)),
])
def test_a_printed_number_and_half_a_unit_of_its_last_digit(text, expected):
    op, value, half = _parse_published(text)
    assert op == expected[0]
    assert value == pytest.approx(expected[1], rel=1e-12)
    assert half == pytest.approx(expected[2], rel=1e-12)


@pytest.mark.parametrize("text, says", [
    ("about 1", "published must be a number as printed or a bound, got 'about 1'"),
    ("", "published must be a number as printed or a bound, got ''"),
    ("X1", "published must be a number as printed or a bound, got 'X1'"),  # not a bound sign
    ("12,34", "published must be a number as printed or a bound, got '12,34'"),
    ("inf", "published must be finite, got 'inf'"),
    ("<NaN", "published must be finite, got '<NaN'"),
])
def test_a_published_text_that_is_no_number_is_refused_quoting_it(text, says):
    with pytest.raises(ValueError) as err:
        _parse_published(text)
    assert str(err.value) == says


# -- a deterministic figure: rounding + se_multiple * SE, the edge included ---------------------
@pytest.mark.parametrize("measured, se, status", [
    (0.5265, 0.0, "ok"),  # the edge of 0.526's rounding: 0.526 + 0.0005
    (0.5255, 0.0, "ok"),
    (0.52652, 0.0, "FAIL"),
    (0.52548, 0.0, "FAIL"),
    (0.5295, 0.001, "ok"),  # 0.0005 + 3 * 0.001 = 0.0035: 0.526 + 0.0035
    (0.5296, 0.001, "FAIL"),
    (0.5224, 0.001, "FAIL"),
    (math.nan, 0.0, "FAIL"),
    (math.inf, 1.0, "FAIL"),
])
def test_a_deterministic_figure_within_rounding_plus_three_standard_errors(measured, se, status):
    check = judge(_claim("0.526"), measured, se)
    assert check.status == status
    if math.isfinite(measured):
        assert check.tolerance == pytest.approx(0.0005 + 3 * se)


def test_se_multiple_sets_the_standard_errors_allowed():
    # 0.0005 + 2 * 0.001 = 0.0025: 0.5284 holds, 0.5286 does not; with 0 SE allowed, the rounding
    assert judge(_claim("0.526", se_multiple=2.0), 0.5284, 0.001).status == "ok"
    assert judge(_claim("0.526", se_multiple=2.0), 0.5286, 0.001).status == "FAIL"
    assert judge(_claim("0.526", se_multiple=0.0), 0.5268, 0.001).status == "FAIL"


@pytest.mark.parametrize("published, measured, status", [
    (">0.5", 0.5, "FAIL"), (">0.5", 0.5000001, "ok"), (">0.5", 0.49, "FAIL"),
    ("<0.05", 0.05, "FAIL"), ("<0.05", 0.0499999, "ok"), ("<0.05", 0.06, "FAIL"),
])
def test_a_bound_is_strict(published, measured, status):
    assert judge(_claim(published), measured, 0.0).status == status


# -- the count behind a printed rate: rounded, never truncated -----------------------------------
@pytest.mark.parametrize("stat, published, n, count", [
    ("rate", "0.29", 100, 29),  # 0.29 * 100 = 28.999999999999996 in floats: int() gives 28
    ("rate", "0.57", 100, 57),  # 56.99999999999999
    ("rate", "0.33", 3, 1),  # 0.99
    ("rate", "0.375", 8, 3),
    ("successes", "3", 8, 3),
    ("rate_hi", "0.32", 8, 0),  # Wilson(0, 8) = (0, 0.3244)
    ("rate_lo", "0.68", 8, 8),  # Wilson(8, 8) = (0.6756, 1)
    ("rate_lo", "0.50", 8, None),  # no count of 8 runs has this lower bound
    # Wilson(1, 12) = (0.0149, ..): within 0.005 of 0.01; Wilson(0, 12) starts at 0, 0.01 away,
    # inside a band twice as wide (two counts would fit: none chosen)
    ("rate_lo", "0.01", 12, 1),
])
def test_the_count_a_printed_rate_or_bound_belongs_to(stat, published, n, count):
    claim = _claim(published, "experiment", {"stat": stat, "rule": "sqrt"})
    assert published_count(claim, n) == count


@pytest.mark.parametrize("measured_k, status", [(47, "ok"), (48, "ok"), (49, "FAIL")])
def test_a_printed_rate_is_judged_as_its_rounded_count(measured_k, status):
    """29/100 (Wilson 0.210-0.385) against a measured 47/100 (0.3751-0.567): they overlap, but
    28/100 (up to 0.3749) would not, so truncating 0.29 * 100 to 28 would fail this claim; 49/100
    (from 0.3942) does not overlap 29/100."""
    ci = {k: binomtest(k, 100).proportion_ci(method="wilson") for k in (28, 29, measured_k)}
    assert ci[28].high < 0.3751 < ci[29].high  # (the edges, from SciPy)
    fig = Figure(measured_k / 100, n=100, successes=measured_k)
    assert _exp({"stat": "rate", "rule": "sqrt"}, "0.29", fig) == status


# -- a mean and its printed standard error ---------------------------------------------------------
MEAN = {"stat": "mean", "rule": "sqrt", "value": "accuracy@2"}


@pytest.mark.parametrize("n, measured_se, status", [
    # 8 seeds, published 0.50 ± 0.09: the SE holds while |SE - 0.09| <= 0.005 + 3 hypot(SE,
    # 0.09) / sqrt(2 * 7). SE 0.50: 0.41 <= 0.005 + 0.80178 * 0.50804 = 0.41234 (ok; with
    # sqrt(2 * 8) it would be 0.005 + 0.75 * 0.50804 = 0.386: FAIL). SE 0.52: 0.43 > 0.005 +
    # 0.80178 * 0.52773 = 0.42813 (FAIL)
    (8, 0.50, "ok"), (8, 0.52, "FAIL"),
    # below: SE 0 fails (0.09 > 0.005 + 0.80178 * 0.09 = 0.0772)
    (8, 0.0, "FAIL"), (8, 0.02, "ok"),  # 0.07 <= 0.005 + 0.80178 * 0.0922 = 0.0789
    # 3 seeds: 3 / sqrt(4) = 1.5; SE 0.09 + d holds for any d (1.5 hypot > d)
    (3, 5.0, "ok"),
])
def test_a_printed_se_is_judged_with_the_se_of_an_se_at_its_edge(n, measured_se, status):
    fig = Figure(0.50, measured_se, n)
    assert _exp(MEAN, "0.50", fig, published_se="0.09") == status


@pytest.mark.parametrize("n, expected", [(2, 1 / math.sqrt(2)), (3, 1 / 2), (5, 1 / math.sqrt(8)),
                                         (8, 1 / math.sqrt(14))])
def test_the_standard_error_of_a_standard_error(n, expected):
    assert _se_of_se(1.0, n) == pytest.approx(expected, rel=1e-12)
    assert math.isnan(_se_of_se(1.0, 1))


@pytest.mark.parametrize("measured, status", [
    # published 0.30 with no printed SE, measured SE 0.05: 0.005 + 3 * sqrt(2) * 0.05 = 0.21713
    (0.517, "ok"), (0.5175, "FAIL"), (0.083, "ok"), (0.0825, "FAIL"),
])
def test_a_mean_without_a_printed_se_counts_the_measured_one_twice(measured, status):
    assert _exp(MEAN, "0.30", Figure(measured, 0.05, 8)) == status


@pytest.mark.parametrize("measured, status", [
    # a stat "se": published 0.09, measured 0.15 with its SE 0.15 / sqrt(14) = 0.040089; the
    # published one's SE scales with it: 0.09 / sqrt(14) = 0.024054; combined 0.046752;
    # tolerance 0.005 + 3 * 0.046752 = 0.14526 -> |0.15 - 0.09| = 0.06 holds
    (0.15, "ok"),
    # 0.30: SE 0.080178, published's 0.024054 -> combined 0.083708, tolerance 0.25612 > 0.21
    (0.30, "ok"),
    # 0.40: 0.10690 and 0.024054 -> 0.10958, tolerance 0.33373 > 0.31: still ok
    (0.40, "ok"),
    # 0.03: 0.0080178 and 0.024054 -> 0.025355, tolerance 0.081065 > 0.06: ok
    (0.03, "ok"),
    # 0.60: 0.16036 and 0.024054 -> 0.16215, tolerance 0.49145 < 0.51: FAIL
    (0.60, "FAIL"),
])
def test_a_standard_error_claim_with_the_se_of_an_se(measured, status):
    se = {"stat": "se", "rule": "sqrt", "value": "accuracy@2"}
    assert _exp(se, "0.09", Figure(measured, measured / math.sqrt(14), 8)) == status


def test_a_standard_error_claim_at_its_edge():
    """published 0.09; measured s with SE s / sqrt(14): ok while s - 0.09 <= 0.005 + 3 *
    hypot(s, 0.09) / sqrt(14). At s = 0.5: 0.41 vs 0.005 + 0.80178 * 0.50804 = 0.41234 (ok); at
    s = 0.52: 0.43 vs 0.42813 (FAIL); with sqrt(2 n) for sqrt(2 (n - 1)) in the SE's SE,
    0.5 would fail (0.386)."""
    se = {"stat": "se", "rule": "sqrt", "value": "accuracy@2"}
    assert _exp(se, "0.09", Figure(0.50, 0.50 / math.sqrt(14), 8)) == "ok"
    assert _exp(se, "0.09", Figure(0.52, 0.52 / math.sqrt(14), 8)) == "FAIL"


# -- the median selector: an asymmetric case (its mean is elsewhere) -----------------------------
def test_the_median_is_the_middle_value_not_the_mean():
    from engine.experiments.select import Selector
    from engine.experiments.spec import ExperimentSpec

    spec = ExperimentSpec.from_dict({**TINY, "axes": {"seed": [0, 1, 2, 3, 4]}})
    losses = {0: 1.0, 1: 30.0, 2: 2.0, 3: 3.0, 4: 100.0}  # median 3, mean 27.2

    def result(seed: int) -> dict:
        return {"index": seed, "key": f"seed={seed}", "values": {"seed": seed}, "error": None,
                "rows": [], "rules": {r: {"steps_to_target": None, "final_loss": losses[seed]}
                                      for r in ("none", "sqrt")}}

    results = [result(s) for s in losses]
    fig = Selector.from_dict({"stat": "median", "rule": "sqrt", "value": "final_loss"}
                             ).measure(spec, results)
    assert fig.value == 3.0 and fig.n == 5
    # five values: the order-statistics interval with <= 2.5 % in each tail is [x_(1), x_(5)]
    # (P(B = 0) = 1/32 > 2.5 %, so rank 1 is the lowest allowed), coverage 1 - 2/32 = 0.9375,
    # z = 1.8627: SE = (100 - 1) / (2 * 1.8627)
    assert fig.se == pytest.approx(99 / (2 * 1.862732), rel=1e-5)
    even = [result(s) for s in (0, 1, 2, 3)]  # 1, 30, 2, 3: median (2 + 3) / 2
    assert Selector.from_dict({"stat": "median", "rule": "sqrt", "value": "final_loss"}
                              ).measure(spec, even).value == 2.5
    mean = Selector.from_dict({"stat": "mean", "rule": "sqrt", "value": "final_loss"}
                              ).measure(spec, results)
    assert mean.value == pytest.approx(27.2)


# -- a best value: tied when the seeds cannot tell it from the best, to its printed digits -------
@pytest.mark.parametrize("published, status", [
    ("0.01", "ok"), ("0.010", "ok"), ("0.03", "ok"), ("0.1", "FAIL"), ("0.0104", "FAIL"),
])
def test_a_published_best_value_is_one_of_the_tied_ones(published, status):
    fig = Figure(0.01, n=4, accepted=(0.01, 0.03))
    assert _exp({"stat": "best", "rule": "sqrt", "over": "lr", "value": "final_loss"},
                published, fig, tolerance="statistical") == status


def test_a_best_value_check_names_the_tied_values_and_its_edge_belongs_to_it():
    best = {"stat": "best", "rule": "sqrt", "over": "lr", "value": "final_loss"}
    claim = _claim("0.03", "experiment", best, tolerance="statistical")
    check = judge_experiment(claim, Figure(0.01, n=4, accepted=(0.03, 0.01)))
    assert check.claim is claim and (check.measured, check.se, check.status) == (0.01, 0.0, "ok")
    assert math.isnan(check.tolerance)
    assert check.note == "tied with the best (3 combined SE): 0.01, 0.03"  # sorted
    # published "0" (half a unit: 0.5): an accepted value exactly at the edge is tied
    edge = 0.5 * (1 + 1e-9)
    assert _exp(best, "0", Figure(0.0, n=4, accepted=(edge,)), tolerance="statistical") == "ok"
    assert _exp(best, "0", Figure(0.0, n=4, accepted=(0.5000001,)),
                tolerance="statistical") == "FAIL"


# -- a selection the experiment cannot answer: refused before anything runs, naming the field ---
@pytest.mark.parametrize("measure, says", [
    ({"stat": "mode", "rule": "sqrt"}, ["stat must be one of n, successes, rate,", "'mode'"]),
    ({"stat": "mean", "rule": "sqrt"}, ["stat 'mean' needs a value"]),
    ({"stat": "mean", "rule": "sqrt", "value": "final_loss", "over": "seed"},
     ["over (an axis) goes with the stats lr_sensitivity, lr_sensitivity_se, best and only with "
      "them"]),
    ({"stat": "best", "rule": "sqrt", "over": "lr"}, ["over='lr' must be an axis that at leaves "
                                                      "open"]),
    ({"stat": "n", "rule": "sqrt", "across": "mean"}, ["across must be one of min, max"]),
    ({"stat": "n", "rule": "dk"}, ["rule 'dk' is not trained in 'tiny' (none, sqrt)"]),
    ({"stat": "n", "rule": "sqrt", "at": {"lr": 0.1}}, ["'lr' is not an axis of 'tiny'"]),
    ({"stat": "n", "rule": "sqrt", "at": {"seed": 7}}, ["seed=7 is not a value of that axis"]),
    ({"stat": "n"}, ["selects 2 points of 'tiny': fix them with rule and at, or give across"]),
    ({"stat": "mean", "rule": "sqrt", "value": "nonsense"},
     ["value 'nonsense' is neither a per-rule result (final_loss, ", "nor COLUMN@0|end|STEP of a "
      "metrics.csv column"]),
    ({"stat": "mean", "rule": "sqrt", "value": "scaling@0"}, ["value 'scaling@0' is neither"]),
    ({"stat": "mean", "rule": "sqrt", "value": "step@end"}, ["value 'step@end' is neither"]),
    ({"stat": "mean", "rule": "sqrt", "value": "loss@3"},
     ["value 'loss@3': step 3 is not logged in seed=0 (4 steps, every 2)"]),
    ({"stat": "mean", "rule": "sqrt", "value": "loss@5"}, ["step 5 is not logged"]),
])
def test_a_selection_the_experiment_cannot_answer_is_refused_naming_measure(measure, says):
    from engine.errors import ConfigError
    from engine.experiments.select import Selector
    from engine.experiments.spec import ExperimentSpec

    spec = ExperimentSpec.from_dict(TINY)
    with pytest.raises(ConfigError) as err:
        Selector.from_dict(measure).check(spec)
    assert err.value.field == "measure"
    for part in says:
        assert part in err.value.message, err.value.message


@pytest.mark.parametrize("value", ["success", "final_loss", "loss@0", "loss@end", "loss@2",
                                   "loss@4", "accuracy@4"])
def test_every_logged_value_is_a_value(value):
    """The last step is logged whatever log_every (4 of 4 steps, every 2), as are @0 and @end."""
    from engine.experiments.select import Selector
    from engine.experiments.spec import ExperimentSpec

    Selector.from_dict({"stat": "mean", "rule": "sqrt", "value": value}).check(
        ExperimentSpec.from_dict(TINY))


def test_over_statistics_carry_their_run_count_and_nan_without_runs():
    from engine.experiments.select import Selector
    from engine.experiments.spec import ExperimentSpec

    spec = ExperimentSpec.from_dict({**TINY, "axes": {"lr": [0.01, 0.1], "seed": [0, 1]}})

    def result(i: int, lr: float, seed: int, loss: float | None) -> dict:
        return {"index": i, "key": str(i), "values": {"lr": lr, "seed": seed}, "error": None,
                "rows": [{"scaling": "sqrt", "step": 0, "loss": 3.0}],
                "rules": {"sqrt": {"final_loss": loss, "steps_to_target": None}}}

    res = [result(0, 0.01, 0, 1.0), result(1, 0.1, 0, 2.0), result(2, 0.01, 1, 1.5),
           result(3, 0.1, 1, 2.5)]
    for stat in ("best", "lr_sensitivity", "lr_sensitivity_se"):
        fig = Selector.from_dict({"stat": stat, "rule": "sqrt", "over": "lr"}).measure(spec, res)
        assert fig.n == 2, stat
    # seed 0: (1 + 2) / 2 - 1 = 0.5, seed 1: (1.5 + 2.5) / 2 - 1.5 = 0.5: SE 0, its SE 0
    se = Selector.from_dict({"stat": "lr_sensitivity_se", "rule": "sqrt", "over": "lr"}
                            ).measure(spec, res)
    assert (se.value, se.se) == (0.0, 0.0)
    none = [{**r, "rows": []} for r in res]  # no loss at init: no curve
    fig = Selector.from_dict({"stat": "best", "rule": "sqrt", "over": "lr"}).measure(spec, none)
    assert math.isnan(fig.value) and fig.n == 0


# -- every field of a check on each judging path (the verdict's note, SE and tolerance too) ------
def _fields(check) -> tuple:
    def nan(x):
        return "nan" if isinstance(x, float) and math.isnan(x) else x

    return (check.claim, nan(check.measured), nan(check.se), nan(check.tolerance), check.status,
            check.note)


MEAN = {"stat": "mean", "rule": "sqrt", "value": "final_loss"}


def test_every_field_of_a_judged_figure():
    c, above, below = _claim("1"), _claim(">0.5"), _claim("<0.5")
    assert _fields(judge(c, math.inf, 0.2)) == (c, math.inf, 0.2, "nan", "FAIL",
                                                "the measurement is not finite")
    assert _fields(judge(above, 0.6, 0.1)) == (above, 0.6, 0.1, "nan", "ok", "")
    assert _fields(judge(below, 0.6, 0.1)) == (below, 0.6, 0.1, "nan", "FAIL", "")
    assert _fields(judge(c, 1.2, 0.1)) == (c, 1.2, 0.1, pytest.approx(0.8), "ok", "")


def test_a_figure_exactly_at_its_tolerance_holds_and_the_next_float_does_not():
    """Published 0: half a unit is 0.5, allowed up to 0.5 * (1 + 1e-9), that value included;
    the same edge for a mean, a standard error (SE 0: rounding alone) and a printed SE."""
    edge = 0.5 * (1 + 1e-9)
    beyond = math.nextafter(edge, 1.0)
    for measured, status in ((edge, "ok"), (beyond, "FAIL")):
        assert judge(_claim("0"), measured, 0.0).status == status
        assert _exp(MEAN, "0", Figure(measured, 0.0, 4)) == status
        assert _exp({**MEAN, "stat": "se"}, "0", Figure(measured, 0.0, 4)) == status
        # the mean holds exactly; its SE is `measured`, printed 0 (se_multiple 0: rounding alone)
        assert _exp(MEAN, "1", Figure(1.0, measured, 4), published_se="0",
                    se_multiple=0.0) == status


def test_a_standard_error_of_zero_is_judged_by_rounding():
    """A measured SE of 0 (every seed the same): its own SE is 0, no division by it."""
    check = judge_experiment(_claim("0", "experiment", {**MEAN, "stat": "se"}), Figure(0.0, 0.0, 5))
    assert _fields(check) == (check.claim, 0.0, 0.0, 0.5, "ok",
                              "standard error of a standard error over seeds")
    c = _claim("0.1", "experiment", {**MEAN, "stat": "se"})
    combined = math.hypot(0.02, 0.02 * 0.1 / 0.1)
    assert _fields(judge_experiment(c, Figure(0.1, 0.02, 5))) == (
        c, 0.1, pytest.approx(combined), pytest.approx(0.05 + 3 * combined), "ok",
        "standard error of a standard error over seeds")


def test_every_field_of_a_mean_and_its_printed_se():
    c = _claim("1", "experiment", MEAN)
    combined = math.hypot(0.1, 0.1)  # the measured SE twice
    assert _fields(judge_experiment(c, Figure(1.2, 0.1, 4))) == (
        c, 1.2, pytest.approx(combined), pytest.approx(0.5 + 3 * combined), "ok",
        "3 combined SE (measured SE 0.1, twice)")
    printed = _claim("1", "experiment", MEAN, published_se="0.1")
    combined = math.hypot(0.6, 0.1)
    se_tol = 0.05 + 3 * combined / math.sqrt(2 * 9)  # 0.48: the SE is 0.5 off
    assert _fields(judge_experiment(printed, Figure(1.0, 0.6, 10))) == (
        printed, 1.0, pytest.approx(combined), pytest.approx(0.5 + 3 * combined), "FAIL",
        f"the mean holds, its SE does not: published 0.1, measured 0.6, tolerance ± {se_tol:.3g}")
    assert _fields(judge_experiment(printed, Figure(1.0, 0.2, 10)))[4:] == (
        "ok", "3 combined SE (measured SE 0.2, published 0.1)")
    # se_multiple 0: rounding alone (not 1 SE); one run has no SE of its SE; two runs do
    bare = _claim("1", "experiment", MEAN, se_multiple=0.0)
    assert judge_experiment(bare, Figure(1.2, 0.1, 4)).tolerance == 0.5
    printed0 = _claim("1", "experiment", MEAN, published_se="0.1", se_multiple=0.0)
    assert judge_experiment(printed0, Figure(1.0, 0.6, 1)).status == "ok"
    assert judge_experiment(printed0, Figure(1.0, 0.6, 2)).status == "FAIL"  # 0.5 > 0.05


def test_every_field_of_a_figure_judged_over_seeds_without_a_number():
    c = _claim("1", "experiment", MEAN, scale=2.0)
    assert _fields(judge_experiment(c, Figure(math.inf, 0.1, 4))) == (
        c, math.inf, 0.2, "nan", "FAIL", "the measurement is not finite")
    assert _fields(judge_experiment(c, Figure(0.5, math.nan, 1))) == (
        c, 1.0, "nan", "nan", "FAIL", "no standard error from 1 run(s): cannot judge over seeds")


def test_a_scaled_figure_scales_its_resolution_and_its_tied_values():
    steps = _claim("20", "experiment", {"stat": "median_steps", "rule": "sqrt"}, scale=2.0)
    check = judge_experiment(steps, Figure(10.0, 0.0, 4, resolution=2.0))
    assert (check.measured, check.tolerance, check.status) == (20.0, 0.5 + 4.0, "ok")
    best = _claim("1", "experiment", {"stat": "best", "rule": "sqrt"}, scale=100.0)
    check = judge_experiment(best, Figure(0.01, 0.0, 4, accepted=(0.02, 0.01)))
    assert (check.measured, check.status, check.note) == (
        1.0, "ok", "tied with the best (3 combined SE): 1, 2")


def test_an_exact_figure_reports_no_standard_error():
    c = _claim("2", "experiment", {"stat": "n", "rule": "sqrt"})
    check = judge_experiment(c, Figure(2.0, 0.3, 2))
    assert (check.measured, check.se, check.tolerance, check.status) == (2.0, 0.0, 0.5, "ok")


def _wilson(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(method="wilson")
    return f"{k}/{n} ({ci.low:.2f}-{ci.high:.2f})"


def test_every_field_of_a_count_check():
    three = _claim("3", "experiment", {"stat": "successes", "rule": "sqrt"})
    assert _fields(judge_experiment(three, Figure(5.0, 0.0, 10, successes=5))) == (
        three, 5.0, 0.0, "nan", "ok",
        f"published {_wilson(3, 10)}, measured {_wilson(5, 10)}: the Wilson 95 % intervals overlap")
    none = _claim("0", "experiment", {"stat": "successes", "rule": "sqrt"})
    assert _fields(judge_experiment(none, Figure(10.0, 0.0, 10, successes=10))) == (
        none, 10.0, 0.0, "nan", "FAIL", f"published {_wilson(0, 10)}, measured "
        f"{_wilson(10, 10)}: the Wilson 95 % intervals do not overlap")
    # no count of 10 runs has a Wilson lower end of 0.99 (10/10 has 0.72)
    bound = _claim("0.99", "experiment", {"stat": "rate_lo", "rule": "sqrt"})
    assert _fields(judge_experiment(bound, Figure(0.72, 0.0, 10, successes=10))) == (
        bound, 0.72, 0.0, "nan", "FAIL", "no count of 10 runs has the published bound 0.99")
