"""Hover read-outs: gone when the pointer leaves, recomputed with every new result, never part of
an exported figure (the sweep's box used to stay, show old numbers and reach sweep.png/svg; the
inspector kept "J[4, 3]" on a 4x4 matrix)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from engine.config import SimulationConfig, SweepConfig
from engine.simulate import sweep
from ui.pages.simulation.run import LabState
from ui.plots.sweep import SweepPanel

D_KS = (4, 64, 512)


def _state(scalings: tuple[str, ...], seed: int = 0, trials: int = 200) -> LabState:
    cfg = SimulationConfig(d_k=64, trials=trials, scalings=scalings, seed=seed)
    points = tuple(sweep(SweepConfig(cfg, D_KS)))
    snap = next(p.snapshot for p in points if p.d_k == 64)
    return LabState(cfg, snap, points, len(points), "done")


@pytest.fixture
def panel(show_widget):
    return show_widget(SweepPanel(), (1400, 320))


def _leave(widget) -> None:
    QApplication.sendEvent(widget, QEvent(QEvent.Type.Leave))


def test_sweep_read_out_disappears_when_the_pointer_leaves(panel):
    panel.refresh(_state(("none", "sqrt")), force=True)
    assert "d_k = 64" in panel.show_values_at(1, np.log10(64))
    assert panel.hover[1].isVisible()
    _leave(panel.glw.viewport())
    assert not any(t.isVisible() for t in panel.hover) and panel.hover_text == ""


def test_sweep_read_out_follows_a_new_result(panel):
    panel.refresh(_state(("none", "sqrt")), force=True)
    panel.show_values_at(1, np.log10(64))
    assert "sqrt:" in panel.hover_text
    new = _state(("none",), seed=7)
    panel.refresh(new, force=True)
    expected = next(p for p in new.sweep if p.d_k == 64).snapshot.rules["none"].top_weight.mean
    assert panel.hover[1].isVisible()
    assert f"none: {expected:.4g}" in panel.hover_text
    assert "sqrt" not in panel.hover_text  # a rule no longer compared is not read out


def test_sweep_read_out_never_reaches_an_export(panel):
    state = _state(("none", "sqrt"))
    panel.refresh(state, force=True)
    clean_svg = panel.svg_bytes()
    panel.show_values_at(0, np.log10(64))
    assert panel.hover[0].isVisible()
    svg = panel.svg_bytes()
    assert b"d_k = 64" not in svg and b"95% interval" not in svg
    assert len(svg) == len(clean_svg)
    assert panel.hover[0].isVisible()  # still shown on screen after the export


def test_one_trial_has_no_standard_error_in_the_read_out(panel):
    panel.refresh(_state(("sqrt",), trials=1), force=True)
    text = panel.show_values_at(1, np.log10(64))
    assert "n/a" in text and "± 0" not in text


def test_the_inspector_heatmap_read_out_is_cleared_by_a_new_matrix_and_on_leaving(show_widget):
    from engine.inspect import inspect_scores
    from ui.pages.inspector.page import InspectorPage

    page = show_widget(InspectorPage(), (1200, 800))
    heat = page.heatmap
    heat.update_result(inspect_scores(np.arange(5.0), 1.0))
    heat.hovered.emit("J[4, 3] = 0.01")
    assert page.hover_label.text().startswith("J[4, 3]")
    heat.update_result(inspect_scores(np.arange(4.0), 1.0))
    assert not page.hover_label.text().startswith("J[")
    heat.hovered.emit("J[3, 3] = 0.01")
    _leave(heat)
    assert not page.hover_label.text().startswith("J[")
