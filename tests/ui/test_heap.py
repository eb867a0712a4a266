"""Once the window is up, its objects leave the garbage collector's reach: a full collection
that a large run triggers walks only what was made since (it stalled the window for a block of
hundreds of ms before), and thaw gives them back at shutdown."""

from __future__ import annotations

import gc

from ui.heap import freeze_startup_objects, thaw


def test_freeze_takes_every_live_object_out_of_a_full_collection() -> None:
    before = len(gc.get_objects())
    try:
        frozen = freeze_startup_objects()
        # (a frozen object that another thread frees leaves the count: a CI run saw 2 fewer)
        assert 0 <= frozen - gc.get_freeze_count() <= 100 and frozen > before // 2
        # what a full collection walks now: only objects made after the freeze
        made_after = [object() for _ in range(10)]  # (untracked: not counted)
        tracked = [[i] for i in range(1000)]
        walked = len(gc.get_objects())
        assert walked < frozen // 10 and walked >= len(tracked)
        del made_after, tracked
    finally:
        thaw()
    assert gc.get_freeze_count() == 0
    assert len(gc.get_objects()) >= before // 2  # given back


class _Node:
    """A garbage cycle's member: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def _cycle_ref():
    import weakref

    return weakref.ref(_Node())


def test_a_due_collection_runs_the_generation_pythons_schedule_would() -> None:
    """collect_due runs Python's own schedule: nothing below generation 0's threshold; above
    it the oldest generation due (the counts restart), a full one only by Python's rule."""
    from ui.heap import collect_due

    was_enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.disable()
    try:
        gc.collect()
        gc.set_threshold(50, 3, 2)
        ref = _cycle_ref()
        assert collect_due() is None and ref() is not None  # (under the threshold: kept)
        keep = [[i] for i in range(60)]  # 60 tracked allocations: generation 0 is due
        assert gc.get_count()[0] > 50
        assert collect_due() == 0 and ref() is None and gc.get_count()[0] < 50
        # generation 1 is due once its count (young collections since its own) passes 3
        while gc.get_count()[1] < 3:
            gc.collect(0)
        keep += [[i] for i in range(60)]
        assert gc.get_count()[1] == 3 and collect_due() == 0  # (3 is not past 3)
        keep += [[i] for i in range(60)]
        assert gc.get_count()[1] == 4 and collect_due() == 1 and gc.get_count()[1] == 0
        # generation 2: its count past 2 is not enough. Python collects it in full only once
        # the objects new to it since its last full collection are a quarter of those there:
        # this process's many long-lived objects (all of them, after the full collect) make
        # the few new ones wait; a schedule redone from the counts collected them in full
        full = gc.get_stats()[2]["collections"]
        gc.collect()
        _push_generation_2_past(2)
        keep += [[i] for i in range(60)]
        assert collect_due() == 1 and gc.get_stats()[2]["collections"] == full + 1
        # with the long-lived objects frozen (as the app freezes its start-up objects), the few
        # new ones are more than a quarter: the full collection is due
        gc.freeze()
        try:
            gc.collect()  # (generation 2 now holds nothing but what comes next)
            survivors = [[i] for i in range(200)]
            gc.collect(1)  # (they reach generation 2)
            _push_generation_2_past(2)
            keep += [[i] for i in range(60)]
            assert collect_due() == 2 and gc.get_count()[2] == 0
            del survivors
        finally:
            gc.unfreeze()
        del keep
    finally:
        gc.set_threshold(*thresholds)
        if was_enabled:
            gc.enable()


def _push_generation_2_past(threshold: int) -> None:
    """Generation 2's count past ``threshold`` and generation 1's past 3, by collections of the
    younger generations."""
    while gc.get_count()[2] <= threshold:
        gc.collect(1)
    while gc.get_count()[1] <= 3:
        gc.collect(0)


def test_collections_run_from_the_event_loop_only(qtbot) -> None:
    """collect_at_safe_points turns Python's automatic collections off (none can start inside a
    Qt call, where one deadlocked the GUI thread) and runs them from a timer: a garbage cycle
    goes at the timer's next tick; stopping it gives Python's own schedule back."""
    from PySide6.QtWidgets import QApplication

    from ui.heap import collect_at_safe_points, stop_collecting_at_safe_points

    thresholds = gc.get_threshold()
    timer = collect_at_safe_points(QApplication.instance(), every_ms=20)
    try:
        assert not gc.isenabled() and timer.isActive()
        gc.set_threshold(10, 10, 10)
        ref = _cycle_ref()
        keep = [[i] for i in range(100)]  # (past generation 0's threshold: it would have run)
        assert ref() is not None  # not collected at the allocation
        qtbot.waitUntil(lambda: ref() is None, timeout=2000)
        del keep
    finally:
        gc.set_threshold(*thresholds)
        stop_collecting_at_safe_points(timer)
    assert gc.isenabled()


def test_the_app_collects_at_safe_points_from_its_start() -> None:
    """The app turns the collector to its safe points once its window is up (ui/app.py)."""
    import inspect

    import ui.app

    source = inspect.getsource(ui.app)
    assert "collect_at_safe_points(app)" in source
