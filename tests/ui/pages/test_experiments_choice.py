"""Choosing another experiment clears the run shown (progress, verdict, grid, jobs), or reloads
the chosen one from the output folder; Start into a folder that holds an experiment names it."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from engine.experiments.runner import run_experiment
from engine.experiments.spec import Axis, ExperimentSpec
from engine.training.config import TrainingConfig

TINY = TrainingConfig(d_model=16, heads=1, items_max=4, classes=4, batch=8, probe_size=4,
                      scalings=("none", "sqrt"), steps=4, log_every=2, device="cpu",
                      hist_bins=20)


def _folder_with(name: str, out) -> ExperimentSpec:
    """A finished 2-job experiment called ``name`` in ``out`` (run in this process)."""
    spec = ExperimentSpec(name, TINY, (Axis("seed", (0, 1)),))
    for _ in run_experiment(spec, out, workers=1):
        pass
    return spec


@pytest.fixture
def page(show_widget):
    from ui.pages.experiments.page import ExperimentsPage

    return show_widget(ExperimentsPage())


def test_choosing_another_experiment_clears_the_run_shown(page, qtbot, tmp_path):
    from ui.pages.experiments.page import NO_VERDICT

    _folder_with("seeds", tmp_path / "old")
    assert page.open_folder(tmp_path / "old")
    qtbot.waitUntil(lambda: "seeds" in page.verdict_label.text(), timeout=10_000)
    assert page.progress_bar.format() == "2/2 jobs"
    page.form.select_builtin("heads")
    assert page.run_spec is None and page.progress is None
    assert page.progress_bar.format() == "no run yet" and page.verdict_label.text() == NO_VERDICT
    heads = page.form.builtins["heads"]
    assert page.jobs.rowCount() == len(heads.jobs())
    assert page._grid_state is None or page._grid_state.filled == 0
    assert page.status == "idle" and not page.buttons["resume"].isEnabled()
    page.redraw()
    assert NO_VERDICT == page.verdict_label.text()  # nothing of the old run comes back


def test_start_into_a_folder_of_another_experiment_names_it(page, qtbot, tmp_path):
    _folder_with("seeds", tmp_path / "old")
    page.form.select_builtin("heads")
    page.form.out_edit.setText(str(tmp_path / "old"))
    assert page.start()
    qtbot.waitUntil(lambda: page.status == "error", timeout=30_000)
    assert "already holds experiment 'seeds'" in page.message
    assert "choose another folder" in page.message


def test_choosing_the_experiment_the_folder_holds_reloads_it(page, qtbot, tmp_path):
    _folder_with("heads", tmp_path / "held")
    _folder_with("seeds", tmp_path / "other")
    assert page.open_folder(tmp_path / "other")
    page.form.out_edit.setText(str(tmp_path / "held"))
    page.form.select_builtin("heads")
    assert page.run_out == tmp_path / "held" and page.run_spec.name == "heads"
    assert page.progress.done == 2 and page.progress_bar.format() == "2/2 jobs"


def test_empty_figures_show_zero_to_one_not_negative_values(page):
    """Before any job: no figure's y axis offers negative step counts, losses or accuracies
    (pyqtgraph's empty range is -0.5..0.5)."""
    assert page.figure_panels
    for panel, fig in zip(page.figure_panels, page._figure_state, strict=True):
        panel.refresh(fig, force=True)
        if panel.plot.getAxis("left").logMode:
            continue
        (x_lo, _x_hi), (lo, hi) = panel.plot.getViewBox().viewRange()
        assert lo >= -0.05 and hi <= 1.05, (panel.title, lo, hi)
        if not panel.plot.getAxis("bottom").logMode and not panel._figure.x_ticks:
            assert x_lo >= -0.05, (panel.title, x_lo)
