"""Experiments at other lengths: the length columns in metrics.csv and summary.csv, the per-rule
results at each evaluation length, the vs_length figure and the longest_length verdict, and the
built-in ``length`` experiment."""

from __future__ import annotations

import math

import pytest

from engine.errors import ConfigError
from engine.experiments.builtin import builtin, load_builtins
from engine.experiments.figures import MEAN_ERROR, figure_data, verdict
from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec, VerdictSpec
from engine.experiments.summary import metrics_columns, summary_columns
from engine.training.config import TrainingConfig

BASE = TrainingConfig(d_model=16, heads=2, items_min=2, items_max=5, classes=4, key_dim=4,
                      scalings=("sqrt", "logn"), steps=6, log_every=3, batch=8, probe_size=4,
                      hist_bins=20, eval_lengths=(5, 20), eval_size=8, device="cpu")
FIGURES = (FigureSpec("vs_length", "accuracy", "Accuracy vs length", x_log=True),
           FigureSpec("vs_length", "entropy_norm", "Entropy vs length", x_log=True))
SPEC = ExperimentSpec("len", BASE, (Axis("seed", (0, 1)),), figures=FIGURES,
                      verdict=VerdictSpec("longest_length", "accuracy"))


def _synthetic(acc: dict[str, list[tuple[float, float]]]) -> list[dict]:
    """Job results with given (accuracy at N = 5, at N = 20) per rule and seed."""
    out = []
    for job in SPEC.jobs():
        s = job.values["seed"]
        rules = {rule: {"accuracy_len5": v[s][0], "accuracy_len20": v[s][1],
                        "entropy_norm_len5": 0.5, "entropy_norm_len20": 0.8,
                        "steps_to_target": None, "diverged_step": None, "collapsed": False}
                 for rule, v in acc.items()}
        out.append({"index": job.index, "key": job.key, "values": job.values, "error": None,
                    "rules": rules, "rows": []})
    return out


def test_the_length_columns_are_in_the_experiment_csv_files(tmp_path):
    pytest.importorskip("torch")
    from engine.experiments.runner import run_experiment
    from engine.io import read_csv

    assert metrics_columns(SPEC)[-4:] == ["accuracy_len5", "entropy_norm_len5",
                                           "accuracy_len20", "entropy_norm_len20"]
    assert summary_columns(SPEC)[-4:] == metrics_columns(SPEC)[-4:]
    last = list(run_experiment(SPEC, tmp_path, workers=1))[-1]
    assert last.finished and last.failed == 0
    metrics = read_csv(tmp_path / "metrics.csv")
    assert len(metrics) == 2 * 2 * 3  # jobs x rules x logs (0, 3, 6)
    for row in metrics:
        for n in (5, 20):
            assert 0.0 <= float(row[f"accuracy_len{n}"]) <= 1.0
            assert 0.0 < float(row[f"entropy_norm_len{n}"]) <= 1.0 + 1e-9
    summary = read_csv(tmp_path / "summary.csv")
    assert len(summary) == 2 * 2
    for row in summary:  # the per-rule result at a length is the value at the last log
        final = next(m for m in metrics if m["job"] == row["job"]
                     and m["scaling"] == row["scaling"] and m["step"] == "6")
        for column in ("accuracy_len20", "entropy_norm_len5"):
            assert float(row[column]) == float(final[column])
    res = last.results[0]
    assert set(res["rules"]["logn"]) >= {"accuracy_len5", "accuracy_len20", "entropy_norm_len20"}
    fig = figure_data(SPEC, last.results)[0]
    assert [s.x for s in fig.series] == [(5.0, 20.0)] * 2
    assert all(s.n == (2, 2) for s in fig.series)


def test_vs_length_is_the_mean_and_standard_error_over_seeds_per_rule():
    results = _synthetic({"sqrt": [(1.0, 0.5), (0.9, 0.7)], "logn": [(1.0, 0.9), (1.0, 0.8)]})
    acc, ent = figure_data(SPEC, results)
    assert acc.kind == "vs_length" and acc.x_log and acc.error == MEAN_ERROR
    assert "5" in acc.x_label and "trained on 2-5" in acc.x_label
    sqrt, logn = acc.series
    assert (sqrt.rule, logn.rule) == ("sqrt", "logn") and sqrt.x == (5.0, 20.0)
    assert sqrt.y == pytest.approx((0.95, 0.6)) and sqrt.n == (2, 2)
    # standard error of two values a, b: |a - b| / 2
    assert sqrt.hi[1] - sqrt.y[1] == pytest.approx(0.1) and sqrt.y[1] - sqrt.lo[1] == pytest.approx(0.1)
    assert logn.y == pytest.approx((1.0, 0.85)) and logn.lo[0] == logn.hi[0] == 1.0
    assert ent.series[0].y == pytest.approx((0.5, 0.8))
    line = verdict(SPEC, results)
    assert "N = 5 -> 20" in line and "trained on 2-5" in line
    assert "sqrt 0.95 ± 0.05 (n=2) -> 0.6 ± 0.1 (n=2)" in line
    assert "logn 1 ± 0 (n=2) -> 0.85 ± 0.05 (n=2)" in line
    # each rule against the first at the longest length, ± the combined standard error
    assert f"At N = 20, minus sqrt (± combined SE): logn +0.25 ± {math.hypot(0.1, 0.05):.2g}" in line


def test_a_length_figure_without_runs_or_with_a_diverged_rule_leaves_points_out():
    results = _synthetic({"sqrt": [(1.0, 0.5), (0.9, 0.7)], "logn": [(1.0, 0.9), (1.0, 0.8)]})
    for res in results:
        res["rules"]["logn"].update(accuracy_len20=None)  # as a diverged run reports it
    sqrt, logn = figure_data(SPEC, results)[0].series
    assert sqrt.x == (5.0, 20.0) and logn.x == (5.0,)
    assert "logn 1 ± 0 (n=2) -> no runs" in verdict(SPEC, results)
    assert verdict(SPEC, []) == "no finished jobs yet"


@pytest.mark.parametrize("make,field", [
    (lambda: ExperimentSpec("x", BASE.replace(eval_lengths=()), figures=FIGURES), "eval_lengths"),
    (lambda: ExperimentSpec("x", BASE.replace(eval_lengths=()),
                            verdict=VerdictSpec("longest_length", "accuracy")), "eval_lengths"),
    (lambda: FigureSpec("vs_length", "loss", "t"), "figures"),
    (lambda: VerdictSpec("longest_length", "success"), "verdict"),
])
def test_length_figures_need_evaluation_lengths_and_a_length_metric(make, field):
    with pytest.raises(ConfigError) as exc:
        make()
    assert exc.value.field == field


def test_the_builtin_length_experiment_trains_short_and_tests_long():
    spec = builtin("length")
    assert "length" in load_builtins()
    b = spec.base
    assert b.task == "retrieval" and b.items_max == 16 and set(spec.rules) == {"sqrt", "logn",
                                                                               "ssmax"}
    assert b.items_max in b.eval_lengths and max(b.eval_lengths) >= 16 * b.items_max
    seeds = next(a.values for a in spec.axes if a.field == "seed")
    assert len(seeds) >= 4
    assert any(f.kind == "vs_length" and f.y == "accuracy" for f in spec.figures)
    assert spec.verdict.kind == "longest_length" and spec.verdict.metric == "accuracy"
    assert spec.title and len(spec.description) > 200
    assert ExperimentSpec.from_dict(spec.to_dict()) == spec


def test_length_appears_in_the_list_of_experiments(capsys):
    from main import main

    assert main(["experiment", "--list"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("length ")]
    assert len(line) == 1 and "jobs" in line[0]
