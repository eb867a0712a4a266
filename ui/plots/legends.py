"""Legends outside the data: in their own row below a plot's x axis, as many columns as the
plot's width allows, taken out of the layout while kept off the screen (and back for exports)."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtWidgets import QSizePolicy

#: row of a PlotItem's own grid below its x axis (0 title, 1 top axis, 2 view box, 3 bottom axis)
LEGEND_ROW = 4


def outside_legend(plot: pg.PlotItem, row: int = LEGEND_ROW, col: int = 0) -> pg.LegendItem:
    """The plot's legend in its own row below the x axis, never over the data, across the
    plot's whole width (under its y axis too: beside a wide y title the view box alone left a
    narrow figure room for one column, and five rules in five rows squashed its plot); it takes
    as many columns as that width allows (re-flowed when the plot is resized or a series added).
    ``plot.addItem(item)`` of a named item still adds it (``plot.legend`` is this legend)."""
    legend = pg.LegendItem(labelTextSize="8pt", colCount=1, horSpacing=14, verSpacing=-4,
                           frame=False)
    # its width never widens the plot (its columns follow the plot's width instead)
    legend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
    # nor holds it wide: the columns fitted to a wider plot (a larger window, presentation
    # mode's two figures a row) kept the plot that wide, past its view, and the room measured
    # on that plot kept the columns (the last entries and the x title were cut)
    legend.setMinimumWidth(1)
    plot.layout.addItem(legend, row, col, 1, 2)  # (columns 0 and 1: y axis and view box)
    plot.legend = legend
    set_legend_slot(legend, lambda: plot.layout.addItem(legend, row, col, 1, 2),
                    lambda: plot.layout.removeItem(legend))
    original_add = legend.addItem

    def add(item: Any, name: str) -> None:
        original_add(item, name)
        fit_legend_columns(legend, plot)

    legend.addItem = add
    plot.getViewBox().sigResized.connect(lambda *_: fit_legend_columns(legend, plot))
    return legend


def set_legend_slot(legend: pg.LegendItem, attach: Any, detach: Any) -> None:
    """How to put a legend into its layout cell and take it out: a legend kept off the screen
    leaves its layout (hidden, it still moved the plots around it) and returns for exports."""
    legend._lab_attach = attach
    legend._lab_detach = detach
    legend._lab_attached = True


def show_legend(legend: pg.LegendItem, on: bool) -> None:
    attached = getattr(legend, "_lab_attached", None)
    if attached is not None and attached != on:
        (legend._lab_attach if on else legend._lab_detach)()
        legend._lab_attached = on
    legend.setVisible(on)


def fit_legend_columns(legend: pg.LegendItem, plot: pg.PlotItem | None = None,
                       room: float | None = None) -> None:
    """As many legend columns as fit ``room`` pixels (default: from where the legend starts in
    ``plot`` to the plot's right edge); the widest entry sets the column width."""
    if not legend.items:
        return
    widest = max(20 + label.item.boundingRect().width() for _sample, label in legend.items) + 18
    if room is None:
        room = legend_room(plot) if plot is not None else widest
    room = max(room, widest)
    cols = max(1, min(len(legend.items), int(room // widest)))
    if cols != legend.columnCount:
        legend.setColumnCount(cols)


def legend_room(plot: pg.PlotItem) -> float:
    """Pixels from the plot's left edge (where its legend's cell starts) to its right edge, inside
    the layout's margins. It does not depend on the y axis's width: a legend that read the view
    box's left and a y axis that widened for a title on more lines reacted to each other's sizes
    (TidyAxis), and 0.8 of the plot's width overestimated beside a wide y axis (the last entry ran
    past the plot's edge)."""
    left, _top, right, _bottom = plot.layout.getContentsMargins()
    return plot.boundingRect().width() - left - right
