"""The time a grid will take, before it runs: ``engine.experiments.estimate`` times a few steps
of the grid's costliest job in a worker process (a generator for ``ui.worker.Worker``: its
thread only waits, the GUI process never imports torch for it); once jobs finish, their own
seconds take over (the runner's estimate)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from engine.experiments.estimate import START_S, Estimate, estimate_job, format_seconds

__all__ = ["START_S", "Estimate", "format_seconds", "time_job"]


def time_job(config: Any, cancelled: Callable[[], bool]) -> Iterator[Estimate]:
    """Yield the timing of ``config`` once (nothing when cancelled; the process is killed)."""
    return estimate_job(config, cancelled)
