"""Experiments on recall at more pairs: the built-in ``recall_length``, the pair labels of the
length figure and verdict, and a tiny recall grid with ``eval_every`` through the runner."""

from __future__ import annotations

import json

import pytest

from engine.experiments.builtin import builtin
from engine.experiments.figures import figure_data, length_x_label, verdict
from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec, VerdictSpec
from engine.training.config import TrainingConfig


def test_the_builtin_recall_length_trains_few_pairs_and_tests_4x_and_16x():
    spec = builtin("recall_length")
    b = spec.base
    assert b.task == "recall" and b.positions in ("sinusoidal", "none")
    assert b.eval_lengths == (b.pairs, 4 * b.pairs, 16 * b.pairs) and max(b.eval_lengths) <= b.classes
    assert set(b.scalings) == {"sqrt", "logn", "ssmax"}
    assert len(next(a for a in spec.axes if a.field == "seed").values) >= 4
    assert b.eval_every > 1 and not b.evaluates_lengths_at(b.log_every)  # only first and last
    assert b.evaluates_lengths_at(b.steps) and b.evaluates_lengths_at(0)
    assert [f.kind for f in spec.figures].count("vs_length") == 2
    assert spec.verdict.kind == "longest_length"
    assert "Measured" in spec.description and "RESULT" not in spec.description
    assert length_x_label(spec) == f"key-value pairs at evaluation N (trained on {b.pairs})"


BASE = TrainingConfig(task="recall", d_model=16, heads=2, layers=2, classes=16, pairs=2,
                      positions="sinusoidal", scalings=("sqrt", "logn"), steps=4, log_every=1,
                      batch=8, probe_size=4, hist_bins=20, eval_lengths=(2, 8), eval_size=8,
                      eval_every=3, device="cpu", lr=0.01)
SPEC = ExperimentSpec("rl", BASE, (Axis("seed", (0, 1)),),
                      figures=(FigureSpec("vs_length", "accuracy", "Accuracy vs pairs", x_log=True),
                               FigureSpec("vs_step", "accuracy", "Training accuracy")),
                      verdict=VerdictSpec("longest_length", "accuracy"))


def test_a_recall_grid_with_eval_every_keeps_the_last_evaluation(tmp_path):
    pytest.importorskip("torch")
    from engine.experiments.runner import run_experiment
    from engine.io import read_csv

    last = list(run_experiment(SPEC, tmp_path, workers=1))[-1]
    assert last.finished and last.failed == 0
    metrics = read_csv(tmp_path / "metrics.csv")
    assert len(metrics) == 2 * 2 * 5  # jobs x rules x logs 0..4
    for row in metrics:  # evaluated at logs 0, 3 and 4 (the last) only
        assert (row["accuracy_len8"] != "") == (row["step"] in ("0", "3", "4"))
    summary = read_csv(tmp_path / "summary.csv")
    for row in summary:
        final = next(m for m in metrics if m["job"] == row["job"]
                     and m["scaling"] == row["scaling"] and m["step"] == "4")
        assert row["accuracy_len8"] == final["accuracy_len8"] != ""
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "jobs").glob("*.json"))]
    fig = figure_data(SPEC, results)[0]
    assert fig.x_label == "key-value pairs at evaluation N (trained on 2)"
    assert [len(s.x) for s in fig.series] == [2, 2]
    assert "trained on 2 pairs" in verdict(SPEC, results)
