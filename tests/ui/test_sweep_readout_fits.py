"""The sweep's hover read-out is whole (issue 31, item 11): with seven rules it is wider than one
plot of the strip; it was clipped by its plot and cut at the panel's edge."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QGraphicsItem

from engine.config import SimulationConfig, SweepConfig
from engine.simulate import sweep
from ui.plots.sweep import SweepPanel
from ui.simulation_run import LabState

SEVEN = ("none", "sqrt", "dk", "logn", "ssmax", "softcap", "sigmoid")


@pytest.fixture(scope="module")
def state():
    cfg = SimulationConfig(d_k=64, trials=100, scalings=SEVEN, seed=0)
    points = tuple(sweep(SweepConfig(cfg, (4, 64, 1024))))
    snap = next(p.snapshot for p in points if p.d_k == 64)
    return LabState(cfg, snap, points, len(points), "done")


@pytest.fixture
def panel(show_widget, state):
    p = show_widget(SweepPanel(), (1000, 260))
    p.refresh(state, force=True)
    return p


def _clipped_by_an_ancestor(item) -> bool:
    parent = item.parentItem()
    while parent is not None:
        if parent.flags() & QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape:
            return True
        parent = parent.parentItem()
    return False


@pytest.mark.parametrize("end", [0.0, 4.0])  # log10 of the first and last point's d_k
def test_every_plots_read_out_is_inside_the_visible_panel(panel, end) -> None:
    seen = panel.glw.mapToScene(panel.glw.viewport().rect()).boundingRect()
    for i in range(len(panel.plots)):
        text = panel.show_values_at(i, end)
        assert all(name in text for name in SEVEN)
        item = panel.hover[i]
        r = item.sceneBoundingRect()
        assert r.width() > 50 and r.height() > 50  # (a real, multi-line read-out)
        assert not _clipped_by_an_ancestor(item), i
        assert r.left() >= seen.left() - 0.5 and r.right() <= seen.right() + 0.5, (i, r, seen)
        assert r.top() >= seen.top() - 0.5, (i, r, seen)
