"""Shared fixtures for the GUI tests: one main window per test, closed and deleted afterwards."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def collect_at_safe_points(qapp):
    """As in the app (ui/heap.py): garbage is collected at the event loop's top level only. A
    collection that Python started inside Qt's disconnect deleted a closed window's menus there
    and deadlocked the test process (two full GUI runs of six hung that way)."""
    from ui.heap import collect_at_safe_points, stop_collecting_at_safe_points

    timer = collect_at_safe_points(qapp)
    yield
    stop_collecting_at_safe_points(timer)


@pytest.fixture
def window(qtbot):
    from ui.window.main_window import MainWindow

    w = MainWindow(theme="light", restore=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()
    w.deleteLater()
    qtbot.wait(10)


@pytest.fixture
def wait_complete(qtbot):
    """wait_complete(w): until the current generation's final state (simulation and sweep) is
    the window's state."""

    def wait(w, timeout: int = 30_000) -> None:
        gen = w.worker.generation

        def ok() -> bool:
            latest = w.worker.peek_latest()
            return (latest is not None and latest.generation == gen and latest.done
                    and w.state is latest.item and w.state.complete and not w.page.stale())

        qtbot.waitUntil(ok, timeout=timeout)

    return wait


@pytest.fixture
def show_widget(qtbot):
    """show_widget(widget, size): the widget shown and exposed; after the test its own workers
    are stopped (``shutdown()``), and it is closed and deleted (a live pyqtgraph widget at
    interpreter exit crashes)."""
    shown = []

    def show(widget, size: tuple[int, int] = (1400, 900)):
        qtbot.addWidget(widget)
        widget.resize(*size)
        widget.show()
        qtbot.waitExposed(widget)
        shown.append(widget)
        return widget

    yield show
    for widget in shown:
        stop = getattr(widget, "shutdown", None)
        if callable(stop):
            stop()
        widget.close()
        widget.deleteLater()
    qtbot.wait(10)
