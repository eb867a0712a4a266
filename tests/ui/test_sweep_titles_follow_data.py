"""A sweep plot never shows one configuration's data under another's title (issue 31, item 8):
the plots are redrawn one per tick, and each plot's title changes with its own data, not with
the first plot's (after tour step 10 the target plot kept step 9's ~0.125 under the new title)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.config import SimulationConfig
from ui.plots.sweep import NO_TARGET_TITLE, SweepPanel
from ui.simulation_run import lab_run


def _final(correlation: float):
    cfg = SimulationConfig(trials=300, scalings=("none", "sqrt"), correlation=correlation)
    return list(lab_run(cfg, lambda: False))[-1]


@pytest.fixture(scope="module")
def states():
    return _final(0.0), _final(0.9)


@pytest.fixture
def panel(show_widget):
    return show_widget(SweepPanel(), (1000, 260))


def _target(panel) -> int:
    return next(i for i, m in enumerate(panel.metrics) if m.key == "target_weight")


def _mean(state, i: int, panel) -> np.ndarray:
    """The target weight of sqrt at every sweep point, from the state itself."""
    m = panel.metrics[i]
    points = sorted(state.sweep, key=lambda p: p.x)
    return np.array([m.get(p.snapshot.rules["sqrt"]).mean for p in points])


def test_the_target_plot_keeps_its_title_until_its_data_changes(panel, states) -> None:
    no_target, target = states
    i = _target(panel)
    assert i > 0  # drawn after the first plot's turn
    panel.refresh(no_target, force=True)
    assert panel.plots[i].titleLabel.text == NO_TARGET_TITLE
    before = np.array(panel.series[(i, "sqrt")].curve.yData, copy=True)
    # the next configuration (rho = 0.9): one plot per refresh, the target plot not yet
    assert panel.refresh(target)
    assert panel._pending and i in panel._pending
    assert panel.plots[i].titleLabel.text == NO_TARGET_TITLE  # its data are still rho = 0's
    np.testing.assert_array_equal(panel.series[(i, "sqrt")].curve.yData, before)
    while panel._pending:  # the remaining turns
        assert panel.refresh(target)
    title = panel.plots[i].titleLabel.text
    assert title != NO_TARGET_TITLE and title.startswith("target weight")
    assert not np.array_equal(panel.series[(i, "sqrt")].curve.yData, before)  # with its data
    # by the state: rho = 0.9 gives the target key far more than 1/n of the weight
    assert _mean(target, i, panel).min() > _mean(no_target, i, panel).max()


def test_a_new_configuration_without_points_clears_every_plot(panel, states) -> None:
    """The 'no points yet' case: the refill of new parameters has not a point yet, so none of
    the last configuration's curves stay under the plots' titles."""
    from dataclasses import replace

    no_target, target = states
    panel.refresh(no_target, force=True)
    i = _target(panel)
    assert len(panel.series[(i, "sqrt")].curve.yData) == len(no_target.sweep)
    while panel.refresh(replace(target, sweep=())):
        pass
    for plot in panel.plots:
        assert all(item.yData is None or len(item.yData) == 0 for item in plot.listDataItems())
    assert "no points yet" in panel.info_label.full_text


def test_empty_plots_are_titled_for_the_configuration_they_wait_for(panel, states) -> None:
    """Before a configuration's first point the empty target plot is titled for it: at ρ = 0
    "no target", never the ρ > 0 title the panel was built with (seen before any point came)."""
    from dataclasses import replace

    no_target, target = states
    i = _target(panel)
    while panel.refresh(replace(no_target, sweep=())):
        pass
    assert panel.plots[i].titleLabel.text == NO_TARGET_TITLE
    while panel.refresh(replace(target, sweep=())):
        pass
    assert panel.plots[i].titleLabel.text.startswith("target weight")


def test_points_half_drawn_go_when_another_configuration_starts(panel) -> None:
    """A sweep's first points drawn on plot 0, the other plots still to come, and then other
    parameters (only the trials: the same d_k, n and ρ) start a run: its empty sweep is a new
    configuration, and the half-drawn points go. (An empty sweep's key was the same for every
    configuration of one d_k, n and ρ, and the panel, marked drawn at the last one's start,
    kept those points under "no points yet" for the whole 200,000-trial simulation.)"""
    from dataclasses import replace

    first = list(lab_run(SimulationConfig(trials=300, scalings=("none", "sqrt")), lambda: False))[-1]
    other = replace(first, config=replace(first.config, trials=400),
                    snapshot=replace(first.snapshot, config=replace(first.snapshot.config,
                                                                    trials=400)), sweep=())
    while panel.refresh(replace(first, sweep=())):  # the first run's start: no point yet
        pass
    assert panel.refresh(first)  # its points: plot 0 now, the others in later turns
    assert panel._pending
    assert len(panel.series[(0, "sqrt")].curve.yData) == len(first.sweep)
    assert panel.refresh(other)
    for plot in panel.plots:
        assert all(item.yData is None or len(item.yData) == 0 for item in plot.listDataItems())
    assert "no points yet" in panel.info_label.full_text
