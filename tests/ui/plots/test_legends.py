"""Legends never cover data: every legend box lies outside every data area (view box) of its
panel, with all six rules on; coinciding curves stay visible (a line pattern / marker per rule)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from engine.config import RULES


def _overlaps(panel) -> list[str]:
    from PySide6.QtWidgets import QApplication

    bad = []
    QApplication.processEvents()  # layouts settle (as before any paint)
    panel.glw.scene().prepareForPaint()
    boxes = [p.getViewBox().sceneBoundingRect() for p in panel.plot_items()]
    legends = {id(p.legend): p.legend for p in panel.plot_items() if p.legend is not None}
    for legend in legends.values():
        if not legend.isVisible() or not legend.items:
            continue
        rect = legend.sceneBoundingRect()
        assert rect.width() > 0 and rect.height() > 0
        for box in boxes:
            inter = rect.intersected(box)
            if inter.width() > 1 and inter.height() > 1:
                bad.append(f"{panel.plot_id}: legend {rect} over data {box}")
    return bad


def test_no_legend_covers_data_on_the_simulation_page(qtbot, window, wait_complete):
    window.resize(1280, 720)
    window.apply_config({"trials": 300, "scalings": list(RULES)})
    qtbot.waitUntil(lambda: window.state is not None and window.state.config.scalings == RULES,
                    timeout=10_000)
    wait_complete(window)
    bad = []
    for panel in window.page.panels.values():
        window.page.ensureWidgetVisible(panel)
        panel.refresh(window.state, force=True)
        qtbot.wait(20)
        bad += _overlaps(panel)
        legend_rules = [label.text for plot in panel.plot_items() if plot.legend is not None
                        for _s, label in plot.legend.items]
        if panel.plot_id in ("scores", "top_weight", "entropy", "jacobian", "sweep"):
            assert len(legend_rules) >= len(RULES), panel.plot_id  # every rule is named
    assert bad == []


def test_no_legend_covers_data_on_the_training_page(show_widget, qtbot):
    import torch

    from engine.training.config import TrainingConfig
    from ui.pages.training.page import TrainingPage

    torch.set_num_threads(1)
    page = show_widget(TrainingPage(), (1280, 720))
    cfg = TrainingConfig(d_model=32, heads=2, items_max=6, classes=4, batch=8, probe_size=4,
                         scalings=("none", "sqrt", "dk", "temperature"), steps=4, log_every=2,
                         device="cpu", hist_bins=40)
    page.controls.set_config(cfg)
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)
    bad = []
    for panel in page.panels.values():
        panel.refresh(page.view, force=True)
        bad += _overlaps(panel)
    assert bad == []


@pytest.mark.parametrize("a, b", [("none", "temperature"), ("sqrt", "qknorm")])
def test_rules_that_can_coincide_differ_in_line_pattern(a, b):
    from ui.plots.rule_pens import rule_pen

    assert rule_pen(a).style() != rule_pen(b).style()


def test_sweep_rules_differ_in_marker():
    from ui.plots.sweep import RULE_SYMBOLS

    assert set(RULE_SYMBOLS) == set(RULES) and len(set(RULE_SYMBOLS.values())) == len(RULES)


def test_an_outside_legend_is_added_to_by_plot_add_item(qtbot):
    from ui.plots.legends import outside_legend

    w = pg.GraphicsLayoutWidget()
    qtbot.addWidget(w)
    plot = w.addPlot()
    legend = outside_legend(plot)
    plot.addItem(pg.PlotDataItem([0, 1], [0, 1], name="a"))
    assert plot.legend is legend and [label.text for _s, label in legend.items] == ["a"]
    assert legend.parentItem() is not plot.getViewBox()
