"""A figure-wide title over a row of plots (the sweep's six): the panel's name over the first
plot alone was wider than that plot, so it was cut at the figure's left edge and pushed the first
plot's own title onto broken lines ("core / td" for "score std")."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg

from ui.plots.legends import set_legend_slot


def add_title_row(panel: Any, title: str, size: str) -> pg.LabelItem:
    """Every item of ``panel``'s layout moved one row down and ``title`` (HTML) put in the new
    first row, across every column; a legend that leaves and rejoins its layout (a legend kept
    off the screen) rejoins it in its new row."""
    ci = panel.glw.ci
    placed = []
    for item, cells in list(ci.items.items()):
        rows = [r for r, _c in cells]
        cols = [c for _r, c in cells]
        placed.append((item, min(rows), min(cols), max(rows) - min(rows) + 1,
                       max(cols) - min(cols) + 1))
    columns = max((col + span for _i, _r, col, _rs, span in placed), default=1)
    for item, *_cell in placed:
        ci.removeItem(item)
    label = pg.LabelItem(title, size=size, color=panel.theme.foreground)
    ci.addItem(label, row=0, col=0, colspan=columns)
    for item, row, col, rowspan, colspan in placed:
        ci.addItem(item, row=row + 1, col=col, rowspan=rowspan, colspan=colspan)
        if getattr(item, "_lab_attach", None) is not None:
            set_legend_slot(item, lambda i=item, r=row + 1, c=col, s=colspan:
                            ci.addItem(i, row=r, col=c, colspan=s),
                            lambda i=item: ci.removeItem(i))
    panel._lab_figure_title = label
    return label
