"""The Experiments page: a tiny grid runs in worker processes and fills the grid view, the
figures and the verdict; a click opens a job's logged curves in the Training page; Stop keeps the
finished jobs and Resume continues; Export all writes the files; invalid axes disable Start."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

pytest.importorskip("torch")

from engine.training.config import TrainingConfig

TINY = TrainingConfig(d_model=16, heads=1, items_max=4, classes=4, batch=8, probe_size=4,
                      scalings=("none", "sqrt"), steps=6, log_every=2, device="cpu",
                      hist_bins=20)


def _experiments_page(window):
    page = window.open_page("ExperimentsPage")
    assert type(page).__name__ == "ExperimentsPage"
    return page


def _use(page, base, axes, workers, out):
    page.form.set_base(base)
    page.form.axes.set_axes(axes)
    page.form.workers.setValue(workers)
    page.form.out_edit.setText(str(out))
    assert page.spec is not None, page.reason_label.text()
    assert page.buttons["start"].isEnabled()


def _no_pool_left(page, qtbot):
    page.shutdown()
    qtbot.waitUntil(lambda: not multiprocessing.active_children(), timeout=10_000)


def test_the_window_has_the_experiments_tab_and_takes_the_training_settings(window, qtbot):
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert "Experiments" in titles
    page = _experiments_page(window)
    assert "TrainingPage" not in window.pages  # built on demand, not by the tab
    assert page.form.builtin_name == "seeds" and page.spec is not None
    assert page.form.use_training_settings()
    training = window.pages["TrainingPage"]
    assert window.tabs.currentWidget() is page  # taking the settings does not switch tabs
    assert page.form.base == training.current_config()
    assert page.form.builtin_name == ""  # now a grid of one's own
    assert page.spec.base.replace(scalings=training.current_config().scalings) == page.spec.base
    # the planned figures are shown, and only those (replaced panels leave no trace)
    page.form.axes.set_axes([("lr", "1e-3, 1e-2"), ("seed", "0, 1")])
    qtbot.wait(50)
    shown = [p for p in page.figures_inner.findChildren(type(page.figure_panels[0]))
             if p.isVisible()]
    assert sorted(p.title for p in shown) == sorted(f.title for f in page.spec.figures)


def test_invalid_axis_values_mark_the_row_and_disable_start(window):
    from ui.theme import current_theme

    page = _experiments_page(window)
    page.form.set_base(TINY)
    page.form.axes.set_axes([("lr", "1e-3, abc"), ("seed", "0, 1")])
    row = page.form.axes.rows[0]
    # an error-coloured border on the theme's own field colours (readable in both themes)
    assert f"border: 2px solid {current_theme().error}" in row.values_edit.styleSheet()
    assert "lr=abc" in row.error_label.text() and not row.error_label.isHidden()
    assert page.form.axes.rows[1].values_edit.styleSheet() == ""
    assert not page.buttons["start"].isEnabled()
    assert "lr=abc" in page.reason_label.text()
    row.values_edit.setText("1e-3, -1")  # the engine's range check names the value
    assert "lr=-1" in row.error_label.text() and not page.buttons["start"].isEnabled()
    row.values_edit.setText("1e-3, 1e-2")
    assert row.values_edit.styleSheet() == "" and page.buttons["start"].isEnabled()
    assert page.reason_label.text() == ""
    page.form.axes.add_row("lr", "0.1")  # the same field twice
    assert not page.buttons["start"].isEnabled()
    assert "already an axis" in page.form.axes.rows[-1].error_label.text()


@pytest.mark.slow
def test_a_tiny_grid_fills_the_view_opens_a_job_and_exports(window, qtbot, tmp_path):
    page = _experiments_page(window)
    _use(page, TINY, [("lr", "1e-3, 1e-2"), ("seed", "0, 1")], 2, tmp_path / "run")
    assert "4 job(s)" in page.plan_label.text()
    assert page.start()
    assert page.status == "running" and not page.buttons["start"].isEnabled()
    assert not page.form.isEnabled() or not page.form.choice.isEnabled()  # locked while running
    qtbot.waitUntil(lambda: page.status == "done", timeout=120_000)
    qtbot.waitUntil(lambda: not page.redraw() and page._grid_state is not None, timeout=5_000)
    p = page.progress
    assert p.finished and p.done == 4 and p.failed == 0
    # the grid: lr (columns) x rule (rows), every cell filled, hover and click
    grid = page._grid_state
    assert grid.x == "lr" and grid.rules == ("none", "sqrt") and len(grid.x_labels) == 2
    assert grid.filled == 4 and page.grid_panel.draw_count > 0
    assert page.grid_panel.data_rows()
    panel = page.grid_panel
    panel._on_move(panel.scene_pos_of(1, 1))
    assert panel.hover_text.startswith("sqrt, lr=0.01: final training loss")
    assert panel.readout.text() == panel.hover_text
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    QApplication.sendEvent(panel.glw, QEvent(QEvent.Type.Leave))  # the pointer leaves the plot
    assert panel.hover_text == "" and panel.readout.text() == ""
    # figures with error bars and the verdict
    assert page.figure_panels and all(f.draw_count > 0 for f in page.figure_panels)
    assert all(f.data_rows() for f in page.figure_panels)
    assert "none" in page.verdict_label.text() and "no finished jobs" not in page.verdict_label.text()
    assert [page.jobs.status(i) for i in range(4)] == ["done"] * 4
    # a click on a cell opens that job's logged curves in the Training page
    from PySide6.QtCore import QPoint, Qt

    pos = panel.glw.mapFromScene(panel.scene_pos_of(0, 1))
    qtbot.mouseClick(panel.glw.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))
    training = window.pages.get("TrainingPage")
    qtbot.waitUntil(lambda: training is not None or "TrainingPage" in window.pages, timeout=2000)
    training = window.pages["TrainingPage"]
    assert window.tabs.currentWidget() is training and training.status == "viewing"
    job = next(r for r in p.results if r["index"] == grid.jobs[1][0])
    assert job["values"]["lr"] == 0.01
    qtbot.waitUntil(lambda: not training.stale(), timeout=10_000)
    x, y = training.panels["train_loss"].curves[("none", -1, -1)].getData()
    rows = [r for r in job["rows"] if r["scaling"] == "none"]
    assert list(x) == [r["step"] for r in rows]
    assert list(y) == pytest.approx(list(np.log10([r["loss"] for r in rows])))  # log y
    for pid in ("train_entropy", "train_logit_std", "train_grads"):
        assert training.panels[pid].data_rows(), pid
    assert training.panels["train_logit_dist"].data_rows() == []  # not logged: not drawn
    # export all: figures, the grid, summary.csv, points.csv, metrics.csv, experiment.json
    window.tabs.setCurrentWidget(page)
    out = page.export_all(tmp_path / "export")
    assert out is not None and str(out) in page.message
    names = {f.name for f in out.iterdir()}
    assert {"summary.csv", "points.csv", "metrics.csv", "experiment.json", "experiment_grid.png",
            "experiment_grid.svg"} <= names
    for f in page.figure_panels:
        assert f"{f.plot_id}.png" in names and f"{f.plot_id}.svg" in names
    assert len((out / "summary.csv").read_text().splitlines()) == 1 + 4 * 2
    _no_pool_left(page, qtbot)


@pytest.mark.slow
def test_stop_keeps_finished_jobs_and_resume_continues(window, qtbot, tmp_path, monkeypatch):
    """Stop after the first job, deterministically: the jobs run one at a time in this process
    (the device queue) and a hook holds every later job until the runner passes the Stop on, so
    exactly job 0 is kept; Resume then runs exactly jobs 1 and 2."""
    import threading
    import time

    from engine.experiments import runner

    page = _experiments_page(window)
    monkeypatch.setattr(runner, "runs_on_cuda", lambda spec: True)
    real = runner.run_job
    holding = threading.Event()
    holding.set()
    ran: list[int] = []

    def hooked(config, target=0.9, cancelled=None, progress_path=None):
        if holding.is_set() and config["seed"] > 0:  # held until Stop reaches the job
            while not cancelled():
                time.sleep(0.01)
        res = real(config, target, cancelled, progress_path)
        if not res.get("cancelled"):
            ran.append(config["seed"])
        return res

    monkeypatch.setattr(runner, "run_job", hooked)
    _use(page, TINY.replace(steps=40, log_every=10), [("seed", "0, 1, 2")], 1, tmp_path / "run")
    page.start()
    qtbot.waitUntil(lambda: page.progress is not None and page.progress.done >= 1,
                    timeout=120_000)
    page.stop()
    assert page.status == "stopping"
    qtbot.waitUntil(lambda: page.status == "stopped", timeout=10_000)
    assert page.progress.done == 1 and ran == [0]
    assert sorted(p.name for p in (tmp_path / "run" / "jobs").iterdir()) == ["job-00000.json"]
    job0 = (tmp_path / "run" / "jobs" / "job-00000.json").read_bytes()
    assert len((tmp_path / "run" / "summary.csv").read_text().splitlines()) == 1 + 2
    assert page.buttons["resume"].isEnabled()
    assert [page.jobs.status(i) for i in range(3)] == ["done", "pending", "pending"]
    before = {r["key"]: r["rows"] for r in page.progress.results}
    # the folder reopens (experiment.json and the job files) and Resume continues it
    holding.clear()
    page.run_spec = page.progress = None
    assert page.open_folder(tmp_path / "run")
    assert page.progress.done == 1 and page.status == "stopped"
    assert page.buttons["resume"].isEnabled() and page.run_spec.name == "custom"
    assert page.resume()
    qtbot.waitUntil(lambda: page.status == "done", timeout=120_000)
    p = page.progress
    assert p.done == 3 and p.resumed == 1 and ran == [0, 1, 2]  # job 0 kept, not rerun
    assert (tmp_path / "run" / "jobs" / "job-00000.json").read_bytes() == job0
    after = {r["key"]: r["rows"] for r in p.results}
    assert all(after[k] == v for k, v in before.items())
    assert len((tmp_path / "run" / "summary.csv").read_text().splitlines()) == 1 + 3 * 2
    _no_pool_left(page, qtbot)


def test_grid_cells_hold_means_with_errors_and_the_jobs_behind_them():
    from engine.experiments.spec import Axis, ExperimentSpec
    from ui.pages.experiments.grid_data import EVERY_JOB, grid_data

    spec = ExperimentSpec("t", TINY, (Axis("lr", (1e-3, 1e-2)), Axis("seed", (0, 1))))

    def res(index, lr, seed, loss_none, steps_sqrt):
        rules = {"none": {"final_loss": loss_none, "steps_to_target": None},
                 "sqrt": {"final_loss": 0.1, "steps_to_target": steps_sqrt}}
        return {"index": index, "key": f"{index}", "values": {"lr": lr, "seed": seed},
                "rules": rules, "rows": [], "error": None}

    results = [res(0, 1e-3, 0, 1.0, 4), res(1, 1e-3, 1, 3.0, None),
               {"index": 2, "key": "2", "values": {"lr": 1e-2, "seed": 0}, "rules": {},
                "rows": [], "error": "RuntimeError: boom"}]
    g = grid_data(spec, results, "final_loss", "lr")
    assert g.cells[0][0].value == pytest.approx(2.0) and g.cells[0][0].n == 2
    assert g.cells[0][0].hi - g.cells[0][0].value == pytest.approx(1.0)  # SE of (1, 3)
    assert g.cells[0][1] is None and g.jobs == ((0, 1), ())  # a failed job is not a value
    assert "no finished job yet" in g.describe(0, 1)
    s = grid_data(spec, results, "success", "lr")
    assert s.cells[1][0].value == pytest.approx(0.5) and s.cells[0][0].value == 0.0
    assert "1/2 = 0.50 (95 % CI" in s.describe(1, 0)
    steps = grid_data(spec, results, "steps_to_target", EVERY_JOB)
    assert steps.cells[0][0] is None and "never reached" in steps.describe(0, 0)
    assert steps.cells[1][0].value == 4 and len(steps.x_labels) == 4


def test_the_training_page_shows_logged_rows_as_its_curves(show_widget, qtbot):
    from engine.training.trainer import Trainer
    from ui.pages.training.page import TrainingPage

    trainer = Trainer(TINY)
    for _ in trainer.iterate():
        pass
    snap = trainer.snapshot()
    page = show_widget(TrainingPage(), (1500, 1000))
    assert page.show_metrics(snap.metrics_rows(), "job 0", TINY, {"none": None, "sqrt": None})
    qtbot.waitUntil(lambda: not page.stale(), timeout=10_000)
    assert page.status == "viewing" and "job 0" in page.status_label.text()
    for rule in TINY.scalings:
        r = snap.rules.index(rule)
        x, y = page.panels["train_accuracy"].curves[(rule, -1, -1)].getData()
        assert list(x) == list(snap.log_steps)
        assert list(y) == pytest.approx(list(snap.scalars["accuracy"][:, r]))
        _, std = page.panels["train_logit_std"].curves[(rule, 0, 0)].getData()  # log y: log10
        want = snap.heads["logit_std"][:, r].mean(axis=(1, 2))
        assert list(std) == pytest.approx(list(np.log10(want)))
    assert not page.buttons["export"].isEnabled() and page.buttons["start"].isEnabled()


@pytest.mark.slow
def test_a_job_is_timed_for_the_estimate():
    from engine.experiments.spec import Axis, ExperimentSpec
    from ui.pages.experiments.estimate import time_job

    est = list(time_job([TINY], lambda: False))
    assert len(est) == 1 and est[0].step_s > 0 and est[0].timing(TINY).log_s > 0
    spec = ExperimentSpec("t", TINY, (Axis("seed", (0, 1, 2, 3)),))
    one, two = est[0].grid_seconds(spec, 1), est[0].grid_seconds(spec, 2)
    assert two < one and est[0].job_seconds(TINY.replace(steps=60)) > est[0].job_seconds(TINY)


def test_the_last_choice_is_remembered(show_widget, tmp_path):
    from ui.pages.experiments.page import ExperimentsPage
    from ui.settings import open_settings

    page = show_widget(ExperimentsPage())
    page.form.set_base(TINY)
    page.form.axes.set_axes([("d_k", "8, 16"), ("seed", "0, 1, 2")])
    page.form.rule_checks["qknorm"].setChecked(True)
    page.form.workers.setValue(1)
    page.form.out_edit.setText(str(tmp_path / "out"))
    page.grid_panel.metric_box.setCurrentIndex(page.grid_panel.metric_box.findData("success"))
    settings = open_settings()
    page.save_settings(settings)
    again = show_widget(ExperimentsPage())
    again.restore_settings(settings)
    assert again.form.state() == page.form.state()
    assert again.spec.to_dict() == page.spec.to_dict()
    assert again.grid_panel.metric == "success" and again.grid_panel.x == "d_k"
    builtin = show_widget(ExperimentsPage())
    builtin.form.select_builtin("head_width")
    builtin.save_settings(settings)
    last = show_widget(ExperimentsPage())
    last.restore_settings(settings)
    assert last.form.builtin_name == "head_width" and last.spec.name == "head_width"


def test_the_window_remembers_the_page_only_in_a_normal_session(qtbot):
    from ui.window.main_window import MainWindow

    def session(restore: bool, pick: str | None = None) -> str:
        w = MainWindow(theme="light", restore=restore)
        qtbot.addWidget(w)
        w.show()
        page = _experiments_page(w)
        if pick:
            page.form.select_builtin(pick)
        name = page.form.builtin_name
        w.close()
        return name

    assert session(True, "heads") == "heads"
    assert session(True) == "heads"  # restored
    assert session(False, "learning_rate") == "learning_rate"  # e.g. --screenshot: not saved
    assert session(True) == "heads"


@pytest.mark.slow
def test_closing_the_window_while_a_grid_runs_ends_the_pool(window, qtbot, tmp_path):
    w = window
    page = _experiments_page(w)
    _use(page, TINY.replace(steps=400, log_every=100), [("seed", "0, 1, 2, 3")], 2,
         tmp_path / "run")
    page.start()
    qtbot.waitUntil(lambda: page.progress is not None and page.progress.running > 0,
                    timeout=60_000)
    w.close()
    assert not page.worker.is_running()
    qtbot.waitUntil(lambda: not multiprocessing.active_children(), timeout=10_000)


def test_job_statuses_follow_the_progress():
    from types import SimpleNamespace

    from engine.experiments.spec import Axis, ExperimentSpec
    from ui.pages.experiments.jobs_table import job_statuses

    spec = ExperimentSpec("t", TINY, (Axis("seed", (0, 1, 2, 3, 4)),))
    keys = [j.key for j in spec.jobs()]
    done = {"key": keys[0], "seconds": 1.5, "error": None,
            "rules": {"none": {"final_loss": 1.25}, "sqrt": {"final_loss": None}}}
    failed = {"key": keys[2], "error": "RuntimeError: boom", "rules": {}}
    progress = SimpleNamespace(results=(done, failed), running=3, workers=2)
    got = job_statuses(spec, progress, running_now=True)
    assert [s for s, _ in got] == ["done", "running", "failed", "running", "pending"]
    assert got[0][1] == "1.5 s · none 1.25, sqrt diverged" and got[2][1] == "RuntimeError: boom"
    assert [s for s, _ in job_statuses(spec, progress, running_now=False)][1] == "pending"
    assert [s for s, _ in job_statuses(spec, None, running_now=False)] == ["pending"] * 5


def test_closing_the_window_while_the_estimate_runs_leaves_no_process_or_thread(window, qtbot):
    w = window
    page = _experiments_page(w)
    page.form.set_base(TINY.replace(steps=400))
    page._start_estimate()  # (without the debounce)
    assert page.estimator.is_running()
    qtbot.waitUntil(lambda: bool(multiprocessing.active_children()), timeout=10_000)  # the timing one
    w.close()  # while it trains
    assert page.estimator.join(0.0)  # its thread has ended
    assert not multiprocessing.active_children()  # and the timing process is gone
    assert page.estimate is None


@pytest.mark.slow
def test_the_estimate_is_timed_in_a_worker_process(show_widget, qtbot):
    """The page's thread only waits: the timing runs in another process."""
    from ui.pages.experiments.page import ExperimentsPage

    page = show_widget(ExperimentsPage())
    page.form.set_base(TINY)
    page.form.axes.set_axes([("seed", "0, 1")])
    qtbot.waitUntil(lambda: page.estimate is not None, timeout=120_000)
    assert page.estimate.step_s > 0
    assert "about" in page.plan_label.text() and "worker process" in page.plan_label.toolTip()
    _no_pool_left(page, qtbot)


def test_a_running_job_shows_its_step_progress_bar(show_widget):
    from types import SimpleNamespace

    from engine.experiments.spec import Axis, ExperimentSpec
    from ui.pages.experiments.jobs_table import JobTable, job_statuses

    spec = ExperimentSpec("t", TINY, (Axis("seed", (0, 1, 2, 3)),))
    progress = SimpleNamespace(results=(), running=2, workers=2, job_progress={1: 0.37})
    got = job_statuses(spec, progress, running_now=True)
    assert [s for s, _ in got] == ["running", "running", "pending", "pending"]
    assert got[1][1].endswith(" 37 %") and "█" in got[1][1] and got[0][1] == ""
    table = show_widget(JobTable())
    table.set_spec(spec)
    # the detail column's header is whole in its column; what it holds per status on hover
    head = table.horizontalHeaderItem(3)
    assert head.text() == "detail" and "final loss per rule" in head.toolTip()
    assert table.horizontalHeader().fontMetrics().horizontalAdvance(head.text()) \
        < table.columnWidth(3)
    assert table.set_statuses(got) == 2
    assert table.item(1, 3).text().endswith("37 %")
    later = job_statuses(spec, SimpleNamespace(results=(), running=2, workers=2,
                                               job_progress={1: 1.0, 0: 0.5}), True)
    assert later[1][1].endswith("100 %") and later[0][1].endswith("50 %")
    assert table.set_statuses(later) == 2


def test_opening_a_folder_says_which_job_files_were_not_taken(window, tmp_path):
    import json

    from engine.experiments.runner import run_experiment
    from engine.experiments.spec import Axis, ExperimentSpec

    page = _experiments_page(window)
    spec = ExperimentSpec("two", TINY, (Axis("seed", (0, 1)),))
    out = tmp_path / "run"
    for _ in run_experiment(spec, out, workers=1):
        pass
    path = out / "jobs" / "job-00001.json"
    res = json.loads(path.read_text())
    res["config"]["lr"] = 0.5  # not this grid's job any more
    path.write_text(json.dumps(res))
    assert page.open_folder(out)
    assert page.progress.done == 1 and page.status == "stopped"
    assert "1 job file(s) ignored" in page.message and "job-00001.json" in page.message
    from ui.theme import current_theme

    assert current_theme().error in page.status_label.text()  # shown as an error
    assert page.buttons["resume"].isEnabled()
