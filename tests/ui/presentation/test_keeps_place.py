"""Presentation mode presents the page you are on and returns to it (F11 on Training jumped to
the Simulation page, and leaving stayed there); its larger type reaches every page's plot titles
and axis titles (they stayed about 11 px); leaving gives back every tick font and axis width."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QFontInfo
from PySide6.QtWidgets import QApplication

from ui.plots.base import PlotPanel
from ui.plots.type_scale import AXIS_FLOOR
from ui.presentation.mode import FONT_SCALE


def _settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(5)


def _axis_title_px(axis: pg.AxisItem) -> float:
    """The axis title's text height as drawn (the scene's own measure, not a size asked for)."""
    doc = axis.label.document()
    return doc.firstBlock().layout().lineAt(0).height() if doc.firstBlock().layout().lineCount() \
        else QFontInfo(axis.label.font()).pixelSize()


def _looks(page) -> dict:
    out = {}
    for panel in page.findChildren(PlotPanel):
        for k, plot in enumerate(panel.plot_items()):
            for side in ("left", "bottom"):
                axis = plot.getAxis(side)
                font = axis.style.get("tickFont")
                out[(panel.plot_id, k, side)] = (
                    None if font is None else font.toString(), round(axis.width(), 3),
                    round(axis.height(), 3), axis.label.toHtml())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("title", ["Training", "Score inspector"])
def test_f11_presents_the_page_you_are_on_and_returns_to_it(window, qtbot, title):
    window.resize(1280, 720)
    assert window.open_page_titled(title)
    page = window.tabs.currentWidget()
    _settle(qtbot)
    before = _looks(page)
    axes = [(p, plot.getAxis(side)) for p in page.findChildren(PlotPanel)
            for plot in p.plot_items() for side in ("left", "bottom")
            if plot.getAxis(side).labelText and plot.getAxis(side).isVisible()]
    normal = {id(a): _axis_title_px(a) for _p, a in axes}
    window.set_presentation(True)
    _settle(qtbot)
    assert window.tabs.currentWidget() is page
    # the larger type reaches this page's axis titles, each as far as its axis holds it (a small
    # Training plot's three-line y title has no room to grow at 1280x720, and one under a taller
    # title may shrink to AXIS_FLOOR rather than run into it)
    grown = 0
    for _panel, axis in axes:
        px = _axis_title_px(axis)
        assert px >= AXIS_FLOOR * normal[id(axis)] - 0.5, axis.labelText
        grown += px >= 0.9 * FONT_SCALE * normal[id(axis)]
    assert grown >= len(axes) / 2, f"{grown} of {len(axes)} axis titles larger"
    window.set_presentation(False)
    _settle(qtbot)
    assert window.tabs.currentWidget() is page
    assert _looks(page) == before


def test_presentation_titles_grow_on_the_simulation_page_and_come_back(window, qtbot):
    window.resize(1280, 720)
    _settle(qtbot)
    plot = window.page.panels["sweep"].plot_items()[0]
    html = plot.titleLabel.item.toHtml()
    size = plot.titleLabel._lab_size
    window.set_presentation(True)
    _settle(qtbot)
    assert window.tabs.currentWidget() is window.page
    shown = plot.titleLabel.item.toHtml()
    assert shown != html and f"{float(size[:-2]) * FONT_SCALE:.4g}{size[-2:]}" in shown
    window.set_presentation(False)
    _settle(qtbot)
    assert plot.titleLabel.item.toHtml() == html
