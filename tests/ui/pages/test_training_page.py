"""The Training page: a short run streams to every plot; pause/resume/step/stop/reset; export;
closing while training ends the thread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pytest

pytest.importorskip("torch")

from engine.training.config import TrainingConfig
from ui.pages.training.page import TrainingPage

TINY = TrainingConfig(d_model=32, heads=2, items_max=6, classes=4, batch=8, probe_size=4,
                      scalings=("none", "sqrt", "cosine"), steps=12, log_every=3, device="cpu",
                      hist_bins=40)


@pytest.fixture(autouse=True)
def _one_thread():
    """torch's default thread pool on 2 shared cores costs seconds per tiny run."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def page(show_widget):
    return show_widget(TrainingPage(), (1500, 1000))


def _use(page, cfg):
    page.controls.set_config(cfg)
    assert page.controls.config_from_widgets() == cfg


def test_the_demo_preset_is_the_default(page):
    from engine.training.presets import preset

    assert page.controls.config_from_widgets() == preset("demo").config
    assert page.status == "idle" and page.buttons["start"].isEnabled()
    assert not page.controls.locked
    # the form fits its side panel (no clipped preset text, rule names or combo boxes)
    viewport = page.controls.parentWidget()
    assert page.controls.minimumSizeHint().width() <= viewport.width()
    assert page.controls.width() <= viewport.width()


def test_one_colour_per_rule_from_the_theme(page):
    from engine.training.config import TRAINING_RULES
    from ui.theme import RULE_COLORS, rule_text_color

    assert set(RULE_COLORS) == set(TRAINING_RULES)
    assert len(set(RULE_COLORS.values())) == len(TRAINING_RULES)
    from PySide6.QtGui import QPalette

    for rule in TRAINING_RULES:
        box = page.controls.rule_checks[rule]
        # through the palette, not a style sheet (which kept the old theme's colours), in the
        # rule's hue made readable on the theme (ui.theme.rule_text_color)
        got = box.palette().color(QPalette.ColorRole.WindowText).name().lower()
        assert got == rule_text_color(rule).lower(), rule
        assert box.styleSheet() == ""


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
    from ui.theme import RULE_COLORS

    for pid in ("train_loss", "train_entropy", "train_grads"):
        for key, item in page.panels[pid].curves.items():
            assert item.opts["pen"].color().name() == RULE_COLORS[key[0]].lower(), (pid, key)
    assert page.panels["train_probe_attention"].image.image is not None
    _the_line_style_key_is_in_the_strip_on_screen_and_the_title_in_a_figure(page)


def _the_line_style_key_is_in_the_strip_on_screen_and_the_title_in_a_figure(page):
    """Which matrix each line style is: an entry of the rule strip on screen (as the plot's
    title it took a row of a 140 px plot in presentation mode), the figure's title in an
    export."""
    from ui.export.plot_files import figure_clone

    grads = page.panels["train_grads"]
    strip = page.rule_strip.text()
    assert "━━</b> W_Q" in strip and "╍╍</b> W_K" in strip and "┈┈</b> W_V" in strip
    assert "Gradient norms: " in strip  # (the full form: three rules leave it room)
    assert not grads.plot.titleLabel.isVisible()
    assert grads.plot.titleLabel.maximumHeight() == 0
    for style in ("screen", "slide"):
        with figure_clone(grads, style) as clone:
            title = clone.plot.titleLabel
            assert title.isVisible() and "Gradient norms" in title.text
            assert "solid W_Q · dash W_K · dot W_V" in title.text


def test_before_a_run_the_strip_names_the_rules_start_will_train(page):
    """The rule strip (the plots' on-screen legend) is not blank before the first step: it
    names the checked rules in their colours, and follows the form."""
    _use(page, TINY)
    text = page.rule_strip.text()
    assert all(rule in text for rule in ("none", "sqrt", "cosine")) and "qknorm" not in text
    page.controls.rule_checks["cosine"].setChecked(False)
    assert "cosine" not in page.rule_strip.text() and "sqrt" in page.rule_strip.text()


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
    # Resume continues with the run's own config: the form is locked, not silently ignored
    assert page.controls.locked and page.controls.lock_label.isVisible()
    assert not page.controls.widgets["lr"].isEnabled()
    assert not page.controls.rule_checks["sqrt"].isEnabled()
    assert page.controls.config_from_widgets() == page.trainer.cfg
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
    assert not page.controls.locked and page.controls.widgets["lr"].isEnabled()
    assert page.buttons["export"].isEnabled()
    # the strip is the legend of the curves drawn: a rule checked after the run is not in it
    page.controls.rule_checks["dk"].setChecked(True)
    assert "dk" not in page.rule_strip.text() and "cosine" in page.rule_strip.text()
    page.reset()
    assert page.status == "idle" and page.trainer is None and page.snapshot is None
    assert "dk" in page.rule_strip.text()  # no run: the rules Start will train
    # the old run's curves, images and titles are gone from every plot
    for pid, panel in page.panels.items():
        for plot in panel.plot_items():
            for item in plot.listDataItems():
                x, _y = item.getData()
                assert x is None or len(x) == 0, pid
            for item in plot.items:
                if isinstance(item, pg.ImageItem):
                    assert item.image is None, pid
            assert "step" not in (plot.titleLabel.text or ""), pid


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


def _diverged_and_collapsed():
    import torch

    from engine.training.trainer import Trainer

    cfg = TINY.replace(scalings=("none", "sqrt", "dk"), collapse_threshold=0.99, collapse_logs=2)
    t = Trainer(cfg)
    with torch.no_grad():
        t.runs[2].model.head.weight.fill_(float("nan"))  # dk diverges at step 0
    snap = list(t.iterate())[-1]
    assert snap.diverged_step.tolist() == [-1, -1, 0]
    return snap


def test_the_status_line_names_diverged_and_collapsed_runs(page):
    snap = _diverged_and_collapsed()
    page.snapshot = snap
    page._update_status_text()
    text = page.status_label.text()
    assert "dk diverged at step 0" in text
    r = int(np.flatnonzero((snap.collapse_step >= 0).any(axis=(1, 2)))[0])
    since = int(snap.collapse_step[r][snap.collapse_step[r] >= 0].min())
    # rich text: a bare "<" would open a tag and swallow the rest of the line
    assert f"{snap.rules[r]}: low entropy (H/log n &lt; 0.99 since step {since})" in text
    # a marker, not a failure: only the diverged run is in the error colour, and "collapse"
    # (a right sqrt run ends near one-hot) is not said
    from ui.theme import current_theme

    assert text.count(current_theme().error) == 1 and "collapse" not in text
    from PySide6.QtGui import QTextDocument

    doc = QTextDocument()
    doc.setHtml(text)
    assert f"(H/log n < 0.99 since step {since}) in L0H" in doc.toPlainText()


def test_diverged_and_collapse_markers_are_drawn(qtbot):
    from ui.plots.training.panels import EntropyPanel, LossPanel, TrainingView

    snap = _diverged_and_collapsed()
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


def test_logit_heatmap_rows_are_the_engine_bins_and_lines_sit_on_them(qtbot):
    """The heatmap is drawn in bin-index space (asinh bins): the median line of each step lies in
    the bin that holds the median, and the axis labels are logit values, increasing."""
    from engine.training.trainer import run_training
    from ui.plots.training.panels import LogitDistributionPanel, TrainingView

    _, snap = run_training(TINY)
    panel = LogitDistributionPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.refresh(TrainingView(snap, run=1), force=True)
    edges = snap.hist_edges
    assert panel.image.image.shape == (snap.n_logs, len(edges) - 1)
    x, y = panel.lines[len(snap.percentiles) // 2].getData()
    median = snap.logit_percentiles[:, 1, 0, 0, len(snap.percentiles) // 2]
    np.testing.assert_array_equal(x, snap.log_steps)
    for yy, m in zip(y, median, strict=True):
        i = int(np.floor(yy))
        assert edges[i] <= m <= edges[min(i + 1, len(edges) - 1)]
    ticks = panel.plot.getAxis("left")._tickLevels[0]
    values = [float(label) for _, label in ticks]
    assert len(values) >= 3 and values == sorted(values) and 0.0 in values


def test_a_step_that_outlasts_the_pause_wait_is_not_raced(page, qtbot, monkeypatch):
    """When one training step takes longer than the pause waits for, the GUI must not touch the
    trainer (snapshot, resume, export) until that thread has left it."""
    import threading

    from ui.export.plot_files import ExportError
    from ui.pages.training import page as page_module

    _use(page, TINY.replace(steps=100_000, log_every=5))
    page.start()
    qtbot.waitUntil(lambda: page.snapshot is not None and page.snapshot.step >= 5, timeout=60_000)
    trainer = page.trainer
    real = trainer.advance
    inside = threading.Event()  #: the worker is inside a held step
    release = threading.Event()  #: the held step may finish

    def advance(*args, **kwargs):
        if not release.is_set():
            inside.set()
            release.wait(30.0)  # the step lasts until the test lets it go, however loaded the machine
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer, "advance", advance)
    monkeypatch.setattr(page_module, "JOIN_S", 0.05)
    assert inside.wait(30.0), "the worker never entered a training step"
    try:
        page.pause()
        assert page.status == "paused" and not page._trainer_free()
        page.resume()  # refused: the old thread still owns the trainer
        assert page.status == "paused" and "still finishing" in page.status_label.text()
        with pytest.raises(ExportError):
            page.export_all("/nonexistent-not-written")
    finally:
        release.set()
    qtbot.waitUntil(page._trainer_free, timeout=5_000)
    page.resume()
    assert page.status == "running"
    page.stop()


def test_only_failures_are_red_in_the_status_line(page):
    """"exported to ..." used to be shown in the error red, like "export failed"."""
    red = "color:#C62828"
    page._update_status_text("exported to /tmp/x")
    text = page.status_label.text()
    assert "exported to /tmp/x" in text and red not in text
    page._update_status_text("export failed: disk full", error=True)
    assert f"<span style='{red}'>export failed: disk full</span>" in page.status_label.text()
    page._set_status("error", "RuntimeError: boom")
    assert f"<span style='{red}'>RuntimeError: boom</span>" in page.status_label.text()


def test_a_refused_start_says_why_next_to_the_button(page):
    page.controls.widgets["lr"].setValue(0.0)  # below its range: clamped to the minimum, valid
    page.controls.widgets["items_min"].setValue(50)
    page.controls.widgets["items_max"].setValue(10)
    assert not page.buttons["start"].isEnabled()
    assert page.start_reason.isVisible() and "items" in page.start_reason.text()
    page.controls.widgets["items_max"].setValue(60)
    assert page.buttons["start"].isEnabled() and not page.start_reason.isVisible()


def test_empty_plots_say_what_will_appear_instead_of_empty_legends(page):
    for panel in page.panels.values():
        assert panel.hint.visible and "after Start" in panel.hint.item.textItem.toPlainText()
        for plot in panel.plot_items():
            assert plot.legend is None or not plot.legend.isVisible()


def test_probe_attention_ticks_sit_at_cell_centres_one_per_cell(page, qtbot):
    _use(page, TINY.replace(steps=3, log_every=1))
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)
    panel = page.panels["train_probe_attention"]
    qtbot.waitUntil(lambda: panel.draw_count > 0, timeout=5_000)
    assert not panel.hint.visible
    n_q, n_k = page.snapshot.probe_weights.shape[-2:]
    rect = panel.image.mapRectToParent(panel.image.boundingRect())
    assert (rect.left(), rect.top(), rect.width(), rect.height()) == (-0.5, -0.5, n_k, n_q)
    major, minor = panel.plot.getAxis("bottom")._tickLevels
    ticks = sorted(v for v, _ in major + minor)
    assert ticks == list(range(n_k))  # one tick per cell, at its centre (never n_k itself)
    page.reset()
    assert panel.hint.visible


@pytest.mark.slow
def test_each_panels_export_menu_writes_its_file(page, qtbot, tmp_path, monkeypatch):
    """The ⋯ menu of every panel is connected and the same as on the Simulation page: PNG, SVG,
    CSV, a slide (1920x1080 PNG) and a paper figure (SVG) land where the dialog said."""
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QFileDialog, QToolButton

    from ui.plots.base import EXPORT_ACTIONS

    _use(page, TINY)
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)
    asked = []

    def save_as(_parent, _title, suggested, _filter):
        asked.append(suggested)  # a full path: the last folder used, else Pictures / Documents
        return str(tmp_path / Path(suggested).name), ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", save_as)
    names = {"png": "{}.png", "svg": "{}.svg", "csv": "{}.csv", "slide": "{}_slide.png",
             "paper": "{}_paper.svg"}
    for pid, panel in page.panels.items():
        button = next(b for b in panel.findChildren(QToolButton) if b.text() == "⋯")
        actions = [a for a in button.menu().actions() if a.text()]
        assert [a.text() for a in actions] == [text for text, _kind in EXPORT_ACTIONS]
        for action in actions:
            action.trigger()
        for name in names.values():
            out = tmp_path / name.format(pid)
            assert out.is_file() and out.stat().st_size > 0, out
    assert len(asked) == 5 * len(page.panels)
    png = (tmp_path / "train_loss.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    slide = QImage(str(tmp_path / "train_loss_slide.png"))
    assert (slide.width(), slide.height()) == (1920, 1080)
    assert b"Training loss" in (tmp_path / "train_loss_paper.svg").read_bytes()
    header = (tmp_path / "train_loss.csv").read_text().splitlines()[0]
    assert "step" in header


def test_a_panel_export_before_any_run_says_why(page, tmp_path):
    from ui.export.plot_files import ExportError

    with pytest.raises(ExportError, match="start a training run"):
        page.export_panel("train_loss", tmp_path / "x.png", "png")
    assert not (tmp_path / "x.png").exists()


def test_an_export_all_that_fails_half_way_leaves_no_folder(page, qtbot, tmp_path, monkeypatch):
    import errno

    import engine.training.export
    from ui.export.plot_files import ExportError

    _use(page, TINY)
    page.start()
    qtbot.waitUntil(lambda: page.status == "done", timeout=60_000)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(engine.training.export, "write_training_outputs", full)
    with pytest.raises(ExportError, match="No space left"):
        page.export_all(tmp_path)
    assert list(tmp_path.iterdir()) == []
