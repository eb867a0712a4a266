"""The modules of pages not built yet, imported in a background thread once the window is up: the
first opening of the Real model tab then builds its widgets only (its engine.probe modules and
panels took about half a second to import, the window frozen meanwhile).

Importing only defines classes and functions (no widget is made off the GUI thread); a module
that fails here is imported again when its page is built, and that page shows why."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable

#: imported in the background after start-up (the heavy pages without torch at import)
PREIMPORT = ("ui.pages.real_model.page",)
#: after the window is up: the first paint and the first run's start come first
PREIMPORT_DELAY_MS = 1500


def import_all(modules: Iterable[str]) -> None:
    """Import ``modules`` (the background thread's job); a failure is left for the page."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # (the page's own import says why, in the window)
            pass


def preimport_later(modules: Iterable[str] = PREIMPORT, delay_ms: int = PREIMPORT_DELAY_MS) -> None:
    """Start a daemon thread that imports ``modules`` ``delay_ms`` after the event loop runs."""
    from PySide6.QtCore import QTimer

    names = tuple(modules)
    QTimer.singleShot(delay_ms, lambda: threading.Thread(
        target=import_all, args=(names,), name="lab-preimport", daemon=True).start())
