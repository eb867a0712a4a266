"""The modules of pages not built yet, imported in a background thread once the window is up: the
first opening of the Real model tab then builds its widgets only (its engine.probe modules and
panels took about half a second to import, the window frozen meanwhile).

Importing only defines classes and functions (no widget is made off the GUI thread); a module
that fails here is imported again when its page is built, and that page shows why."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable

#: imported in the background after start-up (the heavy pages without torch at import)
PREIMPORT = ("ui.pages.real_model.page",)
#: after the window is up: the first paint and the first run's start come first
PREIMPORT_DELAY_MS = 1500
#: how often a preimport waiting for the window to be idle asks again, and how long it waits at
#: most: a run that streams on would leave the first opening of the Real model tab to import on
#: the GUI thread (0.2 s of it, a 0.5 s stall), worse than one stall of the run
IDLE_RECHECK_MS = 500
IDLE_WAIT_MAX_MS = 10_000


def import_all(modules: Iterable[str]) -> None:
    """Import ``modules`` (the background thread's job); a failure is left for the page."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # (the page's own import says why, in the window)
            pass


def preimport_later(modules: Iterable[str] = PREIMPORT, delay_ms: int = PREIMPORT_DELAY_MS,
                    idle: Callable[[], bool] | None = None) -> None:
    """Start a daemon thread that imports ``modules`` ``delay_ms`` after the event loop runs,
    and, given ``idle``, not before it says the window is idle (asked every ``IDLE_RECHECK_MS``,
    for ``IDLE_WAIT_MAX_MS`` at most): an import holds the interpreter for long stretches, and
    one in the middle of a streaming run stalled the window's event loop for 100 ms
    (bench/bench_gui.py --sched: "GIL/lock")."""
    from PySide6.QtCore import QTimer

    names = tuple(modules)
    waited = [0]

    def start() -> None:
        if idle is not None and not idle() and waited[0] < IDLE_WAIT_MAX_MS:
            waited[0] += IDLE_RECHECK_MS
            QTimer.singleShot(IDLE_RECHECK_MS, start)
            return
        threading.Thread(target=import_all, args=(names,), name="lab-preimport",
                         daemon=True).start()

    QTimer.singleShot(delay_ms, start)
