"""``--figure-style``: the CLI's figures use the GUI's export presets (slide by default: a
1920x1080 PNG, tick text 18 px), paper (700x460) or the screen look, for simulate, train and
experiment alike (one writer: ui.export.plot_files.write_styled_figures)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from engine.config import SimulationConfig, SweepConfig
from engine.simulate import run_simulation, sweep
from tests.cli.test_simulate_cli import run


def tick_font_px(svg: Path) -> set[float]:
    """Font sizes (px) of the numeric tick labels of an SVG figure."""
    sizes = set()
    for el in ET.parse(svg).getroot().iter():
        if el.tag.endswith("text"):
            text = "".join(el.itertext()).strip().replace("−", "-")
            try:
                float(text)
            except ValueError:
                continue
            sizes.add(float(el.get("font-size")))
    return sizes


def png_size(path: Path) -> tuple[int, int]:
    from PySide6.QtGui import QImage

    img = QImage(str(path))
    return img.width(), img.height()


@pytest.fixture(scope="module")
def sim():
    cfg = SimulationConfig(trials=200, scalings=("none", "sqrt"))
    return run_simulation(cfg), list(sweep(SweepConfig(cfg, (4, 64))))


@pytest.mark.parametrize(("style", "size", "ticks"), [
    ("slide", (1920, 1080), 18), ("paper", (700, 460), 11), ("screen", None, 12)])
def test_simulation_figures_in_each_style(qapp, tmp_path, sim, style, size, ticks):
    from ui.export.figure_writers import write_simulation_figures

    snap, points = sim
    write_simulation_figures(snap, points, tmp_path, style=style)
    for pid in ("scores", "weights", "sweep"):
        if size is not None:
            assert png_size(tmp_path / f"{pid}.png") == size
        else:
            assert png_size(tmp_path / f"{pid}.png")[0] == 1200  # the window's Export size
        assert tick_font_px(tmp_path / f"{pid}.svg") == {ticks}, pid
    if style != "screen":  # the panel's title is on the figure
        assert b"Score histograms" in (tmp_path / "scores.svg").read_bytes()


@pytest.mark.slow  # two CLI runs drawing every figure
def test_simulate_cli_defaults_to_the_slide_style(tmp_path):
    r = run("simulate", "--d-k", "16", "--trials", "100", "--scaling", "sqrt", "--out",
            str(tmp_path), "--figures", "--quiet")
    assert r.returncode == 0, r.stderr
    assert png_size(tmp_path / "d16_scores.png") == (1920, 1080)
    assert tick_font_px(tmp_path / "d16_scores.svg") == {18}
    r = run("simulate", "--d-k", "16", "--trials", "100", "--scaling", "sqrt", "--out",
            str(tmp_path / "paper"), "--figures", "--figure-style", "paper", "--quiet")
    assert r.returncode == 0, r.stderr
    assert png_size(tmp_path / "paper" / "d16_scores.png") == (700, 460)


def test_experiment_figures_take_the_style(qapp, tmp_path):
    from engine.experiments.figures import FigureData, Series
    from ui.export.experiment_figures import write_experiment_figures

    fig = FigureData(id="loss_vs_lr", kind="vs_axis", title="Final loss vs learning rate",
                     x_label="learning rate", y_label="final loss", x_log=True, y_log=False,
                     error="mean ± 1 standard error over seeds",
                     series=tuple(Series(name=r, rule=r, x=(1e-3, 1e-2, 1e-1), y=(y, y - .2, y - .3),
                                         lo=(y - .1, y - .3, y - .4), hi=(y + .1, y - .1, y - .2),
                                         n=(8, 8, 8)) for r, y in (("none", 1.0), ("sqrt", .8))))
    paths = write_experiment_figures([fig], tmp_path, style="slide")
    png = next(p for p in paths if p.suffix == ".png")
    assert png_size(png) == (1920, 1080)
    assert tick_font_px(png.with_suffix(".svg")) == {18}
