"""The score histogram's "fixed axes": checked, the view keeps its range when d_k changes (the
unscaled spread is seen growing); unchecked, the axes follow the data again."""

from __future__ import annotations

import pytest

from engine.config import SimulationConfig
from engine.simulate import run_simulation


@pytest.fixture(scope="module")
def states():
    from ui.simulation_run import LabState

    out = {}
    for d_k in (16, 256):
        cfg = SimulationConfig(d_k=d_k, trials=200, scalings=("none", "sqrt"))
        out[d_k] = LabState(cfg, run_simulation(cfg), (), 0, "done")
    return out


@pytest.fixture
def scores(qapp):
    from ui.headless import offscreen_panel
    from ui.plots.histograms import ScoresPanel

    with offscreen_panel(ScoresPanel, (800, 500)) as panel:
        yield panel


def _x_span(panel) -> float:
    (x0, x1), _y = panel.view_range()
    return x1 - x0


def test_axes_follow_the_data_by_default(scores, states):
    scores.refresh(states[16], force=True)
    small = _x_span(scores)
    scores.refresh(states[256], force=True)
    assert _x_span(scores) > 2.5 * small  # the raw spread grows like sqrt(d_k): 4x


def test_fixed_axes_keep_the_range_across_d_k(qtbot, scores, states):
    from PySide6.QtCore import Qt

    scores.refresh(states[16], force=True)
    before = scores.view_range()
    assert scores.fixed_box is not None and scores.fixed_box.text() == "fixed axes"
    qtbot.mouseClick(scores.fixed_box, Qt.MouseButton.LeftButton)  # UI -> state
    assert scores.fixed_axes
    assert scores.plot.getViewBox().autoRangeEnabled() == [False, False]
    scores.refresh(states[256], force=True)  # state -> plot: d_k 16 -> 256, same frame
    after = scores.view_range()
    for a, b in zip(before, after):
        assert a == pytest.approx(b)
    # back to following the data
    qtbot.mouseClick(scores.fixed_box, Qt.MouseButton.LeftButton)
    assert not scores.fixed_axes
    scores.refresh(states[256], force=True)
    assert _x_span(scores) > 2.5 * (before[0][1] - before[0][0])


def test_fixed_axes_survive_log_y_and_reach_the_presets(scores, states, monkeypatch):
    import ui.export.plot_files as export

    scores.refresh(states[16], force=True)
    scores.set_fixed_axes(True)
    x_before = scores.view_range()[0]
    scores.log_box.setChecked(True)  # a new y scale is fitted once, x stays
    assert scores.view_range()[0] == pytest.approx(x_before)
    assert scores.plot.getViewBox().autoRangeEnabled() == [False, False]
    scores.refresh(states[256], force=True)
    assert scores.view_range()[0] == pytest.approx(x_before)

    seen = {}
    original = export.style_panel

    def spy(panel, preset):
        seen["range"] = panel.view_range()
        seen["log"] = panel.is_log
        original(panel, preset)

    monkeypatch.setattr(export, "style_panel", spy)
    export.preset_bytes(scores, "paper")
    assert seen["log"] and seen["range"][0] == pytest.approx(x_before)
