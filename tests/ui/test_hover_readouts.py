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
from ui.plots.sweep import SweepPanel
from ui.simulation_run import LabState

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
    assert b"d_k = 64" not in svg and "±".encode() not in svg
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


@pytest.fixture
def scores(show_widget):
    from ui.plots.histograms import ScoresPanel

    return show_widget(ScoresPanel(), (700, 450))


def test_histogram_hover_reads_each_rules_density_and_goes_on_leave(scores):
    state = _state(("none", "sqrt"))
    scores.refresh(state, force=True)
    h = state.snapshot.rules["sqrt"].logit_hist
    i = len(h.edges) // 2
    x = float(h.edges[i] + h.edges[i + 1]) / 2
    text = scores.show_values_at(x)
    assert f"sqrt: {float(h.density()[i]):.4g}" in text and "none:" in text
    assert scores.hover.isVisible()
    svg = scores.svg_bytes()
    assert b"density<br" not in svg and b"outside the bins" not in svg
    _leave(scores.glw.viewport())
    assert not scores.hover.isVisible() and scores.hover_text == ""


def test_score_histogram_offers_log_y_with_finite_values(scores):
    state = _state(("none", "sqrt"))
    scores.refresh(state, force=True)
    assert scores.log_box is not None and not scores.is_log
    scores.log_box.setChecked(True)
    scores.refresh(state, force=True)
    assert scores.plot.ctrl.logYCheck.isChecked()
    for curve in [*scores.curves.values(), scores.raw_curve, scores.raw_theory, *scores.theory.values()]:
        y = curve.getData()[1]
        assert y is not None and np.isfinite(y).all()
    # the CSV keeps the true densities (zeros included), not the drawn floor
    assert any(row.get("density") == 0.0 for row in scores.data_rows())


def test_sweep_hover_marks_the_d_k_in_every_sweep_plot_and_a_click_sets_it(panel, qtbot):
    from PySide6.QtCore import QPointF

    panel.refresh(_state(("none", "sqrt")), force=True)
    panel.show_values_at(2, np.log10(70))
    assert all(line.isVisible() and line.value() == pytest.approx(np.log10(64))
               for line in panel.hover_lines)
    _leave(panel.glw.viewport())
    assert not any(line.isVisible() for line in panel.hover_lines)
    vb = panel.plots[3].getViewBox()
    (_x0, _x1), (y0, y1) = vb.viewRange()
    scene_pos = vb.mapViewToScene(QPointF(np.log10(480), (y0 + y1) / 2))

    class Click:
        def scenePos(self):
            return scene_pos

    with qtbot.waitSignal(panel.d_k_clicked, timeout=1000) as sig:
        panel._on_click(Click())
    assert sig.args == [512]


def test_a_sweep_click_sets_d_k_in_the_window(qtbot, window):
    window.page.panels["sweep"].d_k_clicked.emit(512)
    assert window.params.config_from_widgets().d_k == 512


def test_a_click_on_a_sweep_along_n_sets_n_not_d_k(panel, qtbot):
    """Along n the clicked point's value is an n: it sets n_keys (d_k_clicked stays silent)."""
    from PySide6.QtCore import QPointF

    cfg = SimulationConfig(d_k=64, n_keys=16, trials=100, scalings=("sqrt",), seed=0)
    points = tuple(sweep(SweepConfig(cfg, (64,), axis="n_keys", n_keys_values=(8, 64, 512))))
    panel.refresh(LabState(cfg, points[1].snapshot, points, len(points), "done"), force=True)
    assert "n = 512" in panel.show_values_at(1, np.log10(500))
    vb = panel.plots[1].getViewBox()
    (_x0, _x1), (y0, y1) = vb.viewRange()
    scene_pos = vb.mapViewToScene(QPointF(np.log10(480), (y0 + y1) / 2))

    class Click:
        def scenePos(self):
            return scene_pos

    d_k_clicks: list[int] = []
    panel.d_k_clicked.connect(d_k_clicks.append)
    with qtbot.waitSignal(panel.n_clicked, timeout=1000) as sig:
        panel._on_click(Click())
    assert sig.args == [512] and d_k_clicks == []


def test_a_sweep_click_along_n_sets_n_keys_in_the_window(qtbot, window):
    window.page.panels["sweep"].n_clicked.emit(512)
    assert window.params.config_from_widgets().n_keys == 512
