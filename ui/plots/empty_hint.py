"""A sentence in an empty plot saying what will appear there and how."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt

#: the part of a plot's height a hint may take (the rest: a plot's own marks near its edges,
#: such as the Accuracy plot's "chance" line and the Entropy plot's "low entropy" label)
HINT_ROOM = 0.6


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
        self._texts: tuple[str, ...] = ()  #: the sentence, then shorter ones (the first that fits)
        self._colour = ""

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
        self._fit_height(view.height())
        self.item.setPos((x0 + x1) / 2, (y0 + y1) / 2)

    def _fit_height(self, room: float) -> None:
        """The longest of the texts whose lines fit the plot's height (a five-line sentence in a
        short Training plot ran over its axes and its "chance" label); the shortest otherwise."""
        if not self._texts:
            return
        doc = self.item.textItem.document()
        for text in self._texts:
            if self.item.textItem.toPlainText() != text:
                self.item.setText(text, color=self._colour)
            if doc.size().height() - 2 * doc.documentMargin() <= HINT_ROOM * room:
                return

    def show(self, text: str, colour: str, *shorter: str) -> None:
        """``text``, or the first of ``shorter`` that fits the plot's height where it does not."""
        self._texts, self._colour = (text, *shorter), colour
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
