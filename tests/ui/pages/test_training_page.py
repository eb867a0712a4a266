"""The Training page: a short run streams to every plot; pause/resume/step/stop/reset; export;
closing while training ends the thread."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from engine.training.config import TrainingConfig
from ui.pages.training.page import TrainingPage

TINY = TrainingConfig(d_model=32, heads=2, items_max=6, classes=4, batch=8, probe_size=4,
                      scalings=("none", "sqrt", "cosine"), steps=12, log_every=3, device="cpu",
                      hist_bins=40)


@pytest.fixture
def page(qtbot):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    p = TrainingPage()
    qtbot.addWidget(p)
    p.resize(1500, 1000)
    p.show()
    qtbot.waitExposed(p)
    yield p
    p.shutdown()
    p.close()
    p.deleteLater()
    qtbot.wait(10)
    torch.set_num_threads(before)


def _use(page, cfg):
    page.controls.set_config(cfg)
    assert page.controls.config_from_widgets() == cfg


def test_the_demo_preset_is_the_default(page):
    from engine.training.presets import preset

    assert page.controls.config_from_widgets() == preset("demo").config
    assert page.status == "idle" and page.buttons["start"].isEnabled()


def test_a_short_run_streams_to_every_plot(page, qtbot):
    _use(page, TINY)
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)
    qtbot.waitUntil(lambda: not page.stale(), timeout=10_000)
    snap = page.snapshot
    assert snap.done and list(snap.log_steps) == [0, 3, 6, 9, 12]
    for pid, panel in page.panels.items():
        assert panel.draw_count > 0, pid
        assert panel.data_rows(), pid
    # one colour per rule, per-head curves with every logged step
    loss = page.panels["train_loss"]
    assert len(loss.curves) == 3
    x, _ = loss.curves[("sqrt", -1, -1)].getData()
    assert list(x) == [0, 3, 6, 9, 12]
    assert len(page.panels["train_entropy"].curves) == 3 * 2  # runs x heads
    assert page.panels["train_probe_attention"].image.image is not None


def test_bad_parameters_disable_start_and_name_the_field(page):
    page.controls.widgets["heads"].setValue(3)  # 256 is not divisible by 3
    assert not page.buttons["start"].isEnabled()
    assert "heads" in page.controls.error_label.text()


def test_pause_resume_step_stop_reset(page, qtbot):
    _use(page, TINY.replace(steps=100_000, log_every=5))
    page.start()
    qtbot.waitUntil(lambda: page.snapshot is not None and page.snapshot.step >= 5, timeout=60_000)
    page.toggle_pause()
    assert page.status == "paused" and page.buttons["pause"].text() == "Resume"
    paused_at = page.trainer.step
    qtbot.wait(200)
    assert page.trainer.step == paused_at  # nothing runs while paused
    page.step()
    qtbot.waitUntil(lambda: page.status == "paused" and page.trainer.step == paused_at + 1,
                    timeout=10_000)
    assert page.snapshot.log_steps[-1] == paused_at  # the single step was observed
    page.toggle_pause()
    assert page.status == "running"
    qtbot.waitUntil(lambda: page.snapshot.step > paused_at + 10, timeout=30_000)
    page.stop()
    assert page.status == "stopped" and not page.worker.is_running()
    assert page.buttons["export"].isEnabled()
    page.reset()
    assert page.status == "idle" and page.trainer is None and page.snapshot is None


def test_reset_then_start_reproduces_the_same_curves(page, qtbot):
    _use(page, TINY)
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)
    first = page.snapshot.scalars["loss"].copy()
    page.reset()
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)
    np.testing.assert_array_equal(page.snapshot.scalars["loss"], first)


def test_export_all_writes_figures_and_results(page, qtbot, tmp_path):
    _use(page, TINY)
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)
    out = page.export_all(tmp_path)
    names = {p.name for p in out.iterdir()}
    for f in ("metrics.csv", "metrics_heads.csv", "histograms.npz", "config.json", "weights.pt"):
        assert f in names
    for pid in page.panels:
        assert {f"{pid}.png", f"{pid}.svg", f"{pid}.csv"} <= names


def test_closing_while_training_ends_the_thread(qtbot):
    p = TrainingPage()
    qtbot.addWidget(p)
    p.show()
    _use(p, TINY.replace(steps=100_000))
    p.start()
    qtbot.waitUntil(lambda: p.snapshot is not None and p.snapshot.step > 0, timeout=60_000)
    assert p.worker.is_running()
    p.close()
    assert not p.worker.is_running() and p.worker.join(0.1)
    assert not p.timer.isActive()
    p.deleteLater()
    qtbot.wait(10)


def test_diverged_and_collapse_markers_are_drawn(qtbot):
    import torch

    from engine.training.trainer import Trainer
    from ui.pages.training.plots import EntropyPanel, LossPanel, TrainingView

    cfg = TINY.replace(scalings=("none", "sqrt", "dk"), collapse_threshold=0.99, collapse_logs=2)
    t = Trainer(cfg)
    with torch.no_grad():
        t.runs[2].model.head.weight.fill_(float("nan"))  # dk diverges at step 0
    snap = list(t.iterate())[-1]
    assert snap.diverged_step.tolist() == [-1, -1, 0]
    loss, entropy = LossPanel(), EntropyPanel()
    for panel in (loss, entropy):
        qtbot.addWidget(panel)
        panel.show()
        panel.refresh(TrainingView(snap), force=True)
    assert len(loss.diverged.data) == 1  # one red cross, for dk
    collapsed = int((snap.collapse_step >= 0).sum())
    assert collapsed > 0 and len(entropy.collapsed.data) == collapsed
    x, _ = loss.curves[("dk", -1, -1)].getData()
    assert x is None or len(x) == 0  # a run that diverged at step 0 has no curve
