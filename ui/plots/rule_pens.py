"""Each scaling rule's pen: its colour and its line pattern, the same in every plot."""

from __future__ import annotations

from functools import cache
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt

from ui.theme import rule_color

#: a line pattern per rule besides its colour: a curve that coincides with another (temperature
#: at T = 1 lies exactly on none; qknorm often on sqrt) still shows through it
RULE_STYLES: dict[str, Qt.PenStyle] = {
    "temperature": Qt.PenStyle.DotLine,
    "cosine": Qt.PenStyle.DashDotLine,
    "qknorm": Qt.PenStyle.DashDotDotLine,
}


@cache
def symbol_brush(colour: str) -> Any:
    """One QBrush per colour, shared by every symbol of that colour. pyqtgraph's symbol atlas
    keys a symbol by the ids of its pen and brush objects: given a colour string (or a tuple,
    or None), each setData made a new QBrush, so a new atlas entry, rendered, and the atlas
    grew with every update (612 entries after 600 updates of one curve), and with it the pixmap
    made from it at the next paint."""
    return pg.mkBrush(colour)


@cache
def symbol_pen(colour: str | None) -> Any:
    """One QPen per colour (None: no outline), shared as :func:`symbol_brush`'s brushes."""
    return pg.mkPen(colour)


def symbol_style(fill: str, edge: str | None) -> dict[str, Any]:
    """A PlotDataItem's ``symbolBrush`` and ``symbolPen``, as shared objects (see
    :func:`symbol_brush`)."""
    return {"symbolBrush": symbol_brush(fill), "symbolPen": symbol_pen(edge)}


def rule_pen(rule: str, width: float = 2.0, style: Qt.PenStyle | None = None) -> Any:
    """The rule's colour, and its line pattern unless ``style`` is given (theory lines)."""
    return pg.mkPen(rule_color(rule), width=width,
                    style=RULE_STYLES.get(rule, Qt.PenStyle.SolidLine) if style is None else style)
