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


@pytest.mark.parametrize("height", [80, 110])
def test_a_title_with_no_aside_takes_a_shorter_form_not_a_cut(qtbot, height):
    """"probability density" beside a plot too short for it (the Real model page's stacked
    histograms, the Simulation page's Top weight with every rule) read "prob…": it takes one of
    its shorter forms, which fits; the whole title stays on hover."""
    _w, plot = _plot(qtbot, (300, height), "probability density", "step")
    axis = plot.getAxis("left")
    assert axis._shown in ("density", "pdf")
    assert _along(axis) <= axis._room() + 0.5
    assert axis.label.toolTip() == "probability density"


def test_an_html_title_is_whole_on_hover_without_its_tags(qtbot):
    _w, plot = _plot(qtbot, (300, 90), "‖J‖<sub>F</sub> of the row", "step")
    axis = plot.getAxis("left")
    assert axis._shown == "‖J‖<sub>F</sub>"  # (the quantity, not "‖J‖<su…")
    assert axis.label.toolTip() == "‖J‖F of the row"


def test_presentation_type_measures_an_html_title_as_drawn(qtbot):
    """Presentation mode's larger type shrinks a y title to its plot's length: "mean
    ‖J‖<sub>F</sub>" was measured with its tags (as 24 characters, not 8) and drawn at the
    floor; it takes the same size as the same text without tags."""
    import re

    from ui.plots import type_scale

    sizes = {}
    type_scale.set_factor(1.4, [])
    try:
        for text in ("mean ‖J‖<sub>F</sub>", "mean ‖J‖F"):
            _w, plot = _plot(qtbot, (300, 140), text, "step")
            html = plot.getAxis("left").labelString()
            sizes[text] = re.search(r"font-size: ?([0-9.]+)", html).group(1)
    finally:
        type_scale.set_factor(1.0, [])
    assert sizes["mean ‖J‖<sub>F</sub>"] == sizes["mean ‖J‖F"], sizes


@pytest.mark.parametrize(("title", "forms"), [
    ("cross-entropy loss (nats)", ("cross-entropy loss",)),
    (LONG, ("learning-rate sensitivity of the final training loss", "learning-rate sensitivity")),
    # a function's argument is part of the quantity, never an aside to drop
    ("mean ‖diag(p) − ppᵀ‖<sub>F</sub>", ()),
    ("entropy / log(n)", ()),
    ("accuracy (eval. sets) per length", ("accuracy per length", "accuracy")),
])
def test_shorter_forms_drop_asides_not_arguments(title, forms):
    from ui.plots.tidy_axis import shorter_titles

    assert shorter_titles(title) == forms


def test_presentation_prefers_a_shorter_form_at_full_type_to_the_whole_title_shrunk(qtbot):
    """Presentation mode's type shrinks a y title to its room: a title with a shorter form that
    fits at the normal size or more shows that form ("density"), not the whole title in small
    type (it was "probability density" at three quarters of the normal size)."""
    import re

    from PySide6.QtGui import QFontInfo

    from ui.plots import type_scale

    type_scale.set_factor(1.4, [])
    try:
        _w, plot = _plot(qtbot, (300, 110), "probability density", "step")
        axis = plot.getAxis("left")
        axis.resizeEvent()
        drawn = re.search(r"font-size: ?([0-9.]+)px", axis.labelString())
        normal = QFontInfo(axis.label.font()).pixelSize()
        assert axis._shown in ("density", "pdf")
        assert drawn is not None and float(drawn.group(1)) >= normal - 1e-9, (drawn, normal)
    finally:
        type_scale.set_factor(1.0, [])


@pytest.mark.parametrize(("height", "shown"), [(40, "‖∂L/∂W‖"), (115, "‖∂L/∂W‖"), (400, None)])
def test_a_one_word_title_takes_its_shorter_form_only_where_it_does_not_fit(qtbot, height, shown):
    """A title with no space ("‖∂loss/∂W‖", Training's gradient norms) has no lines to wrap
    but has a shorter form: beside a short plot it was never refitted and shrank to the floor
    in presentation mode; beside a tall one it stays whole."""
    _w, plot = _plot(qtbot, (300, height), "‖∂loss/∂W‖", "step")
    axis = plot.getAxis("left")
    assert axis._shown == shown  # (never cut: "‖…" names nothing)
    if height > 40:
        assert _along(axis) <= axis._room() + 0.5
    assert axis.label.toolTip() == "‖∂loss/∂W‖"


@pytest.mark.parametrize(("height", "shown"), [(150, "‖∂L/∂W‖"), (400, None)])
def test_presentation_draws_a_one_word_title_in_whichever_form_is_larger(qtbot, height, shown):
    """Presentation mode: beside a plot whose room fits "‖∂loss/∂W‖" at the normal size but
    "‖∂L/∂W‖" larger (Training's 140 px rows), the shorter form is drawn, larger than the
    normal size (the whole title stood at the normal size beside its neighbours' larger titles);
    beside a tall plot the whole title, at the full larger type."""
    import re

    from PySide6.QtGui import QFontInfo

    from ui.plots import type_scale

    type_scale.set_factor(1.4, [])
    try:
        _w, plot = _plot(qtbot, (300, height), "‖∂loss/∂W‖", "step")
        axis = plot.getAxis("left")
        axis.resizeEvent()
        normal = QFontInfo(axis.label.font()).pixelSize()
        drawn = float(re.search(r"font-size: ?([0-9.]+)px", axis.labelString()).group(1))
        assert axis._shown == shown
        if shown is None:
            assert drawn == pytest.approx(1.4 * normal)
        else:  # (the room: the whole title would not fit at the shorter form's size)
            assert normal * 1.05 < drawn <= 1.4 * normal + 1e-9
            assert axis._drawn_px(None) < drawn
        assert _along(axis) <= axis._room() + 0.5
    finally:
        type_scale.set_factor(1.0, [])
