"""The figure panel draws a vs_length figure (log x, error bars, one legend entry per rule) and
the writer exports it with its points."""

from __future__ import annotations

import math

import numpy as np

from engine.experiments.figures import figure_data
from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec, VerdictSpec
from engine.io import read_csv
from engine.training.config import TrainingConfig

SPEC = ExperimentSpec(
    "len", TrainingConfig(scalings=("sqrt", "logn"), eval_lengths=(16, 64, 256)),
    (Axis("seed", (0, 1)),),
    figures=(FigureSpec("vs_length", "accuracy", "Accuracy vs length", x_log=True),),
    verdict=VerdictSpec("longest_length", "accuracy"))


def _results():
    out = []
    for job in SPEC.jobs():
        s = job.values["seed"]
        rules = {rule: {f"accuracy_len{n}": 1.0 - (k + 1) * 0.1 * math.log2(n / 16) / 4 - 0.02 * s
                        for n in (16, 64, 256)} for k, rule in enumerate(("sqrt", "logn"))}
        for r in rules.values():
            r.update(steps_to_target=10, diverged_step=None, collapsed=False)
        out.append({"index": job.index, "key": job.key, "values": job.values, "error": None,
                    "rules": rules, "rows": []})
    return out


def test_vs_length_renders_on_a_log_x_axis_with_error_bars(qapp, tmp_path):
    from ui.export.experiment_figures import ExperimentFigurePanel, write_experiment_figures

    (fig,) = figure_data(SPEC, _results())
    panel = ExperimentFigurePanel(fig)
    try:
        panel.refresh(fig, force=True)
        plot = panel.plot
        assert plot.getAxis("bottom").logMode
        assert "trained on 4-16" in plot.getAxis("bottom").labelText
        assert "standard error" in plot.getAxis("left").labelText
        assert len(plot.legend.items) == 2
        curve, bars, _, _ = panel._items["logn"]
        x, y = curve.getData()
        assert np.allclose(y, fig.series[1].y) and len(x) == 3
        assert np.all(np.isfinite(bars.opts["top"])) and float(np.max(bars.opts["top"])) > 0
    finally:
        panel.close()
        panel.deleteLater()
    paths = write_experiment_figures([fig], tmp_path)
    assert sorted(p.suffix for p in paths) == [".csv", ".png", ".svg"]
    rows = read_csv(tmp_path / f"{fig.id}.csv")
    assert {float(r["x"]) for r in rows} == {16.0, 64.0, 256.0} and len(rows) == 6
