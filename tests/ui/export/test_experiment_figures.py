"""The experiment figure writer draws the engine's figure data: PNG, SVG and the points as CSV,
axis labels with what the error bars mean, one legend entry per series."""

from __future__ import annotations

from engine.experiments.figures import figure_data
from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec
from engine.io import read_csv
from engine.training.config import TrainingConfig

SPEC = ExperimentSpec(
    "fig", TrainingConfig(scalings=("none", "sqrt")),
    (Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1))),
    figures=(FigureSpec("by_rule", "success", "Success"),
             FigureSpec("vs_axis", "final_loss", "Loss vs lr", x="lr", x_log=True),
             FigureSpec("vs_step", "logit_max_abs", "Max logit", x="lr", y_log=True)))


def _results():
    out = []
    for job in SPEC.jobs():
        res = {"index": job.index, "key": job.key, "values": job.values, "error": None,
               "rules": {}, "rows": []}
        for k, rule in enumerate(("none", "sqrt")):
            res["rules"][rule] = {"final_loss": 1.0 + k + job.values["seed"],
                                  "steps_to_target": 30 if rule == "sqrt" else None,
                                  "diverged_step": None, "collapsed": False}
            res["rows"] += [{"scaling": rule, "step": s, "logit_max_abs": 2.0 + s + k}
                            for s in (0, 5, 10)]
        out.append(res)
    return out


def test_writes_png_svg_csv_of_every_figure(qapp, tmp_path):
    from ui.export.experiment_figures import ExperimentFigurePanel, write_experiment_figures

    figs = figure_data(SPEC, _results())
    paths = write_experiment_figures(figs, tmp_path)
    assert sorted(p.name for p in paths) == sorted(
        f"{f.id}.{ext}" for f in figs for ext in ("png", "svg", "csv"))
    assert all(p.stat().st_size > 0 for p in paths)
    rows = read_csv(tmp_path / f"{figs[1].id}.csv")
    assert {r["series"] for r in rows} == {"none", "sqrt"} and len(rows) == 4
    panel = ExperimentFigurePanel(figs[2])
    try:
        panel.refresh(figs[2], force=True)
        plot = panel.plot
        assert "standard error" in plot.getAxis("left").labelText
        assert plot.getAxis("bottom").labelText == "step"
        assert len(plot.legend.items) == 4  # (rule, lr) curves
    finally:
        panel.close()
        panel.deleteLater()


def test_a_compact_panel_shows_its_title_once_and_a_short_error_caption(qapp):
    from ui.export.experiment_figures import ExperimentFigurePanel

    figs = figure_data(SPEC, _results())
    panel = ExperimentFigurePanel(figs[2], compact=True)
    try:
        panel.refresh(figs[2], force=True)
        plot = panel.plot
        assert plot.getAxis("left").labelText == figs[2].y_label  # no "(mean ± 1 standard …)"
        assert not plot.titleLabel.text  # the title is the header's only
        assert figs[2].title in panel.header_label.text()
        assert panel.caption.text() == "error bars: ± 1 SE over seeds"
    finally:
        panel.close()
        panel.deleteLater()


def test_each_legend_sample_has_its_rule_colour_before_any_data(qapp):
    """A figure with no finished job yet: each legend entry's marker is drawn in its rule's
    colour (pyqtgraph's sample reads the scatter's options, set only with the first data: every
    rule was the same grey dot)."""
    import pyqtgraph as pg

    from ui.export.experiment_figures import ExperimentFigurePanel
    from ui.theme import rule_color

    figs = figure_data(SPEC, [])
    panel = ExperimentFigurePanel(figs[0], compact=True)
    try:
        panel.refresh(figs[0], force=True)
        legend = panel.plot.legend
        assert [label.text for _s, label in legend.items] == ["none", "sqrt"]
        for sample, label in legend.items:
            brush = pg.mkBrush(sample.item.scatter.opts["brush"])
            assert brush.color().name() == pg.mkColor(rule_color(label.text)).name(), label.text
    finally:
        panel.close()
        panel.deleteLater()
