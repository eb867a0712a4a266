"""Each plot of the sweep row exports alone (its own menu entries), at a plot's aspect, with its
title, axis labels and legend, and only that plot; the slide and paper presets too."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from engine.config import SimulationConfig, SweepConfig
from engine.simulate import sweep
from ui.export.plot_files import export_panel, export_preset
from ui.plots.sweep import METRICS, SweepPanel

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def state():
    from ui.simulation_run import LabState

    cfg = SimulationConfig(trials=40, n_keys=12, scalings=("none", "sqrt"))
    points = tuple(sweep(SweepConfig(cfg, (1, 16, 256))))
    return LabState(cfg, points[1].snapshot, points, len(points), "done")


@pytest.fixture
def sweep_panel(qapp, state):
    from ui.headless import offscreen_panel, settle_layout

    with offscreen_panel(SweepPanel, (1500, 420)) as panel:
        panel.refresh(state, force=True)
        settle_layout(panel)
        yield panel


def _texts(svg_path) -> str:
    root = ET.parse(svg_path).getroot()
    return " | ".join("".join(t.itertext()).strip() for t in root.iter(f"{SVG}text"))


def _exporting(panel, tmp_path):
    """Connect ``export_requested`` as the window does, writing into tmp_path; returns the list
    of (plot id, path) written."""
    written = []

    def handle(single, kind):
        suffix = {"slide": "png", "paper": "svg"}.get(kind, kind)
        path = tmp_path / f"{single.plot_id}_{kind}.{suffix}"
        if kind in ("slide", "paper"):
            export_preset(single, path, kind)
        else:
            export_panel(single, path, kind)
        written.append((single.plot_id, path))

    panel.export_requested.connect(handle)
    return written


def test_one_sweep_plot_exports_alone(sweep_panel, tmp_path):
    written = _exporting(sweep_panel, tmp_path)
    i = [m.key for m in METRICS].index("top_weight")
    for kind in ("svg", "png", "csv"):
        sweep_panel.export_single(i, kind)
    ids = {pid for pid, _ in written}
    assert ids == {"sweep_top_weight"}
    svg = next(p for _, p in written if p.suffix == ".svg")
    text = _texts(svg)
    assert "mean top weight vs d_k" in text  # its title
    assert "mean max_j p_j" in text and "d_k" in text  # its axis labels
    assert "none: q·k" in text and "sqrt: q·k/√d_k" in text  # its legend
    for other in METRICS:
        if other.key != "top_weight":
            assert other.y_label not in text and other.title not in text  # that plot only
    # a plot's own aspect, not the strip's (the whole row is about 4:1)
    from PySide6.QtGui import QImage

    png = QImage(str(next(p for _, p in written if p.suffix == ".png")))
    assert 1.1 < png.width() / png.height() < 1.8
    csv = next(p for _, p in written if p.suffix == ".csv").read_text()
    assert "top_weight" in csv and "entropy_norm" not in csv


def test_score_std_plot_alone_keeps_the_raw_curve(sweep_panel, tmp_path):
    written = _exporting(sweep_panel, tmp_path)
    sweep_panel.export_single(0, "svg")
    text = _texts(written[0][1])
    assert "raw q·k" in text and "score std vs d_k" in text


@pytest.mark.parametrize("kind", ["slide", "paper"])
def test_one_sweep_plot_with_the_presets(sweep_panel, tmp_path, kind):
    from PySide6.QtGui import QImage

    written = _exporting(sweep_panel, tmp_path)
    i = [m.key for m in METRICS].index("entropy_norm")
    sweep_panel.export_single(i, kind)
    (pid, path), = written
    assert pid == "sweep_entropy_norm"
    if kind == "slide":
        img = QImage(str(path))
        assert (img.width(), img.height()) == (1920, 1080)
    else:
        text = _texts(path)
        assert text.count("mean entropy / log n vs d_k") == 1  # the title, once
        assert "mean H / log n" in text and "none: q·k" in text


def test_menus_offer_each_plot(sweep_panel):
    menu = sweep_panel.export_menu(sweep_panel)
    one = next(a.menu() for a in menu.actions() if a.text() == "Export one panel")
    assert [a.text() for a in one.actions()] == [m.title for m in METRICS]
    sub = one.actions()[3].menu()
    assert [a.text() for a in sub.actions()][-2:] == ["for a slide (1920×1080 PNG)…",
                                                      "for a paper (single-column SVG)…"]
    # right-click in a plot offers that plot alone
    vb_menu = sweep_panel.plots[2].getViewBox().menu
    assert any(a.text() == f"Export only “{METRICS[2].title}”" for a in vb_menu.actions())
