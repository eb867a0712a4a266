"""Summaries with uncertainty, figure data and the verdict, on hand-made results (no training)."""

from __future__ import annotations

import math

import pytest

from engine.experiments.figures import figure_data, verdict
from engine.experiments.point import wilson_interval
from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec, VerdictSpec
from engine.experiments.summary import (
    Group,
    group_results,
    metrics_columns,
    metrics_rows,
    points_columns,
    points_rows,
    summary_columns,
    summary_rows,
)
from engine.training.config import TrainingConfig

SPEC = ExperimentSpec(
    "fake", TrainingConfig(scalings=("none", "sqrt")),
    (Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1, 2))),
    figures=(FigureSpec("by_rule", "success", "s"),
             FigureSpec("vs_axis", "steps_to_target", "st", x="lr", x_log=True),
             FigureSpec("vs_step", "loss", "curves", x="lr", y_log=True)),
    verdict=VerdictSpec("ends_of_axis", "success", "lr"))


def _fake_results():
    """sqrt always reaches the target (in 30 + 10 * seed steps); none only at lr 1e-2, seed 0;
    job 5 raised."""
    out = []
    for job in SPEC.jobs():
        res = {"index": job.index, "key": job.key, "values": job.values, "error": None,
               "rules": {}, "rows": []}
        if job.index == 5:
            res["error"] = "RuntimeError: boom"
            out.append(res)
            continue
        for rule in ("none", "sqrt"):
            hit = rule == "sqrt" or (job.values["lr"] == 1e-2 and job.values["seed"] == 0)
            res["rules"][rule] = {
                "final_loss": 0.1 if hit else 2.0, "final_accuracy": 0.95 if hit else 0.1,
                "probe_accuracy": 0.9, "steps_to_target": 30 + 10 * job.values["seed"] if hit else None,
                "max_logit_abs": 5.0, "max_logit_std": 1.0, "min_entropy_norm": 0.5,
                "diverged_step": None, "collapsed": False, "seconds": 1.0}
            res["rows"] += [{"scaling": rule, "step": s, "loss": 2.0 / (1 + s)} for s in (0, 10)]
        out.append(res)
    return out


def test_groups_over_seeds_with_wilson_rates():
    groups = {(g.rule, g.values["lr"]): g for g in group_results(SPEC, _fake_results())}
    g = groups[("sqrt", 1e-3)]
    assert (g.stats.n, g.stats.successes, g.stats.median_steps) == (3, 3, 40)
    # Wilson at k = n: lower end n / (n + z^2) = 3 / (3 + 1.959964^2), upper end 1
    assert (g.stats.rate_lo, g.stats.rate_hi) == pytest.approx((0.438503, 1.0), abs=1e-6)
    g = groups[("none", 1e-2)]  # job 5 (seed 2) raised: two runs
    assert (g.stats.n, g.stats.successes, g.stats.median_steps) == (2, 1, 30)
    # mean of 0.1 and 2.0, SE = sample SD / sqrt(2) = (1.9 / sqrt(2)) / sqrt(2) = 0.95
    assert g.means["final_loss"] == pytest.approx((1.05, 0.95))


def test_groups_count_diverged_and_collapsed_runs_apart():
    results = _fake_results()
    results[0]["rules"]["sqrt"]["diverged_step"] = 40  # lr 1e-3, seed 0
    results[1]["rules"]["sqrt"]["collapsed"] = True  # lr 1e-3, seed 1
    results[2]["rules"]["sqrt"]["collapsed"] = True
    g = next(g for g in group_results(SPEC, results) if (g.rule, g.values["lr"]) == ("sqrt", 1e-3))
    assert (g.diverged, g.collapsed) == (1, 2)
    row = next(r for r in points_rows(SPEC, results) if (r["scaling"], r["lr"]) == ("sqrt", 1e-3))
    assert (row["diverged"], row["collapsed"]) == (1, 2)


def test_the_verdict_gives_the_median_steps_of_unsorted_and_even_counts():
    """Steps 80, 30, 40 (median 40, mean 50) at lr 1e-3; at lr 1e-2 two runs, 90 and 30
    (median 60)."""
    results = _fake_results()
    steps = {0: 80, 1: 30, 2: 40, 3: 90, 4: 30}
    for res in results:
        if res["index"] in steps:
            res["rules"]["sqrt"]["steps_to_target"] = steps[res["index"]]
    text = verdict(SPEC, results)
    assert "sqrt 3/3" in text and "median 40 steps" in text and "median 60 steps" in text


def test_points_csv_rows_are_the_groups_statistics():
    """points.csv: one row per (rule, point of the other axes), the same figures as the table."""
    rows = points_rows(SPEC, _fake_results())
    assert list(rows[0]) == points_columns(SPEC)
    assert points_columns(SPEC)[:9] == ["lr", "scaling", "n", "successes", "rate", "rate_lo",
                                        "rate_hi", "median_steps", "median_steps_se"]
    by = {(r["scaling"], r["lr"]): r for r in rows}
    assert len(rows) == 4
    sqrt = by[("sqrt", 1e-3)]
    assert (sqrt["n"], sqrt["successes"], sqrt["median_steps"]) == (3, 3, 40)
    assert sqrt["final_loss_mean"] == pytest.approx(0.1) and sqrt["final_loss_se"] == 0.0
    none = by[("none", 1e-3)]
    assert none["median_steps"] == "" and none["median_steps_se"] == ""  # never reached: blank
    assert by[("none", 1e-2)]["rate"] == 0.5


def test_summary_and_metrics_rows_have_the_documented_columns():
    results = _fake_results()
    cols = summary_columns(SPEC)
    assert cols == ["job", "lr", "seed", "scaling", "final_loss", "final_accuracy",
                    "probe_accuracy", "steps_to_target", "max_logit_abs", "max_logit_std",
                    "min_entropy_norm", "diverged_step", "collapsed", "seconds", "clip_events"]
    rows = summary_rows(SPEC, results)
    assert len(rows) == 6 * 2 and [r["job"] for r in rows[:4]] == [0, 0, 1, 1]
    assert rows[0]["steps_to_target"] == "" and rows[1]["steps_to_target"] == 30
    assert rows[-1]["final_loss"] == ""  # the job that raised
    m = metrics_rows(results)
    assert len(m) == 5 * 2 * 2 and m[0]["job"] == 0 and m[0]["lr"] == 1e-3


def test_figure_data_carries_the_uncertainty_and_the_verdict_is_computed():
    figs = figure_data(SPEC, _fake_results())
    rate = figs[0]
    assert rate.kind == "by_rule" and [s.rule for s in rate.series] == ["none", "sqrt"]
    none = rate.series[0]
    assert none.y == (1 / 5,) and (none.lo[0], none.hi[0]) == pytest.approx(wilson_interval(1, 5))
    steps = figs[1]
    sqrt = next(s for s in steps.series if s.rule == "sqrt")
    assert sqrt.x == (1e-3, 1e-2) and sqrt.y == (40.0, 35.0) and sqrt.n == (3, 2)
    curves = figs[2]
    assert len(curves.series) == 4 and all(v > 0 for s in curves.series for v in s.lo)
    for fig in figs:
        for s in fig.series:
            assert all(math.isfinite(v) for v in (*s.x, *s.y, *s.lo, *s.hi))
    text = verdict(SPEC, _fake_results())
    assert "none 0/3" in text and "1/2" in text and "sqrt 3/3" in text and "95 % CI" in text
    assert verdict(SPEC, []) == "no finished jobs yet"


def test_a_verdict_at_one_axis_value_uses_only_those_jobs():
    """E.g. the warmup experiment's verdict at one learning rate: pooling every rate would let
    the largest dominate the means."""
    from dataclasses import replace

    spec = replace(SPEC, axes=(Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1, 2))),
                   verdict=VerdictSpec("by_rule", "success", at={"lr": 1e-2}))
    text = verdict(spec, _fake_results())
    assert text.startswith("reached 90% training accuracy at lr=0.01: ")
    assert "none 1/2" in text and "sqrt 2/2" in text  # job 5 (lr 1e-2, seed 2) raised
    pooled = verdict(replace(spec, verdict=VerdictSpec("by_rule", "success")), _fake_results())
    assert "none 1/5" in pooled and "sqrt 5/5" in pooled


def test_metrics_columns_are_job_the_axes_then_the_training_columns_with_the_lengths():
    """metrics.csv's header, written out: a renamed ``job`` or the evaluation lengths dropped
    would break every reader of the file."""
    from dataclasses import replace

    from engine.training.observe import CSV_COLUMNS

    spec = replace(SPEC, base=SPEC.base.replace(eval_lengths=(4, 16)))
    cols = metrics_columns(spec)
    assert cols[:3] == ["job", "lr", "seed"]
    assert cols[3:3 + len(CSV_COLUMNS)] == list(CSV_COLUMNS)
    assert cols[3 + len(CSV_COLUMNS):] == ["accuracy_len4", "entropy_norm_len4",
                                           "accuracy_len16", "entropy_norm_len16"]
    assert metrics_columns(SPEC) == ["job", "lr", "seed", *CSV_COLUMNS]


def test_rows_of_a_job_stored_without_rules_or_rows():
    """A job that raised before training may be stored with neither ``rules`` nor ``rows``: its
    summary rows keep the job, axes and rule with empty figures, and it logs no metrics rows."""
    bare = {"index": 7, "key": "k", "values": {"lr": 0.5, "seed": 4}, "error": "boom"}
    rows = summary_rows(SPEC, [bare])
    assert [(r["job"], r["lr"], r["seed"], r["scaling"]) for r in rows] == [
        (7, 0.5, 4, "none"), (7, 0.5, 4, "sqrt")]
    assert all(r[name] == "" for r in rows for name in ("final_loss", "steps_to_target",
                                                        "collapsed", "clip_events"))
    assert metrics_rows([bare]) == []
    full = _fake_results()[0]
    assert metrics_rows([bare, full]) == metrics_rows([full])


def test_a_group_label_names_its_point_with_short_floats():
    """The CLI table's point column: floats in ``g`` format (0.1 + 0.2 prints 0.3, 1234567.0
    prints 1.23457e+06), other values as they are, comma-separated, in axis order."""
    from engine.experiments.point import PointStats

    stats = PointStats(n=1, successes=0, rate=0.0, rate_lo=0.0, rate_hi=1.0,
                       median_steps=None, median_steps_se=math.nan)
    g = Group(rule="sqrt", values={"lr": 0.1 + 0.2, "width": 1234567.0, "seed": 3,
                                   "init": "xavier"},
              stats=stats, diverged=0, collapsed=0, means={})
    assert g.label() == "lr=0.3, width=1.23457e+06, seed=3, init=xavier"
    assert Group(rule="sqrt", values={}, stats=stats, diverged=0, collapsed=0,
                 means={}).label() == ""


def test_a_group_counts_only_the_jobs_that_hold_its_rule():
    """A job stored with one rule's result (the other not run): that rule's point has one run
    more than the other's, and the missing rule's figures come from its other seeds only."""
    results = _fake_results()
    del results[0]["rules"]["none"]  # lr 1e-3, seed 0
    groups = {(g.rule, g.values["lr"]): g for g in group_results(SPEC, results)}
    assert (groups[("none", 1e-3)].stats.n, groups[("sqrt", 1e-3)].stats.n) == (2, 3)
    assert groups[("none", 1e-3)].means["final_loss"] == (2.0, 0.0)
    assert (groups[("none", 1e-3)].diverged, groups[("none", 1e-3)].collapsed) == (0, 0)


def test_a_divergence_at_step_0_is_counted_and_zeros_are_printed_not_blanked():
    """``diverged_step`` 0 (the loss was not finite at the first step) is a divergence, and a
    figure of 0 (an accuracy of 0.0, no clip events, not collapsed) is written as 0, not as the
    blank that stands for a missing value."""
    results = _fake_results()
    r = results[0]["rules"]["sqrt"]  # lr 1e-3, seed 0
    r.update(diverged_step=0, final_accuracy=0.0, clip_events=0)
    g = next(g for g in group_results(SPEC, results) if (g.rule, g.values["lr"]) == ("sqrt", 1e-3))
    assert g.diverged == 1
    row = next(x for x in summary_rows(SPEC, results) if (x["job"], x["scaling"]) == (0, "sqrt"))
    assert (row["diverged_step"], row["final_accuracy"], row["clip_events"],
            row["collapsed"]) == (0, 0.0, 0, False)
    assert row["steps_to_target"] == 30
