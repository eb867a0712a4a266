"""Curves with symbols keep one symbol-atlas entry per style, however often they are updated.

pyqtgraph's symbol atlas keys a symbol by the ids of its pen and brush objects. Given a colour
string (or a tuple, or None), every setData made a new QBrush or QPen, so a new atlas entry,
rendered, and the atlas grew with every update (612 entries after 600 updates of one curve),
and with it the pixmap made from it at the next paint: the sweep's, the training panels' and
the Real model page's symbols now take shared objects (``ui.plots.rule_pens.symbol_style``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
import pytest

from engine.config import SimulationConfig
from ui.plots.rule_pens import symbol_brush, symbol_pen, symbol_style
from ui.plots.sweep import SweepPanel
from ui.simulation_run import LabState, lab_run


def _atlas_entries(plots: list[Any]) -> list[int]:
    """The atlas size of every curve with symbols and data in ``plots``."""
    sizes = []
    for plot in plots:
        for item in plot.listDataItems():
            if isinstance(item, pg.PlotDataItem) and item.opts["symbol"] is not None \
                    and item.scatter.data.size:
                sizes.append(len(item.scatter.fragmentAtlas))
    return sizes


def test_the_shared_objects_are_one_per_colour():
    assert symbol_brush("#123456") is symbol_brush("#123456")
    assert symbol_brush("#123456") is not symbol_brush("#654321")
    assert symbol_pen(None) is symbol_pen(None) and symbol_pen("#123456") is symbol_pen("#123456")
    style = symbol_style("#123456", None)
    assert style == {"symbolBrush": symbol_brush("#123456"), "symbolPen": symbol_pen(None)}
    assert style["symbolBrush"].color().name() == "#123456"


def test_a_curve_updated_many_times_keeps_one_atlas_entry(qtbot):
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    widget.resize(300, 200)
    widget.show()
    curve = pg.PlotDataItem(symbol="o", symbolSize=6, **symbol_style("#1f77b4", "#1f77b4"))
    widget.addItem(curve)
    rng = np.random.default_rng(0)
    for k in range(60):
        curve.setData(np.arange(13.0), rng.random(13))
        if k % 10 == 0:
            qtbot.wait(1)  # (painted now and then, as on screen)
    assert _atlas_entries([widget.getPlotItem()]) == [1]


def test_the_sweep_strip_keeps_one_atlas_entry_per_curve(qtbot):
    full = list(lab_run(SimulationConfig(trials=200, scalings=("none", "sqrt")), lambda: False))[-1]
    panel = SweepPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 260)
    panel.show()
    for _run in range(2):  # a second run of the same parameters redraws every curve again
        for n in range(1, len(full.sweep) + 1):
            state = LabState(full.config, full.snapshot, tuple(full.sweep[:n]), full.sweep_total,
                             "sweep")
            panel.refresh(state, force=True)
    sizes = _atlas_entries(panel.plots)
    # each rule's curve and the raw q·k's in the plots that draw it, each set 26 times
    assert len(sizes) >= 2 * len(panel.plots) and set(sizes) == {1}, sizes


def test_the_training_panels_keep_one_atlas_entry_per_curve(qtbot):
    pytest.importorskip("torch")
    from engine.training.config import TrainingConfig
    from engine.training.trainer import run_training
    from ui.plots.training.lengths import LengthPanel
    from ui.plots.training.panels import GradChainPanel, TrainingView

    cfg = TrainingConfig(d_model=16, items_max=4, classes=4, key_dim=4, steps=2, log_every=1,
                         batch=4, probe_size=2, scalings=("sqrt", "ssmax"), eval_lengths=(16, 64),
                         eval_size=20, device="cpu")
    _, snap = run_training(cfg)
    for cls in (GradChainPanel, LengthPanel):
        panel = cls()
        qtbot.addWidget(panel)
        panel.resize(500, 300)
        panel.show()
        for _ in range(30):  # a live run redraws with every snapshot
            panel.refresh(TrainingView(snap), force=True)
        sizes = _atlas_entries(panel.plot_items())
        assert len(sizes) >= 2 and set(sizes) == {1}, (cls.__name__, sizes)
