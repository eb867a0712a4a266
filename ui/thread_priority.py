"""Compute threads give way to the GUI thread for a CPU (Linux: a per-thread nice value).

Why: the event loop's long stalls during a run were the GUI thread waiting, runnable, for a
CPU. Linux shares the CPUs between sessions first (autogroup), then between the threads of a
session; inside ours the worker thread, always runnable, took the CPU from the GUI thread as
often as the other way round. Measured by ``bench/bench_gui.py --sched`` on a 2-core machine at
load 8: of 667 probe intervals late by more than a 33 ms frame, 656 were mostly that wait (31.8 s
of 44.3 s), 10 the GIL, 1 the GUI thread's own work. At a lower priority the worker still gets
every slice the GUI thread does not ask for, so a run on an idle machine is as fast as before.
"""

from __future__ import annotations

import os
import sys
import threading

#: the nice value of a compute thread (0 = the GUI thread's; 19 = the lowest)
WORKER_NICE = 10


def thread_nice() -> int | None:
    """The calling thread's nice value, or None where threads have none of their own."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except OSError:
        return None


def lower_current_thread(nice: int = WORKER_NICE) -> bool:
    """Lower the calling thread's priority to ``nice`` (never raise it); True if done.

    Linux only: there ``PRIO_PROCESS`` with a thread id sets that one thread; on macOS and
    Windows the same call would lower the whole process, GUI included, so nothing is done."""
    current = thread_nice()
    if current is None:
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), max(current, nice))
    except OSError:
        return False
    return True
