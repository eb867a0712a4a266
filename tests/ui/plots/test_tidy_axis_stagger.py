"""A category axis names every category: a label that would touch its neighbour goes a line
down (the axis grows by it) instead of being left out. logit_control's five rules in a third
of a 1280 px row lost "softcap"."""

from __future__ import annotations

import pyqtgraph as pg

from tests.ui.plot_layout import overlapping_ticks, tick_labels
from ui.plots.tidy_axis import tidy_axes

RULES = ("sqrt", "qknorm", "softcap", "qkclip", "sink")


def _category_plot(qtbot, width: int, stagger: bool):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    widget.resize(width, 200)
    plot = widget.addPlot(axisItems=tidy_axes())
    axis = plot.getAxis("bottom")
    axis.stagger = stagger
    axis.setTicks([[(float(i), r) for i, r in enumerate(RULES)]])
    plot.setXRange(-0.5, len(RULES) - 0.5, padding=0)
    plot.setLabel("bottom", "scaling rule")
    widget.show()
    qtbot.waitExposed(widget)
    for _ in range(3):  # (the axis grows for its second line, then settles)
        widget.grab()
        qtbot.wait(5)
    return widget, axis  # (the widget kept: its axis lives as long as it)


def test_a_crowded_category_goes_a_line_down_and_none_is_left_out(qtbot):
    # 230 px: about 40 px a category, "softcap" and "qknorm" each wider (the page's third)
    _w1, plain = _category_plot(qtbot, 230, stagger=False)
    assert len(tick_labels(plain)) < len(RULES)  # a plain tidy axis leaves crowded ones out
    _w2, axis = _category_plot(qtbot, 230, stagger=True)
    assert sorted(tick_labels(axis)) == sorted(RULES)
    assert overlapping_ticks(axis) == []
    assert axis._staggered and axis.height() > plain.height()


def test_categories_with_room_stay_on_one_line(qtbot):
    _w1, axis = _category_plot(qtbot, 700, stagger=True)
    _w2, plain = _category_plot(qtbot, 700, stagger=False)
    assert sorted(tick_labels(axis)) == sorted(RULES)
    assert not axis._staggered and axis.height() == plain.height()
