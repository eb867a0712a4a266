"""The Score inspector's plots export like every page's: PNG, SVG, CSV, slide and paper from
their ⋯ menu, at the export style's size whatever the window's (the same picture from a 1280x720
and a 1920x1080 window), nothing non-finite, and a figure File -> Open reopens into the page."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from ui.export.plot_files import PRESETS, preset_bytes
from ui.plots.base import EXPORT_ACTIONS
from ui.plots.figure_metadata import read_figure_metadata

#: a saturated row (weights of 4e-322 and exact zeros: -inf on a log axis without its floor),
#: a sink and a cap
SCORES, SCALE, SOFTCAP, SINK = "1500, 760, 0, -2*4", "1", "1000000", "1"


def _pixels(data: bytes) -> np.ndarray:
    from PySide6.QtGui import QImage

    img = QImage.fromData(data, "PNG").convertToFormat(QImage.Format.Format_RGB888)
    a = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine())
    return a[:, : img.width() * 3].reshape(img.height(), img.width(), 3).copy()


def _svg_size(svg: bytes) -> tuple[int, int]:
    head = svg[:2000].decode("utf-8", "replace")
    width = re.search(r'<svg[^>]*\swidth="([\d.]+)', head)
    height = re.search(r'<svg[^>]*\sheight="([\d.]+)', head)
    assert width and height
    return round(float(width.group(1))), round(float(height.group(1)))


def _inspector_window(qapp, size: tuple[int, int]):
    from ui.window.main_window import MainWindow

    w = MainWindow(theme="light", restore=False, persist=False)
    w.resize(*size)
    w.show()
    assert w.open_page_titled("Score inspector")
    page = w.tabs.currentWidget()
    for edit, text in ((page.scores_edit, SCORES), (page.scale_edit, SCALE),
                       (page.softcap_edit, SOFTCAP), (page.sink_edit, SINK)):
        edit.setText(text)
    assert page.refresh()
    page.log_weights.setChecked(True)  # the log axis travels with the figure
    qapp.processEvents()
    return w, page


def _close(w, qapp) -> None:
    w.shutdown()
    w.close()
    w.deleteLater()
    qapp.processEvents()


def _exports(qapp, size: tuple[int, int]) -> dict[str, dict[str, bytes]]:
    w, page = _inspector_window(qapp, size)
    try:
        assert (w.width(), w.height()) == size
        return {p.plot_id: {"png": p.png_bytes(), "svg": p.svg_bytes(),
                            "csv": p.csv_text().encode(), "slide": preset_bytes(p, "slide"),
                            "paper": preset_bytes(p, "paper")} for p in page.panels()}
    finally:
        _close(w, qapp)


@pytest.fixture(scope="module")
def both(qapp):
    """(exports from a 1280x720 window, exports from a 1920x1080 window)"""
    return _exports(qapp, (1280, 720)), _exports(qapp, (1920, 1080))


@pytest.mark.parametrize("plot_id", ["inspector_weights", "inspector_jacobian", "inspector_gauge"])
def test_every_export_is_the_same_from_a_small_and_a_large_window(both, plot_id):
    from ui.pages.inspector.views import PANEL_CLASSES

    small, large = (side[plot_id] for side in both)
    screen = next(c for c in PANEL_CLASSES if c.plot_id == plot_id).screen_figure_size
    for kind, want in (("png", screen), ("slide", PRESETS["slide"]["size"])):
        a, b = _pixels(small[kind]), _pixels(large[kind])
        assert (a.shape[1], a.shape[0]) == tuple(want), kind
        assert np.array_equal(a, b), f"{plot_id} {kind}: {np.mean(a != b):.2%} of values differ"
    assert _svg_size(small["svg"]) == _svg_size(large["svg"]) == tuple(screen)
    assert _svg_size(small["paper"]) == _svg_size(large["paper"]) == PRESETS["paper"]["size"]
    assert small["csv"] == large["csv"] and small["csv"].count(b"\n") >= 2
    for kind in ("svg", "paper", "csv"):
        text = small[kind].decode("utf-8").lower()
        assert not re.search(r"\b(nan|inf|-inf)\b", text), (plot_id, kind)


def test_the_figures_carry_the_inputs_and_view_and_the_csv_the_drawn_numbers(both, tmp_path):
    small, _large = both
    for plot_id, files in small.items():
        for kind in ("png", "svg"):
            path = tmp_path / f"{plot_id}.{kind}"
            path.write_bytes(files[kind])
            meta = read_figure_metadata(path)
            assert meta["page"] == "inspector" and meta["plot"] == plot_id
            assert meta["inspector"] == {"scores": SCORES, "scale": SCALE, "softcap": SOFTCAP,
                                         "sink": SINK, "sigmoid": False}
    # each figure titled with what it shows, whole ("Σp < 1" is text, not the start of a tag)
    assert "p &lt; 1)" in small["inspector_jacobian"]["svg"].decode()  # (Σ: another font)
    assert "against its maximum 0.25" in small["inspector_gauge"]["svg"].decode()
    assert "the sink takes" in small["inspector_weights"]["svg"].decode()
    weights = small["inspector_weights"]["csv"].decode().splitlines()
    assert weights[0].split(",")[:4] == ["index", "score", "weight", "p_one_minus_p"]
    assert "log10_weight_drawn" in weights[0] and len(weights) == 1 + 7
    drawn = [float(line.split(",")[4]) for line in weights[1:]]
    assert all(math.isfinite(v) for v in drawn) and min(drawn) == -323  # on the floor, not -inf
    gauge = small["inspector_gauge"]["csv"].decode().splitlines()
    assert gauge[0].startswith("largest_abs_jacobian_entry") and len(gauge) == 2
    assert len(small["inspector_jacobian"]["csv"].decode().splitlines()) == 1 + 7


def test_each_plot_has_the_export_menu_of_every_page(qtbot):
    from ui.pages.inspector.page import InspectorPage

    page = InspectorPage()
    qtbot.addWidget(page)
    asked = []
    page.export_panel_dialog = lambda panel, kind: asked.append((panel, kind))  # (no dialog)
    for panel in page.panels():
        panel.export_requested.disconnect()
        panel.export_requested.connect(page.export_panel_dialog)
        texts = [a.text() for a in panel.export_menu(page).actions() if a.text()]
        assert texts == [text for text, _kind in EXPORT_ACTIONS]
        for action in panel.export_menu(page).actions():
            action.trigger()
    assert asked == [(p, kind) for p in page.panels() for _text, kind in EXPORT_ACTIONS]


@pytest.mark.parametrize("kind", ["png", "svg"])
def test_file_open_of_an_inspector_figure_restores_its_inputs_and_view(qapp, tmp_path, kind):
    w, page = _inspector_window(qapp, (1280, 720))
    try:
        path = tmp_path / f"weights.{kind}"
        path.write_bytes(page.weights_plot.png_bytes() if kind == "png"
                         else page.weights_plot.svg_bytes())
        page.scores_edit.setText("1, 2")
        page.sink_edit.setText("")
        page.log_weights.setChecked(False)
        assert page.refresh()
        w.open_page_titled("Training")
        w.open_session(path)
        assert w.tabs.currentWidget() is page
        assert (page.scores_edit.text(), page.scale_edit.text(), page.softcap_edit.text(),
                page.sink_edit.text()) == (SCORES, SCALE, SOFTCAP, SINK)
        assert page.result.scores.size == 7 and page.result.sink == 1.0
        assert page.log_weights.isChecked()
        assert f"Opened weights.{kind}: the softmax weights figure: 7 scores" in w.last_message
        assert "log axis on" in w.last_message
        # bad scores in a figure: one line naming them, and nothing changes
        meta = read_figure_metadata(path)
        meta["inspector"]["scores"] = "1, x"
        from ui.figure_restore import open_figure

        with pytest.raises(ValueError, match="scores"):
            open_figure(w, path, meta)
        assert page.scores_edit.text() == SCORES
    finally:
        _close(w, qapp)
