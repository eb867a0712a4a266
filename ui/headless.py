"""A QApplication for offscreen rendering (``--figures``, the Training figures), the filter
that keeps known-harmless Qt warnings off stderr, and settle_layout (paint once before an
export), offscreen_panel (the show / close of one panel for a figure). No page, plot or window
imports here, so any layer may use it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: harmless messages of the offscreen platform (e.g. under --screenshot or in CI)
_QUIET = ("This plugin does not support propagateSizeHints()",)


def install_message_filter() -> None:
    """Drop known-harmless Qt warnings; everything else still reaches stderr."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(_mode: Any, _context: Any, message: str) -> None:
        if message not in _QUIET:
            sys.stderr.write(message + "\n")

    qInstallMessageHandler(handler)


def ensure_app() -> Any:
    """The QApplication, created headless when there is no display."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:  # our own app (the CLI): keep stderr clean; a host app keeps its handler
        install_message_filter()
        app = QApplication([])
    return app


def settle_layout(panel: Any) -> None:
    """Paint once before exporting: pyqtgraph widens an axis for its tick labels only when it
    paints, and a figure written before that had its axis title over the tick labels."""
    app = ensure_app()
    app.processEvents()
    panel.glw.grab()
    app.processEvents()


@contextmanager
def offscreen_panel(make: Callable[[], Any], size: tuple[int, int], theme: str = "light"
                    ) -> Iterator[Any]:
    """The panel ``make()`` builds (after the QApplication exists), sized, themed and shown without a window for the body; closed and deleted after
    (a pyqtgraph widget alive at interpreter exit crashes). The one set-up of every figure writer."""
    from PySide6.QtCore import Qt

    from ui.theme import THEMES

    app = ensure_app()
    panel = make()
    try:
        panel.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        panel.resize(*size)
        panel.apply_theme(THEMES[theme])
        panel.show()
        app.processEvents()
        yield panel
    finally:
        panel.close()
        panel.deleteLater()
        app.processEvents()
