"""Quit waits for nothing the user asked for (issue 31, item 12): every worker is cancelled and
its (daemon) thread gets a short grace, never the seconds a chunk or a training step can take;
the process then ends without the interpreter joining pool threads still inside a job."""

from __future__ import annotations

import threading

import pytest

from ui.pages.base import QUIT_JOIN_S
from ui.worker import Worker


@pytest.fixture
def joins(monkeypatch):
    """Every Worker.join's timeout, recorded (and the real join done)."""
    seen: list[float] = []
    real = Worker.join

    def join(self, timeout: float = 5.0) -> bool:
        seen.append(timeout)
        return real(self, timeout)

    monkeypatch.setattr(Worker, "join", join)
    return seen


def test_quit_cancels_a_stuck_run_and_waits_only_the_grace(qtbot, window, joins) -> None:
    release = threading.Event()
    started = threading.Event()

    def stuck(cancelled):  # a step that checks its cancel flag only after a long while
        started.set()
        release.wait(60)
        yield 1

    for cls in ("TrainingPage", "ExperimentsPage"):
        assert window.ensure_page(cls) is not None
    window.worker.start(stuck)
    assert started.wait(10)
    window.close()
    assert joins and max(joins) <= QUIT_JOIN_S  # the window's worker and every page's
    assert len(joins) >= 3
    assert window.worker._run.cancel.is_set()
    release.set()


def test_the_app_leaves_without_joining_pool_threads(monkeypatch, qtbot) -> None:
    """leave_now writes the settings, flushes and ends the process at once (os._exit)."""
    import ui.app as app

    calls = []

    class FakeSettings:
        def sync(self):
            calls.append("sync")

    class FakeWindow:
        settings = FakeSettings()

    monkeypatch.setattr(app.os, "_exit", lambda code: calls.append(("exit", code)))
    app.leave_now(FakeWindow(), 3)
    assert calls == ["sync", ("exit", 3)]


def test_the_apps_quit_joins_no_worker_at_all(qtbot, window, joins, monkeypatch) -> None:
    """The app's Quit (the process ends next: exits_on_close) cancels every run and waits on no
    thread: no Worker.join with a timeout, no Thread.join."""
    thread_joins: list[object] = []
    real = threading.Thread.join

    def thread_join(self, timeout=None):
        thread_joins.append(timeout)
        return real(self, 0 if timeout is None else timeout)

    monkeypatch.setattr(threading.Thread, "join", thread_join)
    release = threading.Event()
    started = threading.Event()

    def stuck(cancelled):
        started.set()
        release.wait(60)
        yield 1

    page = window.ensure_page("RealModelPage")  # a page with its own worker (a LivePage)
    page.worker.start(stuck)
    window.worker.start(stuck)
    assert started.wait(10)
    window.exits_on_close = True  # as ui.app.run_gui sets it
    window.close()
    assert window.worker._run.cancel.is_set() and page.worker._run.cancel.is_set()
    assert [t for t in joins if t > 0] == [] and [t for t in thread_joins if t != 0] == []
    release.set()
