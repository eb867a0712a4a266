"""A redraw costs one paint: pyqtgraph settles auto-ranges at paint time, and a range change
then queues a second full repaint of the panel unless the panel settles it right after drawing."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QObject

from engine.config import SimulationConfig
from engine.simulate import run_simulation
from ui.plots.histograms import ScoresPanel, TopWeightPanel
from ui.simulation_run import LabState


class PaintCounter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.paints = 0

    def eventFilter(self, _obj, event) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.paints += 1
        return False


@pytest.mark.parametrize("cls", [ScoresPanel, TopWeightPanel])
def test_each_redraw_paints_the_panel_once(qtbot, cls):
    panel = cls()
    qtbot.addWidget(panel)
    panel.resize(420, 300)
    panel.show()
    qtbot.waitExposed(panel)
    states = [LabState(s.config, s, (), 0, "simulation")
              for s in (run_simulation(SimulationConfig(seed=i, trials=200 + 150 * i)) for i in range(5))]
    panel.refresh(states[0], force=True)
    qtbot.wait(150)  # let paints queued by earlier tests' widgets and this first draw land
    counter = PaintCounter()
    panel.glw.viewport().installEventFilter(counter)
    for state in states[1:]:
        assert panel.refresh(state)
        qtbot.wait(40)  # several event-loop turns: a queued second repaint would land here
    panel.glw.viewport().removeEventFilter(counter)
    # one paint per redraw; one stray paint from unrelated events is tolerated, a second paint per
    # redraw (the regression this guards against) would give 2 * (len(states) - 1)
    assert 1 <= counter.paints <= len(states), counter.paints


def test_a_first_draw_of_seven_rules_takes_turns(qtbot):
    """Seven rules' curves, theory curves and legend entries made in one tick were a 50 ms
    block: a panel makes at most RULES_PER_TICK rules' items per refresh and draws once all
    exist; with two rules it draws on its first refresh, as before."""
    from ui.plots.base import RULES_PER_TICK

    rules = ("none", "sqrt", "dk", "logn", "ssmax", "softcap", "sigmoid")
    panel = ScoresPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 300)
    panel.show()
    qtbot.waitExposed(panel)
    snap = run_simulation(SimulationConfig(seed=1, trials=100, scalings=rules))
    state = LabState(snap.config, snap, (), 0, "simulation")
    made = []
    while panel.draw_count == 0:
        assert panel.refresh(state)  # each turn does work (a tick's share)
        made.append(len(panel.curves))
    turns = -(-len(rules) // RULES_PER_TICK)
    assert made == [min(k * RULES_PER_TICK, len(rules)) for k in range(1, turns + 1)]
    assert len(made) > 1
    assert all(len(c.xData) for c in panel.curves.values())  # then every rule is drawn
    two = run_simulation(SimulationConfig(seed=2, trials=100, scalings=("none", "sqrt")))
    fresh = TopWeightPanel()
    qtbot.addWidget(fresh)
    fresh.resize(420, 300)
    fresh.show()
    qtbot.waitExposed(fresh)
    assert fresh.refresh(LabState(two.config, two, (), 0, "simulation"))
    assert fresh.draw_count == 1 and len(fresh.curves) == 2
