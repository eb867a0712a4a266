"""A title longer than its plot: on more lines (three beside a plot, two under it), then cut
short with "…" when even that does not fit; never running past the plot's ends."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from ui.plots.tidy_axis import MAX_BOTTOM_LINES, MAX_LABEL_LINES, TidyAxis, tidy_axes

LONG = "learning-rate sensitivity (Wortsman et al.) of the final training loss"


def _plot(qtbot, size, left, bottom):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    widget.resize(*size)
    plot = widget.addPlot(axisItems=tidy_axes())
    plot.setLabel("left", left)
    plot.setLabel("bottom", bottom)
    widget.show()
    qtbot.waitExposed(widget)
    widget.grab()
    qtbot.wait(10)
    return widget, plot


def _along(axis: TidyAxis) -> float:
    margin = axis.label.document().documentMargin()
    return axis.label.boundingRect().width() - 2 * margin


def test_a_title_fits_on_fewer_lines_when_it_can(qtbot):
    _w, plot = _plot(qtbot, (500, 400), "accuracy", "step")
    for side in ("left", "bottom"):
        axis = plot.getAxis(side)
        assert axis._lines == 1 and axis._shown is None


@pytest.mark.parametrize(("size", "lines", "cut"), [((300, 260), 3, False), ((300, 110), 3, True)])
def test_a_long_y_title_wraps_then_is_cut(qtbot, size, lines, cut):
    _w, plot = _plot(qtbot, size, LONG, "step")
    axis = plot.getAxis("left")
    assert axis._lines == lines <= MAX_LABEL_LINES
    assert (axis._shown is not None) == cut
    if cut:
        assert axis._shown.endswith("…") and LONG.startswith(axis._shown[:-1])
    assert _along(axis) <= axis._room() + 0.5


def test_a_long_x_title_takes_two_lines(qtbot):
    _w, plot = _plot(qtbot, (260, 300), "y", "items in the set at evaluation N (trained on 4-16)")
    axis = plot.getAxis("bottom")
    assert axis._lines == 2 <= MAX_BOTTOM_LINES and axis._shown is None
    assert _along(axis) <= axis._room() + 0.5
    # the axis is tall enough for both lines: the title stays inside the plot
    margin = axis.label.document().documentMargin()
    text = axis.label.mapRectToItem(plot, axis.label.boundingRect()).adjusted(0, margin, 0, -margin)
    assert text.bottom() <= plot.boundingRect().bottom() + 1
