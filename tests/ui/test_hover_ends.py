"""A hover read-out ends with what takes the pointer's place, not only when the pointer leaves:
a right-click export's menu, a dialog taking the focus (File -> Open, an export's file dialog),
an opened figure, presentation mode (issue 31, item 7)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from engine.config import SimulationConfig
from engine.simulate import run_simulation
from ui.simulation_run import LabState


@pytest.fixture
def scores(window):
    cfg = SimulationConfig(d_k=64, trials=200, scalings=("none", "sqrt"), seed=0)
    snap = run_simulation(cfg)
    panel = window.page.panels["scores"]
    panel.refresh(LabState(cfg, snap, (), 0, "done"), force=True)
    return panel


def _hovered(panel) -> bool:
    panel.show_values_at(0.0)
    return panel.hover.isVisible() and panel.hover_text != ""


def _gone(panel) -> bool:
    return not panel.hover.isVisible() and panel.hover_text == ""


def test_the_export_menu_ends_the_read_out(scores) -> None:
    assert _hovered(scores)
    menu = scores.export_menu(scores)
    menu.aboutToShow.emit()  # what a right-click (or the header's menu button) opens
    assert _gone(scores)


def test_a_dialog_taking_the_focus_ends_the_read_out(scores) -> None:
    assert _hovered(scores)
    QApplication.sendEvent(scores.glw.viewport(), QEvent(QEvent.Type.WindowDeactivate))
    assert _gone(scores)


def test_an_opened_figure_ends_the_read_out(scores) -> None:
    assert _hovered(scores)
    scores.apply_view_state({"log_y": False})
    assert _gone(scores)


def test_presentation_mode_ends_every_read_out(window, scores) -> None:
    assert _hovered(scores)
    window.present_action.setChecked(True)
    assert _gone(scores)
    assert _hovered(scores)
    window.present_action.setChecked(False)
    assert _gone(scores)
