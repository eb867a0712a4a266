"""The simulation page: its plot panels (ui.plots.PANEL_CLASSES) in a scrollable grid and the results table.

The page only draws: the window hands it the latest :class:`LabState`, and on every redraw tick
each panel redraws if its data changed and it is on screen (a panel scrolled into view catches up
on the next tick).
"""

from __future__ import annotations

import html
import time
from typing import Any

from PySide6.QtWidgets import QGraphicsOpacityEffect, QScrollArea, QWidget

from ui.pages.base import PanelRedraw
from ui.pages.simulation.results_table import ResultsTable
from ui.plots import PANEL_CLASSES, PlotPanel
from ui.plots.base import panel_grid
from ui.plots.cover import Cover
from ui.plots.rule_strip import entry, rule_parts, show_parts, strip_label
from ui.theme import LIGHT, Theme

#: plot_id -> (row, column, column span) in the grid
GRID = {
    "scores": (1, 0, 1), "weights": (1, 1, 1), "top_weight": (1, 2, 1),
    "entropy": (2, 0, 1), "jacobian": (2, 1, 1), "sweep": (3, 0, 3),
}
RESULTS_CELL = (2, 2)
#: the id of the results table among the ids a tour question may cover (besides the plot ids)
RESULTS_ID = "results"
STRIP_ROW = 0
PANEL_MIN_HEIGHT = 170
OUTDATED_OPACITY = 0.35  #: plots that no longer show the parameters set now are dimmed to this
#: panels redrawn per timer tick at most: painting all six at once stalls the event loop
PANELS_PER_TICK = 1
#: the sweep's items are made ahead only in a tick whose panel took less than this much of the
#: GUI thread's CPU: one of its curves is 3-7 ms, and the panel's paint follows in the same
#: turn. A panel's first draw (its new rules' curves and legend entries) plus that curve made
#: the longest tick of a seven-rule run (40 ms); a 7 ms refresh (the top weights), a curve and
#: the paint, 25-30 ms (bench_gui.py --rules 7 --profile). The cheap panels' ticks (weights,
#: entropy: 2-3 ms) leave room, and there are hundreds before a sweep's first point
AHEAD_IF_UNDER_S = 0.004


def strip_entries(rules: tuple[str, ...], theme: Theme, short: bool = False) -> list[str]:
    """Each rule's line (its colour and pattern) and label, then the series that are not
    rules."""
    parts = rule_parts(rules, theme, short)
    parts.append(entry(f'<span style="color:{theme.raw}"><b>━━━</b></span>',
                       f'<span style="color:{theme.muted}">raw q·k</span>'))
    parts.append(entry("", f'<span style="color:{theme.foreground}">'
                       f'╌╌ {"theory / mean" if short else "normal theory / rule mean"}</span>'))
    return parts


class SimulationPage(QScrollArea, PanelRedraw):
    panels_per_tick = PANELS_PER_TICK

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("simulation_page")
        self.setWidgetResizable(True)
        inner = QWidget(self)
        # small enough that the three rows, the sweep included, fit a 1280x720 projector
        grid, panels = panel_grid(inner, PANEL_CLASSES, GRID, min_height=PANEL_MIN_HEIGHT)
        for panel in panels.values():
            panel.glw.setMinimumSize(200, 120)
            panel.set_legend_on_screen(False)  # the strip above names every series once
        #: one legend for the whole page: each rule's colour and line pattern, the grey raw
        #: q·k and the dashed theory (exported figures carry their own legends)
        self.rule_strip = strip_label(inner)  # one line: it never moves the plots under it
        grid.addWidget(self.rule_strip, STRIP_ROW, 0, 1, 3)
        self._strip_rules: tuple[str, ...] | None = None
        self.panels: dict[str, PlotPanel] = panels
        self.results = ResultsTable(inner)
        self.results.setMinimumHeight(PANEL_MIN_HEIGHT)
        grid.addWidget(self.results, *RESULTS_CELL)
        for row in (1, 2, 3):
            grid.setRowStretch(row, 1)
        self.setWidget(inner)
        self.state: Any = None
        self.theme: Theme = LIGHT
        self._covers: dict[str, Cover] = {}
        #: why the plots do not show the parameters set now (a refused config), or None
        self.outdated_reason: str | None = None

    def set_state(self, state: Any) -> None:
        self.state = state

    def redraw(self, budget: int = PANELS_PER_TICK) -> list[str]:
        """Redraw at most ``budget`` panels whose data changed and which are visible, taking
        turns (round robin) so one tick never pays for painting all six; returns the ids drawn."""
        if self.state is None:
            return []
        started = time.thread_time()
        drawn = self.redraw_panels(budget)
        snap = self.state.snapshot
        if (not self.state.sweep and snap is not None
                and time.thread_time() - started < AHEAD_IF_UNDER_S
                and not self._waits and "sweep" not in drawn
                and not any(self.panels[pid].paint_due for pid in drawn)):
            # before the sweep's first point, one of its curves a tick (~3 ms): made at the
            # first point, they were the sweep's longest blocks (a simulation streaming its
            # snapshots leaves few ticks with no panel to draw). Not in a tick whose panel
            # left its paint to the loop's next turn, nor in one that waits for such a paint
            # (PanelRedraw, bounded): the curve made repaints the sweep's plot there too (a
            # run's first second: a tick, the sweep's paint and a panel's first paint in one
            # 35 ms stretch, bench_gui.py --rules 7 --profile). Nor in one that drew the sweep
            # itself: its paint comes in this turn (a new run's "no points yet" strip)
            self.panels["sweep"].make_items_ahead(tuple(snap.rules))
        if self.results.isVisible():
            self.results.show_snapshot(self.state.snapshot)
        if snap is not None and tuple(snap.rules) != self._strip_rules:
            self.show_rules(tuple(snap.rules))
        return drawn

    def show_rules(self, rules: tuple[str, ...]) -> None:
        """The page's rule strip for ``rules`` (while the plots are outdated, it says so)."""
        self._strip_rules = rules
        if self.outdated_reason is not None:
            self._show_outdated()
            return
        show_parts(self.rule_strip, strip_entries(rules, self.theme),
                   strip_entries(rules, self.theme, short=True))

    def mark_outdated(self, reason: str | None) -> None:
        """The plots no longer show the parameters set now (``reason``: why, e.g. a refused
        value): the strip above them says so in the error colour and every plot is dimmed, also
        in presentation mode; None: they are current again."""
        if reason == self.outdated_reason:
            return
        self.outdated_reason = reason
        for panel in self.panels.values():
            if reason is None:
                panel.glw.setGraphicsEffect(None)
            else:
                dim = QGraphicsOpacityEffect(panel.glw)
                dim.setOpacity(OUTDATED_OPACITY)
                panel.glw.setGraphicsEffect(dim)
        if reason is not None:
            self._show_outdated()
        elif self._strip_rules is not None:
            self.show_rules(self._strip_rules)
        else:
            self.rule_strip.setText("")

    def _show_outdated(self) -> None:
        text = html.escape(f"⚠ {self.outdated_reason}")
        self.rule_strip.setText(f'<span style="color:{self.theme.error}"><b>{text}</b></span>')
        self.rule_strip.setToolTip(text)

    def redraw_source(self) -> Any:
        return self.state

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        for p in self.panels.values():
            p.apply_theme(theme)
        if self._strip_rules is not None:
            self.show_rules(self._strip_rules)

    def highlight(self, plot_id: str, hold: bool = False) -> PlotPanel:
        """Bring the plot into view and outline it: for a moment, or (``hold``) until another
        plot is highlighted or :meth:`clear_highlight`."""
        panel = self.panels[plot_id]
        self.ensureWidgetVisible(panel, 10, 10)
        if hold:
            self.clear_highlight()
            panel.flash(None)
        else:
            panel.flash()
        return panel

    def conceal(self, ids: list[str], text: str = "") -> None:
        """Cover the plots (and the results table, ``RESULTS_ID``) in ``ids`` with ``text``, and
        uncover every other: the tour hides what would give its question's answer away."""
        for pid in ids:
            if pid not in self._covers:
                target = self.results if pid == RESULTS_ID else self.panels[pid].glw
                self._covers[pid] = Cover(target)
            self._covers[pid].show(text)
        for pid, cover in self._covers.items():
            if pid not in ids:
                cover.hide()

    def concealed(self) -> list[str]:
        return [pid for pid, cover in self._covers.items() if cover.shown]

    def clear_highlight(self) -> None:
        for p in self.panels.values():
            if p.highlighted:
                p.unflash()
