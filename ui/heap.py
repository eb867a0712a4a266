"""The GUI process's garbage collector, kept off the event loop's back.

A full (generation 2) collection walks every object the process holds: after start-up that is
hundreds of thousands (Qt wrappers, pyqtgraph, numpy, the pages), and a collection that a large
run's allocations trigger mid-run stalled the window for one long block (measured by
``bench/bench_gui.py``: a 310 ms pause 43 s into the d_k 1024, 200,000-trial run on a loaded
machine, next to redraw blocks of tens of ms). Objects alive once the window is up live as long
as the window: they are moved out of the collector's reach (``gc.freeze``), so a later collection
walks only what was made since. Reference counting still frees them; only cycles among them wait
for ``thaw`` at shutdown.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> int:
    """Collect once, then freeze every object alive now; returns how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def thaw() -> None:
    """Give the frozen objects back to the collector (at shutdown: their cycles can go)."""
    gc.unfreeze()
