"""A y axis's title on more lines widens the axis, which narrows the legend's columns, which moves
the title again: the two must settle. Where the legend read the axis's width of the last layout
pass, a figure of the Score inspector's weights (log axis, three legend entries) swapped between
a two-line and a three-line title for ever and its export never finished. A fuse stops the swap
after FUSE changes so that such a bug fails here instead of hanging the suite."""

from __future__ import annotations

import pytest

from tests.ui.pages.test_inspector_export import _close, _inspector_window
from ui.export.plot_files import preset_bytes
from ui.plots import tidy_axis

#: changes of a title's lines within one figure export that count as a loop
FUSE = 40


@pytest.fixture
def line_changes(monkeypatch):
    changes: list[tuple[str, int, int]] = []
    fit = tidy_axis.TidyAxis._fit_label

    def counted(self) -> None:
        if len(changes) >= FUSE:
            return  # (frozen: the layout settles and the test reports the loop)
        was = self._lines
        fit(self)
        if self._lines != was:
            changes.append((self.labelText, was, self._lines))

    monkeypatch.setattr(tidy_axis.TidyAxis, "_fit_label", counted)
    return changes


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_inspector_weights_figures_settle(qapp, line_changes, size):
    w, page = _inspector_window(qapp, size)
    try:
        weights = next(p for p in page.panels() if p.plot_id == "inspector_weights")
        for style in ("slide", "paper"):
            line_changes.clear()
            assert preset_bytes(weights, style)  # (slide: PNG, paper: SVG)
            assert len(line_changes) < 8, (style, line_changes[:8])
        line_changes.clear()
        assert weights.png_bytes()[:4] == b"\x89PNG"
        assert len(line_changes) < 8, line_changes[:8]
    finally:
        _close(w, qapp)
