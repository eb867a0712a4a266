"""Presentation mode's larger type reaches every text of a plot: the legends' entries (created
with a size pyqtgraph keeps in its options: they stayed 8 pt), a colour bar's title (on a
TidyAxis: it wraps where the bar is short, "fraction per b" was cut at the top), and a y title
is measured with what pyqtgraph writes after it (a space: "query position" was cut to "query…"
where it fits on two lines)."""

from __future__ import annotations

import re

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtGui import QFontInfo

from ui.plots import type_scale
from ui.plots.heatmap import heatmap_with_colorbar
from ui.plots.tidy_axis import TidyAxis, tidy_axes


@pytest.fixture
def presenting():
    type_scale.set_factor(1.4, [])
    yield 1.4
    type_scale.set_factor(1.0, [])


def _px(html: str) -> float:
    found = re.search(r"font-size: ?([0-9.]+)(px|pt)", html)
    assert found is not None, html
    return float(found.group(1))


def test_a_legend_entry_takes_the_larger_type_and_exports_keep_theirs(qtbot, presenting):
    legend = pg.LegendItem(labelTextSize="8pt")
    legend.addItem(pg.PlotDataItem([0, 1], [0, 1]), "sqrt")
    _sample, label = legend.items[0]
    assert label.opts["size"] == "11.2pt"
    with type_scale.unscaled():  # an exported figure's legend: the size it was given
        other = pg.LegendItem(labelTextSize="8pt")
        other.addItem(pg.PlotDataItem([0, 1], [0, 1]), "sqrt")
        assert other.items[0][1].opts["size"] == "8pt"
    type_scale.set_factor(1.0, [])
    label.setText(label.text)  # (leaving presentation mode redraws it)
    assert label.opts["size"] == "8pt"


def test_a_colour_bar_title_is_on_a_tidy_axis_and_wraps_where_the_bar_is_short(qtbot, presenting):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    widget.resize(320, 120)
    plot = widget.addPlot(axisItems=tidy_axes())
    image, bar = heatmap_with_colorbar(plot, "fraction per bin")
    image.setImage(np.random.default_rng(0).random((8, 8)))
    widget.show()
    qtbot.waitExposed(widget)
    widget.grab()
    qtbot.wait(10)  # (a view destroyed before its layout settles can crash in Qt)
    titled = bar.getAxis("left")
    assert isinstance(titled, TidyAxis) and titled.labelText == "fraction per bin"
    titled.resizeEvent()
    margin = titled.label.document().documentMargin()
    assert titled._lines >= 2 or titled._shown is not None  # (one line would not fit 120 px)
    assert titled.label.boundingRect().width() - 2 * margin <= titled._room() + 0.5


def test_a_two_word_title_that_fits_on_two_lines_is_not_cut(qtbot, presenting):
    """At every plot height where "position " (pyqtgraph draws the title with a trailing
    space) fits the axis's room at the least type (AXIS_FLOOR), the title shows whole, never
    "query…"; measured here with the font's own metrics, not the code under test."""
    from PySide6.QtGui import QFont, QFontMetricsF

    from ui.plots.type_scale import AXIS_FLOOR

    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    widget.resize(300, 150)
    plot = widget.addPlot(axisItems=tidy_axes())
    plot.setLabel("left", "query position")
    plot.setLabel("bottom", "key")
    widget.show()
    qtbot.waitExposed(widget)
    axis = plot.getAxis("left")
    normal = QFontInfo(axis.label.font()).pixelSize()
    font = QFont(axis.label.font())
    font.setPixelSize(round(AXIS_FLOOR * normal))
    need = QFontMetricsF(font).horizontalAdvance("position ") + 4
    checked = 0
    for height in range(96, 200, 2):
        widget.resize(300, height)
        widget.grab()
        qtbot.wait(1)
        axis.resizeEvent()
        margin = axis.label.document().documentMargin()
        assert axis.label.boundingRect().width() - 2 * margin <= axis._room() + 0.5, height
        if need < axis._room():
            checked += 1
            assert axis._shown is None, (height, axis._shown, axis._room())
    assert checked >= 10
    qtbot.wait(10)  # (a view destroyed before its layout settles can crash in Qt)
