"""Presentation mode on the Real model page at 1280x720: the head detail's two stacked
histograms keep a readable plot (their view boxes were 30 px tall: the per-head grids above
held their usual 200 px minimum, so the 1:3 split stayed 2:3), and leaving restores it."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from ui.pages.real_model.page import RealModelPage
from ui.pages.real_model.per_head_tab import GRID_MIN_HEIGHT, PRESENT_GRID_MIN_HEIGHT


def _settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(5)


def test_the_head_detail_gets_the_height_in_presentation_mode(window, qtbot):
    window.resize(1280, 720)
    assert window.open_page_titled("Real model")
    page = window.findChild(RealModelPage)
    qtbot.waitUntil(lambda: len(page._per_head) == 3, timeout=10_000)
    _settle(qtbot)
    grid, scores = page._per_head["grid"], page._per_head["scores"]
    normal = [p.getViewBox().height() for p in scores.plot_items()]
    window.set_presentation(True)
    _settle(qtbot)
    assert grid.glw.minimumHeight() == PRESENT_GRID_MIN_HEIGHT < GRID_MIN_HEIGHT
    heights = [p.getViewBox().height() for p in scores.plot_items()]
    assert len(heights) == 2 and min(heights) >= 50, heights
    # the grids above still show their data area (not squeezed to their axes)
    assert grid.glw.height() >= PRESENT_GRID_MIN_HEIGHT
    window.set_presentation(False)
    _settle(qtbot)
    assert grid.glw.minimumHeight() == GRID_MIN_HEIGHT
    assert [p.getViewBox().height() for p in scores.plot_items()] == normal
