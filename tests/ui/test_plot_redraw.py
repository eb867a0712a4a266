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
