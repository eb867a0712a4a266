"""Presentation mode's larger type on every plot of every page: plot titles and axis titles are
drawn at ``factor`` times their size while it is on (they are scene text with sizes of their
own, so the application's larger font never reached them: they stayed about 11 px).

pyqtgraph's title labels (``LabelItem.setText``) and axis titles (``AxisItem.labelString``) are
wrapped once, on import: each keeps the size it was given and draws it scaled (no larger than
its plot or axis holds), so a title set again during presentation mode (a redraw) is large too,
and factor 1 draws exactly what it drew before. ``PlotItem.setTitle`` gives the title row the
title's height. Exported figures are drawn at factor 1 (:func:`unscaled`): they never depend on the
window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontInfo, QFontMetricsF

_factor = 1.0
#: the least an axis title is drawn at in presentation mode, of its normal size
AXIS_FLOOR = 0.75
_SIZE = re.compile(r"^\s*([0-9.]+)\s*(px|pt)\s*$")


def factor() -> float:
    return _factor


def _scaled(size: str | None, f: float) -> str | None:
    match = _SIZE.match(size or "")
    if f == 1.0 or match is None:
        return size
    return f"{float(match.group(1)) * f:.4g}{match.group(2)}"


_label_set_text = pg.LabelItem.setText
_axis_label_string = pg.AxisItem.labelString


def _set_text(self: pg.LabelItem, text: str, **args: Any) -> None:
    if "size" in args:
        self._lab_size = args["size"]  # the size asked for (drawn scaled)
    elif not hasattr(self, "_lab_size") and "size" in getattr(self, "opts", {}):
        # a size given to the constructor (a legend's entries: LabelItem(name, size=...)),
        # which pyqtgraph keeps in its options and never passes here: legends stayed 8 pt
        self._lab_size = self.opts["size"]
    base = getattr(self, "_lab_size", None)
    if base is not None:
        args["size"] = _scaled(base, _factor)
    _label_set_text(self, text, **args)


def label_size(axis: pg.AxisItem) -> str | None:
    """The type size ``axis`` draws its title at ("16.8px"), presentation mode's factor
    applied, but no larger than the axis holds along its length (a short plot's y title ran out
    of it); None at the normal size when the title's style sets none (the label's font)."""
    size = axis.labelStyle.get("font-size")
    if _factor == 1.0:
        return size
    size = size or f"{QFontInfo(axis.label.font()).pixelSize()}px"
    f = _factor
    room = axis._room() if hasattr(axis, "_room") else \
        axis.height() if axis.orientation in ("left", "right") else axis.width()
    if room > 0:
        font = QFont(axis.label.font())
        match = _SIZE.match(_scaled(size, f) or "")
        if match is not None and match.group(2) == "px":
            font.setPixelSize(max(1, round(float(match.group(1)))))
        elif match is not None:
            font.setPointSizeF(float(match.group(1)))
        from ui.plots.tidy_axis import MAX_LABEL_LINES, plain_text, split_lines

        # (a title with spaces may take up to MAX_LABEL_LINES lines: ui.plots.tidy_axis)
        # the form the axis shows (a TidyAxis may show a shorter one: "density" where
        # "probability density" does not fit), each form at the largest type it fits
        shown = getattr(axis, "_shown", None) or axis.labelText or " "
        text = split_lines(shown, MAX_LABEL_LINES) \
            if axis.orientation in ("left", "right") else shown
        # (measured as drawn: "mean ‖J‖<sub>F</sub>" counted its tags and took a tiny type)
        # (with what pyqtgraph writes after the title, a space and any units: measured
        # without it, "query position" was drawn 5 px wider than its room and cut "query…")
        drawn = plain_text(_axis_label_string(axis))
        title = plain_text(axis.labelText or "")
        suffix = drawn[drawn.rfind(title) + len(title):] if title in drawn else ""
        lines = [plain_text(line) for line in text.split("<br>")]
        lines[-1] += suffix
        longest = max(QFontMetricsF(font).horizontalAdvance(line) for line in lines)
        if longest > room - 4 > 0:
            # (down to AXIS_FLOOR of the normal size: a tiny plot under presentation mode's
            # taller title has less room than it had; its y title must not run into it)
            f = max(getattr(axis, "type_floor", AXIS_FLOOR), f * (room - 4) / longest)
    return _scaled(size, f)


def label_px(axis: pg.AxisItem) -> float:
    """``label_size`` in pixels (0 when it is not given in pixels)."""
    match = _SIZE.match(label_size(axis) or "")
    return float(match.group(1)) if match is not None and match.group(2) == "px" else 0.0


def _label_string(self: pg.AxisItem) -> str:
    if _factor == 1.0:
        return _axis_label_string(self)
    saved = dict(self.labelStyle)
    try:
        self.labelStyle["font-size"] = label_size(self)
        return _axis_label_string(self)
    finally:
        self.labelStyle = saved


_plot_set_title = pg.PlotItem.setTitle


def _set_title(self: pg.PlotItem, title: str | None = None, **args: Any) -> None:
    """pyqtgraph's title row is 30 px high whatever the title: a title of two lines (or one in
    a slide's or presentation mode's larger type) ran over the top of the data. The row takes
    the title's height (30 px at least, as before)."""
    _plot_set_title(self, title, **args)
    label = self.titleLabel
    room = self.width() - 4
    if title is not None and _factor != 1.0 and room > 0 and label.itemRect().width() > room:
        # presentation mode's larger type, no wider than the plot (down to the normal size)
        base = getattr(label, "_lab_size", None)
        f = max(1.0, _factor * room / label.itemRect().width())
        if base is not None:
            _label_set_text(label, title, size=_scaled(base, f))
    if title is not None:
        height = max(30, math.ceil(self.titleLabel.itemRect().height()))
        self.titleLabel.setMaximumHeight(height)
        self.layout.setRowFixedHeight(0, height)


pg.LabelItem.setText = _set_text
pg.AxisItem.labelString = _label_string
pg.PlotItem.setTitle = _set_title


def set_factor(f: float, scenes: list[Any]) -> None:
    """Draw every title and axis title at ``f`` times its size from now on, redrawing those of
    ``scenes`` (the window's plot scenes) at once."""
    global _factor
    _factor = f
    for scene in scenes:
        refresh_scene(scene)


def refresh_scene(scene: Any) -> None:
    """Redraw the titles and axis titles of ``scene`` at the current factor."""
    for item in scene.items():
        if isinstance(item, pg.AxisItem) and item.labelText:
            item._updateLabel()
            item.picture = None
            item.resizeEvent()
            item.update()
        elif isinstance(item, pg.PlotItem) and item.titleLabel.isVisible() \
                and getattr(item.titleLabel, "_lab_size", None) is not None:
            item.setTitle(item.titleLabel.text)  # (its row follows its height)
        elif isinstance(item, pg.LabelItem) and getattr(item, "_lab_size", None) is not None:
            item.setText(item.text)


@contextmanager
def unscaled() -> Iterator[None]:
    """Factor 1 for the duration (an exported figure, whatever the window shows)."""
    global _factor
    saved, _factor = _factor, 1.0
    try:
        yield
    finally:
        _factor = saved
