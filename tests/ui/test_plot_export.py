"""Exports: PNG decodes and is not blank, SVG is XML with paths, CSV round-trips, Export all
writes the CLI's files, sessions round-trip, and an unwritable target gives a clear message."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from engine.config import SimulationConfig
from engine.io import read_csv
from ui.export.plot_files import ExportError
from ui.plots import PLOT_IDS

SVG_NS = "{http://www.w3.org/2000/svg}"


def _png_is_drawn(path: Path) -> None:
    from PySide6.QtGui import QImage

    img = QImage(str(path))
    assert not img.isNull() and img.width() > 100 and img.height() > 50
    img = img.convertToFormat(QImage.Format.Format_RGB32)
    arr = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine())
    pixels = arr[:, : img.width() * 4].reshape(-1, 4)[:, :3]
    colours = np.unique(pixels[:: max(1, len(pixels) // 50_000)], axis=0)
    assert len(colours) > 10, "blank image"


def _svg_has_paths(path: Path) -> None:
    root = ET.parse(path).getroot()  # raises if not well-formed XML
    assert root.tag == f"{SVG_NS}svg"
    assert len(root.findall(f".//{SVG_NS}path")) > 0


@pytest.fixture
def finished(qtbot, window, wait_complete):
    window.apply_config({"trials": 2000, "scalings": ["none", "sqrt", "dk"]})
    wait_complete(window)
    return window


@pytest.mark.parametrize("plot_id", PLOT_IDS)
def test_each_plot_exports_png_svg_csv(finished, tmp_path, plot_id):
    png = finished.export_plot(plot_id, tmp_path / "p.png", "png")
    _png_is_drawn(png)
    svg = finished.export_plot(plot_id, tmp_path / "p.svg", "svg")
    _svg_has_paths(svg)
    csv_path = finished.export_plot(plot_id, tmp_path / "p.csv", "csv")
    rows = read_csv(csv_path)
    expected = finished.page.panels[plot_id].data_rows()
    assert len(rows) == len(expected) > 0
    for got, want in zip(rows, expected, strict=False):
        for key, value in want.items():
            if isinstance(value, float):
                assert float(got[key]) == value  # repr() keeps every digit
            else:
                assert got[key] == str(value)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


@pytest.mark.slow
def test_export_all_writes_everything_and_config_reproduces(qtbot, finished, tmp_path, wait_complete):
    out = finished.export_all_to(tmp_path)
    assert out.parent == tmp_path and str(out) in finished.last_message
    names = {p.name for p in out.iterdir()}
    for pid in PLOT_IDS:
        assert {f"{pid}.png", f"{pid}.svg", f"{pid}.csv"} <= names
    assert {"summary.csv", "histograms.npz", "config.json"} <= names
    _png_is_drawn(out / "sweep.png")
    _svg_has_paths(out / "scores.svg")
    summary = read_csv(out / "summary.csv")
    snap = finished.state.snapshot
    assert [r["scaling"] for r in summary] == list(snap.rules)
    assert float(summary[1]["top_weight_mean"]) == snap.rules["sqrt"].top_weight.mean
    with np.load(out / "histograms.npz") as npz:
        np.testing.assert_array_equal(npz[f"d{snap.config.d_k}_sqrt_logit_counts"],
                                      snap.rules["sqrt"].logit_hist.counts)
    # opening the exported config.json reproduces the same numbers (same seed and backend)
    finished.params.set_config(SimulationConfig(d_k=7, trials=100))
    cfg = finished.open_session(out / "config.json")
    assert cfg == snap.config
    wait_complete(finished)
    again = finished.state.snapshot
    assert again.rules["sqrt"].top_weight == snap.rules["sqrt"].top_weight
    assert again.raw_var == snap.raw_var


def test_session_save_open_round_trip(qtbot, window, tmp_path):
    cfg = SimulationConfig(d_k=100, n_keys=12, seed=42, scalings=("dk", "qknorm"), dist="uniform",
                           method="explicit", trials=500)
    window.params.set_config(cfg)
    path = window.save_session(tmp_path / "s.json")
    data = json.loads(path.read_text())
    assert data["config"]["d_k"] == 100
    window.params.set_config(SimulationConfig())
    assert window.open_session(path) == cfg
    assert window.params.config_from_widgets() == cfg


def test_bad_session_file_is_refused(window, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"config": {"d_k": -3}}))
    with pytest.raises(ValueError, match="d_k"):
        window.open_session(bad)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_target_gives_a_clear_message(finished, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ExportError, match="locked"):
            finished.export_plot("scores", locked / "s.png", "png")
        with pytest.raises(ExportError, match="locked"):
            finished.export_all_to(locked)
    finally:
        locked.chmod(0o700)


def test_export_into_a_missing_parent_gives_a_clear_message(finished, tmp_path):
    target = tmp_path / "a-file"
    target.write_text("x")
    with pytest.raises(ExportError, match="a-file"):
        finished.export_plot("scores", target / "s.png", "png")
    with pytest.raises(ExportError, match="a-file"):
        finished.export_all_to(target)


def test_export_before_results_is_refused(window, tmp_path):
    with pytest.raises(ExportError, match="Nothing to export"):
        window.export_all_to(tmp_path)


def test_results_table_copies_text_and_csv(finished):
    from PySide6.QtWidgets import QApplication

    table = finished.page.results
    table.copy_text()
    text = QApplication.clipboard().text()
    lines = text.strip().split("\n")
    assert lines[0].split("\t") == ["measure", "none", "sqrt", "dk"]
    assert len(lines) == 1 + table.table.rowCount()
    table.copy_csv()
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(QApplication.clipboard().text())))
    snap = finished.state.snapshot
    assert [r["scaling"] for r in rows] == ["none", "sqrt", "dk"]
    assert float(rows[2]["logit_var"]) == snap.rules["dk"].logit_var.mean


def test_a_cli_config_json_opened_in_the_gui_reproduces_the_cli_numbers(qtbot, window, wait_complete,
                                                                       tmp_path, capsys):
    """simulate --out writes config.json; opening it in the window gives the CLI's numbers: the
    main run equals the CLI's first d_k row and the window's sweep equals every CLI row."""
    from main import main

    out = tmp_path / "cli"
    assert main(["simulate", "--d-k", "16", "256", "--trials", "1200", "--seed", "11", "--keys", "6",
                 "--scaling", "none", "sqrt", "qknorm", "--method", "explicit", "--quiet",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    cli_rows = read_csv(out / "summary.csv")
    cfg = window.open_session(out / "config.json")
    assert (cfg.d_k, cfg.seed, cfg.trials, cfg.n_keys) == (16, 11, 1200, 6)
    wait_complete(window)
    numeric = [k for k in cli_rows[0] if k not in ("scaling", "method", "backend", "device", "dtype")]

    def same(gui_rows, d_k):
        want = [r for r in cli_rows if int(r["d_k"]) == d_k]
        assert [r["scaling"] for r in gui_rows] == [r["scaling"] for r in want] == ["none", "sqrt", "qknorm"]
        for got, ref in zip(gui_rows, want, strict=True):
            for key in numeric:
                assert float(got[key]) == float(ref[key]), (d_k, got["scaling"], key)
            assert (got["backend"], got["method"]) == (ref["backend"], ref["method"])

    same(window.state.snapshot.summary_rows(), 16)
    sweep = {p.d_k: p.snapshot for p in window.state.sweep}
    for d_k in (16, 256):  # the window's sweep runs the same config (trials <= its cap) at each d_k
        same(sweep[d_k].summary_rows(), d_k)


def test_export_all_menu_reports_the_folder_or_a_clear_error(qtbot, finished, tmp_path, monkeypatch):
    """The Ctrl+E path (dialog -> export -> message), with the dialog answered by the test."""
    from PySide6.QtWidgets import QFileDialog

    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(tmp_path))
    finished.export_all_action.trigger()
    made = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(made) == 1 and str(made[0]) in finished.last_message
    assert "Exported" in finished.last_message
    # a target whose "folder" is a file: refused with a message naming it (no traceback, no root
    # dependence)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(blocker / "sub"))
    finished.export_all_action.trigger()
    assert "not-a-folder" in finished.last_message and "Exported" not in finished.last_message


def test_plot_export_menu_reports_an_unwritable_target(qtbot, finished, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    target = blocker / "scores.png"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    panel = finished.page.panels["scores"]
    panel.export_requested.emit(panel, "png")
    assert "a-file" in finished.last_message and "Cannot" in finished.last_message
    ok = tmp_path / "ok.svg"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(ok), ""))
    panel.export_requested.emit(panel, "svg")
    _svg_has_paths(ok)


def test_weights_csv_holds_every_heatmap_row_of_every_rule(finished, tmp_path):
    rows = read_csv(finished.export_plot("weights", tmp_path / "w.csv", "csv"))
    snap = finished.state.snapshot
    for rule, result in snap.rules.items():
        mine = [r for r in rows if r["rule"] == rule]
        assert len(mine) == result.sample_weights.size
        first = [float(r["weight"]) for r in mine if r["row"] == "0"]
        np.testing.assert_array_equal(first, result.sample_weights[0])
    selected = {r["row"] for r in rows if r["selected_row"] == "True"}
    assert selected == {str(finished.page.panels["weights"].row_box.value())}


def test_a_session_carries_the_training_parameters(qtbot, window, tmp_path):
    import json

    page = window.open_page("TrainingPage")
    assert page is not None
    cfg = page.controls.config_from_widgets().replace(steps=123, lr=0.0042, seed=7)
    page.controls.set_config(cfg)
    path = window.save_session(tmp_path / "s.json")
    data = json.loads(path.read_text())
    assert data["training"]["steps"] == 123
    page.controls.set_config(cfg.replace(steps=5, lr=0.1))
    window.open_session(path)
    assert page.controls.config_from_widgets() == cfg


def test_a_session_fills_the_training_form_when_that_page_is_built(qtbot, tmp_path):
    import json

    from engine.training.config import TrainingConfig
    from ui.window.main_window import MainWindow

    path = tmp_path / "s.json"
    cfg = TrainingConfig(steps=77, seed=3)
    path.write_text(json.dumps({"config": SimulationConfig(trials=500).to_dict(),
                                "training": cfg.to_dict()}))
    w = MainWindow(theme="light", restore=False, persist=False)
    try:
        w.open_session(path)
        assert "TrainingPage" not in w.pages
        page = w.open_page("TrainingPage")
        assert page.controls.config_from_widgets() == cfg
    finally:
        w.shutdown()
        w.close()
        w.deleteLater()


@pytest.mark.parametrize("kind", ["png", "svg"])
def test_an_exported_figure_carries_its_parameters_and_opens_them(qtbot, window, wait_complete,
                                                                    tmp_path, kind):
    from ui.plots.figure_metadata import read_figure_metadata

    window.apply_config({"trials": 700, "d_k": 96, "seed": 11, "scalings": ["none", "dk"]})
    qtbot.waitUntil(lambda: window.state is not None and window.state.config.d_k == 96, timeout=10_000)
    wait_complete(window)
    made = window.state.config
    numbers = window.state.snapshot.rules["dk"].top_weight.mean
    path = window.export_plot("top_weight", tmp_path / f"fig.{kind}", kind)
    meta = read_figure_metadata(path)
    assert meta is not None and meta["plot"] == "top_weight"
    assert SimulationConfig.from_dict(meta["config"]) == made
    window.apply_config({"d_k": 8, "seed": 1})
    qtbot.waitUntil(lambda: window.state is not None and window.state.config.d_k == 8, timeout=10_000)
    assert window.open_session(path) == made
    assert window.params.config_from_widgets() == made
    wait_complete(window)
    assert window.state.config == made
    assert window.state.snapshot.rules["dk"].top_weight.mean == numbers  # same seed, same numbers


def test_an_image_without_parameters_is_refused(window, tmp_path):
    from PySide6.QtGui import QImage

    img = QImage(20, 20, QImage.Format.Format_RGB32)
    img.fill(0)
    path = tmp_path / "plain.png"
    img.save(str(path))
    with pytest.raises(ValueError, match="carries no"):
        window.open_session(path)


def test_slide_and_paper_presets(finished, tmp_path):
    from PySide6.QtGui import QImage

    from ui.export.plot_files import export_preset
    from ui.plots.figure_metadata import read_figure_metadata

    for plot_id in ("scores", "sweep"):
        panel = finished.page.panels[plot_id]
        png = export_preset(panel, tmp_path / f"{plot_id}_slide.png", "slide")
        img = QImage(str(png))
        assert (img.width(), img.height()) == (1920, 1080)
        _png_is_drawn(png)
        assert read_figure_metadata(png)["config"] == finished.state.config.to_dict()
        svg = export_preset(panel, tmp_path / f"{plot_id}_paper.svg", "paper")
        _svg_has_paths(svg)
        assert panel.title.encode() in svg.read_bytes()  # the panel's title is on the figure
    # the on-screen panel is untouched (the preset draws a copy)
    assert finished.page.panels["scores"].plot.getAxis("left").style.get("tickFont") is None


def test_an_export_all_that_fails_half_way_leaves_no_folder(finished, tmp_path, monkeypatch):
    """The figures are written, then the disk fills: the user finds nothing (not a folder of
    figures without results), and the message names the folder the export was to make."""
    import errno

    import engine.export

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(engine.export, "write_simulation_outputs", full)
    parent = tmp_path / "exports"
    parent.mkdir()
    with pytest.raises(ExportError, match=r"attention-lab-\d{8}-\d{6}: No space left") as err:
        finished.export_all_to(parent)
    assert "staging" not in str(err.value)
    assert list(parent.iterdir()) == []
