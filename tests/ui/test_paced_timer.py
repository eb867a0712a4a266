"""The redraw timer lets what fell due during a long block go before a late tick's work, runs
an on-time tick's work at once, and tells late from on time after a stall (Qt's own next due
time). Real timers and a GUI thread held busy with sleep; no timing is asserted beyond order."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer

from ui.paced_timer import LATE_MS, PacedTimer

LONG_MS = 60_000  #: an interval whose timer never fires during a test


def _other_timer(order: list[str], ms: int) -> QTimer:
    other = QTimer()
    other.setSingleShot(True)
    other.setTimerType(Qt.TimerType.PreciseTimer)
    other.timeout.connect(lambda: order.append("other"))
    other.start(ms)
    return other


def test_a_plain_timer_that_fell_due_first_runs_first(qtbot):
    """Why the pacing: Qt fires the timers that fell due during a block in the order they fell
    due, so a plain redraw tick runs before a timer due 10 ms after it."""
    order: list[str] = []
    tick = QTimer()
    tick.setTimerType(Qt.TimerType.PreciseTimer)
    tick.timeout.connect(lambda: order.append("work"))
    tick.start(20)
    other = _other_timer(order, 30)
    time.sleep(0.060)  # the GUI thread busy past both
    qtbot.waitUntil(lambda: "work" in order and "other" in order, timeout=2000)
    tick.stop()
    assert order[:2] == ["work", "other"]
    del other


def test_a_late_tick_lets_what_fell_due_meanwhile_go_first(qtbot):
    order: list[str] = []
    paced = PacedTimer(20)
    paced.paced_timeout.connect(lambda: order.append("work"))
    paced.start()
    other = _other_timer(order, 30)
    time.sleep(0.060)  # the GUI thread busy past both (a long paint)
    qtbot.waitUntil(lambda: "work" in order and "other" in order, timeout=2000)
    paced.stop()
    assert order[:2] == ["other", "work"]
    assert paced.deferred >= 1
    del other


def test_an_on_time_tick_works_at_once():
    done: list[int] = []
    paced = PacedTimer(LONG_MS)
    paced.paced_timeout.connect(lambda: done.append(1))
    paced.start()
    paced.timeout.emit()  # (due in a minute: early, so on time)
    assert done == [1] and paced.deferred == 0
    paced.stop()


def test_late_ticks_while_one_waits_add_no_work_and_a_stop_drops_it(qtbot):
    done: list[int] = []
    paced = PacedTimer(LONG_MS)
    paced.paced_timeout.connect(lambda: done.append(1))
    paced.start()
    paced._due = time.perf_counter() - 2 * LATE_MS / 1000  # the next firing is late
    paced.timeout.emit()
    paced._due = time.perf_counter() - 2 * LATE_MS / 1000
    paced.timeout.emit()
    assert done == [] and paced.deferred == 1  # (left to the next turn, once)
    qtbot.waitUntil(lambda: done == [1], timeout=2000)
    qtbot.wait(20)
    assert done == [1]
    paced._due = time.perf_counter() - 2 * LATE_MS / 1000
    paced.timeout.emit()
    paced.stop()  # (the window closing)
    qtbot.wait(20)
    assert done == [1]


def test_after_a_stall_the_next_ticks_are_on_time_again(qtbot):
    """Qt's next due time after a late firing is one interval from then: a pacer that kept
    counting intervals from the old due time would find every later tick late."""
    done: list[float] = []
    paced = PacedTimer(25)
    paced.paced_timeout.connect(lambda: done.append(time.perf_counter()))
    paced.start()
    time.sleep(0.120)  # one stall of several intervals
    qtbot.waitUntil(lambda: len(done) >= 12, timeout=10_000)
    paced.stop()
    # the stall's tick, and on a loaded machine a few more (never most of them)
    assert 1 <= paced.deferred <= len(done) // 3
