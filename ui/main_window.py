"""The main window: parameter dock, pages, menus, status bar; the live run loop.

Flow: a widget changes -> debounce (200 ms) -> ``config_from_widgets()`` -> the worker runs
``lab_run`` (simulation, then the sweep along d_k or n) in a thread -> it keeps only the latest LabState ->
a 30 Hz timer takes it and the page redraws what changed and is visible.
"""

from __future__ import annotations

import importlib
import time
import traceback
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTabWidget,
    QWidget,
)

from engine.config import SimulationConfig
from engine.errors import ConfigError
from ui.pages.simulation.page import SimulationPage
from ui.pages.simulation.presets import load_presets
from ui.params.panel import ParamPanel
from ui.presentation import Presenter
from ui.sessions import Sessions
from ui.settings import open_settings, settings_location
from ui.simulation_run import LabState, SweepCache, lab_run
from ui.theme import THEMES, apply_app_theme
from ui.window_exports import WindowExports
from ui.window_settings import WindowSettings
from ui.worker import Worker

DEBOUNCE_MS = 200
REDRAW_MS = 33  #: at most ~30 redraws a second
DEFAULT_SIZE = (1600, 1000)

#: (tab title, module, class) of the other pages, built the first time their tab is shown
LAZY_PAGES = (
    ("Score inspector", "ui.pages.inspector.page", "InspectorPage"),
    ("Training", "ui.pages.training.page", "TrainingPage"),
    ("Real model", "ui.pages.real_model.page", "RealModelPage"),
    ("Experiments", "ui.pages.experiments.page", "ExperimentsPage"),
)
TOUR = ("ui.pages.tour.panel", "TourPanel")

HELP_TEXT = """<h3>Attention Scaling Lab</h3>
<p>Why attention divides q·k by √d_k, shown live. Change any parameter on the left and every plot
reruns; results refine while trials stream in. Each scaling rule keeps its colour everywhere.</p>
<table>
<tr><td>F5</td><td>rerun</td></tr><tr><td>Esc</td><td>stop (in the guided tour: leave the tour)</td></tr>
<tr><td>Ctrl+E</td><td>export all (figures, summary.csv, histograms.npz, config.json)</td></tr>
<tr><td>Ctrl+S / Ctrl+O</td><td>save / open a session (any exported config.json opens too)</td></tr>
<tr><td>F1</td><td>this help</td></tr></table>
<p>Right-click a plot to export it as PNG, SVG or CSV. Hover the sweep for exact values (the
point is marked in all six sweep plots); click a sweep point to set its d_k (or n, along n). Exported figures carry
their parameters: File → Open accepts them.</p>"""


class MainWindow(QMainWindow):
    #: the current generation produced its final state (simulation and sweep)
    results_complete = Signal()

    def __init__(self, theme: str | None = None, restore: bool = True, reset: bool = False,
                 persist: bool = True) -> None:
        super().__init__()
        self.setObjectName("main_window")
        self.setWindowTitle("Attention Scaling Lab")
        self.settings = open_settings()
        #: pages remember their last choices only in a normal session (not --screenshot, tests)
        self._remember = restore
        #: False (``--screenshot``): nothing is ever written to the settings
        self.persist = persist
        if reset and persist:
            self.settings.clear()
        self.state: LabState | None = None
        self.config: SimulationConfig | None = None
        self.sweep_cache = SweepCache()
        self.sweep_axis = "d_k"  #: what the sweep runs along: "d_k" or "n_keys" (the length)
        self.last_message = ""  #: last user-facing message (tests read it)
        self.redraw_count = 0
        self.window_settings = WindowSettings(self)
        self.sessions = Sessions(self)
        self.exports = WindowExports(self)
        self._run_started = 0.0
        self._closing = False
        self._build_tabs()
        self._build_params_dock()
        self._build_run_loop()
        self._build_status_bar()
        self._build_menus()
        self.theme_name = "light"
        self.resize(*DEFAULT_SIZE)
        if restore:
            self.window_settings.restore()
        saved_theme = self.settings.value("theme") if restore else None
        self.set_theme(theme or (saved_theme if saved_theme in THEMES else "light"))
        self.redraw_timer.start()

    # -- construction --------------------------------------------------------------------------
    def _build_tabs(self) -> None:
        """The Simulation page, and a tab for each other page (built the first time it is shown)."""
        self.page = SimulationPage(self)
        for panel in self.page.panels.values():
            panel.export_requested.connect(self.exports.export_panel_dialog)
        self.page.panels["sweep"].axis_requested.connect(self.set_sweep_axis)
        # clicking a point of the sweep sets its value (d_k, or n along n): the whole page follows
        self.page.panels["sweep"].d_k_clicked.connect(lambda d: self.apply_config({"d_k": d}))
        self.page.panels["sweep"].n_clicked.connect(lambda n: self.apply_config({"n_keys": n}))
        self.tabs = QTabWidget(self)
        self.tabs.setObjectName("pages")
        self.tabs.addTab(self.page, "Simulation")
        self._lazy: dict[int, tuple[str, str]] = {}
        self.pages: dict[str, QWidget] = {}
        for title, module, cls in LAZY_PAGES:  # always a tab: one that fails to load says why
            placeholder = QLabel(f"Loading {title}…")
            placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
            index = self.tabs.addTab(placeholder, title)
            self._lazy[index] = (module, cls)
        self.tabs.currentChanged.connect(self._build_lazy_tab)
        self.tabs.currentChanged.connect(self._sync_params_dock)
        self.tabs.currentChanged.connect(lambda _i: self._sync_status_bar())
        self.setCentralWidget(self.tabs)

    def _build_params_dock(self) -> None:
        self.params = ParamPanel(self)
        self.params_dock = QDockWidget("Parameters", self)
        self.params_dock.setObjectName("params_dock")
        self.params_dock.setWidget(self.params)
        self.params_dock.setMinimumWidth(300)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.params_dock)
        self.tour_dock: QDockWidget | None = None
        self.tour: Any = None
        #: the simulation parameters only mean something on the Simulation tab: the dock steps aside
        #: on the other pages (they have their own controls) and comes back as the user left it
        self._params_dock_wanted = True
        self._was_on_simulation = True

    def _build_run_loop(self) -> None:
        """The worker thread, the debounce after a widget changes and the ~30 Hz redraw timer."""
        self.worker = Worker(self)
        self.worker.finished.connect(self._on_finished)
        self.worker.error.connect(self._on_error)
        self.worker.cancelled.connect(self._on_cancelled)
        self.debounce = QTimer(self)
        self.debounce.setSingleShot(True)
        self.debounce.setInterval(DEBOUNCE_MS)
        self.debounce.timeout.connect(self.rerun)
        self.params.changed.connect(self.debounce.start)
        self.params.clamped.connect(lambda text: self.statusBar().showMessage(text, 10_000))
        self.redraw_timer = QTimer(self)
        self.redraw_timer.setInterval(REDRAW_MS)
        self.redraw_timer.timeout.connect(self.tick)

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
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

    def _action(self, menu: Any, text: str, slot: Any, shortcut: Any = None, tip: str = "") -> QAction:
        act = QAction(text, self)
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        act.setStatusTip(tip)
        act.setToolTip(tip)
        act.triggered.connect(lambda _checked=False: slot())
        menu.addAction(act)
        return act

    def _build_menus(self) -> None:
        mb = self.menuBar()
        f = mb.addMenu("&File")
        self.open_action = self._action(f, "&Open session…", self.sessions.open_dialog,
                                        QKeySequence.StandardKey.Open,
                                        "Open saved parameters, an exported config.json, or an "
                                        "exported figure (PNG/SVG carry their parameters)")
        self.save_action = self._action(f, "&Save session…", self.sessions.save_dialog,
                                        QKeySequence.StandardKey.Save, "Save the parameters as JSON")
        f.addSeparator()
        self.export_all_action = self._action(f, "&Export all…", self.exports.export_all_dialog, "Ctrl+E",
                                              "Every figure (PNG, SVG), its data, summary.csv, histograms.npz and config.json")
        plots_menu = f.addMenu("Export plot")
        for panel in self.page.panels.values():
            plots_menu.addMenu(panel.export_menu(plots_menu))
        f.addSeparator()
        self._action(f, "&Quit", self.close, QKeySequence.StandardKey.Quit, "Close the app")
        r = mb.addMenu("&Run")
        self.rerun_action = self._action(r, "&Rerun", self.rerun, "F5", "Run again with the current parameters")
        self.stop_action = self._action(r, "&Stop", self.stop, "Esc", "Stop the running computation")
        self._action(r, "&New seed", self.params.draw_new_seed, None, "Draw a new random seed and rerun")
        self.presets_menu = mb.addMenu("&Presets")
        for preset in load_presets():
            self._action(self.presets_menu, preset.title, lambda c=preset.config: self.apply_config(c),
                         None, preset.description)
        self.presets_menu.setToolTipsVisible(True)
        v = mb.addMenu("&View")
        group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        for name in THEMES:
            act = QAction(f"{name.capitalize()} theme", self, checkable=True)
            act.triggered.connect(lambda _c=False, n=name: self.set_theme(n))
            group.addAction(act)
            v.addAction(act)
            self.theme_actions[name] = act
        v.addSeparator()
        self.presenter = Presenter(self)
        self.present_action = QAction("&Presentation mode", self, checkable=True)
        self.present_action.setShortcut(QKeySequence("F11"))
        self.present_action.setStatusTip("Larger text and lines, one plot at a time with the sweep "
                                         "below; Left/Right change the plot")
        self.present_action.toggled.connect(self.set_presentation)
        v.addAction(self.present_action)
        self.play_action = QAction("&Play d_k through the sweep", self, checkable=True)
        self.play_action.setShortcut(QKeySequence("Ctrl+P"))
        self.play_action.setStatusTip("Step d_k (or n, along n) through the sweep's values, the page following")
        self.play_action.toggled.connect(lambda on: self.presenter.play() if on else self.presenter.stop())
        v.addAction(self.play_action)
        v.addAction(self.params_dock.toggleViewAction())
        self._action(v, "Guided &tour", self.show_tour, None, "Step through the science, plot by plot")
        h = mb.addMenu("&Help")
        self._action(h, "&Help and shortcuts", self.show_help, "F1", "What the app does and its shortcuts")
        self._action(h, "Start the guided &tour", self.show_tour, None, "Step through the science")

    def set_presentation(self, on: bool) -> None:
        """Presentation mode on or off (View menu, F11, ``--present``)."""
        if self.present_action.isChecked() != on:
            self.present_action.setChecked(on)  # comes back here through toggled
            return
        self.presenter.set_active(on)
        if not on and self.play_action.isChecked():
            self.play_action.setChecked(False)

    # -- lazy pages ----------------------------------------------------------------------------
    def _build_lazy_tab(self, index: int) -> None:
        spec = self._lazy.pop(index, None)
        if spec is None:
            return
        module, cls = spec
        try:
            page = getattr(importlib.import_module(module), cls)(self)
        except Exception as exc:  # the tab stays and shows why (and the traceback goes to stderr)
            traceback.print_exc()
            page = QLabel(f"This page could not be loaded:\n{type(exc).__name__}: {exc}")
            page.setObjectName("page_load_error")
            page.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            page.setAlignment(Qt.AlignmentFlag.AlignCenter)
        title = self.tabs.tabText(index)
        old = self.tabs.widget(index)
        self.tabs.blockSignals(True)
        self.tabs.removeTab(index)
        self.tabs.insertTab(index, page, title)
        self.tabs.setCurrentIndex(index)
        self.tabs.blockSignals(False)
        old.deleteLater()
        self.pages[cls] = page
        self._connect_page(cls, page)
        self.sessions.apply_pending()
        if hasattr(page, "apply_theme"):
            page.apply_theme(THEMES[self.theme_name])

    def _connect_page(self, cls: str, page: QWidget) -> None:
        """Links between pages go through the window (no page imports another)."""
        if cls == "ExperimentsPage" and hasattr(page, "open_job"):
            page.set_base_config_source(self._training_config)
            page.open_job.connect(self._open_experiment_job)
            if self._remember:
                page.restore_settings(self.settings)

    def ensure_page(self, cls: str) -> QWidget | None:
        """The page whose class is ``cls``, built if needed, without switching tabs."""
        if cls not in self.pages:
            current = self.tabs.currentIndex()
            for index, (_module, name) in list(self._lazy.items()):
                if name == cls:
                    self._build_lazy_tab(index)
                    self.tabs.blockSignals(True)
                    self.tabs.setCurrentIndex(current)
                    self.tabs.blockSignals(False)
        return self.pages.get(cls)

    def _training_config(self) -> Any:
        page = self.ensure_page("TrainingPage")
        if page is None or not hasattr(page, "current_config"):
            raise ConfigError("training", "the Training page is not available")
        return page.current_config()

    def _open_experiment_job(self, result: dict, title: str) -> bool:
        """Show a finished experiment job's logged curves in the Training page."""
        from engine.training.config import TrainingConfig

        page = self.ensure_page("TrainingPage")
        if page is None or not hasattr(page, "show_metrics"):
            self.message("Open job", "The Training page is not available.", error=True)
            return False
        cfg = TrainingConfig.from_dict(result["config"])
        diverged = {rule: r.get("diverged_step") for rule, r in result.get("rules", {}).items()}
        if not page.show_metrics(result["rows"], title, cfg, diverged, result.get("seconds", 0.0),
                                 result.get("device", "")):
            self.message("Open job", "The Training page is training: stop its run first, then "
                                     "click the job again.", error=True)
            return False
        self.tabs.setCurrentWidget(page)
        return True

    def _sync_params_dock(self, index: int) -> None:
        on_simulation = self.tabs.widget(index) is self.page
        if on_simulation:
            self.params_dock.setVisible(self._params_dock_wanted)
        elif self._was_on_simulation:  # leaving it: remember how the user had the dock
            self._params_dock_wanted = self.params_dock.isVisible()
            self.params_dock.hide()
        self._was_on_simulation = on_simulation

    def _sync_status_bar(self) -> None:
        """Each page shows its own status: the simulation's run line, progress and Stop belong
        to the Simulation page; another page shows its ``status_summary()`` (or nothing)."""
        on_simulation = self.tabs.currentWidget() is self.page
        for w in (self.status_label, self.progress, self.stop_button):
            w.setVisible(on_simulation)
        self.page_status.setVisible(not on_simulation)
        if not on_simulation:
            summary = getattr(self.tabs.currentWidget(), "status_summary", None)
            text = summary() if callable(summary) else ""
            if self.page_status.text() != text:
                self.page_status.setText(text)

    @property
    def status_text(self) -> str:
        """What the status bar shows for the current page (tests read it)."""
        label = self.status_label if self.tabs.currentWidget() is self.page else self.page_status
        return label.text()

    def open_page_titled(self, title: str) -> bool:
        """Show the page whose tab reads ``title`` (case-insensitive); False if there is none."""
        for index in range(self.tabs.count()):
            if self.tabs.tabText(index).lower() == title.strip().lower():
                self.tabs.setCurrentIndex(index)
                return True
        return False

    def open_page(self, cls: str) -> QWidget | None:
        """Show (building if needed) the page whose class is ``cls``; None if it does not exist."""
        if cls in self.pages:
            self.tabs.setCurrentWidget(self.pages[cls])
            return self.pages[cls]
        for index, (_module, name) in list(self._lazy.items()):
            if name == cls:
                self.tabs.setCurrentIndex(index)
                return self.pages.get(cls)
        return None

    def show_tour(self) -> None:
        if self.tour_dock is None:
            try:
                module = importlib.import_module(TOUR[0])
                self.tour = getattr(module, TOUR[1])(self)
            except Exception as exc:
                traceback.print_exc()
                self.message("Guided tour", f"The tour could not be loaded: {type(exc).__name__}: {exc}", error=True)
                return
            if hasattr(self.tour, "sweep_axis"):
                self.tour.sweep_axis.connect(lambda axis: self.set_sweep_axis(axis, rerun=False))
            self.tour.apply_config.connect(self.apply_config)
            self.tour.highlight.connect(lambda plot_id: self.highlight_plot(plot_id, hold=True))
            if hasattr(self.tour, "show_inspector"):
                self.tour.show_inspector.connect(self._tour_inspector)
            if hasattr(self.tour, "open_inspector"):
                self.tour.open_inspector.connect(self._tour_open_inspector)
            self.tour.finished.connect(self._leave_tour)
            self.tour.highlight.connect(self.presenter.follow)  # presentation: show the step's plot
            if hasattr(self.tour, "show_result"):  # what the step's run measured, for its question
                self.results_complete.connect(
                    lambda: self.tour.show_result(self.state.snapshot if self.state else None))
            self.tour_dock = QDockWidget("Guided tour", self)
            self.tour_dock.setObjectName("tour_dock")
            self.tour_dock.setWidget(self.tour)
            self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.tour_dock)
            if hasattr(self.tour, "start"):
                self.tour.start()  # enter step 1: applies its parameters, highlights its plot
        if not self.tour_dock.isVisible():
            self._size_before_tour = self.size()
        self.tour_dock.show()
        self.tour_dock.raise_()
        self.tour.setFocus()  # arrows step, Esc leaves the tour (elsewhere Esc stops the run)

    def _leave_tour(self) -> None:
        """Hide the tour; if its dock made the window wider (a platform without a window manager
        grows the window to fit), give the width back so it is not remembered."""
        self.tour_dock.hide()
        self.page.clear_highlight()  # the step's plot to watch was outlined until now
        before = getattr(self, "_size_before_tour", None)
        if before is not None and not self.isMaximized() and self.width() > before.width():
            self.resize(before)

    def _tour_inspector(self, scores: list, scale: float) -> None:
        """A step's example: load it into the inspector if that page exists, without leaving the
        plot the step highlights (the tour's link opens the inspector)."""
        page = self.pages.get("InspectorPage")
        if page is not None and hasattr(page, "set_scores"):
            page.set_scores(scores, scale)

    def _tour_open_inspector(self, scores: list, scale: float) -> None:
        page = self.open_page("InspectorPage")
        if page is not None and hasattr(page, "set_scores"):
            page.set_scores(scores, scale)

    # -- running -------------------------------------------------------------------------------
    def rerun(self) -> bool:
        """Validate the widgets and start a new generation; False (message shown) if invalid."""
        self.debounce.stop()
        try:
            cfg = self.params.config_from_widgets()
        except ConfigError as exc:
            self.worker.stop()
            self.stop_button.setEnabled(False)
            self.status_label.setText(f"not run: {exc.field}: {exc.message}")
            self.last_message = str(exc)
            return False
        self.config = cfg
        cache, axis = self.sweep_cache, self.sweep_axis
        self._run_started = time.perf_counter()
        self.worker.start(lambda cancelled: lab_run(cfg, cancelled, cache, axis=axis))
        self.stop_button.setEnabled(True)
        self.progress.setValue(0)
        self.progress.setFormat("starting…")
        return True

    def set_sweep_axis(self, axis: str, rerun: bool = True) -> bool:
        """Sweep along d_k or along n (the number of keys) from now on; reruns unless told not
        to (the tour applies its parameters next, which reruns)."""
        self.sweep_axis = axis
        self.page.panels["sweep"].set_axis(axis)
        return self.rerun() if rerun else True

    def stop(self) -> None:
        if self.worker.is_running():
            self.worker.stop()
            self.status_label.setText(self.status_label.text() + "  — stopped")
        self.stop_button.setEnabled(False)

    def tick(self) -> None:
        """The redraw timer: take the latest state (if new), then redraw what changed."""
        latest = self.worker.take_latest()
        if latest is not None:
            self.state = latest.item
            self.page.set_state(self.state)
            self._show_progress(self.state)
        if self.page.isVisible() and self.page.redraw():
            self.redraw_count += 1
        elif self.page_status.isVisible():
            self._sync_status_bar()
        if latest is not None and latest.item.complete and latest.done:
            self.stop_button.setEnabled(False)
            self.results_complete.emit()

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

    def _on_finished(self, generation: int) -> None:
        self.stop_button.setEnabled(False)

    def _on_cancelled(self, generation: int) -> None:
        if generation == self.worker.generation:
            self.stop_button.setEnabled(False)
            self.progress.setFormat("stopped")

    def _on_error(self, generation: int, exc: object) -> None:
        if generation != self.worker.generation:
            return
        self.stop_button.setEnabled(False)
        self.progress.setFormat("error")
        if isinstance(exc, ConfigError):
            self.params.show_error(exc)
            self.status_label.setText(f"not run: {exc.field}: {exc.message}")
            self.last_message = str(exc)
        else:
            self.message("Simulation error", f"{type(exc).__name__}: {exc}", error=True)

    # -- the API the tour and other pages use --------------------------------------------------
    def apply_config(self, data: dict) -> bool:
        """Set the widgets from a partial dict of SimulationConfig fields, then rerun."""
        merged = {**self.params.widget_values(), **dict(data)}
        try:
            cfg = SimulationConfig.from_dict(merged)
        except ConfigError as exc:
            self.params.show_error(exc)
            self.last_message = str(exc)
            self.status_label.setText(f"not applied: {exc}")
            return False
        self.params.set_config(cfg)
        return self.rerun()

    def highlight_plot(self, plot_id: str, hold: bool = False) -> bool:
        """Bring the plot into view and outline it: for a moment, or (``hold``: the tour's plot
        to watch) until the next step's plot or the tour is left."""
        if plot_id not in self.page.panels:
            self.status_label.setText(f"no plot called {plot_id!r}")
            return False
        self.tabs.setCurrentWidget(self.page)
        self.page.highlight(plot_id, hold=hold)
        return True

    def set_theme(self, name: str) -> None:
        theme = THEMES[name]
        self.theme_name = name
        app = QApplication.instance()
        if app is not None:
            apply_app_theme(app, theme)
        self.params.apply_theme(theme)
        self.page.apply_theme(theme)
        for page in self.pages.values():
            if hasattr(page, "apply_theme"):
                page.apply_theme(theme)
        self.theme_actions[name].setChecked(True)
        self.window_settings.save_theme(name)

    def message(self, title: str, text: str, error: bool = False) -> None:
        """Tell the user something without blocking (status bar and a non-modal box)."""
        self.last_message = text
        self.statusBar().showMessage(text, 10_000)
        box = QMessageBox(QMessageBox.Icon.Warning if error else QMessageBox.Icon.Information,
                          title, text, QMessageBox.StandardButton.Ok, self)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.setModal(False)
        box.show()

    def show_help(self) -> None:
        QMessageBox.about(self, "Attention Scaling Lab",
                          HELP_TEXT + f"<p>Settings are kept in {settings_location()}.</p>")

    # -- sessions, exports, settings (each in its own module; the window keeps its API) -------
    def save_session(self, path: str | Path) -> Path:
        return self.sessions.save(path)

    def open_session(self, path: str | Path) -> SimulationConfig:
        return self.sessions.open(path)

    def export_all_to(self, parent: str | Path) -> Path:
        return self.exports.export_all_to(parent)

    def export_plot(self, plot_id: str, path: str | Path, kind: str) -> Path:
        return self.exports.export_plot(plot_id, path, kind)

    def save_settings(self) -> None:
        self.window_settings.save()

    def shutdown(self) -> None:
        """Stop timers and the worker thread; safe to call twice."""
        if self._closing:
            return
        self._closing = True
        self.redraw_timer.stop()
        self.debounce.stop()
        self.presenter.stop()
        self.worker.stop()
        for page in self.pages.values():  # pages with their own workers stop them too
            stop = getattr(page, "shutdown", None)
            if callable(stop):
                stop()
        self.worker.join(5.0)

    def closeEvent(self, event: Any) -> None:
        self.save_settings()
        self.shutdown()
        super().closeEvent(event)
