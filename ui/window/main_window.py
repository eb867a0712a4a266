"""The main window: the parameter dock, the pages (the page registry: the Simulation page, the
others built the first time their tab is shown) and the menus.

Each other job has its own module, a helper object that is a Qt child of the window: the live
run and the status bar (``run.py``), the guided tour (``tour.py``), the links
between pages (``links.py``), sessions (``sessions.py``), what the window remembers
(``settings.py``), exports (``exports.py``), presentation mode
(``ui/presentation/``) and the help box (``help.py``). The window keeps one-line methods
for what the tests and the other modules call.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QLabel,
    QMainWindow,
    QMessageBox,
    QWidget,
)

from engine.config import SimulationConfig
from engine.errors import ConfigError
from engine.simulation_presets import load_presets
from ui.lab_style import size_combos_by_contents
from ui.pages.base import quit_grace
from ui.pages.simulation.page import SimulationPage
from ui.params.panel import ParamPanel
from ui.preimport import import_then, is_imported
from ui.presentation.mode import Presenter
from ui.settings import open_settings
from ui.simulation_run import LabState, SweepCache
from ui.theme import THEMES, apply_app_theme
from ui.window.exports import WindowExports
from ui.window.help import show_about, show_help
from ui.window.links import PageLinks
from ui.window.page_tabs import PageTabs
from ui.window.run import WindowRun
from ui.window.screen_fit import PREFERRED_SIZE, clamp_rect, first_rect
from ui.window.sessions import Sessions
from ui.window.settings import WindowSettings
from ui.window.shortcuts import WindowShortcutsWin
from ui.window.tour import WindowTour

#: (tab title, module, class) of the other pages, built the first time their tab is shown
LAZY_PAGES = (
    ("Score inspector", "ui.pages.inspector.page", "InspectorPage"),
    ("Training", "ui.pages.training.page", "TrainingPage"),
    ("Real model", "ui.pages.real_model.page", "RealModelPage"),
    ("Experiments", "ui.pages.experiments.page", "ExperimentsPage"),
)
#: (module, class) of the guided tour, built the first time it is shown
TOUR = ("ui.pages.tour.panel", "TourPanel")


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
        self.page_links = PageLinks(self)
        self._closing = False
        #: the process ends as soon as this window is closed (the app's Quit, ui.app.leave_now):
        #: closing then waits for no worker thread at all (they are daemons, outputs staged)
        self.exits_on_close = False
        self._build_tabs()
        self._build_params_dock()
        self._build_run()
        self.window_tour = WindowTour(self)
        self._build_menus()
        self.shortcuts_win = WindowShortcutsWin(self)  # Ctrl+E works with a field focused
        self.theme_name = "light"
        # a user's window fits the screen it opens on; one that restores nothing (--screenshot,
        # tests) has a fixed first size, whatever the machine's screen
        self.resize(*PREFERRED_SIZE)
        if restore:
            self.fit_to_screen(first=True)
        if restore:
            self.window_settings.restore()
        saved_theme = self.settings.value("theme") if restore else None
        self.set_theme(theme or (saved_theme if saved_theme in THEMES else "light"))
        size_combos_by_contents(self)  # (a stable width: ui.lab_style)
        self.redraw_timer.start()

    def fit_to_screen(self, first: bool = False) -> None:
        """``first``: the first size, from the screen's available geometry; otherwise the
        current (restored) geometry moved and shrunk into the screen (ui.window.screen_fit)."""
        screen = self.screen() or QApplication.primaryScreen()
        if screen is None:
            return
        available = screen.availableGeometry()
        if first:
            self.setGeometry(first_rect(available))
            return
        frame = self.frameGeometry()
        inside = clamp_rect(frame, available)
        if inside != frame:
            margin_w = frame.width() - self.width()
            margin_h = frame.height() - self.height()
            self.resize(max(1, inside.width() - margin_w), max(1, inside.height() - margin_h))
            self.move(inside.topLeft())

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
        self.tabs = PageTabs(self)  # each page scrolls in its tab rather than widen the window
        self.tabs.setObjectName("pages")
        self.tabs.addTab(self.page, "Simulation")
        self._lazy: dict[int, tuple[str, str]] = {}
        self.pages: dict[str, QWidget] = {}
        for title, module, cls in LAZY_PAGES:  # always a tab: one that fails to load says why
            placeholder = QLabel(f"Loading {title}…")
            placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
            index = self.tabs.addTab(placeholder, title)
            self._lazy[index] = (module, cls)
        #: a tab clicked now (its page is built once its module is imported, off the GUI thread)
        self._clicked_tab: int | None = None
        self._importing: set[int] = set()  #: the tabs whose modules import in the background
        self.tabs.tabBar().tabBarClicked.connect(self._tab_clicked)
        self.tabs.currentChanged.connect(self._open_lazy_tab)
        self.tabs.currentChanged.connect(self._page_shown)
        self.setCentralWidget(self.tabs)

    def _build_params_dock(self) -> None:
        self.params = ParamPanel(self)
        self.params_dock = QDockWidget("Parameters", self)
        self.params_dock.setObjectName("params_dock")
        self.params_dock.setWidget(self.params)
        self.params_dock.setMinimumWidth(300)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.params_dock)
        #: the simulation parameters only mean something on the Simulation tab: the dock steps aside
        #: on the other pages (they have their own controls) and comes back as the user left it
        self._params_dock_wanted = True
        self._was_on_simulation = True

    def _build_run(self) -> None:
        """The live run and the status bar (``run.py``); the window names the parts that
        tests and the other modules reach through it."""
        run = self.window_run = WindowRun(self)
        self.worker, self.debounce, self.redraw_timer = run.worker, run.debounce, run.redraw_timer
        self.status_label, self.progress = run.status_label, run.progress
        self.stop_button, self.page_status = run.stop_button, run.page_status

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
        #: the current page's plots, each with its export menu (filled when opened)
        self.plots_menu = f.addMenu("Export plot")
        self.plots_menu.aboutToShow.connect(self.exports.fill_plot_menu)
        self.exports.fill_plot_menu()
        f.addSeparator()
        self._action(f, "&Quit", self.close, QKeySequence.StandardKey.Quit, "Close the app")
        r = mb.addMenu("&Run")
        self.rerun_action = self._action(r, "&Rerun", self.rerun, "F5", "Run again with the current parameters")
        self.stop_action = self._action(r, "&Stop", self.stop, "Esc", "Stop the running computation (in the guided tour: leave the tour)")
        self._action(r, "&New seed", self.params.draw_new_seed, None, "Draw a new random seed and rerun")
        self.presets_menu = mb.addMenu("&Presets")
        self._fill_presets_menu()
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
        self.presenter.add_actions(v)
        self.present_action, self.play_action = self.presenter.present_action, self.presenter.play_action
        # entering or leaving presentation mode, no read-out stays on a plot for the pointer
        self.present_action.toggled.connect(lambda _on: self.clear_hovers())
        for sc in self.findChildren(QShortcut):  # presentation mode's arrows, for the F1 help
            if sc.key() in (QKeySequence(Qt.Key.Key_Left), QKeySequence(Qt.Key.Key_Right)):
                sc.setWhatsThis("previous / next plot in presentation mode")
        v.addAction(self.params_dock.toggleViewAction())
        self._action(v, "Guided &tour", self.show_tour, None, "Step through the science, plot by plot")
        h = mb.addMenu("&Help")
        self._action(h, "&Help and shortcuts", self.show_help, "F1", "What the app does and its shortcuts")
        self._action(h, "Start the guided &tour", self.show_tour, None, "Step through the science")
        self._action(h, "&About Attention Scaling Lab", lambda: show_about(self), None,
                     "The version, torch's version and the device")

    def _fill_presets_menu(self) -> None:
        """One entry per preset; a broken presets file gives one disabled entry that says which
        file and what is wrong (and the same line on stderr)."""
        try:
            presets = load_presets()
        except ConfigError as exc:  # FileFormatError: FILE: field path: what is wrong
            sys.stderr.write(f"presets unavailable: {exc}\n")
            act = self.presets_menu.addAction(f"Presets unavailable: {exc}")
            act.setEnabled(False)
            return
        for preset in presets:
            self._action(self.presets_menu, preset.title, lambda c=preset.config: self.apply_config(c),
                         None, preset.description)
        self.presets_menu.setToolTipsVisible(True)

    def set_presentation(self, on: bool) -> None:
        """Presentation mode on or off (View menu, F11, ``--present``)."""
        self.presenter.switch(on)

    # -- lazy pages ----------------------------------------------------------------------------
    def _tab_clicked(self, index: int) -> None:
        """A click on another tab: the switch it makes next comes from the user (Qt emits this
        before it switches), who sees the tab's "Loading…" while its module imports."""
        self._clicked_tab = index if index != self.tabs.currentIndex() else None

    def _open_lazy_tab(self, index: int) -> None:
        """A tab shown for the first time gets its page. Clicked, with its module not imported
        yet (ui/preimport.py had no idle moment for it), the module imports in the background
        while the tab shows "Loading…", and the page is built when it is done: an import on the
        GUI thread froze the window 0.5 s. Opened from code (sessions, links, tests), the page is
        built at once, so that it is there when the call returns."""
        clicked, self._clicked_tab = self._clicked_tab == index, None
        spec = self._lazy.get(index)
        if spec is None:
            return
        if clicked and not is_imported(spec[0]):
            if index not in self._importing:
                self._importing.add(index)
                import_then(spec[0], lambda: self._lazy_imported(index), self)
            return
        self._build_lazy_tab(index)

    def _lazy_imported(self, index: int) -> None:
        """A clicked tab's module is imported: its page is built if the tab is still shown (if
        not, when it is next shown, then without waiting), and the window follows it as it
        followed the placeholder."""
        self._importing.discard(index)
        if self.tabs.currentIndex() == index and index in self._lazy:
            self._build_lazy_tab(index)
            self._page_shown(index)

    def _page_shown(self, index: int) -> None:
        """The window follows the page shown: the parameter dock, the status bar and
        presentation mode."""
        self._sync_params_dock(index)
        self.window_run.sync_status_bar()
        self.presenter.page_changed()

    def _build_lazy_tab(self, index: int) -> None:
        spec = self._lazy.pop(index, None)
        if spec is None:
            return
        module, cls = spec
        try:
            page = getattr(importlib.import_module(module), cls)(self)
        except Exception as exc:  # the tab stays and shows why
            if isinstance(exc, ConfigError):  # a broken bundled file: which, and what is wrong
                why = str(exc)
                sys.stderr.write(f"{self.tabs.tabText(index)} page: {why}\n")
            else:  # a bug: the traceback goes to stderr
                traceback.print_exc()
                why = f"{type(exc).__name__}: {exc}"
            page = QLabel(f"This page could not be loaded:\n{why}")
            page.setWordWrap(True)
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
        self.presenter.page_built(page)
        size_combos_by_contents(page)
        self.page_links.connect_page(cls, page)
        self.sessions.apply_pending()
        if hasattr(page, "apply_theme"):
            page.apply_theme(THEMES[self.theme_name])

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

    def _sync_params_dock(self, index: int) -> None:
        on_simulation = self.tabs.widget(index) is self.page
        presenting = self.presenter.active  # (its compact bar stands in for the dock)
        if on_simulation:
            self.params_dock.setVisible(self._params_dock_wanted and not presenting)
        elif self._was_on_simulation:  # leaving it: remember how the user had the dock
            if not presenting:
                self._params_dock_wanted = self.params_dock.isVisible()
            self.params_dock.hide()
        self._was_on_simulation = on_simulation

    def params_dock_wanted(self) -> bool:
        """Whether the user has the parameter dock shown on the Simulation page (it steps
        aside on the other pages and in presentation mode)."""
        if self.tabs.currentWidget() is self.page and not self.presenter.active:
            return self.params_dock.isVisible()
        return self._params_dock_wanted

    def want_params_dock(self, on: bool) -> None:
        """The dock as the user wants it: shown now if the Simulation page is."""
        self._params_dock_wanted = on
        if self.tabs.currentWidget() is self.page and not self.presenter.active:
            self.params_dock.setVisible(on)

    @property
    def status_text(self) -> str:
        """What the status bar shows for the current page (tests read it)."""
        return self.window_run.status_text

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

    # -- the guided tour (tour.py) --------------------------------------------------------
    def show_tour(self) -> None:
        self.window_tour.show(TOUR)

    @property
    def tour(self) -> Any:
        """The tour panel; None until the tour is first shown (or when it failed to load)."""
        return self.window_tour.panel

    @property
    def tour_dock(self) -> QDockWidget | None:
        return self.window_tour.dock

    # -- the live run (run.py) -----------------------------------------------------------
    def rerun(self) -> bool:
        """Validate the widgets and start a new generation; False (message shown) if invalid."""
        return self.window_run.rerun()

    def set_sweep_axis(self, axis: str, rerun: bool = True) -> bool:
        return self.window_run.set_sweep_axis(axis, rerun)

    def stop(self) -> None:
        self.window_run.stop()

    def is_idle(self) -> bool:
        """No run streams: the simulation's worker and every page's own are at rest (the time
        for background work that holds the interpreter, ui/preimport.py)."""
        workers = [self.worker] + [getattr(page, "worker", None) for page in self.pages.values()]
        return not any(w is not None and w.is_running() for w in workers)

    # -- the API the tour and other pages use --------------------------------------------------
    def apply_config(self, data: dict) -> bool:
        """Set the widgets from a partial dict of SimulationConfig fields, then rerun."""
        return self.window_run.apply_config(data)

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
        self.presenter.bar.apply_theme(theme)
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

    def clear_hovers(self) -> None:
        """Every plot's hover read-out off (on every built page)."""
        from ui.plots.base import PlotPanel

        for panel in self.findChildren(PlotPanel):
            panel.clear_hover()

    def show_help(self) -> None:
        show_help(self)

    # -- sessions, exports, settings (each in its own module; the window keeps its API) -------
    def save_session(self, path: str | Path) -> Path:
        return self.sessions.save(path)

    def open_session(self, path: str | Path) -> SimulationConfig | None:
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
        # Quit waits for nothing the user asked for: every run is cancelled at once, and its
        # thread (a daemon; what it would still produce is dropped, files are staged) gets no
        # wait when the process ends next (exits_on_close), else a short grace, never the
        # seconds a simulation chunk or a training step can take
        grace = quit_grace(self)
        for page in self.pages.values():  # pages with their own workers stop them too
            stop = getattr(page, "shutdown", None)
            if callable(stop):
                if hasattr(page, "join_s"):
                    page.join_s = min(page.join_s, grace)
                stop()
        if grace > 0:
            self.worker.join(grace)

    def closeEvent(self, event: Any) -> None:
        self.save_settings()
        self.shutdown()
        super().closeEvent(event)
