"""Every tour step at 1280x720, in the normal window and in presentation mode: its "look at" plot
is whole on screen, nothing scrolls sideways, the window keeps its size, and a step about the
sweep along n says so; leaving the tour leaves no sideways scroll bar (and gives back the
parameter dock that stepped aside for it)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication


def _settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(5)


def _drawn(w, qtbot) -> None:
    """Until the step's run has given its first results and the page shows them (its sweep may
    still be running: step 6's explicit method takes a while, and the layout does not wait)."""
    gen = w.worker.generation

    def ok() -> bool:
        latest = w.worker.peek_latest()
        return (latest is not None and latest.generation == gen and w.state is latest.item
                and not w.page.stale())

    qtbot.waitUntil(ok, timeout=60_000)


@pytest.mark.parametrize("present", [False, True], ids=["window", "presentation"])
@pytest.mark.slow
def test_every_step_shows_its_plot_whole(qtbot, window, present):
    window.resize(1280, 720)
    if present:
        window.set_presentation(True)
    dock_before = window.params_dock.isVisible()
    window.show_tour()
    tour = window.tour
    tour.ask_check.setChecked(False)  # (a question would hold the plot back until answered)
    page = window.page
    try:
        assert len(tour._steps) >= 12
        for i in range(len(tour._steps)):
            tour.go_to(i)
            _drawn(window, qtbot)
            _settle(qtbot)
            step = tour.current_step
            where = f"step {i + 1} ({step.plot})"
            assert (window.width(), window.height()) == (1280, 720), where
            assert page.horizontalScrollBar().maximum() == 0, where
            panel = page.panels[step.plot]
            assert panel.isVisible(), where
            assert panel.visibleRegion().boundingRect().size() == panel.size(), where
            hint = tour._plot_hint.text()
            if step.plot == "sweep":
                assert ("along n" in hint) == (step.sweep_axis == "n_keys"), (where, hint)
            if present and step.plot == "sweep":
                assert window.presenter.shown == "sweep"
    finally:
        tour.leave()
    _settle(qtbot)
    assert page.horizontalScrollBar().maximum() == 0
    assert window.params_dock.isVisible() == dock_before
