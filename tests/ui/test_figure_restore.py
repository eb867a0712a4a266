"""File -> Open of an exported figure reopens it into its page with everything that drew it:
the Simulation's parameters and view choices (log y, the heatmap's rule and row, the sweep's
axis), a Training figure's config and view, an experiment's folder (or the experiment into the
form), a real model's text, head and bugs; the status bar says what was restored."""

from __future__ import annotations

from pathlib import Path

import pytest

from ui.plots.figure_metadata import read_figure_metadata


@pytest.mark.parametrize("kind", ["png", "svg"])
def test_a_simulation_figure_restores_log_y_and_says_so(window, wait_complete, qtbot, tmp_path,
                                                        kind):
    window.apply_config({"trials": 600, "d_k": 96, "seed": 5, "scalings": ["none", "dk"]})
    qtbot.waitUntil(lambda: window.state is not None and window.state.config.d_k == 96,
                    timeout=10_000)
    wait_complete(window)
    scores = window.page.panels["scores"]
    scores.log_box.setChecked(True)
    made = window.state.config
    path = window.export_plot("scores", tmp_path / f"scores.{kind}", kind)
    meta = read_figure_metadata(path)
    assert meta["page"] == "simulation" and meta["view"]["log_y"] is True
    scores.log_box.setChecked(False)
    window.apply_config({"d_k": 8})
    window.tabs.setCurrentIndex(2)  # another page
    assert window.open_session(path) == made
    assert scores.log_box.isChecked() and scores.is_log
    assert window.tabs.currentWidget() is window.page
    assert window.params.config_from_widgets() == made
    assert f"Opened scores.{kind}: the score histograms figure: d_k 96" in window.last_message
    assert "log y on" in window.last_message
    assert window.statusBar().currentMessage() == window.last_message


@pytest.mark.slow
def test_the_heatmaps_rule_and_row_and_the_sweeps_axis_come_back(window, wait_complete, qtbot,
                                                                   tmp_path):
    window.apply_config({"trials": 300, "scalings": ["none", "sqrt", "dk"]})
    wait_complete(window)
    weights = window.page.panels["weights"]
    weights.rule_box.setCurrentText("none")
    weights.row_box.setValue(7)
    png = window.export_plot("weights", tmp_path / "weights.png", "png")
    assert window.set_sweep_axis("n_keys")
    wait_complete(window, timeout=60_000)
    sweep = window.export_plot("sweep", tmp_path / "sweep.svg", "svg")
    assert read_figure_metadata(sweep)["view"]["sweep_axis"] == "n_keys"
    window.set_sweep_axis("d_k")
    weights.rule_box.setCurrentText("dk")
    weights.row_box.setValue(0)
    window.open_session(png)
    assert weights.row_box.value() == 7 and weights.rule_box.currentText() == "none"
    assert "heatmap none, row 7" in window.last_message
    window.open_session(sweep)
    assert window.sweep_axis == "n_keys" and "sweep along n" in window.last_message


def _tiny_training():
    from engine.training.config import TrainingConfig
    from engine.training.trainer import Trainer

    cfg = TrainingConfig(d_model=16, heads=2, items_max=4, classes=4, batch=8, probe_size=4,
                         scalings=("none", "sqrt"), steps=6, log_every=2, device="cpu",
                         hist_bins=20, seed=4)
    trainer = Trainer(cfg)
    for _ in trainer.iterate():
        pass
    return cfg, trainer.snapshot()


def test_a_training_figure_fills_the_training_form_with_its_view(window, qtbot, tmp_path):
    pytest.importorskip("torch")
    cfg, snap = _tiny_training()
    training = window.ensure_page("TrainingPage")
    assert training.show_metrics(snap.metrics_rows(), "a run", cfg)
    qtbot.waitUntil(lambda: training.view is not None, timeout=5_000)
    loss = training.panels["train_loss"]
    loss.log_box.setChecked(False)
    path = training.export_panel("train_loss", tmp_path / "loss.png", "png")
    meta = read_figure_metadata(path)
    assert meta["page"] == "training" and meta["view"] == {"log_y": False}
    training.reset()
    training.controls.preset_box.setCurrentIndex(1)  # another preset in the form
    loss.log_box.setChecked(True)
    assert window.open_session(path) is None
    assert window.tabs.currentWidget() is training
    assert training.controls.config_from_widgets() == cfg
    assert training.controls.preset_box.currentText() == "figure loss.png"
    assert not loss.log_box.isChecked()
    assert "Opened loss.png: the training loss figure's training" in window.last_message
    assert "seed 4" in window.last_message and "Start trains it again" in window.last_message
    # the figure trains again into the same curves (same seed): Start
    training.start()
    qtbot.waitUntil(lambda: training.status == "done", timeout=60_000)
    assert training.snapshot.metrics_rows() == snap.metrics_rows()


def test_a_training_heatmap_brings_back_its_run_layer_and_head(window, qtbot, tmp_path):
    pytest.importorskip("torch")
    cfg, _snap = _tiny_training()
    training = window.ensure_page("TrainingPage")
    training.controls.set_config(cfg)
    training.start()
    qtbot.waitUntil(lambda: training.status == "done", timeout=60_000)
    training.run_box.setCurrentText("sqrt")
    training.head_box.setValue(1)
    qtbot.waitUntil(lambda: training.view is not None and training.view.head == 1, timeout=5_000)
    path = training.export_panel("train_logit_dist", tmp_path / "dist.svg", "svg")
    assert read_figure_metadata(path)["view"] == {"run": "sqrt", "layer": 0, "head": 1}
    training.reset()
    window.open_session(path)
    assert "heatmap of sqrt, layer 0, head 1" in window.last_message
    training.start()
    qtbot.waitUntil(lambda: training.status == "done", timeout=60_000)
    assert training.run_box.currentText() == "sqrt" and training.head_box.value() == 1


def _experiment_folder(out: Path, name: str = "tiny"):
    from engine.experiments.runner import run_experiment
    from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec
    from engine.training.config import TrainingConfig

    base = TrainingConfig(d_model=16, heads=1, items_max=4, classes=4, batch=8, probe_size=4,
                          scalings=("none", "sqrt"), steps=4, log_every=2, device="cpu",
                          hist_bins=20)
    spec = ExperimentSpec(name, base, (Axis("lr", (1e-3, 3e-2)), Axis("seed", (0, 1))),
                          figures=(FigureSpec("vs_axis", "final_loss", "Final loss", x="lr"),))
    for _ in run_experiment(spec, out, workers=1):
        pass
    return spec


def test_an_experiment_figure_reopens_its_folder_or_fills_the_form(window, qtbot, tmp_path):
    pytest.importorskip("torch")
    import shutil

    spec = _experiment_folder(tmp_path / "run")
    page = window.ensure_page("ExperimentsPage")
    assert page.open_folder(tmp_path / "run")
    page.grid_panel.set_choices(("lr", "seed"), "seed", "final_loss")
    page.redraw()
    from ui.export.plot_files import export_panel

    panel = page.figure_panels[0]
    panel.refresh(page._figure_state[0], force=True)
    png = export_panel(panel, tmp_path / "fig.png", "png")
    grid = export_panel(page.grid_panel, tmp_path / "grid.svg", "svg")
    meta = read_figure_metadata(png)
    assert meta["page"] == "experiments" and meta["folder"] == str((tmp_path / "run").resolve())
    assert read_figure_metadata(grid)["view"] == {"x": "seed", "metric": "final_loss"}
    page.form.select_builtin("heads")  # another experiment: the run goes
    assert page.run_spec is None
    window.tabs.setCurrentIndex(0)
    assert window.open_session(grid) is None
    assert window.tabs.currentWidget() is page
    assert page.run_out == (tmp_path / "run").resolve() and page.progress.done == 4
    assert page.grid_panel.x == "seed" and page.grid_panel.metric == "final_loss"
    assert "the experiment 'tiny' from" in window.last_message and "4/4 jobs" in window.last_message
    # the folder is gone: the experiment comes back into the form (Start runs it)
    shutil.rmtree(tmp_path / "run")
    page.form.select_builtin("heads")
    window.open_session(png)
    assert page.run_spec is None and page.spec is not None
    assert page.spec.axes == spec.axes and page.spec.base == spec.base
    assert "into the form" in window.last_message and "no longer holds it" in window.last_message


def test_the_cli_experiment_figures_carry_the_experiment_and_folder(tmp_path):
    pytest.importorskip("torch")
    from engine.experiments.figures import figure_data
    from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec
    from engine.training.config import TrainingConfig
    from ui.export.experiment_figures import write_experiment_figures

    spec = ExperimentSpec("t", TrainingConfig(), (Axis("seed", (0, 1)),),
                          figures=(FigureSpec("by_rule", "success", "Success"),))
    source = {"experiment": spec.to_dict(), "folder": str(tmp_path)}
    paths = write_experiment_figures(figure_data(spec, []), tmp_path, source=source)
    meta = read_figure_metadata(next(p for p in paths if p.suffix == ".png"))
    assert meta["page"] == "experiments" and ExperimentSpec.from_dict(meta["experiment"]) == spec
    assert meta["folder"] == str(tmp_path)


def _figure_with(path: Path, meta: dict) -> Path:
    """A PNG carrying ``meta`` as its parameters (as a hand-edited or hostile figure would)."""
    import json

    from PySide6.QtGui import QImage

    from ui.plots.figure_metadata import METADATA_KEY

    image = QImage(4, 4, QImage.Format.Format_RGB32)
    image.fill(0)
    image.setText(METADATA_KEY, json.dumps(meta))
    assert image.save(str(path), "PNG")
    return path


@pytest.mark.parametrize("meta, field", [
    ({"page": "simulation", "plot": "scores", "config": {"d_k": -3}}, "config.d_k"),
    ({"page": "training", "plot": "train_loss", "training": {"steps": "many"}}, "training.steps"),
    ({"page": "real_model", "plot": "x", "real_model": {"text": 5}}, "real_model.text"),
    ({"page": "experiments", "plot": "grid", "experiment": {"name": 3}}, "experiment"),
    ({"page": "experiments", "plot": "grid", "experiment": {}, "folder": ["a"]}, "folder"),
])
def test_a_bad_figure_of_a_page_is_refused_in_one_line_and_changes_nothing(
        window, monkeypatch, tmp_path, meta, field):
    from PySide6.QtWidgets import QFileDialog

    path = _figure_with(tmp_path / "bad.png", {"app": "attention-scaling-lab", **meta})
    said = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(path), ""))
    monkeypatch.setattr(window, "message", lambda title, text, error=False: said.append(text))
    before = window.params.widget_values(), window.tabs.currentIndex()
    window.sessions.open_dialog()
    assert len(said) == 1 and str(path) in said[0] and field in said[0], said
    assert "\n" not in said[0]
    assert (window.params.widget_values(), window.tabs.currentIndex()) == before


def test_a_figure_that_names_no_page_opens_as_the_session_it_carries(window, tmp_path):
    """Figures from before figures named their page carry a session's parts: they open as one."""
    from engine.config import SimulationConfig

    cfg = SimulationConfig(d_k=48, trials=200, seed=9)
    path = _figure_with(tmp_path / "old.png", {"app": "attention-scaling-lab",
                                               "config": cfg.to_dict(), "sweep_axis": "d_k"})
    assert window.open_session(path) == cfg
    assert window.params.config_from_widgets() == cfg
