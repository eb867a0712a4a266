"""The figure builders (by rule, per step, per evaluation length, the best learning rate, panels)
from hand-made results, each whole FigureData compared with one written by hand: the means and
standard errors of two seeds worked out here (1 and 3: 2 ± 1), ids, titles, labels, the log
axes' dropped points, the legend names and colours."""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist

import pytest

from engine.experiments.figures import (
    MEAN_ERROR,
    OPTIMUM_ERROR,
    RATE_ERROR,
    FigureData,
    Series,
    figure_data,
    length_x_label,
    trained_length,
)
from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec
from engine.training.config import TrainingConfig


def _results(spec: ExperimentSpec, rules, rows=lambda values: []) -> list[dict]:
    """``rules(values)`` -> the per-rule results of the job at those axis values."""
    return [{"index": job.index, "key": job.key, "values": job.values, "error": None,
             "rules": rules(job.values), "rows": rows(job.values)} for job in spec.jobs()]


def _empty(name: str, rule: str, colour: str = "") -> Series:
    return Series(name, rule, (), (), (), (), (), colour)


def test_by_rule_figures_whole():
    spec = ExperimentSpec(
        "fake", TrainingConfig(scalings=("none", "sqrt", "dk")), (Axis("seed", (0, 1)),),
        figures=(FigureSpec("by_rule", "final_loss", "Loss", y_log=True),
                 FigureSpec("by_rule", "success", "Rate"),
                 FigureSpec("by_rule", "logit_std@0", "Std", y_label="own")))

    def rules(v):  # none: loss 1 and 3, reached once; sqrt: loss 0 (off a log axis); dk: none
        return {"none": {"final_loss": (1.0, 3.0)[v["seed"]],
                         "steps_to_target": (10, None)[v["seed"]]},
                "sqrt": {"final_loss": 0.0, "steps_to_target": None}}

    def rows(v):
        return [{"scaling": "none", "step": 0, "logit_std": (2.0, 4.0)[v["seed"]]},
                {"scaling": "sqrt", "step": 0, "logit_std": 1.0},
                {"scaling": "none", "step": 5, "logit_std": 99.0}]

    loss, rate, std = figure_data(spec, _results(spec, rules, rows))
    ticks = ((0.0, "none"), (1.0, "sqrt"), (2.0, "dk"))
    assert loss == FigureData(
        "fake_1_final_loss", "by_rule", "Loss", "scaling rule", "final training loss", False, True,
        (Series("none", "none", (0.0,), (2.0,), (1.0,), (3.0,), (2,)), _empty("sqrt", "sqrt"),
         _empty("dk", "dk")), MEAN_ERROR, ticks)
    assert std == FigureData(
        "fake_3_logit_std_at_0", "by_rule", "Std", "scaling rule", "own", False, False,
        (Series("none", "none", (0.0,), (3.0,), (2.0,), (4.0,), (2,)),
         Series("sqrt", "sqrt", (1.0,), (1.0,), (1.0,), (1.0,), (2,)), _empty("dk", "dk")),
        MEAN_ERROR, ticks)
    # Wilson's interval by its formula: 1 of 2 and 0 of 2 at z = 1.96
    z = NormalDist().inv_cdf(0.975)
    half = z * math.sqrt(0.25 / 2 + z * z / 16) / (1 + z * z / 2)
    assert (rate.id, rate.y_label, rate.error, rate.x_ticks) == (
        "fake_2_success", "reached the target (rate)", RATE_ERROR, ticks)
    none, sqrt, dk = rate.series
    assert none.x == (0.0,) and none.y == (0.5,) and none.n == (2,)
    assert none.lo[0] == pytest.approx(0.5 - half, rel=1e-6)
    assert none.hi[0] == pytest.approx(0.5 + half, rel=1e-6)
    assert sqrt.x == (1.0,) and sqrt.y == (0.0,) and sqrt.lo == (0.0,)
    assert sqrt.hi[0] == pytest.approx(z * z / 2 / (1 + z * z / 2), rel=1e-6)
    assert dk == _empty("dk", "dk")


def test_per_step_curves_whole():
    spec = ExperimentSpec(
        "fake", TrainingConfig(scalings=("none", "sqrt")),
        (Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1))),
        figures=(FigureSpec("vs_step", "loss", "Curves", x="lr", y_log=True),
                 FigureSpec("vs_step", "accuracy", "Acc")))
    loss = {  # (rule, lr, step) -> the two seeds' values ("" and NaN are not values)
        ("none", 1e-3, 0): (2.0, 4.0), ("none", 1e-3, 10): (1.0, 1.0),
        ("none", 1e-2, 0): (2.0, 2.0), ("none", 1e-2, 10): (0.0, 0.0),
        ("sqrt", 1e-3, 0): (1.0, math.nan), ("sqrt", 1e-3, 10): ("", ""),
        ("sqrt", 1e-2, 0): (5.0, 7.0), ("sqrt", 1e-2, 10): (3.0, 3.0)}

    def rows(v):
        return [{"scaling": rule, "step": step, "loss": loss[rule, v["lr"], step][v["seed"]],
                 "accuracy": 0.5}
                for rule in ("sqrt", "none") for step in (10, 0)]

    curves, acc = figure_data(spec, _results(spec, lambda v: {"none": {}, "sqrt": {}}, rows))
    assert curves == FigureData(
        "fake_1_loss", "vs_step", "Curves", "step", "training loss", False, True,
        (Series("none, lr=0.001", "none", (0.0, 10.0), (3.0, 1.0), (2.0, 1.0), (4.0, 1.0), (2, 2)),
         Series("none, lr=0.01", "none", (0.0,), (2.0,), (2.0,), (2.0,), (2,)),  # 0: off the log axis
         Series("sqrt, lr=0.001", "sqrt", (0.0,), (1.0,), (1.0,), (1.0,), (1,)),
         Series("sqrt, lr=0.01", "sqrt", (0.0, 10.0), (6.0, 3.0), (5.0, 3.0), (7.0, 3.0), (2, 2))),
        MEAN_ERROR)
    assert acc == FigureData(
        "fake_2_accuracy", "vs_step", "Acc", "step", "training accuracy", False, False,
        (Series("none", "none", (0.0, 10.0), (0.5, 0.5), (0.5, 0.5), (0.5, 0.5), (4, 4)),
         Series("sqrt", "sqrt", (0.0, 10.0), (0.5, 0.5), (0.5, 0.5), (0.5, 0.5), (4, 4))),
        MEAN_ERROR)


def test_per_length_figures_whole():
    base = TrainingConfig(scalings=("none", "sqrt"), items_min=4, items_max=8, eval_lengths=(8, 32))
    spec = ExperimentSpec(
        "fake", base, (Axis("heads", (1, 2)), Axis("layers", (1,)), Axis("seed", (0, 1))),
        figures=(FigureSpec("vs_length", "accuracy", "Len"),
                 FigureSpec("vs_length", "entropy_norm", "Ent", y_label="mine", x_log=True,
                            y_log=True)))

    def rules(v):
        s, h = v["seed"], v["heads"]
        none = {"accuracy_len8": (1.0, 0.5)[s] if h == 1 else 0.25,
                "entropy_norm_len8": 0.5, "entropy_norm_len32": 0.0 if h == 1 else 0.25}
        if h == 1:
            none["accuracy_len32"] = 0.5
        return {"none": none, "sqrt": {"accuracy_len8": 1.0, "accuracy_len32": 1.0,
                                       "entropy_norm_len8": 1.0, "entropy_norm_len32": 1.0}}

    acc, ent = figure_data(spec, _results(spec, rules))
    x_label = "items in the set at evaluation N (trained on 4-8)"
    ones = ((8.0, 32.0), (1.0, 1.0), (1.0, 1.0), (1.0, 1.0), (2, 2))
    assert acc == FigureData(
        "fake_1_accuracy", "vs_length", "Len", x_label, "accuracy at evaluation (no gradient)",
        False, False,
        (Series("none, heads=1, layers=1", "none", (8.0, 32.0), (0.75, 0.5), (0.5, 0.5), (1.0, 0.5), (2, 2)),
         Series("none, heads=2, layers=1", "none", (8.0,), (0.25,), (0.25,), (0.25,), (2,)),
         Series("sqrt, heads=1, layers=1", "sqrt", *ones), Series("sqrt, heads=2, layers=1", "sqrt", *ones)),
        MEAN_ERROR)
    assert ent == FigureData(
        "fake_2_entropy_norm", "vs_length", "Ent", x_label, "mine", True, True,
        (Series("none, heads=1, layers=1", "none", (8.0,), (0.5,), (0.5,), (0.5,), (2,)),  # 0 dropped
         Series("none, heads=2, layers=1", "none", (8.0, 32.0), (0.5, 0.25), (0.5, 0.25), (0.5, 0.25), (2, 2)),
         Series("sqrt, heads=1, layers=1", "sqrt", *ones), Series("sqrt, heads=2, layers=1", "sqrt", *ones)),
        MEAN_ERROR)
    assert figure_data(dataclasses.replace(spec, figures=(FigureSpec("vs_length", "entropy_norm", "E"),)),
                       _results(spec, rules))[0].y_label == \
        "entropy / log n of the query's row at evaluation"


def test_the_trained_length_in_words():
    assert trained_length(TrainingConfig(items_min=4, items_max=16)) == "4-16 items"
    recall = TrainingConfig(task="recall", pairs=6)
    assert trained_length(recall) == "6 pairs"
    spec = ExperimentSpec("fake", recall, (Axis("seed", (0,)),))
    assert length_x_label(spec) == "key-value pairs at evaluation N (trained on 6)"


def test_the_best_learning_rate_figure_whole(monkeypatch):
    """curve and optimum stubbed (test_transfer.py computes them): no curve at the first width,
    a non-finite interval at the last, so only d_model 64 has a point."""
    from engine.experiments import transfer
    from engine.experiments.transfer import Optimum

    spec = ExperimentSpec(
        "fake", TrainingConfig(scalings=("none", "sqrt")),
        (Axis("d_model", (32, 64, 128)), Axis("heads", (1,)), Axis("lr", (1e-3, 1e-2)),
         Axis("seed", (0, 1))),
        figures=(FigureSpec("by_rule", "final_loss", "First"),
                 FigureSpec("optimum", "final_accuracy", "Best", x="d_model", over="lr",
                            x_log=True),
                 FigureSpec("optimum", "final_loss", "Own", x="d_model", over="lr",
                            y_label="own")))
    calls = []

    def curve(spec_, results, rule, over, where, metric="final_loss"):
        calls.append((rule, over, dict(where), metric))
        return None if where["d_model"] == 32 else (rule, where["d_model"])

    def optimum(c):
        rule, width = c
        lo = math.nan if width == 128 else (-3.0 if rule == "none" else -2.5)
        return Optimum(-2.0, 0.1, lo, -1.0, True, 4 if rule == "none" else 3)

    monkeypatch.setattr(transfer, "curve", curve)
    monkeypatch.setattr(transfer, "optimum", optimum)
    results = _results(spec, lambda v: {"none": {"final_loss": 1.0}, "sqrt": {"final_loss": 1.0}})
    _, best, own = figure_data(spec, results)
    assert best == FigureData(
        "fake_2_best_lr", "vs_axis", "Best", "model width d_model", "best learning rate", True,
        True, (Series("heads=1, none", "none", (64.0,), (10.0 ** -2,), (10.0 ** -3,),
                      (10.0 ** -1,), (4,)),
               Series("heads=1, sqrt", "sqrt", (64.0,), (10.0 ** -2,), (10.0 ** -2.5,),
                      (10.0 ** -1,), (3,))),
        OPTIMUM_ERROR)
    assert calls[:6] == [(rule, "lr", {"heads": 1, "d_model": w}, "final_accuracy")
                         for rule in ("none", "sqrt") for w in (32, 64, 128)]
    assert (own.id, own.y_label, own.x_log, own.y_log) == ("fake_3_best_lr", "own", False, True)


def test_panels_whole():
    """One figure per (heads, rule), a curve per d_model in graded colours, along weight decay
    on a log axis (its 0 dropped)."""
    spec = ExperimentSpec(
        "fake", TrainingConfig(scalings=("none", "sqrt")),
        (Axis("heads", (1, 2)), Axis("d_model", (32, 64)), Axis("layers", (1,)),
         Axis("weight_decay", (0.0, 0.1)), Axis("seed", (0,))),
        figures=(FigureSpec("by_rule", "final_loss", "First"),
                 FigureSpec("vs_axis", "loss@end", "T", x="weight_decay", panel="heads",
                            x_log=True),
                 FigureSpec("vs_axis", "success", "R", x="weight_decay", panel="heads",
                            y_label="own"),
                 FigureSpec("vs_axis", "final_loss", "Z", x="weight_decay", panel="heads",
                            y_log=True)))

    def loss(rule, v):
        return 10.0 * v["heads"] + v["d_model"] / 32 + 10 * v["weight_decay"] + (rule == "sqrt")

    def rows(v):
        return [{"scaling": rule, "step": step, "loss": loss(rule, v) + (step == 0) * 50}
                for rule in ("none", "sqrt") for step in (0, 5)]

    results = _results(spec, lambda v: {"none": {"final_loss": 1.0, "steps_to_target": 3},
                                        "sqrt": {"final_loss": 0.0, "steps_to_target": None}},
                       rows)
    figs = figure_data(spec, results)
    assert len(figs) == 1 + 4 + 4 + 4 and figs[0].id == "fake_1_final_loss"
    dark, light = "#440154", "#B5DE2B"
    want = []
    for h in (1, 2):
        for rule in ("none", "sqrt"):
            series = tuple(
                Series(f"d_model={d}, layers=1", rule, (0.1,),
                       (loss(rule, {"heads": h, "d_model": d, "weight_decay": 0.1}),) * 1,
                       (loss(rule, {"heads": h, "d_model": d, "weight_decay": 0.1}),),
                       (loss(rule, {"heads": h, "d_model": d, "weight_decay": 0.1}),), (1,), c)
                for d, c in ((32, dark), (64, light)))
            want.append(FigureData(f"fake_2_loss_at_end_{h}_{rule}", "vs_axis",
                                   f"T: heads {h}, {rule}", "weight decay",
                                   "training loss after training", True, False, series,
                                   MEAN_ERROR))
    assert figs[1:5] == want
    rate, zero = figs[5:9], figs[9:]
    assert [f.id for f in rate] == ["fake_3_success_1_none", "fake_3_success_1_sqrt",
                                    "fake_3_success_2_none", "fake_3_success_2_sqrt"]
    assert all(f.error == RATE_ERROR and f.y_label == "own" and not f.x_log for f in rate)
    assert rate[0].series[0].x == (0.0, 0.1) and rate[0].series[0].y == (1.0, 1.0)
    assert rate[1].series[1].y == (0.0, 0.0)
    # a final loss of 0 (sqrt) is off the log axis: its panels have empty curves
    assert [[c.y for c in f.series] for f in zero] == [[(1.0, 1.0), (1.0, 1.0)], [(), ()]] * 2
    assert zero[0].series[0].x == (0.0, 0.1) and zero[0].y_log and not zero[0].x_log
