"""At 1280x720 no panel of any page draws tick labels over each other, cuts an axis label or lets
a title run past its plot: the Simulation page (sweep along d_k and along n, and in presentation
mode), the Training page after a run, the Real model and Experiments pages (the learning_rate
experiment, whose fifteen series must not squash their figure). Tick labels are kept apart by
ui.plots.tidy_axis, which the first test shows is needed."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication

from tests.ui.plot_layout import (
    export_problems,
    label_cut,
    layout_problems,
    overlapping_ticks,
    tick_labels,
)
from ui.plots.base import PlotPanel
from ui.plots.tidy_axis import TidyAxis

pytest.importorskip("torch")


def _settle(qtbot, n: int = 3) -> None:
    for _ in range(n):
        QApplication.processEvents()
        qtbot.wait(5)


def _problems(page, qtbot) -> list[str]:
    _settle(qtbot)
    out = []
    for panel in page.findChildren(PlotPanel):
        if panel.isVisible():
            panel.glw.grab()  # pyqtgraph sizes an axis for its labels when it paints
    _settle(qtbot)
    for panel in page.findChildren(PlotPanel):
        if panel.isVisible():
            out += layout_problems(panel.plot_id, panel, whole_titles=True)
    return out


def _crowded(axis_class, qtbot):
    """A narrow plot with six explicit ticks whose labels cannot all fit."""
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    widget.resize(140, 120)
    plot = widget.addPlot(axisItems={"bottom": axis_class("bottom")})
    plot.getAxis("bottom").setTicks([[(float(i), f"{10 ** i:,}") for i in range(6)]])
    plot.setXRange(0, 5, padding=0)
    widget.show()
    qtbot.waitExposed(widget)
    widget.grab()
    return widget, plot.getAxis("bottom")


def test_tidy_axis_drops_the_labels_that_would_overlap(qtbot):
    _w1, crowded = _crowded(pg.AxisItem, qtbot)
    assert overlapping_ticks(crowded)  # pyqtgraph's own axis draws them over each other
    _w2, tidy = _crowded(TidyAxis, qtbot)
    assert overlapping_ticks(tidy) == []
    labels = tick_labels(tidy)
    assert 2 <= len(labels) < 5 and labels[0] == "10"  # ("1" is past the axis end: hidden)


@pytest.fixture
def small(qtbot, window, wait_complete):
    window.resize(1280, 720)
    _settle(qtbot)
    assert (window.width(), window.height()) == (1280, 720)
    return window


def test_simulation_page_along_d_k_and_along_n(small, qtbot, wait_complete):
    small.rerun()
    wait_complete(small)
    small.page.redraw(budget=9)
    assert _problems(small.page, qtbot) == []
    sweep = small.page.panels["sweep"]
    assert len(tick_labels(sweep.plots[-1].getAxis("left"))) >= 2  # "target weight" has y ticks
    small.set_sweep_axis("n_keys")
    wait_complete(small)
    small.page.redraw(budget=9)
    assert _problems(small.page, qtbot) == []


@pytest.mark.slow
def test_simulation_page_in_presentation_mode(small, qtbot, wait_complete):
    small.set_sweep_axis("n_keys")
    wait_complete(small)
    small.set_presentation(True)
    try:
        for _ in range(5):
            small.page.redraw(budget=9)
            assert _problems(small.page, qtbot) == [], small.presenter.shown
            small.presenter.step(1)
        small.presenter.show_sweep()
        small.page.redraw(budget=9)
        assert _problems(small.page, qtbot) == []
    finally:
        small.set_presentation(False)


def test_training_page_empty_hints_fit_their_plots(small, qtbot):
    """Before Start each panel says what will appear: at 1280x720 (four panels to a row) its
    sentence wraps to the plot's width instead of running past both edges."""
    assert small.open_page_titled("Training")
    page = small.tabs.currentWidget()
    _problems(page, qtbot)  # (painted once: sized)
    checked = 0
    for panel in page.findChildren(PlotPanel):
        hint = getattr(panel, "hint", None)
        if hint is None or not hint.visible or not panel.isVisible():
            continue
        view = hint.plot.getViewBox()
        # (the logit heatmap beside its colour bar was a 40 px sliver: its hint was cut)
        assert view.width() >= 110, (panel.plot_id, view.width())
        text = hint.item.mapRectToScene(hint.item.boundingRect())
        assert view.sceneBoundingRect().adjusted(-2, -2, 2, 2).contains(text), panel.plot_id
        checked += 1
    assert checked >= 6
    assert _problems(page, qtbot) == []  # (a two-line y title touched its tick labels)


def test_training_page_after_a_run(small, qtbot):
    from engine.training.config import TrainingConfig

    assert small.open_page_titled("Training")
    page = small.tabs.currentWidget()
    cfg = TrainingConfig(d_model=32, heads=2, items_max=6, classes=4, batch=8, probe_size=4,
                         scalings=("none", "sqrt", "cosine"), steps=12, log_every=3,
                         device="cpu", hist_bins=40)
    page.controls.set_config(cfg)
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)
    page.redraw_panels(budget=99)
    problems = _problems(page, qtbot)
    assert problems == [], "\n".join(problems)
    # and every export style of every panel with data: titles whole, nothing cut
    panels = [p for p in page.findChildren(PlotPanel) if getattr(p, "_state", None) is not None]
    assert len(panels) >= 8
    problems = [p for panel in panels for p in export_problems(panel.plot_id, panel)]
    assert problems == [], "\n".join(problems)


def test_real_model_page(small, qtbot):
    assert small.open_page_titled("Real model")
    assert _problems(small.tabs.currentWidget(), qtbot) == []


def test_experiments_page_with_fifteen_series(small, qtbot):
    assert small.open_page_titled("Experiments")
    page = small.tabs.currentWidget()
    page.form.select_builtin("learning_rate")
    _settle(qtbot)
    assert _problems(page, qtbot) == []
    assert len(page.figure_panels) == 3
    per_step = page.figure_panels[2]
    assert len(per_step._figure.series) == 15
    # one entry per rule and one per learning rate, not one per series
    assert len(per_step.plot.legend.items) == 3 + 5
    for panel in page.figure_panels:
        view = panel.plot.getViewBox()
        # (fifteen legend entries left it a sliver; 0.33 now that the header wraps its title
        # and error caption onto a second line instead of cutting them)
        assert view.height() >= 0.3 * panel.glw.height(), (panel.plot_id, view.height())
        # the header's title and error caption show whole (they were cut on one line)
        assert label_cut(panel.header_label) == "", panel.plot_id
        assert panel.caption.text() in panel.header_label.text()


@pytest.mark.parametrize("builtin", ["", "seeds"])
def test_experiments_page_empty_figures(small, qtbot, builtin):
    """Before a run each figure's legend lists the rules: its last entry ("dk") ran a few px
    past the panel's right edge (the legend's columns were fitted to 0.8 of the plot's width,
    more than the width right of a wide y axis)."""
    assert small.open_page_titled("Experiments")
    page = small.tabs.currentWidget()
    if builtin:
        page.form.select_builtin(builtin)
    _settle(qtbot)
    problems = _problems(page, qtbot)
    assert problems == [], "\n".join(problems)
    assert any(len(p.plot.legend.items) >= 3 for p in page.figure_panels if p.isVisible())


@pytest.mark.parametrize("builtin", sorted(
    __import__("engine.experiments.builtin", fromlist=["load_builtins"]).load_builtins()))
def test_every_builtin_experiments_figures_fit(small, qtbot, builtin):
    """Every built-in experiment's empty figures at 1280x720: long y titles (logit_control's
    "learning-rate sensitivity (Wortsman et al.) of the final training loss"), long x titles
    (length's "items in the set at evaluation N (trained on 4-16)") and five-rule legends stay
    inside their plots."""
    assert small.open_page_titled("Experiments")
    page = small.tabs.currentWidget()
    page.form.select_builtin(builtin)
    _settle(qtbot)
    problems = _problems(page, qtbot)
    assert problems == [], "\n".join(problems)
    if builtin == "logit_control":  # five rules, four figures: the projector's worst case
        _presented_experiments_page_is_whole(small, page, qtbot)


def _presented_experiments_page_is_whole(window, page, qtbot) -> None:
    """Presentation mode at 1280x720 with five rules, and back: the grid named two of them
    ("qknorm", "sink": its rows were shorter than the larger type), and the figures' legends
    were cut at the bottom (a panel shorter than its header and plot lost the plot's last
    45 px)."""
    window.set_presentation(True)
    try:
        _settle(qtbot)
        problems = _problems(page, qtbot)
        assert problems == [], "\n".join(problems)
        assert tick_labels(page.grid_panel.plot.getAxis("left")) == list(page.spec.rules)
    finally:
        window.set_presentation(False)
    # back to three figures a row: legends fitted to two a row held their plots wider than
    # the panels (the x titles and last legend entries were cut)
    problems = _problems(page, qtbot)
    assert problems == [], "\n".join(problems)
