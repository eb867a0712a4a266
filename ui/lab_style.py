"""The app's widget style: Fusion, with check box outlines that can be seen; and combo boxes
sized by their contents.

Fusion outlines an unchecked check box a shade darker than the window, which on the dark theme's
fields is all but invisible. Here every check box is outlined in the theme's quiet text colour
(``Theme.muted``, at least 4.5:1 against the window), over what Fusion draws.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from PySide6.QtCore import QEvent, QRectF, Qt
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QApplication, QComboBox, QProxyStyle, QStyle, QWidget

_OUTLINED = (QStyle.PrimitiveElement.PE_IndicatorCheckBox,
             QStyle.PrimitiveElement.PE_IndicatorItemViewItemCheck)


class LabStyle(QProxyStyle):
    def __init__(self, outline: str) -> None:
        super().__init__("Fusion")  # (by its key: the proxy owns the style it wraps)
        self.outline = outline  #: the check boxes' outline colour (the theme's muted text)

    def drawPrimitive(self, element: Any, option: Any, painter: Any, widget: Any = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if element in _OUTLINED:
            painter.save()
            painter.setRenderHint(painter.RenderHint.Antialiasing, True)
            painter.setPen(QPen(QColor(self.outline), 1.0))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            rect = QRectF(option.rect).adjusted(0.5, 0.5, -0.5, -0.5)
            painter.drawRoundedRect(rect, 2.0, 2.0)
            painter.restore()


def size_combos_by_contents(root: QWidget) -> None:
    """Every combo box under ``root`` sized by its contents, always. Qt's default sizes a combo
    box by its contents when first shown (an empty one, before the first results, got a width
    of its own) and by its minimum length after any font change: presentation mode's larger
    type, and back, left the Simulation page's heatmap box and its column narrower."""
    first_show = QComboBox.SizeAdjustPolicy.AdjustToContentsOnFirstShow
    for combo in root.findChildren(QComboBox):
        if combo.sizeAdjustPolicy() == first_show:
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
            # Qt keeps the minimum size it measured first (an empty box's): measured again
            # whenever the items change
            model = combo.model()
            for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset):
                signal.connect(partial(remeasure, combo))
            remeasure(combo)


def remeasure(combo: QComboBox, *_args: Any) -> None:
    """Drop the sizes ``combo`` keeps (a style change is what makes Qt measure them again)."""
    QApplication.sendEvent(combo, QEvent(QEvent.Type.StyleChange))
    combo.updateGeometry()
