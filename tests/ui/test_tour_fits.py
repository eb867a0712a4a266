"""The guided tour at 1280x720 (a projector): at every step, the answered question and its text
included, the window keeps its size, the tour's dock stays inside it and the plot the step points
at is shown whole."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication


def _settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(10)


@pytest.mark.slow
def test_every_tour_step_fits_a_1280x720_window(qtbot, window):
    window.resize(1280, 720)
    window.show_tour()
    tour = window.tour
    assert len(tour.steps) >= 16
    for index, step in enumerate(tour.steps):
        tour.go_to(index)
        if tour.asking:
            tour.answer(step.question.answer)  # the answer and its explanation take room too
        _settle(qtbot)
        assert (window.width(), window.height()) == (1280, 720), step.title
        dock = window.tour_dock.geometry()
        assert window.rect().contains(dock), (step.title, dock)
        panel = window.page.panels[step.plot]
        assert panel.highlighted, step.title
        seen = panel.visibleRegion().boundingRect()
        assert seen.size() == panel.size(), (step.title, step.plot, seen, panel.size())
        assert tour._text.isVisible() and tour.next_button.isVisibleTo(tour), step.title
        # the buttons are on screen, not pushed below the dock
        bottom = tour.next_button.mapTo(window, tour.next_button.rect().bottomRight())
        assert bottom.y() <= 720, step.title
