"""The one function for a point's statistics (success count, Wilson interval, median steps, mean
± SE, median), checked against independent computations (SciPy, NumPy) on hand-made runs, with
even and unsorted counts; and the value of one run that every statistic reads."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats as sps
from scipy.stats import binomtest

from engine.experiments.point import (
    mean_se,
    point_stats,
    quantile,
    quantile_se,
    run_value,
    wilson_interval,
)


def _run(steps: int | None, loss: float | None = 1.0, rule: str = "sqrt", error: str | None = None,
         rows: list[dict] | None = None, diverged: int | None = None) -> dict:
    return {"index": 0, "key": "k", "values": {}, "error": error, "rows": rows or [],
            "rules": {rule: {"steps_to_target": steps, "final_loss": loss,
                             "diverged_step": diverged, "collapsed": False}}}


def test_wilson_interval_textbook_cases_and_scipy():
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.490, abs=5e-4) and hi == pytest.approx(0.943, abs=5e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=5e-4)
    assert wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    for k, n in ((0, 8), (3, 8), (5, 8), (8, 8), (1, 4), (2, 3)):
        ci = sps.binomtest(k, n).proportion_ci(method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_mean_and_standard_error():
    m, se = mean_se([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5 and se == pytest.approx(math.sqrt(5 / 3) / 2)
    assert mean_se([3.0]) == (3.0, 0.0)
    assert all(math.isnan(v) for v in mean_se([]))


@pytest.mark.parametrize("values", [[5.0, 1.0, 4.0, 2.0], [9.0, 3.0, 7.0], [2.0, 40.0],
                                    [35.0, 30.0, 50.0, 35.0, 40.0, 30.0, 45.0, 35.0], [7.0]])
@pytest.mark.parametrize("q", [0.5, 0.25, 0.75, 0.1])
def test_quantiles_of_unsorted_even_and_odd_counts_are_numpys(values, q):
    assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))


def test_the_median_of_an_even_count_is_the_mean_of_the_two_middle_values():
    assert quantile([40.0, 10.0, 30.0, 20.0], 0.5) == 25.0
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert math.isnan(quantile([], 0.5))


def test_the_standard_error_of_a_median_from_order_statistics():
    """Eight values: the distribution-free interval with at most 2.5 % in each tail is
    [x_(1), x_(8)] (coverage 1 - 2/256); the SE is its width over 2 z of that coverage. Shuffling
    the values changes nothing; fewer than two values give nan."""
    x = [35.0, 30.0, 50.0, 35.0, 40.0, 30.0, 45.0, 35.0]
    cover = 1 - 2 / 256
    z = sps.norm.ppf(0.5 + cover / 2)
    assert quantile_se(x) == pytest.approx((50 - 30) / (2 * z))
    shuffled = x[:]
    random.Random(1).shuffle(shuffled)
    assert quantile_se(shuffled) == quantile_se(x)
    # 20 values: ranks 6 and 15 (Bin(20, 1/2): P(B <= 5) = 0.0207, P(B >= 15) = 0.0207)
    y = list(range(20, 0, -1))
    cover = sps.binom.cdf(14, 20, 0.5) - sps.binom.cdf(5, 20, 0.5)
    assert quantile_se(y) == pytest.approx((15 - 6) / (2 * sps.norm.ppf(0.5 + cover / 2)))
    assert math.isnan(quantile_se([3.0])) and math.isnan(quantile_se([]))
    assert quantile_se([4.0, 4.0, 4.0]) == 0.0


def test_the_median_se_is_close_to_the_normal_theory_one_for_many_values():
    """For n normal values the SE of the median is about 1.2533 sigma / sqrt(n)."""
    rng = np.random.default_rng(0)
    n = 400
    ses = [quantile_se(rng.normal(0, 1, n).tolist()) for _ in range(30)]
    assert np.mean(ses) == pytest.approx(1.2533 / math.sqrt(n), rel=0.1)


def test_point_stats_of_hand_made_runs():
    """Unsorted steps, an even count of runs that reached the target, a run that raised."""
    runs = [_run(60, 0.5), _run(None, 2.0), _run(20, 0.25), _run(40, 1.25), _run(80, 1.0),
            _run(30, 9.0, error="RuntimeError: boom"), _run(None, None)]
    st = point_stats(runs, "sqrt", "final_loss")
    assert (st.n, st.successes) == (6, 4)  # the run that raised is not a run
    assert st.rate == pytest.approx(4 / 6)
    assert (st.rate_lo, st.rate_hi) == wilson_interval(4, 6)
    assert st.median_steps == 50.0  # (40 + 60) / 2, from unsorted values
    assert st.median_steps_se == quantile_se([20, 40, 60, 80])
    assert st.values == 5  # one run has no loss
    assert (st.mean, st.se) == pytest.approx(mean_se([0.5, 2.0, 0.25, 1.25, 1.0]))
    assert st.median == 1.0 and st.median_se == quantile_se([0.5, 2.0, 0.25, 1.25, 1.0])
    other = point_stats(runs, "none")
    assert other.n == 0 and math.isnan(other.rate) and other.median_steps is None
    nobody = point_stats([_run(None), _run(None)], "sqrt")
    assert nobody.successes == 0 and nobody.median_steps is None and nobody.rate_hi < 1


def test_run_value_reads_results_and_logged_steps():
    rows = [{"scaling": "sqrt", "step": 0, "loss": 3.0, "accuracy": 0.1},
            {"scaling": "none", "step": 0, "loss": 7.0, "accuracy": 0.0},
            {"scaling": "sqrt", "step": 30, "loss": 2.0, "accuracy": 0.5},
            {"scaling": "sqrt", "step": 60, "loss": 1.0, "accuracy": float("nan")}]
    res = _run(30, 1.5, rows=rows)
    assert run_value(res, "sqrt", "loss@0") == 3.0  # the first log of this rule
    assert run_value(res, "sqrt", "loss@30") == 2.0
    assert run_value(res, "sqrt", "loss@end") == 1.0  # the last
    assert run_value(res, "sqrt", "loss@40") is None  # not logged
    assert run_value(res, "sqrt", "accuracy@end") is None  # not finite
    assert run_value(res, "sqrt", "final_loss") == 1.5
    assert run_value(res, "sqrt", "success") == 1.0
    assert run_value(_run(None), "sqrt", "success") == 0.0
    assert run_value(res, "dk", "final_loss") is None
    diverged = _run(None, None, rows=rows, diverged=45)
    assert run_value(diverged, "sqrt", "loss@end") is None  # no final figure after divergence
    assert run_value(diverged, "sqrt", "loss@30") == 2.0


def test_the_ends_of_an_interval_are_exact_where_they_are_0_or_1():
    """At 0 successes the lower end is 0.0 exactly (the formula leaves 5.6e-17 at n = 3), at n
    the upper end 1.0; one run is a run (n = 1: Wilson (0, 0.7935) and (0.2065, 1)); a binomial
    CDF never exceeds 1 (its running sum would at n = 17, p = 0.1: 1.0000000000000018)."""
    from engine.experiments.point import _binom_cdf

    for n in (1, 3, 6, 7, 12):
        assert wilson_interval(0, n)[0] == 0.0 and wilson_interval(n, n)[1] == 1.0
    one = binomtest(1, 1).proportion_ci(method="wilson")
    assert wilson_interval(1, 1) == pytest.approx((one.low, 1.0), abs=1e-12)
    assert wilson_interval(1, 1)[0] == pytest.approx(0.2065, abs=5e-5)
    assert wilson_interval(0, 1)[1] == pytest.approx(0.7935, abs=5e-5)
    assert max(_binom_cdf(17, 0.1)) <= 1.0 and _binom_cdf(17, 0.1)[-1] == 1.0


def test_the_median_se_of_two_values():
    """n = 2: the only interval is [x_(1), x_(2)], covering with P(B = 1) = 1/2: z = 0.674490,
    SE = (3 - 1) / (2 * 0.674490) = 1.482602."""
    assert quantile_se([3.0, 1.0]) == pytest.approx(1.482602, rel=1e-6)
    assert quantile_se([1.0, 2.0, 4.0]) == pytest.approx(3 / (2 * 1.150349), rel=1e-6)  # 3/4


def test_point_stats_names_its_value():
    runs = [_run(60, 0.5), _run(20, 0.25)]
    assert point_stats(runs, "sqrt", "final_loss").value == "final_loss"
    assert point_stats(runs, "sqrt").value == "" and point_stats(runs, "sqrt").values == 0


def test_run_value_of_odd_results():
    """A result without rules or rows, a flag (a bool is a number: 1.0 or 0.0), a first log that
    is not at step 0 (``@0`` is the first log, whatever its step), a row without a step."""
    assert run_value({}, "sqrt", "final_loss") is None
    assert run_value({"rules": {"sqrt": {"final_loss": 1.0}}}, "sqrt", "loss@0") is None
    res = _run(30, 1.5, rows=[{"scaling": "sqrt", "step": 10, "loss": 3.0},
                              {"scaling": "sqrt", "loss": 2.5},
                              {"scaling": "sqrt", "step": 20, "loss": 2.0}])
    assert run_value(res, "sqrt", "collapsed") == 0.0
    res["rules"]["sqrt"]["collapsed"] = True
    assert run_value(res, "sqrt", "collapsed") == 1.0
    assert run_value(res, "sqrt", "loss@0") == 3.0  # the first log, at step 10
    assert run_value(res, "sqrt", "loss@10") == 3.0 and run_value(res, "sqrt", "loss@20") == 2.0
    assert run_value(res, "sqrt", "loss@1") is None  # the row without a step is no step 1
