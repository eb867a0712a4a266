"""Presentation mode (View -> Presentation mode, ``--present``): the Simulation page for a projector.

Larger text, thicker lines, the parameter dock out of the way (a compact bar of the key
parameters instead: d_k, n, the rules, trials), one plot at a time filling the page with the
sweep always visible underneath; Left/Right step through the plots, or through the tour's steps
while the tour is open (each step then shows its own plot), and Play walks d_k through the
sweep's values so the whole page animates. Leaving restores everything.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QAction, QFont, QKeySequence, QPen, QShortcut
from PySide6.QtWidgets import QApplication, QComboBox, QGraphicsTextItem, QLabel

from ui.presentation.bar import ParamBar

FONT_SCALE = 1.4  #: widget text
#: the sweep row's height under a plot shown large, of each of the plot's two rows
SWEEP_STRETCH = 2
TICK_SCALE = 1.2  #: tick labels, of the normal text size (the six sweep plots stay narrow)
LINE_SCALE = 1.8  #: curve widths
BAR_SYNC_MS = 250  #: how often the compact bar shows the window's current parameters
PLAY_MS = 1600  #: time per d_k while playing (each step reruns the simulation)
#: the plots shown one at a time (the sweep stays visible below them)
SEQUENCE = ("scores", "weights", "top_weight", "entropy", "jacobian")
#: what the bar calls each plot
PLOT_TITLES = {"scores": "scores / logits", "weights": "attention weights",
               "top_weight": "top weight", "entropy": "entropy", "jacobian": "Jacobian size"}


def set_app_font(app: QApplication, font: QFont, window: Any) -> None:
    """The application's font, followed exactly by ``window``'s widgets: one with a style sheet
    keeps the font it had when its sheet was applied, and a combo box its sizes (two Qt
    limitations), so once the font has reached every widget (hidden ones get it later, through
    posted events) those are refreshed; leaving presentation mode leaves nothing larger."""
    app.setFont(font)
    QTimer.singleShot(0, window, lambda: _refresh_widgets(window))


def _refresh_widgets(window: Any) -> None:
    """Style sheets applied again and combo boxes measured again, for the app's own widgets
    only (looked up by class or from the theme's register: wrapping Qt's inner widgets from
    Python left wrappers that outlived them; an application style sheet, set and taken back,
    pinned every widget's palette)."""
    from ui.lab_style import remeasure
    from ui.plots.base import PlotPanel
    from ui.theme import styled_widgets

    QApplication.sendPostedEvents()  # the font change of hidden widgets first
    sheeted = [*window.findChildren(PlotPanel), *styled_widgets(),
               *window.presenter.bar.rule_buttons.values()]
    for widget in sheeted:
        if widget.styleSheet():
            widget.setStyleSheet(widget.styleSheet())
    for combo in window.findChildren(QComboBox):
        remeasure(combo)
    for label in window.findChildren(QLabel):
        if not label.text():  # a label never given text keeps the size of its first font:
            label.setText(" ")  # made a text label (Qt re-measures those on a font change)
            label.setText("")


class Presenter(QObject):
    """Switches a MainWindow in and out of presentation mode; owns the play timer."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.active = False
        self.index = 0  #: the plot of SEQUENCE shown
        self._sweep_alone = False  #: the sweep fills the plot area (a tour step about it)
        self._saved: dict[str, Any] = {}
        #: what presentation mode changed on the plots, to put back exactly when it ends
        self._pens: list[tuple[Any, QPen]] = []
        self._tick_fonts: list[tuple[Any, QFont | None, tuple[float, float]]] = []
        self.timer = QTimer(self)
        self.timer.setInterval(PLAY_MS)
        self.timer.timeout.connect(self._next_d_k)
        self._play_values: list[int] = []
        self._play_field = "d_k"  #: the swept parameter being played (d_k or n_keys)
        self._shortcuts = []
        for key, step in ((Qt.Key.Key_Right, 1), (Qt.Key.Key_Left, -1)):
            sc = QShortcut(QKeySequence(key), window)
            sc.setContext(Qt.ShortcutContext.WindowShortcut)
            sc.activated.connect(lambda s=step: self.step(s))
            sc.setEnabled(False)
            self._shortcuts.append(sc)
        self.bar = ParamBar(window)
        window.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.bar)
        self.bar.hide()
        self.bar.edited.connect(window.apply_config)
        self.bar.step_requested.connect(self.step)
        # the parameters change from many places (presets, the tour, Play, a session): the bar
        # looks at the window's values a few times a second while it is shown
        self._bar_timer = QTimer(self)
        self._bar_timer.setInterval(BAR_SYNC_MS)
        self._bar_timer.timeout.connect(self.sync_bar)
        window.installEventFilter(self)  # leave the mode before the window saves its layout

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt's name
        """Closing in presentation mode leaves it first, so that the layout the window saves (and
        the next start restores) has the parameter dock back and no bar."""
        if event.type() == QEvent.Type.Close and self.active and watched is self.window:
            self.window.set_presentation(False)
        return False

    @property
    def window(self) -> Any:
        """The main window (its parent; no Python reference kept: a closed, deleted window
        must not stay referenced from here)."""
        return self.parent()

    # -- the View menu's actions ---------------------------------------------------------------
    def add_actions(self, menu: Any) -> None:
        """Presentation mode (F11) and Play (Ctrl+P), both checkable, into the window's menu."""
        w = self.window
        self.present_action = QAction("&Presentation mode", w, checkable=True)
        self.present_action.setShortcut(QKeySequence("F11"))
        self.present_action.setStatusTip("Larger text and lines, one plot at a time with the sweep "
                                         "below; Left/Right change the plot")
        self.present_action.toggled.connect(self.switch)
        menu.addAction(self.present_action)
        self.play_action = QAction("&Play d_k through the sweep", w, checkable=True)
        self.play_action.setShortcut(QKeySequence("Ctrl+P"))
        self.play_action.setStatusTip("Step d_k (or n, along n) through the sweep's values, the page following")
        self.play_action.toggled.connect(lambda on: self.play() if on else self.stop())
        menu.addAction(self.play_action)

    def switch(self, on: bool) -> None:
        """Presentation mode on or off, its menu action checked to match (View menu, F11,
        ``--present``); leaving it stops Play."""
        if self.present_action.isChecked() != on:
            self.present_action.setChecked(on)  # comes back here through toggled
            return
        self.set_active(on)
        if not on and self.play_action.isChecked():
            self.play_action.setChecked(False)

    # -- on / off ------------------------------------------------------------------------------
    def set_active(self, on: bool) -> None:
        if on == self.active:
            return
        self.active = on
        w = self.window
        app = QApplication.instance()
        self._combos_follow_contents()
        if on:
            self._saved = {"font": QFont(app.font()), "dock": w.params_dock_wanted()}
            font = QFont(app.font())
            font.setPointSizeF(font.pointSizeF() * FONT_SCALE)
            set_app_font(app, font, w)
            w.params_dock.hide()  # (the page shown stays: F11 presents the page you are on)
            self._scale_plots(True)
            self.show_plot(self.index)
            self._tell_pages(True)
            self.bar.allowed = True
            self.page_changed()
            self.sync_bar()
            self._bar_timer.start()
        else:
            self.stop()
            self._bar_timer.stop()
            self.bar.allowed = False
            self.bar.hide()
            set_app_font(app, self._saved.get("font", app.font()), w)
            w.want_params_dock(self._saved.get("dock", True))
            self._scale_plots(False)
            self._tell_pages(False)
            self._sweep_alone = False
            self._place(None)
            for panel in w.page.panels.values():
                panel.show()
            w.page.results.show()
        for sc in self._shortcuts:
            sc.setEnabled(on)

    def _combos_follow_contents(self) -> None:
        from ui.lab_style import size_combos_by_contents

        size_combos_by_contents(self.window)

    def page_changed(self) -> None:
        """The compact bar of the Simulation parameters shows over the Simulation page only."""
        if self.active:
            self.bar.setVisible(self.window.tabs.currentWidget() is self.window.page)

    def _panels(self, root: Any = None) -> list[Any]:
        from ui.plots.base import PlotPanel

        root = root or self.window
        found = root.findChildren(PlotPanel)  # (a panel built alone: itself, too)
        return [root, *found] if isinstance(root, PlotPanel) else found

    def _scale_plots(self, on: bool) -> None:
        """Thicker curves and larger tick labels, plot titles and axis titles on every page's
        plots (on), or every pen and tick font exactly as it was before (off): dividing by the
        factors again left the ticks at the presentation size (a tick font that had followed
        the application's font)."""
        from ui.plots import type_scale

        panels = self._panels()
        if not on:
            for item, pen in self._pens:
                item.setPen(pen)
            for axis, font, text_size in self._tick_fonts:
                axis.setStyle(tickFont=font)
                # the room kept for tick labels only grows by small steps (pyqtgraph): given
                # back as it was, or every axis stayed a few pixels wider than before
                axis.textWidth, axis.textHeight = text_size
                axis._updateWidth() if axis.orientation in ("left", "right") else axis._updateHeight()
            self._pens, self._tick_fonts = [], []
            type_scale.set_factor(1.0, [p.glw.scene() for p in panels])
        else:
            type_scale.set_factor(FONT_SCALE, [p.glw.scene() for p in panels])
            self._scale_panels(panels)
        for panel in panels:
            panel.invalidate()

    def _scale_panels(self, panels: list[Any]) -> None:
        normal = QFont(self._saved.get("font", QApplication.font()))
        for panel in panels:
            for plot in panel.plot_items():
                self._scale_plot(plot, normal)

    def _tell_pages(self, on: bool) -> None:
        """Pages that lay out otherwise for a projector (``presenting(on)``: the Experiments page
        leaves its form and job list out, so its grid and figures keep their room at the larger
        type) are told the mode."""
        for page in self.window.pages.values():
            presenting = getattr(page, "presenting", None)
            if presenting is not None:
                presenting(on)

    def page_built(self, page: Any) -> None:
        """A page built during presentation mode: its plots' pens and ticks scaled too (its
        titles already are), and put back when the mode ends."""
        presenting = getattr(page, "presenting", None)
        if self.active and presenting is not None:
            presenting(True)
        if self.active:
            panels = self._panels(page)
            self._normal_scene_text(panels)
            self._scale_panels(panels)
            for panel in panels:
                panel.invalidate()

    def _normal_scene_text(self, panels: list[Any]) -> None:
        """Plot text built now took the application's larger font (a text item keeps the font
        it was made with): at the normal size again, so that presentation mode scales it once,
        as it does a page built before (a Real model page first opened in presentation mode
        drew its axis titles at twice the size and cut its "Press Analyze" hint)."""
        from ui.plots import type_scale

        big = QApplication.font().pointSizeF()
        normal = QFont(self._saved.get("font", QApplication.font())).pointSizeF()
        if big <= 0 or normal <= 0 or abs(big - normal) < 0.01:
            return
        for panel in panels:
            scene = panel.glw.scene()
            for item in scene.items():
                if isinstance(item, QGraphicsTextItem) and abs(item.font().pointSizeF() - big) < 0.01:
                    font = QFont(item.font())
                    font.setPointSizeF(normal)
                    item.setFont(font)
            type_scale.refresh_scene(scene)

    def _scale_plot(self, plot: Any, normal: QFont) -> None:
        """One plot's pens and tick fonts scaled up, each original kept to restore."""
        for item in plot.listDataItems():
            pen = item.opts.get("pen")
            if pen is None or not hasattr(item, "setPen"):  # bars keep their outline
                continue
            pen = pg.mkPen(pen)
            self._pens.append((item, QPen(pen)))
            pen.setWidthF(max(1.0, pen.widthF() * LINE_SCALE))
            item.setPen(pen)
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            own = axis.style.get("tickFont")
            self._tick_fonts.append((axis, QFont(own) if own is not None else None,
                                     (axis.textWidth, axis.textHeight)))
            font = QFont(own if own is not None else normal)
            size = font.pointSizeF() if font.pointSizeF() > 0 else 9.0
            font.setPointSizeF(size * TICK_SCALE)
            axis.setStyle(tickFont=font)

    # -- one plot at a time --------------------------------------------------------------------
    def show_plot(self, index: int) -> None:
        """Show plot ``index`` of SEQUENCE (and the sweep); the others step aside."""
        self.index = index % len(SEQUENCE)
        self._sweep_alone = False
        page = self.window.page
        for pid, panel in page.panels.items():
            panel.setVisible(pid == "sweep" or pid == SEQUENCE[self.index])
        page.results.hide()
        self._place(SEQUENCE[self.index])
        self.bar.plot_label.setText(f" {self.index + 1}/{len(SEQUENCE)} {PLOT_TITLES[self.shown]} ")

    def show_sweep(self) -> None:
        """The sweep alone over the whole plot area (a tour step about it: in its usual row, six
        plots under a large one, its numbers crowded at 1280x720)."""
        self._sweep_alone = True
        page = self.window.page
        for pid, panel in page.panels.items():
            panel.setVisible(pid == "sweep")
        page.results.hide()
        self._place("sweep")
        self.bar.plot_label.setText(" sweep ")

    def _place(self, plot_id: str | None) -> None:
        """The shown plot spans the two plot rows and all three columns, the sweep all three
        rows when it is shown alone (None: every plot back in its own cell)."""
        from ui.pages.simulation.page import GRID

        page = self.window.page
        grid = page.widget().layout()
        for pid, panel in page.panels.items():
            row, col, span = GRID[pid]
            grid.removeWidget(panel)
            if pid == plot_id:
                grid.addWidget(panel, 1, 0, 3 if pid == "sweep" else 2, 3)
            else:
                grid.addWidget(panel, row, col, 1, span)
        # under a plot shown large, the sweep row gets SWEEP_STRETCH of the two plot rows' one
        # each: at a third of the height its six plots kept 43 px of data at 1280x720, too
        # short for their y titles in the larger type ("fractio…")
        below = plot_id is not None and plot_id != "sweep"
        grid.setRowStretch(GRID["sweep"][0], SWEEP_STRETCH if below else 1)

    @property
    def tour(self) -> Any:
        """The guided tour while it is open (its dock shown), else None."""
        w = self.window
        dock = getattr(w, "tour_dock", None)
        return w.tour if dock is not None and dock.isVisible() else None

    def step(self, delta: int) -> None:
        """Left/Right: the tour's previous/next step while the tour is open (a step still asking
        its question shows its answer first), otherwise the previous/next plot."""
        if not self.active:
            return
        tour = self.tour
        if tour is not None:
            tour.next() if delta > 0 else tour.back()
        else:
            self.show_plot(self.index + delta)

    def follow(self, plot_id: str) -> None:
        """A tour step's plot to watch: shown (the sweep alone, large, when it is the one)."""
        if not self.active:
            return
        if plot_id in SEQUENCE:
            self.show_plot(SEQUENCE.index(plot_id))
        elif plot_id == "sweep":
            self.show_sweep()

    def sync_bar(self) -> None:
        if self.bar.isVisible():
            self.bar.sync(self.window.params.widget_values())

    @property
    def shown(self) -> str:
        """The plot shown above the sweep, or "sweep" when it is shown alone."""
        return "sweep" if self._sweep_alone else SEQUENCE[self.index]

    # -- play d_k through the sweep ------------------------------------------------------------
    def play(self) -> None:
        state = self.window.state
        values = sorted({p.x for p in state.sweep}) if state is not None and state.sweep else []
        if not values:
            return
        self._play_field = state.sweep[0].axis  # d_k, or n_keys for a sweep along n
        self._play_values = values
        self.timer.start()
        self._next_d_k()

    def stop(self) -> None:
        """Stop playing."""
        self.timer.stop()

    @property
    def playing(self) -> bool:
        return self.timer.isActive()

    def _next_d_k(self) -> None:
        values = self._play_values
        field = self._play_field
        current = self.window.params.widget_values()[field]
        later = [v for v in values if v > current]
        self.window.apply_config({field: later[0] if later else values[0]})
