"""Each scaling rule's pen: its colour and its line pattern, the same in every plot."""

from __future__ import annotations

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


def rule_pen(rule: str, width: float = 2.0, style: Qt.PenStyle | None = None) -> Any:
    """The rule's colour, and its line pattern unless ``style`` is given (theory lines)."""
    return pg.mkPen(rule_color(rule), width=width,
                    style=RULE_STYLES.get(rule, Qt.PenStyle.SolidLine) if style is None else style)
