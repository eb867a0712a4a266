"""An empty plot's hint never covers the plot: in a short plot (a Training panel at 1280x720)
the sentence gives way to its short form (five wrapped lines ran over the axes and the
Accuracy plot's "chance" label); a tall plot keeps the whole sentence."""

from __future__ import annotations

import pyqtgraph as pg

from ui.plots.empty_hint import HINT_ROOM, EmptyHint

LONG = "Attention entropy per head\nof each checked rule\nappears after Start or Step"
SHORT = "appears after Start or Step"


def _hint(qtbot, height: int):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    widget.resize(210, height)
    plot = widget.addPlot()
    hint = EmptyHint(plot)
    widget.show()
    qtbot.waitExposed(widget)
    hint.show(LONG, "#000000", SHORT, "Start or Step")
    widget.grab()
    return widget, plot, hint


def _text_height(hint: EmptyHint) -> float:
    doc = hint.item.textItem.document()
    return doc.size().height() - 2 * doc.documentMargin()


def test_a_short_plot_shows_the_short_hint_inside_its_room(qtbot):
    _w, plot, hint = _hint(qtbot, 150)
    room = plot.getViewBox().height()
    assert hint.item.textItem.toPlainText() == SHORT
    assert _text_height(hint) <= HINT_ROOM * room


def test_a_tall_plot_keeps_the_whole_sentence(qtbot):
    _w, plot, hint = _hint(qtbot, 400)
    assert hint.item.textItem.toPlainText() == LONG
    assert _text_height(hint) <= HINT_ROOM * plot.getViewBox().height()
