"""Every plot title of every Simulation figure, in every export style, fits its plot and
clears its neighbours' (the paper figure's six sweep titles ran into each other)."""

from __future__ import annotations

import itertools

import pytest

from engine.config import SimulationConfig, SweepConfig
from engine.simulate import run_simulation, sweep


@pytest.fixture(scope="module")
def state():
    from ui.simulation_run import LabState

    cfg = SimulationConfig(trials=200, scalings=("none", "sqrt", "dk"))
    points = tuple(sweep(SweepConfig(cfg, (1, 8, 64, 512))))
    return LabState(cfg, run_simulation(cfg), points, len(points), "done")


def _title_rects(clone):
    rects = []
    for plot in clone.plot_items():
        label = plot.titleLabel
        if label is None or not label.isVisible() or not label.text:
            continue
        item = label.item
        rects.append((plot, item.mapRectToScene(item.boundingRect())))
    return rects


@pytest.mark.parametrize("style", ["screen", "slide", "paper"])
def test_titles_fit_their_plots_and_never_overlap(qapp, state, style):
    from ui.export.plot_files import figure_clone
    from ui.headless import offscreen_panel
    from ui.plots import PANEL_CLASSES

    for cls in PANEL_CLASSES:
        with offscreen_panel(cls, (900, 560)) as panel:
            panel.refresh(state, force=True)
            with figure_clone(panel, style) as clone:
                rects = _title_rects(clone)
                assert rects, f"{cls.__name__}: no title"
                for plot, rect in rects:
                    assert rect.width() <= plot.sceneBoundingRect().width() + 1, \
                        f"{cls.__name__} {style}: title {plot.titleLabel.text!r} wider than its plot"
                for (_p, a), (_q, b) in itertools.combinations(rects, 2):
                    assert not a.intersects(b), f"{cls.__name__} {style}: two titles overlap"
