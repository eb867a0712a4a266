"""What the pages share, written once.

:class:`PanelRedraw`: the round-robin redraw of the panels whose data changed and which are on
screen, and ``stale()`` (the visible panels not yet showing the latest data; tests wait on it).

:class:`LivePage`: a page whose engine work runs in its own :class:`ui.worker.Worker` thread; a
~30 Hz timer takes the latest snapshot and redraws (``tick``); ``shutdown`` stops the timer and
joins the thread, also when the main window around the page closes; ``apply_theme`` themes the
page's panels then calls ``theme_changed``; the export hooks ask for a file or folder and say what
happened through ``report``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ui.paced_timer import PacedTimer
from ui.theme import Theme, current_theme
from ui.worker import Worker

REDRAW_MS = 33  #: at most ~30 redraws a second
#: ticks in a row a page waits for a panel's held paint at most (PanelRedraw): a first draw's
#: settling and its paint may take two turns after the tick; a bound, so that a paint that never
#: comes never stops the others
MAX_PAINT_WAITS = 2


#: seconds closing the window waits for each cancelled worker thread to end: they are daemons,
#: what they would still produce is dropped, and outputs are staged
QUIT_JOIN_S = 0.3


def quit_grace(window: Any) -> float:
    """Seconds a closing ``window`` waits for each cancelled worker: none when the process ends
    right after it (the app's Quit: ``exits_on_close``, ui.app.leave_now), else QUIT_JOIN_S."""
    return 0.0 if getattr(window, "exits_on_close", False) else QUIT_JOIN_S


class PanelRedraw:
    """Round-robin redraw and stale bookkeeping over ``self.panels`` (plot_id -> PlotPanel), all
    drawing one object, ``redraw_source()`` (None: nothing to draw yet)."""

    panels: dict[str, Any]
    #: panels painted per redraw at most: painting them all at once stalls the event loop
    panels_per_tick = 3
    _next_panel = 0
    _waits = 0  #: ticks in a row that waited for a panel's paint (PlotPanel.paint_due)

    def redraw_source(self) -> Any:
        return None

    def drawn_ids(self) -> list[str]:
        """The panels that draw the current source (all, unless a page leaves some out)."""
        return list(self.panels)

    def redraw_panels(self, budget: int | None = None) -> list[str]:
        """Redraw at most ``budget`` changed, visible panels, taking turns so one tick never pays
        for painting all of them; returns the ids drawn."""
        source = self.redraw_source()
        if source is None:
            return []
        budget = self.panels_per_tick if budget is None else budget
        if self._waits < MAX_PAINT_WAITS and any(getattr(p, "paint_due", False)
                                                 for p in self.panels.values()):
            # a panel's long refresh left its paint (or the rest of its settling) to the loop's
            # next turns: a refresh now would run in the same turn as that paint
            self._waits += 1
            return []
        self._waits = 0
        ids = self.drawn_ids()
        drawn: list[str] = []
        start = self._next_panel  # fixed for this pass: moving it mid-pass skipped a panel
        for k in range(len(ids)):
            pid = ids[(start + k) % len(ids)]
            if len(drawn) >= budget:
                # not drawn this tick, but an export or a figure taken now shows these data
                # (a panel's last drawn snapshot may be several ticks old)
                self.panels[pid]._state = source
                continue
            if self.panels[pid].refresh(source):
                drawn.append(pid)
                self._next_panel = (start + k + 1) % len(ids)
        return drawn

    def stale(self) -> list[str]:
        """Visible panels not yet showing the current source (empty once the page caught up)."""
        source = self.redraw_source()
        if source is None:
            return []
        return [pid for pid in self.drawn_ids()
                if self.panels[pid].is_on_screen()
                and self.panels[pid].data_key(source) != self.panels[pid]._drawn_key]


class LivePage(QWidget):
    """A page with its own worker thread and redraw timer (see the module docstring)."""

    #: seconds ``shutdown`` waits for the worker's thread
    join_s = 5.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme: Theme = current_theme()
        self._closing = False
        self._watching = False
        self.worker = Worker(self)
        self.timer = PacedTimer(REDRAW_MS, self)
        self.timer.paced_timeout.connect(self.tick)
        app = QApplication.instance()
        if app is not None:  # quitting ends the page's work too
            app.aboutToQuit.connect(self.shutdown)

    # -- hooks for the pages -------------------------------------------------------------------
    def tick(self) -> None:
        """The redraw timer: take the latest snapshot, redraw what changed."""

    def themed_panels(self) -> list[Any]:
        """The plot panels ``apply_theme`` recolours."""
        return list(getattr(self, "panels", {}).values())

    def theme_changed(self, theme: Theme) -> None:
        """The page's own widgets after a theme change (status colours, forms)."""

    def report(self, text: str, error: bool = False) -> None:
        """Tell the user what happened (the page's status line)."""

    def export_all(self, parent: str | Path) -> Path | None:
        raise NotImplementedError

    def stop_work(self) -> None:
        """Anything besides the worker to stop when the page shuts down (a cancel flag, timers)."""

    def form_beside(self, form: QWidget, min_width: int, max_width: int) -> QVBoxLayout:
        """The page's layout: ``form`` in a scrollable side column on the left; returns the
        column on the right (for the buttons, status and plots)."""
        root = QHBoxLayout(self)
        root.setContentsMargins(2, 2, 2, 2)
        side = QScrollArea(self)
        side.setWidgetResizable(True)
        side.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        side.setWidget(form)
        side.setMinimumWidth(min_width)
        side.setMaximumWidth(max_width)
        root.addWidget(side)
        self.form_column = side  #: (a page may leave it out in presentation mode)
        right = QVBoxLayout()
        root.addLayout(right, 1)
        return right

    def add_buttons(self, bar: QHBoxLayout, specs: tuple[tuple[str, str, str], ...]
                    ) -> dict[str, QPushButton]:
        """A push button per (key, text, tool tip), added to ``bar``; returned by key."""
        buttons: dict[str, QPushButton] = {}
        for key, text, tip in specs:
            b = QPushButton(text, self)
            b.setToolTip(tip)
            bar.addWidget(b)
            buttons[key] = b
        return buttons

    # -- theme ---------------------------------------------------------------------------------
    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        for panel in self.themed_panels():
            panel.apply_theme(theme)
        self.theme_changed(theme)

    # -- export --------------------------------------------------------------------------------
    def export_panel_dialog(self, panel: Any, kind: str) -> None:
        """One plot as PNG, SVG, CSV or a preset (its ⋯ menu or right-click)."""
        from ui.export.dialog import export_panel_dialog

        export_panel_dialog(self, panel, kind, self.report)

    def export_all_dialog(self) -> None:
        """Everything the page shows into a new folder under the one chosen."""
        from ui.export.plot_files import ExportError
        from ui.file_dialogs import choose_dir

        folder = choose_dir(self, "Export all into a new folder under…")
        if not folder:
            return
        try:
            out = self.export_all(folder)
        except (ExportError, OSError) as exc:
            self.report(f"export failed: {exc}", True)
            return
        if out is not None:
            self.report(f"exported to {out}", False)

    # -- closing -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the timer and the worker thread (and ``stop_work``); safe to call twice."""
        if self._closing:
            return
        self._closing = True
        self.timer.stop()
        self.stop_work()
        self.worker.stop()
        if self.join_s > 0:  # (Quit: 0, no wait at all)
            self.worker.join(self.join_s)

    def closeEvent(self, event: Any) -> None:
        self.shutdown()
        super().closeEvent(event)

    def showEvent(self, event: Any) -> None:
        """Inside a main window, closing that window must also end the page's work."""
        top = self.window()
        if top is not self and not self._watching:
            top.installEventFilter(self)
            self._watching = True
        super().showEvent(event)

    def eventFilter(self, obj: Any, event: Any) -> bool:
        if event.type() == QEvent.Type.Close and obj is self.window():
            self.join_s = min(self.join_s, quit_grace(obj))  # a short grace, or none (Quit)
            self.shutdown()
        return False
