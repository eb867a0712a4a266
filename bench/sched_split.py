"""Where a late probe's time went, from the kernel's per-thread accounting (Linux only).

``/proc/self/task/<tid>/schedstat`` holds, for each thread, the CPU time it ran and the time it
waited runnable for a CPU (the run queue), both in ns. Between two probes of the GUI thread the
wall time is then: its own CPU + its run-queue wait (the machine's load: other processes, or the
worker on the other core) + the time it slept. It sleeps while idle (up to the probe's period)
and while it waits for the GIL; so the sleep beyond the period, in a late interval, is the GIL
(the worker thread holding it) or a lock, never the load. The worker threads' CPU and run-queue
wait over the same interval are kept too.
"""

from __future__ import annotations

import os
import threading

import numpy as np


def _stat(tid: int) -> tuple[int, int]:
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            run, wait, _n = f.read().split()
        return int(run), int(wait)
    except (OSError, ValueError):
        return 0, 0


def available() -> bool:
    return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat")


class SchedSplit:
    """Call :meth:`sample` in each probe; :meth:`report` splits the late intervals."""

    def __init__(self, worker_prefix: str = "lab-worker") -> None:
        self.gui = threading.get_native_id()
        self.prefix = worker_prefix
        self.rows: list[tuple[float, ...]] = []  #: (wall, gui cpu, gui rq, worker cpu, worker rq) s
        self._last: tuple[float, ...] | None = None
        self._worker_done = [0, 0]  #: of worker threads that ended (their counts stay summed)
        self._seen: dict[int, tuple[int, int]] = {}
        self.phases: list[str] = []  #: the run's phase at the end of each interval

    def _workers(self) -> tuple[int, int]:
        run = wait = 0
        alive = {t.native_id for t in threading.enumerate()
                 if t.name.startswith(self.prefix) and t.native_id is not None}
        for tid in list(self._seen):
            if tid not in alive:  # ended: keep its last counts
                r, w = self._seen.pop(tid)
                self._worker_done[0] += r
                self._worker_done[1] += w
        for tid in alive:
            r, w = _stat(tid)
            if r or w:
                self._seen[tid] = (r, w)
            run += r
            wait += w
        return run + self._worker_done[0], wait + self._worker_done[1]

    def sample(self, now: float, phase: str = "") -> None:
        g_run, g_wait = _stat(self.gui)
        w_run, w_wait = self._workers()
        cur = (now, g_run / 1e9, g_wait / 1e9, w_run / 1e9, w_wait / 1e9)
        if self._last is not None:
            self.rows.append(tuple(a - b for a, b in zip(cur, self._last, strict=True)))
            self.phases.append(phase)
        self._last = cur

    def report(self, period_s: float, frame_ms: float, skip: int = 5) -> None:
        if len(self.rows) <= skip:
            return
        a = np.array(self.rows[skip:]) * 1000  # ms
        wall, gcpu, grq, wcpu, wrq = a.T
        slept = wall - gcpu - grq
        late = wall - period_s * 1000 > frame_ms
        print(f"\nscheduler split of the {late.sum()} probe intervals late by more than "
              f"{frame_ms:.0f} ms (of {len(wall)}); ms, summed over them / worst interval:")
        if not late.any():
            return
        gil = np.maximum(slept - period_s * 1000, 0)
        parts = (("GUI thread's CPU", gcpu), ("GUI waiting for a CPU (load)", grq),
                 ("GUI asleep beyond the period (GIL/lock)", gil),
                 ("worker's CPU", wcpu), ("worker waiting for a CPU", wrq))
        worst = int(np.argmax(np.where(late, wall, -1)))
        for name, v in parts:
            print(f"  {name:42s} {v[late].sum():9.0f}   {v[worst]:7.1f}")
        print(f"  {'wall (the intervals)':42s} {wall[late].sum():9.0f}   {wall[worst]:7.1f}")
        # which cause dominates each late interval
        cause = np.argmax(np.stack([gcpu, grq, gil]), axis=0)[late]
        names = ("GUI CPU", "CPU wait (load)", "GIL/lock")
        print("  late intervals by dominant cause: " + ", ".join(
            f"{names[i]} {int((cause == i).sum())}" for i in range(3)))
        gil_late = late & (np.argmax(np.stack([gcpu, grq, gil]), axis=0) == 2)
        if gil_late.any():
            print(f"  in the GIL/lock ones the worker ran {wcpu[gil_late].sum():.0f} ms and waited "
                  f"for a CPU {wrq[gil_late].sum():.0f} ms (a worker holding the GIL while it "
                  "waits for a CPU is the load again)")
        phases = np.array(self.phases[skip:])
        for phase in sorted(set(phases[late])):
            mask = phases == phase
            print(f"  {phase or '?'}: {int((late & mask).sum())} late of {int(mask.sum())} "
                  f"intervals; max lag {wall[mask].max() - period_s * 1000:.1f} ms")
