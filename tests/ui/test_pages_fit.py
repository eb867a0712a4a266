"""At 1280x720 (a common projector) the Simulation, Training, Real model and Experiments pages
show every plot panel whole, without scrolling (the forms beside them may scroll)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication, QScrollArea

from ui.plots.base import PlotPanel


def _panels(page) -> list[PlotPanel]:
    return [p for p in page.findChildren(PlotPanel) if p.isVisibleTo(page)]


@pytest.mark.parametrize("title", ["Simulation", "Training", "Real model", "Experiments"])
def test_every_panel_is_whole_at_1280x720(window, qtbot, title):
    window.resize(1280, 720)
    assert window.open_page_titled(title)
    page = window.tabs.currentWidget()
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)
    assert window.width() == 1280 and window.height() == 720
    panels = _panels(page)
    assert len(panels) >= 3, title
    for panel in panels:
        seen = panel.visibleRegion().boundingRect()
        assert seen.size() == panel.size(), f"{title}: {panel.plot_id} shows {seen} of {panel.size()}"
    for area in page.findChildren(QScrollArea) + ([page] if isinstance(page, QScrollArea) else []):
        inner = area.widget()
        if inner is None or not any(inner.isAncestorOf(p) for p in panels):
            continue  # a form or a text box beside the plots may scroll
        assert area.verticalScrollBar().maximum() == 0, f"{title}: the plots scroll vertically"
        assert area.horizontalScrollBar().maximum() == 0, f"{title}: the plots scroll sideways"
