"""A sentence in an empty plot saying what will appear there and how."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt


class EmptyHint:
    """A centred sentence in an empty plot saying what will appear there and how (instead of
    empty axes and an empty legend box); hidden with the first data."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.plot = plot
        self.item = pg.TextItem("", anchor=(0.5, 0.5))
        self.item.setZValue(50)
        plot.addItem(self.item, ignoreBounds=True)
        plot.getViewBox().sigRangeChanged.connect(self._centre)
        plot.getViewBox().sigResized.connect(self._centre)
        self.item.hide()

    def _centre(self, *_args: Any) -> None:
        view = self.plot.getViewBox()
        (x0, x1), (y0, y1) = view.viewRange()
        # wrapped to the plot's width: in a narrow panel (four to a row at 1280x720) a line
        # longer than the plot ran past both of its edges
        # (never narrower than a word or two: a word is not cut)
        width = max(100.0, view.width() - 8)
        if abs(self.item.textItem.textWidth() - width) > 0.5:
            self.item.setTextWidth(width)
            option = self.item.textItem.document().defaultTextOption()
            option.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            option.setWrapMode(option.WrapMode.WordWrap)
            self.item.textItem.document().setDefaultTextOption(option)
        self.item.setPos((x0 + x1) / 2, (y0 + y1) / 2)

    def show(self, text: str, colour: str) -> None:
        self.item.setText(text, color=colour)
        self._centre()
        self.item.show()
        if self.plot.legend is not None:
            self.plot.legend.hide()

    def hide(self) -> None:
        self.item.hide()
        # a legend kept off the screen (the page's rule strip names the rules) stays off
        if self.plot.legend is not None and getattr(self.plot.legend, "_lab_attached", True):
            self.plot.legend.show()

    @property
    def visible(self) -> bool:
        return self.item.isVisible()
