"""Page modules imported in a background thread, so that the window never waits for them:

- after start-up, once the window is idle (``preimport_later``): the first opening of the Real
  model tab then builds its widgets only (its engine.probe modules and panels took about half a
  second to import, the window frozen meanwhile);
- when a tab whose module is not imported yet is clicked (``import_then``): the tab shows its
  "Loading…" placeholder while the module imports, and the page is built on the GUI thread after.

Importing only defines classes and functions (no widget is made off the GUI thread); a module
that fails here is imported again when its page is built, and that page shows why."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, QTimer

#: imported in the background after start-up (the heavy pages without torch at import)
PREIMPORT = ("ui.pages.real_model.page",)
#: after the window is up: the first paint and the first run's start come first
PREIMPORT_DELAY_MS = 1500
#: how often a preimport waiting for the window to be idle asks again. It waits for as long as a
#: run streams: an import in the middle of one stalled the event loop for 100 ms, and a tab
#: clicked before the import happened imports its module in the background then (``import_then``)
IDLE_RECHECK_MS = 500


def import_all(modules: Iterable[str]) -> None:
    """Import ``modules`` (the background thread's job); a failure is left for the page."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # (the page's own import says why, in the window)
            pass


def is_imported(name: str) -> bool:
    """``name`` is imported and done: not absent, nor half-way through its import in another
    thread (the test Python's own import makes before it waits for that thread)."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def preimport_later(modules: Iterable[str] = PREIMPORT, delay_ms: int = PREIMPORT_DELAY_MS,
                    idle: Callable[[], bool] | None = None) -> None:
    """Start a daemon thread that imports ``modules`` ``delay_ms`` after the event loop runs,
    and, given ``idle``, not before it says the window is idle (asked every
    ``IDLE_RECHECK_MS``): an import holds the interpreter for long stretches, and one in the
    middle of a streaming run stalled the window's event loop for 100 ms (bench/bench_gui.py
    --sched: "GIL/lock")."""
    names = tuple(modules)

    def start() -> None:
        if idle is not None and not idle():
            QTimer.singleShot(IDLE_RECHECK_MS, start)
            return
        threading.Thread(target=import_all, args=(names,), name="lab-preimport",
                         daemon=True).start()

    QTimer.singleShot(delay_ms, start)


#: how often the GUI thread looks whether a background import (``import_then``) is done
IMPORT_POLL_MS = 20


def import_then(name: str, then: Callable[[], None], owner: QObject) -> QTimer:
    """Import ``name`` in a daemon thread, then call ``then`` on the GUI thread (call this from
    it). A failed import calls ``then`` too: the page's own import then says why. The GUI
    thread looks every ``IMPORT_POLL_MS`` with a timer that ``owner`` owns, so nothing is called
    once ``owner`` is gone; the timer is returned (stopping it forgets the import)."""
    finished = threading.Event()

    def work() -> None:
        try:
            import_all((name,))
        finally:
            finished.set()

    poll = QTimer(owner)
    poll.setInterval(IMPORT_POLL_MS)

    def look() -> None:
        if finished.is_set():
            poll.stop()
            poll.deleteLater()
            then()

    poll.timeout.connect(look)
    poll.start()
    threading.Thread(target=work, name="lab-import", daemon=True).start()
    return poll
