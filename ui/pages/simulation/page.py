"""The simulation page: its plot panels (ui.plots.PANEL_CLASSES) in a scrollable grid and the results table.

The page only draws: the window hands it the latest :class:`LabState`, and on every redraw tick
each panel redraws if its data changed and it is on screen (a panel scrolled into view catches up
on the next tick).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QScrollArea, QWidget

from ui.pages.simulation.results_table import ResultsTable
from ui.plots import PANEL_CLASSES, PlotPanel
from ui.plots.base import panel_grid
from ui.theme import Theme

#: plot_id -> (row, column, column span) in the grid
GRID = {
    "scores": (0, 0, 1), "weights": (0, 1, 1), "top_weight": (0, 2, 1),
    "entropy": (1, 0, 1), "jacobian": (1, 1, 1), "sweep": (2, 0, 3),
}
RESULTS_CELL = (1, 2)
#: panels redrawn per timer tick at most: painting all six at once stalls the event loop
PANELS_PER_TICK = 1


class SimulationPage(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("simulation_page")
        self.setWidgetResizable(True)
        inner = QWidget(self)
        grid, panels = panel_grid(inner, PANEL_CLASSES, GRID, min_height=270)
        self.panels: dict[str, PlotPanel] = panels
        self.results = ResultsTable(inner)
        self.results.setMinimumHeight(200)
        grid.addWidget(self.results, *RESULTS_CELL)
        grid.setRowStretch(0, 1)
        grid.setRowStretch(1, 1)
        grid.setRowStretch(2, 1)
        self.setWidget(inner)
        self.state: Any = None
        self._next = 0

    def set_state(self, state: Any) -> None:
        self.state = state

    def redraw(self, budget: int = PANELS_PER_TICK) -> list[str]:
        """Redraw at most ``budget`` panels whose data changed and which are visible, taking
        turns (round robin) so one tick never pays for painting all six; returns the ids drawn."""
        if self.state is None:
            return []
        ids = list(self.panels)
        drawn: list[str] = []
        for k in range(len(ids)):
            pid = ids[(self._next + k) % len(ids)]
            if len(drawn) >= budget:
                break
            if self.panels[pid].refresh(self.state):
                drawn.append(pid)
                self._next = (ids.index(pid) + 1) % len(ids)
        if self.results.isVisible():
            self.results.show_snapshot(self.state.snapshot)
        return drawn

    def stale(self) -> list[str]:
        """Visible panels not yet showing the current state (0 once the page caught up)."""
        if self.state is None:
            return []
        return [pid for pid, p in self.panels.items()
                if p.is_on_screen() and p.data_key(self.state) != p._drawn_key]

    def apply_theme(self, theme: Theme) -> None:
        for p in self.panels.values():
            p.apply_theme(theme)

    def highlight(self, plot_id: str) -> PlotPanel:
        panel = self.panels[plot_id]
        self.ensureWidgetVisible(panel, 10, 10)
        panel.flash()
        return panel
