"""The Experiments page: build or pick a grid of training runs, run it in the background, watch
the grid view, the figures and the verdict fill in, open any finished job's curves in the
Training page, export everything.

Flow: the form -> an ExperimentSpec (validated by the engine; Start is off with the reason next to
it) -> ``engine.experiments.runner.run_experiment`` runs in ``ui.worker.Worker``'s thread (the
jobs in worker processes) -> the worker keeps only the latest ExperimentProgress -> a 30 Hz timer
takes it and redraws what changed: the progress, the job list, and (when a job finished) the grid
and the figures. Stop sets the runner's cancel flag: it ends the pool within a second and writes
the finished jobs; Resume reruns the same spec on the same folder with ``resume=True``.
"""

from __future__ import annotations

import html
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError
from engine.experiments.spec import ExperimentSpec
from ui.export.experiment_figures import ExperimentFigurePanel
from ui.file_dialogs import choose_dir
from ui.pages.base import LivePage
from ui.pages.experiments.estimate import Estimate, format_seconds, plan_estimate, time_job
from ui.pages.experiments.figure_rows import COLUMNS, PRESENT_COLUMNS, FigureRows
from ui.pages.experiments.folders import new_run_dir
from ui.pages.experiments.form import ExperimentForm
from ui.pages.experiments.grid import GridPanel
from ui.pages.experiments.grid_data import default_x, grid_choices, grid_data
from ui.pages.experiments.jobs_table import JobTable, job_statuses
from ui.settings import load_json, save_json
from ui.theme import ERROR_TEXT, current_theme, themed_css
from ui.worker import Worker

ESTIMATE_DEBOUNCE_MS = 400
JOIN_S = 10.0
ESTIMATE_JOIN_S = 2.0
#: the verdict's box at most (about four lines; a longer verdict scrolls in it)
VERDICT_HEIGHT = 60
SETTINGS_KEY = "experiments/form"

#: the verdict line before any job of the run shown has finished
NO_VERDICT = "<b>Verdict</b>: computed from the finished jobs once they come in"


class ExperimentsPage(LivePage):
    join_s = JOIN_S
    #: a finished job's result (plain dict) and a title: the window shows it in the Training page
    open_job = Signal(object, str)
    #: "idle" | "running" | "stopping" | "stopped" | "done" | "error"
    state_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("experiments_page")
        self.status = "idle"
        self.spec: Any = None  #: the form's valid spec (None while invalid)
        self.run_spec: Any = None  #: the spec of the run shown
        self.run_out: Path | None = None
        self.progress: Any = None  #: latest ExperimentProgress of the run shown
        self.estimate: Estimate | None = None
        self.message = ""  #: the last message shown (tests read it)
        self._cancel = threading.Event()
        self._results_seen: Any = None
        self._grid_state: Any = None
        self._figure_state: list[Any] = []
        self.figure_panels: list[ExperimentFigurePanel] = []
        self._figures_key: Any = None

        self.worker.finished.connect(self._on_finished)
        self.worker.error.connect(self._on_error)
        self.worker.cancelled.connect(self._on_cancelled)
        self.estimator = Worker(self)
        self.estimator.error.connect(lambda _g, exc: self._show_estimate(error=exc))

        self.form = ExperimentForm()
        right = self.form_beside(self.form, 300, 380)
        right.addLayout(self._build_bar())
        self._build_status_lines(right)
        right.addWidget(self._build_results(), 1)

        self.estimate_timer = QTimer(self)
        self.estimate_timer.setSingleShot(True)
        self.estimate_timer.setInterval(ESTIMATE_DEBOUNCE_MS)
        self.estimate_timer.timeout.connect(self._start_estimate)
        self.form.changed.connect(self._validate)
        self.form.chosen.connect(self._experiment_chosen)
        self.verdict_label.setText(NO_VERDICT)
        self._validate()
        self._update_buttons()
        self.timer.start()

    # -- construction --------------------------------------------------------------------------
    def _build_bar(self) -> QHBoxLayout:
        """Start, Stop, Resume, Export all, Open folder, and why Start is refused."""
        bar = QHBoxLayout()
        self.buttons = self.add_buttons(bar, (
            ("start", "Start", "Run every job of the grid in the background (a new output folder)"),
            ("stop", "Stop", "Stop now: finished jobs are kept (Resume continues)"),
            ("resume", "Resume", "Continue the stopped experiment in its folder (finished jobs "
                                 "are skipped)"),
            ("export", "Export all…", "Figures (PNG, SVG), the grid, summary.csv, points.csv, "
                                      "metrics.csv and experiment.json into a new folder"),
            ("open", "Open folder…", "Show an experiment folder's finished jobs (Resume then "
                                     "continues it)"),
        ))
        self.buttons["start"].clicked.connect(self.start)
        self.buttons["stop"].clicked.connect(self.stop)
        self.buttons["resume"].clicked.connect(self.resume)
        self.buttons["export"].clicked.connect(self.export_all_dialog)
        self.buttons["open"].clicked.connect(self._open_dialog)
        self.reason_label = QLabel(self)
        self.reason_label.setWordWrap(True)
        themed_css(self.reason_label, ERROR_TEXT)
        bar.addWidget(self.reason_label, 1)
        return bar

    def _build_status_lines(self, right: QVBoxLayout) -> None:
        """The plan (jobs, estimated time), progress, status and verdict lines."""
        self.plan_label = QLabel(self)
        self.plan_label.setWordWrap(True)
        right.addWidget(self.plan_label)
        self.progress_bar = QProgressBar(self)
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("no run yet")
        self.progress_bar.setToolTip("Jobs finished of the grid (resumed ones included)")
        right.addWidget(self.progress_bar)
        self.status_label = _LineLabel(self)
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        right.addWidget(self.status_label)
        self.verdict_label = QLabel(self)
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict_label.setToolTip("Computed from the finished jobs, with the uncertainty of "
                                      "every number (engine.experiments.figures.verdict)")
        # a verdict of five rules runs to seven lines: it scrolls in its box, and the plots keep
        # their room (the page scrolled at 1280x720)
        self.verdict_box = _VerdictBox(self)
        self.verdict_box.setWidgetResizable(True)
        self.verdict_box.setFrameShape(QFrame.Shape.NoFrame)
        self.verdict_box.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.verdict_box.setWidget(self.verdict_label)
        self.verdict_box.setMaximumHeight(VERDICT_HEIGHT)
        self.verdict_box.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        right.addWidget(self.verdict_box)

    def _build_results(self) -> QSplitter:
        """The grid and the job list above, the figures below."""
        split = _RoomSplitter(Qt.Orientation.Vertical, self)
        top = QSplitter(Qt.Orientation.Horizontal, split)
        self.grid_panel = GridPanel(top)
        self.grid_panel.choice_changed.connect(self._grid_choice_changed)
        self.grid_panel.job_clicked.connect(self.open_job_index)
        self.grid_panel.export_requested.connect(self.export_panel_dialog)
        self.grid_panel.figure_source = self._grid_source
        self.jobs = JobTable(top)
        top.addWidget(self.grid_panel)
        top.addWidget(self.jobs)
        top.setSizes([600, 440])  # the job list's result column needs room too
        # the figures: as many rows as fit, the others a page away (a scroll bar hid them)
        self.figures_inner = FigureRows(split)
        split.addWidget(top)
        split.addWidget(self.figures_inner)
        split.setChildrenCollapsible(False)
        # the figures get the larger share (the splitter keeps the ratio): at 1280x720 their one
        # row must hold a header, a legend of up to 8 entries and a plot that reads
        split.setSizes([350, 600])
        return split

    # -- wiring by the window ------------------------------------------------------------------
    def set_base_config_source(self, source: Any) -> None:
        """``source()`` returns the Training page's config (raises ConfigError if invalid)."""
        self.form.base_source = source

    def restore_settings(self, settings: Any) -> None:
        self.form.restore(load_json(settings, SETTINGS_KEY))
        grid = load_json(settings, SETTINGS_KEY + "_grid")
        if isinstance(grid, dict) and self.spec is not None:
            self.grid_panel.set_choices(grid_choices(self.spec), grid.get("x"), grid.get("metric"))

    def save_settings(self, settings: Any) -> None:
        save_json(settings, SETTINGS_KEY, self.form.state())
        save_json(settings, SETTINGS_KEY + "_grid", {"x": self.grid_panel.x,
                                                     "metric": self.grid_panel.metric})

    # -- the form ------------------------------------------------------------------------------
    def _validate(self) -> None:
        try:
            self.spec = self.form.spec()
            reason = ""
        except ConfigError as exc:
            self.spec = None
            reason = f"Cannot start: {exc.field}: {exc.message}"
        self.reason_label.setText(reason)
        if self.spec is not None and self.run_spec is None:
            self._show_spec(self.spec)
            self._recompute_grid()  # the empty grid and figures of the planned run
            self._ensure_figures(self.spec)
        self._update_buttons()
        self._show_plan()
        if self.spec is not None and self.status not in ("running", "stopping"):
            self.estimate_timer.start()

    def _experiment_chosen(self) -> None:
        """Another experiment chosen: the run shown (progress, verdict, grid, jobs, figures) is
        of the old one, so it goes; if the output folder holds the chosen experiment, its jobs
        are shown instead (Resume continues it)."""
        if self.status in ("running", "stopping") or self.run_spec is None:
            return
        chosen = self.form.builtin_name
        out = Path(self.form.out_dir()) if self.form.out_dir() else None
        from engine.experiments.runner import saved_experiment_name

        held = saved_experiment_name(out) if out is not None else None
        if chosen and held == chosen and out != self.run_out:
            self.open_folder(out)
            return
        if chosen and chosen == self.run_spec.name:
            return  # the run shown is of the chosen experiment
        self._clear_run()

    def _clear_run(self) -> None:
        """Forget the run shown: the page shows the plan of the form's experiment."""
        self.run_spec = self.run_out = self.progress = None
        self._results_seen = None
        self._grid_state = None
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("no run yet")
        self.verdict_label.setText(NO_VERDICT)
        self.verdict_box.updateGeometry()
        self._set_status("idle")

    def _show_spec(self, spec: Any) -> None:
        """The job list and grid choices of ``spec`` (before its run, or for its run)."""
        self.jobs.set_spec(spec)
        self.grid_panel.set_choices(grid_choices(spec), default_x(spec)
                                    if self.grid_panel.x not in spec.axis_names else None)

    def _start_estimate(self) -> None:
        spec = self.spec
        if spec is None or self._closing:
            return
        from engine.experiments.estimate import timed_jobs

        timed = [j.config for j in timed_jobs(spec)]
        if self.estimate is not None and self.estimate.configs == tuple(c.to_dict() for c in timed):
            self._show_plan()
            return
        self.estimator.start(lambda cancelled: time_job(timed, cancelled))
        self._show_plan()

    def _show_estimate(self, error: Any = None) -> None:
        if error is not None:
            first = (str(error).strip().splitlines() or [""])[0]  # (a traceback pushed the plots down)
            self.plan_label.setText(f"could not time a job: {type(error).__name__}: {first}")
            self.plan_label.setToolTip(str(error))
            return
        self._show_plan()

    def _show_plan(self) -> None:
        spec = self.spec if self.status not in ("running", "stopping") else self.run_spec
        if spec is None:
            self.plan_label.setText("")
            return
        jobs = spec.jobs()
        text = (f"<b>{len(jobs)} job(s)</b> × {len(spec.rules)} rule(s) ({', '.join(spec.rules)}), "
                f"{self.form.workers.value()} worker(s)")
        from engine.experiments.estimate import timed_jobs

        est = self.estimate
        timed = timed_jobs(spec)
        shapes = f"job {timed[0].index}" if len(timed) == 1 else \
            f"jobs {', '.join(str(j.index) for j in timed)} (one of each shape)"
        tip = ""
        if est is not None and est.configs == tuple(j.config.to_dict() for j in timed):
            line, tip = plan_estimate(est, spec, self.form.workers.value(), shapes)
            text += " · " + line
        elif self.estimator.is_running():
            text += f" · timing a few steps of {shapes}…"
        self.plan_label.setText(text)
        self.plan_label.setToolTip(tip)

    # -- running -------------------------------------------------------------------------------
    def start(self) -> bool:
        """Run the form's experiment into a new folder (or the chosen one)."""
        if self.spec is None or self.status in ("running", "stopping"):
            return False
        spec = self.spec
        out = Path(self.form.out_dir()) if self.form.out_dir() else new_run_dir(spec.name)
        hits = self.files_in_the_way(out)
        if hits and not self.ask_overwrite(out, hits):
            self._set_status(self.status, f"not started: {out} holds files an experiment writes",
                             error=True)
            return False
        return self._launch(spec, out, resume=False, force=bool(hits))

    @staticmethod
    def files_in_the_way(out: Path) -> list[str]:
        """Files of a folder that is not an experiment's that a run would replace."""
        from engine.experiments.runner import EXPERIMENT_FILE, RESULT_FILES
        from engine.io import files_in_the_way

        return [] if (out / EXPERIMENT_FILE).exists() else files_in_the_way(out, RESULT_FILES)

    def ask_overwrite(self, out: Path, files: list[str]) -> bool:
        from ui.export.dialog import ask_overwrite

        return ask_overwrite(self, out, files)

    def resume(self) -> bool:
        """Continue the run shown (same spec, same folder): finished jobs are skipped."""
        if self.run_spec is None or self.run_out is None or self.status in ("running", "stopping"):
            return False
        return self._launch(self.run_spec, self.run_out, resume=True)

    def stop(self) -> None:
        """Cancel: the runner ends the pool within a second and writes the finished jobs."""
        if self.status != "running":
            return
        self._cancel.set()
        self._set_status("stopping")

    def _launch(self, spec: Any, out: Path, resume: bool, force: bool = False) -> bool:
        from engine.experiments.runner import run_experiment

        self.estimator.stop()
        self._ensure_figures(spec)
        self.run_spec, self.run_out = spec, out
        self._show_spec(spec)
        if not resume:
            self.progress = None
        self._results_seen = None
        cancel = threading.Event()
        self._cancel = cancel
        workers = self.form.workers.value()

        def factory(_worker_cancelled: Any) -> Any:
            # the page's own flag: the runner then writes the finished jobs and yields a last
            # snapshot (the worker's flag is for closing the window)
            return run_experiment(spec, out, workers=workers, resume=resume, force=force,
                                  cancelled=lambda: cancel.is_set() or _worker_cancelled())

        self.worker.start(factory)
        self._set_status("running", f"writing into {out}")
        return True

    def _on_finished(self, _generation: int) -> None:
        self._take()
        p = self.progress
        self._set_status("stopped" if p is None or p.cancelled else "done",
                         f"{'stopped' if p is None or p.cancelled else 'finished'}: the jobs are "
                         f"in {self.run_out}")

    def _on_error(self, _generation: int, exc: Any) -> None:
        text = f"{exc.field}: {exc.message}" if isinstance(exc, ConfigError) \
            else f"{type(exc).__name__}: {exc}"
        self._set_status("error", text, error=True)

    def _on_cancelled(self, _generation: int) -> None:
        self._set_status("stopped", f"stopped: the finished jobs are in {self.run_out}")

    # -- drawing -------------------------------------------------------------------------------
    def _take(self) -> bool:
        got = self.worker.take_latest()
        if got is None:
            return False
        self.progress = got.item
        self._show_progress()
        return True

    def tick(self) -> None:
        self._take()
        if self.estimator.take_latest() is not None:
            self.estimate = self.estimator.peek_latest().item
            self._show_plan()
        self.redraw()

    def _results_changed(self) -> bool:
        p = self.progress
        key = (id(self.run_spec), p.done if p is not None else -1, p.resumed if p else -1)
        if key == self._results_seen:
            return False
        self._results_seen = key
        return True

    def results(self) -> list[dict[str, Any]]:
        return list(self.progress.results) if self.progress is not None else []

    def redraw(self) -> list[str]:
        """Recompute the grid and the figures when jobs finished (or the grid choice changed),
        then let every visible panel redraw if its data changed."""
        if self.run_spec is not None and self._results_changed():
            self._recompute_grid()
            from engine.experiments.figures import figure_data, verdict

            results = self.results()
            self._figure_state = figure_data(self.run_spec, results)
            self.verdict_label.setText(f"<b>Verdict</b> ({html.escape(self.run_spec.name)}): "
                                       f"{html.escape(verdict(self.run_spec, results))}")
            self.verdict_box.updateGeometry()
        drawn = []
        if self._grid_state is not None and self.grid_panel.refresh(self._grid_state):
            drawn.append(self.grid_panel.plot_id)
        for panel, fig in zip(self.figure_panels, self._figure_state):
            if panel.refresh(fig):
                drawn.append(panel.plot_id)
        return drawn

    def _recompute_grid(self) -> None:
        spec = self.run_spec or self.spec
        if spec is None:
            return
        self._grid_state = grid_data(spec, self.results(), self.grid_panel.metric,
                                     self.grid_panel.x)

    def _grid_choice_changed(self) -> None:
        self._recompute_grid()

    def _ensure_figures(self, spec: Any) -> None:
        """One figure panel per figure of ``spec`` (rebuilt only when its figures or its rules
        change: with other rules checked, the legends and the rule axis named the old ones)."""
        key = (spec.name, spec.figures, spec.rules)
        if key != self._figures_key:
            self._figures_key = key
            self._build_figures(spec)

    def _build_figures(self, spec: Any) -> None:
        for panel in self.figure_panels:
            panel.hide()  # explicitly: a panel not shown yet would otherwise still be shown later
            panel.deleteLater()
        self.figure_panels = []
        from engine.experiments.figures import figure_data

        self._figure_state = figure_data(spec, [])  # empty axes with their labels until jobs finish
        for fig in self._figure_state:
            panel = ExperimentFigurePanel(fig, self.figures_inner, compact=True)
            panel.export_requested.connect(self.export_panel_dialog)
            panel.figure_source = self._figure_source
            self.figure_panels.append(panel)
            panel.apply_theme(self.theme)
        self.figures_inner.set_panels(self.figure_panels)

    def _show_progress(self) -> None:
        p = self.progress
        if p is None:
            return
        self.progress_bar.setRange(0, max(p.total, 1))
        self.progress_bar.setValue(p.done)
        self.progress_bar.setFormat(f"{p.done}/{p.total} jobs" + (f" ({p.failed} failed)"
                                                                  if p.failed else ""))
        self.jobs.set_statuses(job_statuses(self.run_spec, p, self.status == "running"))
        left = f" · time left ≈ {format_seconds(p.eta_s)}" if p.eta_s and not p.finished else ""
        self.status_label.setText(
            f"<b>{self.status}</b> · {p.done}/{p.total} jobs done ({p.resumed} from an earlier "
            f"run), {min(p.running, p.workers)} running on {p.workers} {p.executor} worker(s), "
            f"{p.elapsed_s:.0f} s elapsed{left} · {html.escape(str(self.run_out))}")

    # -- status --------------------------------------------------------------------------------
    def _set_status(self, status: str, message: str = "", error: bool = False) -> None:
        self.status = status
        self.message = message
        self._update_buttons()
        if self.progress is not None:
            self._show_progress()
            if status != "running":  # the list's "running" rows are no longer running
                self.jobs.set_statuses(job_statuses(self.run_spec, self.progress, False))
        color = current_theme().error if error else "inherit"
        note = f" · <span style='color:{color}'>{html.escape(message)}</span>" if message else ""
        if self.progress is None or error:
            self.status_label.setText(f"<b>{status}</b>{note}")
        else:
            self.status_label.setText(self.status_label.text() + note)
        self.state_changed.emit(status)

    def _update_buttons(self) -> None:
        s = self.status
        busy = s in ("running", "stopping")
        self.buttons["start"].setEnabled(not busy and self.spec is not None)
        self.buttons["stop"].setEnabled(s == "running")
        can_resume = (not busy and self.run_spec is not None and self.run_out is not None
                      and s in ("stopped", "error", "done")
                      and (self.progress is None or self.progress.done < self.progress.total
                           or self.progress.failed > 0))
        self.buttons["resume"].setEnabled(can_resume)
        self.buttons["export"].setEnabled(bool(self.results()) and not busy)
        self.buttons["open"].setEnabled(not busy)
        self.form.set_locked(busy)

    # -- an experiment folder ------------------------------------------------------------------
    def _open_dialog(self) -> None:
        folder = choose_dir(self, "Open an experiment folder")
        if folder:
            self.open_folder(folder)

    def open_folder(self, folder: str | Path) -> bool:
        """Show the finished jobs of an experiment folder (its experiment.json and job files);
        Resume then runs the missing ones there."""
        from engine.experiments.runner import ExperimentProgress, load_experiment, scan_results

        if self.status in ("running", "stopping"):
            return False
        out = Path(folder)
        try:
            spec = load_experiment(out)
        except ConfigError as exc:  # FileFormatError: FILE: field path: what is wrong
            self._set_status(self.status, f"cannot open {exc}", error=True)
            return False
        found, ignored = scan_results(spec, out)
        results = tuple(sorted(found.values(), key=lambda r: r["index"]))
        total = len(spec.jobs())
        self._ensure_figures(spec)
        self.run_spec, self.run_out = spec, out
        self._show_spec(spec)
        self.progress = ExperimentProgress(
            spec=spec, out_dir=out, total=total, done=len(results),
            failed=sum(1 for r in results if r.get("error")), running=0, resumed=len(results),
            latest=results[-1] if results else None, results=results, elapsed_s=0.0,
            eta_s=None, finished=len(results) == total, cancelled=len(results) < total,
            executor="", workers=self.form.workers.value())
        self._results_seen = None
        message = f"opened {out}: {len(results)}/{total} jobs finished"
        if ignored:
            message += (f"; {len(ignored)} job file(s) ignored ({ignored[0]}"
                        f"{', ...' if len(ignored) > 1 else ''}); Resume reruns those jobs")
        self._set_status("done" if len(results) == total else "stopped", message,
                         error=bool(ignored))
        return True

    # -- exported figures: what drew them, and opening them again -----------------------------
    def _figure_source(self) -> dict[str, Any] | None:
        """The experiment shown and its folder, for an exported figure's metadata."""
        spec = self.run_spec or self.spec
        if spec is None:
            return None
        return {"experiment": spec.to_dict(),
                "folder": str(self.run_out.resolve()) if self.run_out is not None else None}

    def _grid_source(self) -> dict[str, Any] | None:
        source = self._figure_source()
        if source is not None:
            source["view"] = {"x": self.grid_panel.x, "metric": self.grid_panel.metric}
        return source

    def restore_figure(self, meta: dict[str, Any], name: str) -> str:
        """An exported figure opened (File -> Open): its experiment's folder when it still holds
        that experiment (every figure, the grid and the verdict are drawn again from its jobs),
        else the experiment into the form (Start runs it). Returns what was restored, in words;
        ValueError (a ConfigError) when the experiment is bad or a run is active."""
        from engine.experiments.runner import load_experiment

        if self.status in ("running", "stopping"):
            raise ValueError("an experiment is running: stop it first, then open the figure again")
        spec = ExperimentSpec.from_dict(meta.get("experiment"))
        folder = meta.get("folder")
        view = meta.get("view") if isinstance(meta.get("view"), dict) else {}
        where = None
        if isinstance(folder, str) and folder:
            try:
                same = load_experiment(folder).to_dict() == spec.to_dict()
            except (ConfigError, OSError, ValueError):
                same = False
            if same and self.open_folder(folder):
                where = folder
        if where is None:
            self._clear_run()
            self.form.show_spec(spec)
        if view:
            self.grid_panel.set_choices(grid_choices(spec), view.get("x"), view.get("metric"))
        p = self.progress
        if where is not None and p is not None:
            return (f"the experiment {spec.name!r} from {where} ({p.done}/{p.total} jobs), "
                    "its figures, grid and verdict")
        gone = f" (its folder {folder} no longer holds it)" if folder else ""
        return f"the experiment {spec.name!r} into the form{gone}: Start runs it again"

    # -- opening a job -------------------------------------------------------------------------
    def open_job_index(self, index: int) -> bool:
        """Ask the window to show job ``index``'s logged curves in the Training page."""
        res = next((r for r in self.results() if r.get("index") == index), None)
        if res is None or res.get("error") or not res.get("rows"):
            return False
        title = f"{self.run_spec.name} job {index} ({res.get('key', '')})"
        self.open_job.emit(res, title)
        return True

    # -- export --------------------------------------------------------------------------------
    def report(self, text: str, error: bool = False) -> None:
        self._set_status(self.status, text, error=error)

    def export_all(self, parent: str | Path) -> Path | None:
        """Figures, the grid and the result files into a new folder under ``parent``."""
        from ui.export.plot_files import ExportError
        from ui.pages.experiments.export import export_experiment

        p = self.progress
        try:
            self.redraw()
            out = export_experiment(parent, self.run_spec, self.results(),
                                    [self.grid_panel, *self.figure_panels],
                                    "finished" if p is not None and p.finished else "cancelled",
                                    p.workers if p else 1, p.executor if p else "")
        except ExportError as exc:
            self._set_status(self.status, f"export failed: {exc}", error=True)
            return None
        self._set_status(self.status, f"exported to {out}")
        return out

    def presenting(self, on: bool) -> None:
        """Presentation mode: the form and the job list are left out (at the larger type the
        form was cut at its right edge, and the grid had no room for its rules' names); the
        grid, the figures and the verdict take the page."""
        self.form_column.setVisible(not on)
        self.jobs.setVisible(not on)
        # two figures to a row: at the larger type three left each plot 35 px high under a
        # legend on two lines, and a y title cut to "lea…"
        self.figures_inner.set_columns(PRESENT_COLUMNS if on else COLUMNS)

    # -- theme and closing ---------------------------------------------------------------------
    def themed_panels(self) -> list[Any]:
        return [self.grid_panel, *self.figure_panels]

    def stop_work(self) -> None:
        """Cancel the run (the pool ends) and the estimate; ``shutdown`` joins the run's thread."""
        self.estimate_timer.stop()
        self._cancel.set()
        self.estimator.stop()

    def shutdown(self) -> None:
        super().shutdown()
        # only timing steps: not worth a long wait (Quit lowers join_s: shorter still)
        self.estimator.join(min(ESTIMATE_JOIN_S, self.join_s))


class _LineLabel(QLabel):
    """A status line that takes no room while it says nothing (26 px the grid and the figures
    lacked at 1280x720 in presentation mode): hidden from the start, until it has something."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setVisible(False)

    def setText(self, text: str) -> None:  # Qt's name
        super().setText(text)
        self.setVisible(bool(text))


class _VerdictBox(QScrollArea):
    """The verdict as high as its lines, VERDICT_HEIGHT at most (then it scrolls): a one-line
    verdict kept 60 px, 40 of them blank."""

    def sizeHint(self) -> QSize:  # Qt's names
        label = self.widget()
        width = self.viewport().width()
        if label is None or width < 10:
            return super().sizeHint()
        height = label.heightForWidth(width)
        return QSize(super().sizeHint().width(), min(VERDICT_HEIGHT, max(height, 1)))

    def minimumSizeHint(self) -> QSize:
        return QSize(super().minimumSizeHint().width(), min(self.sizeHint().height(), 20))

    def resizeEvent(self, event: Any) -> None:
        old = event.oldSize()
        super().resizeEvent(event)
        if old.width() != event.size().width():  # (the lines follow the width only)
            self.updateGeometry()


class _RoomSplitter(QSplitter):
    """The grid and the figures: they ask for no more than their least room (their sum of
    preferred heights, 540 px, made the page taller than a 1280x720 window and it scrolled),
    and take whatever the page has left."""

    def sizeHint(self) -> QSize:  # Qt's name
        return self.minimumSizeHint()
