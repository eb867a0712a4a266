"""The generic worker: latest-slot coalescing, generations, stop, errors, and a soak test."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

from engine.config import SimulationConfig
from engine.errors import Cancelled, ConfigError
from engine.simulate import simulate
from ui.thread_priority import WORKER_NICE
from ui.worker import Worker


def counting(n: int, pause: float = 0.0):
    def factory(cancelled):
        for i in range(n):
            if cancelled():
                raise Cancelled
            if pause:
                time.sleep(pause)
            yield i

    return factory


@pytest.fixture
def worker(qtbot):
    from PySide6.QtCore import QObject

    owner = QObject()
    w = Worker(owner, poll_ms=5)
    yield w
    w.stop()
    assert w.join(5.0)
    owner.deleteLater()


def test_latest_item_and_finished_signal(qtbot, worker):
    with qtbot.waitSignal(worker.finished, timeout=5000) as sig:
        gen = worker.start(counting(50))
    assert sig.args == [gen]
    latest = worker.take_latest()
    assert latest is not None and latest.done and latest.item == 49 and latest.generation == gen
    assert worker.take_latest() is None  # taken once


def test_engine_generator_runs_off_the_gui_thread(qtbot, worker):
    threads = []

    def factory(cancelled):
        threads.append(threading.current_thread())
        yield from simulate(SimulationConfig(trials=300), cancelled)

    with qtbot.waitSignal(worker.finished, timeout=10_000):
        worker.start(factory)
    assert threads and threads[0] is not threading.main_thread()
    assert worker.take_latest().item.done


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads have their own nice "
                    "value on Linux only (elsewhere the call would lower the whole process)")
def test_worker_thread_runs_below_the_gui_thread(qtbot, worker):
    """The compute thread gives way to the GUI thread for a CPU (ui/thread_priority.py): its
    nice value is raised to WORKER_NICE, the GUI thread's stays where it was."""
    def nice_of_this_thread() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    gui_before = nice_of_this_thread()

    def factory(cancelled):
        yield nice_of_this_thread()

    with qtbot.waitSignal(worker.finished, timeout=5000):
        worker.start(factory)
    # lowered to WORKER_NICE, never raised (a test run already under nice 19 stays there)
    assert worker.take_latest().item == max(gui_before, WORKER_NICE)
    assert WORKER_NICE > 0
    assert nice_of_this_thread() == gui_before  # the GUI thread (and the process) untouched


def test_new_start_drops_the_old_generation(qtbot, worker):
    gate = threading.Event()

    def slow(cancelled):
        yield "old"
        gate.wait(5)
        if cancelled():
            raise Cancelled
        yield "old-late"

    g1 = worker.start(slow)
    qtbot.waitUntil(lambda: worker.peek_latest() is not None)
    with qtbot.waitSignal(worker.finished, timeout=5000):
        g2 = worker.start(counting(3))
    gate.set()
    assert g2 == g1 + 1
    latest = worker.take_latest()
    assert latest.generation == g2 and latest.item == 2
    assert worker.join(5.0)
    assert worker.peek_latest().generation == g2  # the old thread never overwrote the slot


def test_stop_takes_effect_at_the_next_check(qtbot, worker):
    with qtbot.waitSignal(worker.cancelled, timeout=5000):
        worker.start(counting(10_000, pause=0.001))
        qtbot.waitUntil(lambda: worker.peek_latest() is not None)
        t0 = time.perf_counter()
        worker.stop()
    assert worker.join(2.0)
    assert time.perf_counter() - t0 < 2.0
    assert not worker.is_running()
    assert worker.peek_latest() is None or not worker.peek_latest().done


def test_error_is_reported_not_raised(qtbot, worker):
    def bad(cancelled):
        yield 1
        raise ConfigError("d_k", "boom")

    with qtbot.waitSignal(worker.error, timeout=5000) as sig:
        gen = worker.start(bad)
    assert sig.args[0] == gen
    assert isinstance(sig.args[1], ConfigError) and sig.args[1].field == "d_k"


@pytest.mark.slow  # 15-90 s: 12,000 snapshots through the real window
def test_soak_10000_emissions_through_the_window(qtbot, window):
    """10,000+ snapshots through the window's real path (worker slot -> redraw timer -> page)
    without a crash, and no growing memory trend (tracemalloc, after a warm-up). Nothing here
    depends on how fast the machine is: every 500 snapshots the producer waits until the window
    has taken the latest one (so the GUI really draws while they stream), and memory is read
    every 1,000 snapshots, not every so many seconds."""
    snaps = list(simulate(SimulationConfig(trials=3000, scalings=("none", "sqrt", "dk"))))
    from ui.simulation_run import LabState

    states = [LabState(s.config, s, (), 0, "simulation") for s in snaps]
    n, handshake_every, check_every = 12_000, 500, 1_000
    checkpoints: list[int] = []
    handshakes = 0

    def factory(cancelled):
        nonlocal handshakes
        for i in range(n):
            if cancelled():
                raise Cancelled
            item = states[(i // 4) % len(states)]  # a different snapshot every 4
            yield item
            if (i + 1) % handshake_every == 0:  # the window takes this very item before more
                while window.state is not item and not cancelled():
                    time.sleep(0.001)
                handshakes += 1
            if (i + 1) % check_every == 0:
                gc.collect()
                checkpoints.append(tracemalloc.get_traced_memory()[0])

    window.worker.produced = 0
    drawn_before = window.redraw_count
    tracemalloc.start()
    try:
        window.worker.start(factory)
        # (a guard against a hang, not a time the test needs)
        qtbot.waitUntil(lambda: not window.worker.is_running(), timeout=600_000)
    finally:
        tracemalloc.stop()
    assert window.worker.produced >= n
    assert handshakes == n // handshake_every
    assert window.redraw_count - drawn_before > 5  # the page really redrew while they streamed
    assert len(checkpoints) == n // check_every
    # compare the last third with the middle third (the first holds warm-up allocations)
    k = len(checkpoints) // 3
    middle, last = np.median(checkpoints[k:2 * k]), np.median(checkpoints[2 * k:])
    assert last < middle + 2_000_000, (middle, last)
