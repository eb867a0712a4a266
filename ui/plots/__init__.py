"""Reusable pyqtgraph panels; the same classes draw the window and the offscreen figures."""

from __future__ import annotations

from ui.plots.base import PlotPanel
from ui.plots.histograms import EntropyPanel, JacobianPanel, ScoresPanel, TopWeightPanel
from ui.plots.sweep import SweepPanel
from ui.plots.weights import WeightsPanel

#: in display order; ``plot_id`` is the stable id the tour uses
PANEL_CLASSES: tuple[type[PlotPanel], ...] = (
    ScoresPanel, WeightsPanel, TopWeightPanel, EntropyPanel, JacobianPanel, SweepPanel,
)
PLOT_IDS = tuple(c.plot_id for c in PANEL_CLASSES)

__all__ = ["PANEL_CLASSES", "PLOT_IDS", "PlotPanel"]
