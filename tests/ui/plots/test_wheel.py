"""The mouse wheel over a plot scrolls the page it is on (it zoomed the plot where a user expected
the page to scroll); with Ctrl it zooms the plot."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea, QVBoxLayout, QWidget

from ui.plots.histograms import EntropyPanel


def _wheel(widget, modifiers) -> None:
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    event = QWheelEvent(pos, widget.mapToGlobal(pos), QPoint(0, 0), QPoint(0, -120),
                        Qt.MouseButton.NoButton, modifiers, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_the_wheel_scrolls_the_page_and_ctrl_wheel_zooms(qtbot):
    area = QScrollArea()
    inner = QWidget()
    layout = QVBoxLayout(inner)
    panel = EntropyPanel()
    panel.setMinimumHeight(400)
    layout.addWidget(panel)
    layout.addSpacing(1500)  # a page taller than its area: it scrolls
    area.setWidget(inner)
    area.setWidgetResizable(True)
    qtbot.addWidget(area)
    area.resize(500, 400)
    area.show()
    qtbot.waitExposed(area)
    view = panel.plot.getViewBox()
    before = view.viewRange()
    _wheel(panel.glw.viewport(), Qt.KeyboardModifier.NoModifier)
    assert area.verticalScrollBar().value() > 0  # the page scrolled
    assert view.viewRange() == before  # the plot did not zoom
    area.verticalScrollBar().setValue(0)
    _wheel(panel.glw.viewport(), Qt.KeyboardModifier.ControlModifier)
    assert area.verticalScrollBar().value() == 0
    after = view.viewRange()
    assert after != before  # the plot zoomed (out: the wheel turned towards the user)
