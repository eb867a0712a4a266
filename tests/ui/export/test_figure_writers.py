"""Offscreen figures (``simulate --figures``): every plot as PNG and SVG, no window shown."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from engine.config import SimulationConfig, SweepConfig
from engine.simulate import run_simulation, sweep
from ui.plots import PLOT_IDS


@pytest.mark.slow
def test_write_simulation_figures(qtbot, tmp_path):
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    from ui.export.figure_writers import write_simulation_figures

    cfg = SimulationConfig(trials=500)
    snap = run_simulation(cfg)
    points = list(sweep(SweepConfig(cfg, (1, 16, 256))))
    before = set(QApplication.topLevelWidgets())
    paths = write_simulation_figures(snap, points, tmp_path)
    assert sorted(p.name for p in paths) == sorted(f"{pid}.{k}" for pid in PLOT_IDS for k in ("png", "svg"))
    for p in paths:
        if p.suffix == ".png":
            img = QImage(str(p))
            assert not img.isNull() and img.width() >= 800
        else:
            root = ET.parse(p).getroot()
            assert root.findall(".//{http://www.w3.org/2000/svg}path")
    qtbot.wait(10)
    assert not [w for w in QApplication.topLevelWidgets() if w not in before and w.isVisible()]


@pytest.mark.slow
def test_figures_accept_plain_snapshots_as_the_sweep(qtbot, tmp_path):
    """The CLI passes one SimulationSnapshot per d_k."""
    from ui.export.figure_writers import write_simulation_figures

    snaps = [run_simulation(SimulationConfig(d_k=d, trials=300)) for d in (4, 64)]
    paths = write_simulation_figures(snaps[-1], snaps, tmp_path)
    assert (tmp_path / "sweep.svg") in paths
