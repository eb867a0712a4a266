"""An experiment job opened in the Training page: the preset box names the job ("experiment job
N"), not the preset the form held before, and the plots the job did not log say why they are
empty instead of "appears after Start"."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from engine.training.config import TrainingConfig

TINY = TrainingConfig(d_model=16, heads=1, items_max=4, classes=4, batch=8, probe_size=4,
                      scalings=("none", "sqrt"), steps=6, log_every=2, device="cpu",
                      hist_bins=20, lr=3e-3)


def _job_result(index: int) -> dict:
    from engine.training.trainer import Trainer

    trainer = Trainer(TINY)
    for _ in trainer.iterate():
        pass
    return {"index": index, "key": "lr=0.003", "config": TINY.to_dict(),
            "rows": trainer.snapshot().metrics_rows(),
            "rules": {r: {"diverged_step": None} for r in TINY.scalings}, "seconds": 1.0}


def test_an_opened_job_names_itself_in_the_preset_box_and_the_empty_plots_say_why(window, qtbot):
    from ui.pages.training.metrics_view import NOT_IN_ROWS

    training = window.ensure_page("TrainingPage")
    demo = training.controls.preset_box.currentText()
    assert window.page_links.open_experiment_job(_job_result(3), "lr job 3 (lr=0.003)")
    controls = training.controls
    assert controls.preset_box.currentText() == "experiment job 3"
    assert "lr job 3 (lr=0.003)" in controls.preset_text.text()
    assert "Demo" not in controls.preset_text.text()
    assert controls.config_from_widgets() == TINY
    for pid in NOT_IN_ROWS:
        hint = training.panels[pid].hint
        assert hint.visible and "not logged by the job" in hint.item.toPlainText()
        assert "appears after Start" not in hint.item.toPlainText()
    # a second job replaces the first (one such item at most)
    assert window.page_links.open_experiment_job(_job_result(5), "lr job 5")
    texts = [controls.preset_box.itemText(i) for i in range(controls.preset_box.count())]
    assert controls.preset_box.currentText() == "experiment job 5"
    assert not any(t == "experiment job 3" for t in texts)
    # choosing a preset again loads it and drops the job's item
    controls.preset_box.setCurrentIndex(controls.preset_box.findText(demo))
    assert controls.preset_box.findText("experiment job 5") < 0
    assert controls.config_from_widgets() == controls.presets[controls.preset_box.currentData()].config
    # Reset: back to "appears after Start"
    training.reset()
    for pid in NOT_IN_ROWS:
        assert "appears after Start" in training.panels[pid].hint.item.toPlainText()
