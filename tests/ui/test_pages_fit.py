"""At 1280x720 (a common projector) the Simulation, Training, Real model and Experiments pages
show every plot panel whole, without scrolling (the forms beside them may scroll)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication, QScrollArea

from ui.plots.base import PlotPanel


def _panels(page) -> list[PlotPanel]:
    return [p for p in page.findChildren(PlotPanel) if p.isVisibleTo(page)]


@pytest.mark.parametrize("title", ["Simulation", "Training", "Real model",
                                   pytest.param("Experiments", marks=pytest.mark.slow)])
def test_every_panel_is_whole_at_1280x720(window, qtbot, title):
    window.resize(1280, 720)
    assert window.open_page_titled(title)
    page = window.tabs.currentWidget()
    # 720: the screen; 688: what a window on it has inside its title bar (Training's plots
    # scrolled there by 3 px, and by 1 px in presentation mode)
    for height in (720, 688) if title != "Experiments" else (720,):
        window.resize(1280, height)
        for _ in range(3):
            QApplication.processEvents()
            qtbot.wait(20)
        assert window.width() == 1280 and window.height() == height
        _whole(window, page, f"{title} at 1280x{height}")
        if title != "Experiments":  # (its own presentation check below) and in presentation
            # mode, at its larger type (Training's bottom row was cut below a 1280x720 screen's
            # edge)
            window.set_presentation(True)
            try:
                for _ in range(3):
                    QApplication.processEvents()
                    qtbot.wait(20)
                assert window.width() == 1280 and window.height() == height
                _whole(window, page, f"{title} at 1280x{height} (presentation)")
            finally:
                window.set_presentation(False)
    window.resize(1280, 720)
    if title == "Experiments":  # (the same window: a new one costs 5 s)
        _four_figures_and_a_long_verdict_fit(window, qtbot, page)


def _whole(window, page, title: str) -> None:
    """Every visible plot panel of ``page`` whole on screen, none in a scrolled area (the
    page's own, or the tab's around it)."""
    panels = _panels(page)
    assert len(panels) >= 2, title  # (presentation mode shows Simulation's plots one at a time)
    for panel in panels:
        seen = panel.visibleRegion().boundingRect()
        assert seen.size() == panel.size(), f"{title}: {panel.plot_id} shows {seen} of {panel.size()}"
    tab_area = window.tabs.scroll_area(page)
    for area in page.findChildren(QScrollArea) + ([page] if isinstance(page, QScrollArea) else []) \
            + ([tab_area] if tab_area is not None and tab_area is not page else []):
        inner = area.widget()
        if inner is None or not any(inner.isAncestorOf(p) for p in panels):
            continue  # a form or a text box beside the plots may scroll
        assert area.verticalScrollBar().maximum() == 0, f"{title}: the plots scroll vertically"
        assert area.horizontalScrollBar().maximum() == 0, f"{title}: the plots scroll sideways"


def _plots_scroll(page, panels) -> list[str]:
    out = []
    for area in page.findChildren(QScrollArea):
        inner = area.widget()
        if inner is not None and any(inner.isAncestorOf(p) for p in panels) and (
                area.verticalScrollBar().maximum() or area.horizontalScrollBar().maximum()):
            out.append(area.objectName() or type(area).__name__)
    return out


def _four_figures_and_a_long_verdict_fit(window, qtbot, page) -> None:
    """logit_control: four figures (a second row), five rules, a seven-line verdict: the page
    scrolled at 1280x720; now one row of figures with the rest a page away, the verdict in its
    box, the form and job list left out in presentation mode (the form was cut there)."""
    from engine.experiments.builtin import builtin
    from ui.pages.experiments.figure_rows import COLUMNS, PRESENT_COLUMNS

    page.form.show_spec(builtin("logit_control"))
    page.verdict_label.setText("<b>Verdict</b>: " + "sqrt 0.586 ± 0.0059 (best lr 0.01) " * 40)
    for present in (False, True):
        window.set_presentation(present)
        for _ in range(3):
            QApplication.processEvents()
            qtbot.wait(20)
        mode = "presentation" if present else "normal"
        panels = _panels(page)
        wrapper = window.tabs.scroll_area(page)
        assert wrapper.verticalScrollBar().maximum() == 0, f"{mode}: the page scrolls"
        assert _plots_scroll(page, panels) == [], mode
        for panel in panels:
            seen = panel.visibleRegion().boundingRect()
            assert seen.size() == panel.size(), f"{mode}: {panel.plot_id} shows {seen}"
        # (presentation mode: two figures a row, wider, at its larger type)
        per_row = PRESENT_COLUMNS if present else COLUMNS
        assert len(page.figure_panels) == 4 and len(page.figures_inner.shown()) == per_row, mode
        assert page.figures_inner.nav.isVisible(), mode
        assert page.form_column.isVisible() != present and page.jobs.isVisible() != present
    window.set_presentation(False)
