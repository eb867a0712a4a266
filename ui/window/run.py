"""The Simulation page's live run in the main window: the worker thread, the debounce after a
widget changes, the ~30 Hz redraw timer and the status bar (run line, progress, Stop).

Flow: a widget changes -> debounce (200 ms) -> ``config_from_widgets()`` -> the worker runs
``lab_run`` (simulation, then the sweep along d_k or n) in a thread -> it keeps only the latest
LabState -> the redraw timer takes it and the page redraws what changed and is visible.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton

from engine.config import SimulationConfig
from engine.errors import ConfigError
from ui.paced_timer import PacedTimer
from ui.simulation_run import LabState, lab_run
from ui.window.part import WindowPart
from ui.worker import Worker

DEBOUNCE_MS = 200
REDRAW_MS = 33  #: at most ~30 redraws a second


class WindowRun(WindowPart):
    """Starts, stops and shows the window's simulation runs; the run's state (``state``,
    ``config``, ``sweep_axis``, ...) stays on the window, which the pages and sessions read."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self._build_loop()
        self._build_status_bar()

    # -- construction --------------------------------------------------------------------------
    def _build_loop(self) -> None:
        """The worker thread, the debounce after a widget changes and the ~30 Hz redraw timer."""
        w = self.window
        self.worker = Worker(self)
        self.worker.finished.connect(self._on_finished)
        self.worker.error.connect(self._on_error)
        self.worker.cancelled.connect(self._on_cancelled)
        self.debounce = QTimer(self)
        self.debounce.setSingleShot(True)
        self.debounce.setInterval(DEBOUNCE_MS)
        self.debounce.timeout.connect(self.rerun)
        w.params.changed.connect(self.debounce.start)
        w.params.clamped.connect(lambda text: w.statusBar().showMessage(text, 10_000))
        self.redraw_timer = PacedTimer(REDRAW_MS, self)
        self.redraw_timer.paced_timeout.connect(self.tick)

    def _build_status_bar(self) -> None:
        """The run line, the progress bar and Stop (the Simulation page's), and a label for the
        status of any other page."""
        bar = self.window.statusBar()
        self.status_label = QLabel("ready")
        self.status_label.setObjectName("status_run")
        self.status_label.setToolTip("Backend, device, dtype and method of the run; trials done and time taken")
        self.progress = QProgressBar()
        self.progress.setObjectName("progress")
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(260)
        self.progress.setTextVisible(True)
        self.progress.setToolTip("Progress of the simulation (first half) and the sweep along d_k or n (second half)")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stop_button")
        self.stop_button.setToolTip("Stop the running computation now (Esc)")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.setEnabled(False)
        bar.addWidget(self.status_label, 1)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.stop_button)
        #: the status of the page shown when it is not the Simulation page (its own words)
        self.page_status = QLabel("")
        self.page_status.setObjectName("status_page")
        bar.addWidget(self.page_status, 1)
        self.page_status.hide()

    # -- running -------------------------------------------------------------------------------
    def rerun(self) -> bool:
        """Validate the widgets and start a new generation; False (message shown) if invalid."""
        w = self.window
        self.debounce.stop()
        try:
            cfg = w.params.config_from_widgets()
        except ConfigError as exc:
            self.worker.stop()
            self.stop_button.setEnabled(False)
            self.status_label.setText(f"not run: {exc.field}: {exc.message}")
            w.last_message = str(exc)
            self.mark_outdated(exc)
            return False
        w.config = cfg
        cache, axis = w.sweep_cache, w.sweep_axis
        self.worker.start(lambda cancelled: lab_run(cfg, cancelled, cache, axis=axis))
        self.stop_button.setEnabled(True)
        self.progress.setValue(0)
        self.progress.setFormat("starting…")
        return True

    def apply_config(self, data: dict) -> bool:
        """Set the widgets from a partial dict of SimulationConfig fields, then rerun."""
        w = self.window
        merged = {**w.params.widget_values(), **dict(data)}
        try:
            cfg = SimulationConfig.from_dict(merged)
        except ConfigError as exc:
            w.params.show_error(exc)
            w.last_message = str(exc)
            self.status_label.setText(f"not applied: {exc}")
            self.mark_outdated(exc)
            return False
        w.params.set_config(cfg)
        return self.rerun()

    def set_sweep_axis(self, axis: str, rerun: bool = True) -> bool:
        """Sweep along d_k or along n (the number of keys) from now on; reruns unless told not
        to (the tour applies its parameters next, which reruns)."""
        w = self.window
        w.sweep_axis = axis
        w.page.panels["sweep"].set_axis(axis)
        return self.rerun() if rerun else True

    def stop(self) -> None:
        if self.worker.is_running():
            self.worker.stop()
            self.status_label.setText(self.status_label.text() + "  — stopped")
        self.stop_button.setEnabled(False)

    def tick(self) -> None:
        """The redraw timer: take the latest state (if new), then redraw what changed."""
        w = self.window
        latest = self.worker.take_latest()
        if latest is not None:
            self.mark_outdated(None)  # the plots follow the parameters set now again
            w.state = latest.item
            w.page.set_state(w.state)
            self._show_progress(w.state)
        if w.page.isVisible() and w.page.redraw():
            w.redraw_count += 1
        elif self.page_status.isVisible():
            self.sync_status_bar()
        if latest is not None and latest.item.complete and latest.done:
            self.stop_button.setEnabled(False)
            w.results_complete.emit()

    def mark_outdated(self, exc: ConfigError | None) -> None:
        """Tell, on the page and in presentation mode's bar, that the plots still show the last
        run, not the parameters just refused (``exc``); None: they are current again."""
        w = self.window
        if exc is None:
            w.page.mark_outdated(None)
            w.presenter.bar.set_outdated(None)
            return
        shown = bar = ""
        snap = w.state.snapshot if w.state is not None else None
        if snap is not None:
            c = snap.config
            shown = f"; the plots show the last run (d_k {c.d_k:,}, n {c.n_keys:,})"
            bar = f": plots show d_k {c.d_k:,}, n {c.n_keys:,}"
        w.page.mark_outdated(f"Not run: {exc.field}: {exc.message}{shown}")
        w.presenter.bar.set_outdated(f"not run ({exc.field}: {exc.message}){bar}")

    # -- the status bar ------------------------------------------------------------------------
    def _show_progress(self, state: LabState) -> None:
        snap = state.snapshot
        self.progress.setValue(round(1000 * state.progress))
        if state.phase == "simulation":
            self.progress.setFormat(f"simulation {100 * snap.progress:.0f}%" if snap else "simulation")
        elif state.phase == "sweep":
            self.progress.setFormat(f"sweep {len(state.sweep)}/{state.sweep_total}")
        else:
            self.progress.setFormat("done")
        if snap is not None:
            c = snap.config
            self.status_label.setText(
                f"backend {snap.backend} · device {snap.device} · dtype {c.dtype} · method "
                f"{snap.method} · {snap.trials_done:,}/{c.trials:,} trials in {snap.elapsed_s:.2f} s"
                + (f" · sweep {len(state.sweep)}/{state.sweep_total}" if state.sweep_total else ""))

    def sync_status_bar(self) -> None:
        """Each page shows its own status: the simulation's run line, progress and Stop belong
        to the Simulation page; another page shows its ``status_summary()`` (or nothing)."""
        tabs = self.window.tabs
        on_simulation = tabs.currentWidget() is self.window.page
        for widget in (self.status_label, self.progress, self.stop_button):
            widget.setVisible(on_simulation)
        self.page_status.setVisible(not on_simulation)
        if not on_simulation:
            summary = getattr(tabs.currentWidget(), "status_summary", None)
            text = summary() if callable(summary) else ""
            if self.page_status.text() != text:
                self.page_status.setText(text)

    @property
    def status_text(self) -> str:
        """What the status bar shows for the current page."""
        w = self.window
        label = self.status_label if w.tabs.currentWidget() is w.page else self.page_status
        return label.text()

    def _on_finished(self, generation: int) -> None:
        self.stop_button.setEnabled(False)

    def _on_cancelled(self, generation: int) -> None:
        if generation == self.worker.generation:
            self.stop_button.setEnabled(False)
            self.progress.setFormat("stopped")

    def _on_error(self, generation: int, exc: object) -> None:
        if generation != self.worker.generation:
            return
        w = self.window
        self.stop_button.setEnabled(False)
        self.progress.setFormat("error")
        if isinstance(exc, ConfigError):
            w.params.show_error(exc)
            self.status_label.setText(f"not run: {exc.field}: {exc.message}")
            w.last_message = str(exc)
            self.mark_outdated(exc)
        else:
            w.message("Simulation error", f"{type(exc).__name__}: {exc}", error=True)
