"""The guided tour in the main window: its dock, and the hooks from the tour's signals to the
window (parameters, sweep axis, the plot to watch, presentation mode, the Score inspector, and
what a step's run measured for its question).

The tour panel is built the first time it is shown; one that fails to load says why (message and
traceback) instead of vanishing. Where the window is too narrow for the parameters, the page and
the tour side by side (a 1280x720 projector), the tour shares the parameters' place as a tab
(raised; the parameters are one click away), so the page keeps the width its plots need.
"""

from __future__ import annotations

import importlib
import traceback
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget

from ui.window.part import WindowPart

#: what a plot covered by a tour question says
CONCEAL_TEXT = "Hidden until you answer the tour's question: it would give the answer away."


class WindowTour(WindowPart):
    """The window's guided tour: ``panel`` and ``dock`` stay None until it is first shown."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.panel: Any = None
        self._options: dict = {}  #: the scale controls of the current step's inspector example
        self.dock: QDockWidget | None = None
        self._size_before: Any = None

    def show(self, spec: tuple[str, str]) -> None:
        """Show the tour (building the panel from ``spec`` = (module, class) the first time)
        and give it the focus: arrows step, Esc leaves the tour (elsewhere Esc stops the run)."""
        w = self.window
        if self.dock is None:
            if not self._build(spec):
                return
            if hasattr(self.panel, "start"):
                self.panel.start()  # enter step 1: applies its parameters, highlights its plot
        elif not self.dock.isVisible() and hasattr(self.panel, "start"):
            # shown again (Help, View): resume at the step it was left on, with that step's
            # parameters, so its text matches the plots whatever was changed meanwhile
            self.panel.start(max(self.panel.index, 0))
        if not self.dock.isVisible():
            self._size_before = w.size()
        self._place()
        self.dock.show()
        self.dock.raise_()
        self.panel.setFocus()

    def _place(self) -> None:
        """Beside the page on the right where the window is wide enough for the page's plots,
        the parameters and the tour; else tabbed with the parameters on the left."""
        w = self.window
        params = getattr(w, "params_dock", None)
        page = w.page.widget() if hasattr(w.page, "widget") else None
        need = page.minimumSizeHint().width() if page is not None else 0
        tour = max(self.dock.sizeHint().width(), self.dock.minimumSizeHint().width())
        side = params.width() if params is not None and params.isVisible() else 0
        if params is None or not params.isVisible() or w.width() >= need + side + tour + 24:
            if w.dockWidgetArea(self.dock) != Qt.DockWidgetArea.RightDockWidgetArea or \
                    w.tabifiedDockWidgets(self.dock):
                w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dock)
            return
        if self.dock not in w.tabifiedDockWidgets(params):
            w.tabifyDockWidget(params, self.dock)

    def _build(self, spec: tuple[str, str]) -> bool:
        """The tour panel, connected to the window, in a dock on the right; False (the error
        shown) when it cannot be loaded."""
        w = self.window
        module, cls = spec
        try:
            self.panel = getattr(importlib.import_module(module), cls)(w)
        except Exception as exc:
            traceback.print_exc()
            w.message("Guided tour", f"The tour could not be loaded: {type(exc).__name__}: {exc}", error=True)
            return False
        self._connect(self.panel)
        self.dock = QDockWidget("Guided tour", w)
        self.dock.setObjectName("tour_dock")
        self.dock.setWidget(self.panel)
        w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dock)
        return True

    def _connect(self, tour: Any) -> None:
        """A step sets the sweep axis, then the parameters (which rerun), then outlines its plot
        (and shows it in presentation mode); a finished run tells the step what it measured."""
        w = self.window
        if hasattr(tour, "sweep_axis"):
            tour.sweep_axis.connect(lambda axis: w.set_sweep_axis(axis, rerun=False))
        tour.apply_config.connect(w.apply_config)
        tour.highlight.connect(lambda plot_id: w.highlight_plot(plot_id, hold=True))
        if hasattr(tour, "unhighlight"):
            tour.unhighlight.connect(w.page.clear_highlight)
        if hasattr(tour, "inspector_options"):
            tour.inspector_options.connect(self._example_options)
        if hasattr(tour, "show_inspector"):
            tour.show_inspector.connect(self._load_example)
        if hasattr(tour, "open_inspector"):
            tour.open_inspector.connect(self._open_example)
        tour.finished.connect(self.leave)
        if hasattr(tour, "conceal"):  # what would give a question's answer away, until answered
            tour.conceal.connect(lambda ids: w.page.conceal(ids, CONCEAL_TEXT))
        # back on the Simulation page the parameters' tab reappears: the tour stays in front
        w.tabs.currentChanged.connect(lambda _i: self.dock.raise_()
                                      if self.dock is not None and self.dock.isVisible() else None)
        tour.highlight.connect(w.presenter.follow)  # presentation: show the step's plot
        if hasattr(tour, "show_result"):  # what the step's run measured, for its question
            w.results_complete.connect(lambda: tour.show_result(w.state.snapshot if w.state else None))

    def leave(self) -> None:
        """Hide the tour; if its dock made the window wider (a platform without a window manager
        grows the window to fit), give the width back so it is not remembered."""
        w = self.window
        self.dock.hide()
        w.page.conceal([])
        w.page.clear_highlight()  # the step's plot to watch was outlined until now
        before = self._size_before
        if before is not None and not w.isMaximized() and w.width() > before.width():
            w.resize(before)

    def _example_options(self, options: dict) -> None:
        """The next example's soft-cap and sink (cleared when it has none)."""
        self._options = dict(options)  # (an inspector opened later by the link gets them too)
        page = self.window.pages.get("InspectorPage")
        if page is not None and hasattr(page, "set_rule_options"):
            page.set_rule_options(options)

    def _load_example(self, scores: list, scale: float) -> None:
        """A step's example: load it into the inspector if that page exists, without leaving the
        plot the step highlights (the tour's link opens the inspector)."""
        page = self.window.pages.get("InspectorPage")
        if page is not None and hasattr(page, "set_scores"):
            page.set_scores(scores, scale)

    def _open_example(self, scores: list, scale: float) -> None:
        """The user asked for the step's example: open the inspector with it."""
        page = self.window.open_page("InspectorPage")
        if page is not None and hasattr(page, "set_scores"):
            if hasattr(page, "set_rule_options"):
                page.set_rule_options(self._options)
            page.set_scores(scores, scale)
