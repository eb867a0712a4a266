"""The time a grid will take, before it runs: ``engine.experiments.estimate`` times a few steps
of each job shape of the grid in a worker process (a generator for ``ui.worker.Worker``: its
thread only waits, the GUI process never imports torch for it); once jobs finish, their own
seconds take over (the runner's estimate)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from engine.experiments.estimate import START_S, Estimate, estimate_job, format_seconds

__all__ = ["START_S", "Estimate", "busy_note", "format_seconds", "plan_estimate", "time_job"]


def time_job(configs: Sequence[Any], cancelled: Callable[[], bool]) -> Iterator[Estimate]:
    """Yield the timing of ``configs`` once (nothing when cancelled; the process is killed)."""
    return estimate_job(configs, cancelled)


def plan_estimate(est: Estimate, spec: Any, workers: int, timed: str) -> tuple[str, str]:
    """("about 1 min (40 s to 2 min)" and the busy machine's note, for the plan line; what it
    rests on, for its tooltip): the estimate with the spread its own timing showed."""
    total = START_S + est.grid_seconds(spec, workers)
    lo, hi = (START_S + s for s in est.grid_range(spec, workers))
    low, high = format_seconds(lo), format_seconds(hi)
    spread = f" ({low} to {high})" if low != high else ""
    line = f"about {format_seconds(total)}{spread}{busy_note()}"
    why = (f"Timed from a few steps of {timed} in a worker process; the range is the grid at "
           "the fastest and the slowest step timed. A busier machine takes longer, and the first "
           "run also starts the worker processes, which load torch.")
    return line, why


def busy_note(load: float | None = None, cores: int | None = None) -> str:
    """"; the machine is busy (load 13 on 2 cores): it may take several times longer" when more
    processes want a core than there are cores (the timing saw a moment of that load only)."""
    import os

    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # not on every platform
            return ""
    cores = cores or os.cpu_count() or 1
    if load <= cores:
        return ""
    return (f"; the machine is busy (load {load:.0f} on {cores} core{'s' if cores > 1 else ''}): "
            "it may take several times longer")
