"""An exported figure's size and picture come from its export style, never from the window: each
Simulation plot's PNG is the same, pixel for pixel, from a 1280x720 and a 1920x1080 window, and
its SVG has the PNG's size (an SVG of the widget's size was drawn 293x171 by other renderers)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ui.plots import PLOT_IDS


def _pixels(data: bytes) -> np.ndarray:
    from PySide6.QtGui import QImage

    img = QImage.fromData(data, "PNG").convertToFormat(QImage.Format.Format_RGB888)
    a = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine())
    return a[:, : img.width() * 3].reshape(img.height(), img.width(), 3).copy()


def _wait(app, ok, timeout_s: float = 60.0) -> None:
    import time

    end = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < end, "the results did not complete in time"
        app.processEvents()
        time.sleep(0.005)


def _exports(app, size: tuple[int, int]) -> dict[str, tuple[np.ndarray, bytes]]:
    """Every Simulation plot's PNG (as pixels) and SVG, exported from a window of ``size``."""
    from ui.window.main_window import MainWindow

    w = MainWindow(theme="light", restore=False, persist=False)
    w.resize(*size)
    w.show()
    try:
        w.apply_config({"trials": 600, "seed": 3, "scalings": ["none", "sqrt"]})
        gen = w.worker.generation

        def done() -> bool:
            latest = w.worker.peek_latest()
            return (latest is not None and latest.generation == gen and latest.done
                    and w.state is latest.item and w.state.complete)

        _wait(app, done)
        assert (w.width(), w.height()) == size
        return {pid: (_pixels(p.png_bytes()), p.svg_bytes()) for pid, p in w.page.panels.items()}
    finally:
        w.shutdown()
        w.close()
        w.deleteLater()
        app.processEvents()


@pytest.fixture(scope="module")
def both(qapp):
    """(exports from a 1280x720 window, exports from a 1920x1080 window)"""
    return _exports(qapp, (1280, 720)), _exports(qapp, (1920, 1080))


@pytest.mark.parametrize("plot_id", PLOT_IDS)
@pytest.mark.slow
def test_png_is_the_same_from_a_small_and_a_large_window(both, plot_id):
    from ui.plots import PANEL_CLASSES

    small, large = both
    (a, svg_a), (b, _svg_b) = small[plot_id], large[plot_id]
    want = next(c for c in PANEL_CLASSES if c.plot_id == plot_id).screen_figure_size
    assert (a.shape[1], a.shape[0]) == tuple(want)
    assert a.shape == b.shape
    assert np.array_equal(a, b), f"{plot_id}: {np.mean(a != b):.2%} of the values differ"
    head = svg_a[:2000].decode("utf-8", "replace")
    width = re.search(r'<svg[^>]*\swidth="([\d.]+)', head)
    height = re.search(r'<svg[^>]*\sheight="([\d.]+)', head)
    assert width and height and (round(float(width.group(1))), round(float(height.group(1)))) \
        == tuple(want)
