"""The GUI process's garbage collector, kept off the event loop's back and out of Qt's locks.

A full (generation 2) collection walks every object the process holds: after start-up that is
hundreds of thousands (Qt wrappers, pyqtgraph, numpy, the pages), and a collection that a large
run's allocations trigger mid-run stalled the window for one long block (measured by
``bench/bench_gui.py``: a 310 ms pause 43 s into the d_k 1024, 200,000-trial run on a loaded
machine, next to redraw blocks of tens of ms). Objects alive once the window is up live as long
as the window: they are moved out of the collector's reach (``gc.freeze``), so a later collection
walks only what was made since. Reference counting still frees them; only cycles among them wait
for ``thaw`` at shutdown.

The collector runs only at the event loop's top level (``collect_at_safe_points``). Python's own
schedule starts a collection at whatever allocation crosses its threshold, and one started inside
Qt's ``QObject::disconnect`` (PySide looks up a Python override of ``disconnectNotify`` there,
with Qt's signal-slot lock held, and that lookup allocates) deleted garbage Qt objects (a closed
window's menus), whose destructors wait for that same lock: the thread deadlocked (seen with gdb
in the GUI tests: ``gc_collect_main`` -> ``QMenu::~QMenu`` -> ``QObject::~QObject`` ->
``QBasicMutex::lockInternal``, under ``QObject::disconnect``; pyqtgraph disconnects on every item
it adds to a plot). Qt's documentation of ``disconnectNotify`` forbids re-entering QObject there.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

#: how often (ms) the GUI thread runs the collection Python's own schedule has made due: a young
#: generation's collection is well under a millisecond, and garbage waits this long at most
COLLECT_EVERY_MS = 50


def freeze_startup_objects() -> int:
    """Collect once, then freeze every object alive now; returns how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def thaw() -> None:
    """Give the frozen objects back to the collector (at shutdown: their cycles can go)."""
    gc.unfreeze()


class _Tracked:
    """An object the cyclic collector tracks, allocated without a free list: allocating one
    counts towards generation 0 (a list or a dict may come from a free list, which does not)."""


def _turn() -> None:
    """A Python call: where CPython 3.12 and later run a collection that an allocation made
    due (3.11 runs it at the allocation itself)."""


def collect_due() -> int | None:
    """Run the collection Python's automatic schedule has made due, here: one tracked
    allocation with the collector on, so Python itself chooses the generation. Its rules are
    not all in ``gc.get_count``: a full collection waits until the objects that reached the
    oldest generation since the last one are a quarter of those already there, and a schedule
    redone from the counts ran one every ten collections of generation 1 (with 1.5 M long-lived
    objects, 4 full collections where Python ran none, ~150 ms each). Returns the generation
    collected, None when none was due."""
    before = [stats["collections"] for stats in gc.get_stats()]
    gc.enable()
    try:
        _Tracked()
        _turn()
    finally:
        gc.disable()
    ran = [g for g, stats in enumerate(gc.get_stats()) if stats["collections"] != before[g]]
    return max(ran) if ran else None


def collect_at_safe_points(owner: QObject, every_ms: int = COLLECT_EVERY_MS) -> QTimer:
    """Turn Python's automatic collections off and run them from a timer of ``owner`` instead,
    at the event loop's top level, where no Qt lock is held (module docstring). Worker threads'
    garbage is collected there too. Returns the timer; ``stop_collecting_at_safe_points`` undoes
    it."""
    gc.disable()
    timer = QTimer(owner)
    timer.setObjectName("lab_gc_safe_points")
    timer.setInterval(every_ms)
    timer.timeout.connect(collect_due)
    timer.start()
    return timer


def stop_collecting_at_safe_points(timer: QTimer) -> None:
    """Python's own schedule again (and the timer gone)."""
    timer.stop()
    timer.deleteLater()
    gc.enable()
