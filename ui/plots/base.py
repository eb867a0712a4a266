"""The frame every plot lives in: a stable id, theming, redraw-when-changed-and-visible, export.

A panel owns one ``pg.GraphicsLayoutWidget`` (one or more PlotItems, created once). Subclasses
implement ``data_key(state)`` (what its picture depends on), ``draw(state)`` (setData on items
created once) and ``data_rows()`` (the numbers drawn, for CSV). ``state`` is anything with
``.snapshot`` (a SimulationSnapshot or None) and ``.sweep`` (a tuple of SweepPoint).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QCoreApplication,
    QEvent,
    QIODevice,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QPainter, QPicture
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QApplication,
    QCheckBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.io import atomic_write_bytes, csv_text
from ui.paced_timer import TURN_MS  # ("the event loop's next turn"; the sweep's too)
from ui.plots import type_scale  # noqa: F401  (presentation mode's larger titles)
from ui.plots.figure_metadata import METADATA_KEY, svg_with_metadata
from ui.plots.heatmap import heatmap_with_colorbar, theme_colorbar
from ui.plots.lazy_menu import LazyMenuViewBox
from ui.plots.legends import outside_legend, show_legend
from ui.plots.tidy_axis import tidy_axes
from ui.theme import LIGHT, Theme

#: size (pixels) of a figure in the "screen" export style (ui.export.plot_files.PRESETS): an export's size
#: and layout come from its style, never from the widget's size on screen
SCREEN_FIGURE_SIZE = (1200, 750)
#: rules whose plot items (curves, markers, legend entries: 3-7 ms a rule) a panel makes per
#: redraw tick at most: a first draw of seven rules made them all at once, a 30-50 ms block of
#: the GUI thread (bench/bench_gui.py --rules 7 --profile); three a tick were still 20 ms with
#: the tick's other work; two rules draw at once
RULES_PER_TICK = 2
#: a refresh of at least this much of the GUI thread's CPU time leaves its paint to the event
#: loop's next turn (PlotPanel._paint_after); a draw that took this long leaves its settling
#: there too, and a first draw's settling goes on there. At 8 ms a seven-rule histogram draw of
#: 4-7 ms settled in its tick (another 5-10 ms): ticks of 14 ms at the 99th percentile, 20 ms
#: at most, and lags of 22-34 ms; at 4 ms (and the results table spaced, LIVE_MIN_S), 12 and
#: 20 ms, and lags of 15-24 ms (bench/bench_gui.py --rules 7 --trials 30000 --profile, ten runs)
PAINT_LATER_AFTER_S = 0.004
#: layout and auto-range passes a redraw runs before its paint (a change in one can move the other)
SETTLE_ROUNDS = 3
#: held with the mouse wheel over a plot, it zooms the plot (without, the page scrolls)
ZOOM_MODIFIER = Qt.KeyboardModifier.ControlModifier


#: what ends a hover read-out besides the pointer leaving: the window losing focus to a dialog
#: (an export's file dialog, File -> Open), the plot hidden or resized (presentation mode);
#: a read-out stayed through those until the pointer came back
HOVER_ENDS = (QEvent.Type.Leave, QEvent.Type.WindowDeactivate, QEvent.Type.Hide,
              QEvent.Type.Resize)


class PanelView(pg.GraphicsLayoutWidget):
    """A panel's plot area. Its size hint is its minimum size: a graphics view's own hint is
    the size its scene had last, which fed back into the layouts (a page laid out once at
    presentation mode's size kept the taller rows, and a scroll bar, after it)."""

    def sizeHint(self) -> QSize:  # Qt's name
        return self.minimumSize().expandedTo(QSize(1, 1))

    def close(self) -> bool:
        """pyqtgraph's (its scene cleared), after the layouts still waiting to settle: a view
        closed while a title's refit had queued one (a panel built and closed in the same
        event-loop turn) crashed Qt when clearing the scene resized an item already deleted."""
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        return super().close()

    def viewportEvent(self, event: Any) -> bool:  # Qt's name
        """The wheel scrolls the page a plot is on, as over any other widget; with Ctrl (the
        zoom modifier) it zooms the plot (zooming on a plain wheel caught users scrolling)."""
        if event.type() == QEvent.Type.Wheel and not event.modifiers() & ZOOM_MODIFIER:
            area = self.parentWidget()
            while area is not None and not isinstance(area, QAbstractScrollArea):
                area = area.parentWidget()
            if area is not None:  # the page's scroll bar takes the wheel
                horizontal = abs(event.angleDelta().x()) > abs(event.angleDelta().y())
                bar = area.horizontalScrollBar() if horizontal else area.verticalScrollBar()
                QApplication.sendEvent(bar, event)
            return True
        return super().viewportEvent(event)


def record_axis(axis: pg.AxisItem) -> None:
    """Record the axis's drawing now, as its paint would (pyqtgraph's AxisItem.paint): its tick
    labels are measured then, and labels of another width resize the axis, which lays the plot
    out again and paints it once more. Recorded in the redraw, a width change is laid out before
    the paint (the drawing is kept only when the axis kept its size)."""
    if axis.picture is not None or not axis.isVisible():
        return
    size = axis.size()
    picture = QPicture()
    painter = QPainter(picture)
    try:
        if axis.style["tickFont"]:
            painter.setFont(axis.style["tickFont"])
        specs = axis.generateDrawSpecs(painter)
        if specs is not None:
            axis.drawPicture(painter, *specs)
    finally:
        painter.end()
    if axis.size() == size and axis.picture is None:
        axis.picture = picture
        axis.update()


def static_display(plots: Any) -> None:
    """Curves keep their display data when only the view range changes: pyqtgraph's
    ``dynamicRangeLimit`` (clipping values beyond a million view heights, which an auto-ranged
    plot never shows) made every range change at paint time set each curve's data again, which
    moved the bounds, queued another auto-range and painted the panel two or three times in one
    event-loop turn (bench/bench_gui.py --profile: a run's first second)."""
    for plot in plots:
        for item in plot.listDataItems():
            if isinstance(item, pg.PlotDataItem) and item.opts.get("dynamicRangeLimit") is not None:
                item.setDynamicRangeLimit(None)


class PlotPanel(QFrame):
    """Base class of the simulation panels. ``plot_id`` is the stable id the tour highlights."""

    plot_id = ""
    title = ""
    #: the page an exported figure of this panel reopens into (File -> Open)
    figure_page = "simulation"
    #: the owner's export dialog handles the "slide" and "paper" presets (ui.export.plot_files.PRESETS)
    export_presets = False
    #: the figure size of the "screen" export style (a wide strip of plots sets its own)
    screen_figure_size = SCREEN_FIGURE_SIZE
    #: asks the owner (window / page) to export this panel: (panel, "png" | "svg" | "csv")
    export_requested = Signal(object, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(f"plot_{self.plot_id}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.theme: Theme = LIGHT
        self._drawn_key: Any = None
        self._state: Any = None
        #: False: the page shows one shared rule strip instead, and the legends appear only in
        #: exported figures (which must name their series)
        self.legend_on_screen = True
        self.draw_count = 0  #: how many times draw() ran (tests: only redraw what changed)
        #: a paint this panel's last refresh left to a later event-loop turn has not happened
        #: yet (the page's ticks then wait for it before the next panel's refresh, a bounded
        #: number of them: PanelRedraw)
        self.paint_due = False
        self._settle_turns_left = 0  #: settling rounds left to later turns (_settle_rest)
        #: no data drawn yet (built, or emptied for a new run): the next draw's new ranges
        #: resize every axis, and its settling is left to the next turn whole
        self._blank = True
        #: what drew the figure, for its metadata, when the state does not say it (a page's
        #: experiment, model and text): returns a dict merged into the metadata, None if nothing
        self.figure_source: Callable[[], dict[str, Any] | None] | None = None
        #: the export style this panel was restyled to (ui.export.plot_files.style_panel; None on screen)
        self.figure_style: str | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(2, 2, 2, 2)
        outer.setSpacing(1)
        self.header = QHBoxLayout()
        self.header.setContentsMargins(4, 0, 0, 0)
        self.header_label = QLabel(f"<b>{self.title}</b>")
        self.header.addWidget(self.header_label)
        self.header.addStretch(1)
        menu_button = QToolButton(self)
        menu_button.setText("⋯")
        menu_button.setToolTip(f"Export the {self.title.lower()} plot (PNG, SVG) or its data (CSV)")
        menu_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu_button.setMenu(self.export_menu(self))
        menu_button.setAutoRaise(True)
        self.header.addWidget(menu_button)
        outer.addLayout(self.header)
        self.glw = PanelView(self)
        self.glw.setMinimumSize(260, 200)
        outer.addWidget(self.glw, 1)
        # a hover read-out disappears when the pointer leaves the plot
        self.glw.installEventFilter(self)
        self.glw.viewport().installEventFilter(self)
        self._flash_timer = QTimer(self)
        self._flash_timer.setSingleShot(True)
        self._flash_timer.timeout.connect(self._unflash)
        #: the colour bars of this panel's heatmaps (themed with it)
        self.colorbars: list[pg.ColorBarItem] = []
        self.build()
        self.apply_theme(self.theme)

    # -- for subclasses ------------------------------------------------------------------------
    def build(self) -> None:
        raise NotImplementedError

    def data_key(self, state: Any) -> Any:
        snap = getattr(state, "snapshot", None)
        return id(snap) if snap is not None else None

    def draw(self, state: Any) -> None:
        raise NotImplementedError

    def prepare(self, state: Any, most: int) -> bool:
        """Make the plot items the next draw of ``state`` needs, those of at most ``most`` new
        rules; True once all exist (the draw then follows in the same refresh). A panel whose
        items are few or made in ``build`` keeps this default."""
        return True

    def data_rows(self) -> list[dict[str, Any]]:
        return []

    def hover_items(self) -> list[Any]:
        """Scene items that show a hover read-out: hidden on leave and in every export."""
        return []

    def clear_hover(self) -> None:
        """The pointer left: no read-out stays behind (subclasses also reset their labels)."""
        for item in self.hover_items():
            item.hide()

    def eventFilter(self, obj: Any, event: Any) -> bool:
        kind = event.type()
        if kind == QEvent.Type.Paint and obj is self.glw.viewport():
            self.paint_due = False
        elif kind in HOVER_ENDS and obj in (self.glw, self.glw.viewport()):
            if kind == QEvent.Type.Hide:
                self.paint_due = False  # (no paint comes to a hidden view)
            self.clear_hover()
        return super().eventFilter(obj, event)

    def plot_items(self) -> list[pg.PlotItem]:
        return [i for i in self.glw.ci.items if isinstance(i, pg.PlotItem)]

    # -- helpers for subclasses ----------------------------------------------------------------
    def add_plot(self, row: int, col: int, x_label: str, y_label: str, x_units: str | None = None,
                 y_units: str | None = None, legend: bool = True, **kw: Any) -> pg.PlotItem:
        kw.setdefault("viewBox", LazyMenuViewBox())  # (its menu built when first wanted)
        plot = self.glw.addPlot(row=row, col=col, axisItems=tidy_axes(), **kw)
        # the title over the whole plot, its y axis included (pyqtgraph centres it over the data
        # area alone, and a title wider than that ran past the plot's right edge)
        plot.layout.removeItem(plot.titleLabel)
        plot.layout.addItem(plot.titleLabel, 0, 0, 1, 3)
        _relax_min_width(plot.titleLabel)
        plot.setLabel("bottom", x_label, units=x_units)
        plot.setLabel("left", y_label, units=y_units)
        for name in ("bottom", "left"):
            # a "(x0.001)" factor in the label is easy to miss; show the numbers as they are
            plot.getAxis(name).enableAutoSIPrefix(False)
        plot.showGrid(x=True, y=True, alpha=self.theme.grid_alpha)
        if legend:
            outside_legend(plot)
        plot.getViewBox().on_menu(self._add_export_actions)
        return plot

    def _add_export_actions(self, menu: Any) -> None:
        """The panel's exports at the end of a plot's right-click menu."""
        menu.addSeparator()
        for text, kind in EXPORT_ACTIONS:
            menu.addAction(text.replace("Export", "Export plot", 1),
                           lambda k=kind: self.export_requested.emit(self, k))

    def add_heatmap(self, plot: pg.PlotItem, label: str | None = None,
                    colormap: str | pg.ColorMap = "viridis", values: tuple[float, float] = (0.0, 1.0),
                    width: int = 12, row_major: bool = False) -> tuple[pg.ImageItem, pg.ColorBarItem]:
        """A heatmap with its colour bar in ``plot`` (see ui.plots.heatmap); the bar follows the
        panel's theme."""
        image, bar = heatmap_with_colorbar(plot, label, colormap, values, width, row_major)
        self.colorbars.append(bar)
        return image, bar

    def export_menu(self, parent: QWidget) -> QMenu:
        """PNG, SVG, CSV, slide and paper: the same five on every plot of every page."""
        menu = QMenu(f"{self.title}", parent)
        menu.aboutToShow.connect(self.clear_hover)  # a right-click export: the read-out goes
        for text, kind in EXPORT_ACTIONS:
            if kind == "slide":
                menu.addSeparator()
            menu.addAction(text, lambda k=kind: self.export_requested.emit(self, k))
        return menu

    def contextMenuEvent(self, event: Any) -> None:  # right-click on the header / frame
        self.export_menu(self).exec(event.globalPos())

    # -- redraw policy -------------------------------------------------------------------------
    def is_on_screen(self) -> bool:
        return self.isVisible() and not self.visibleRegion().isEmpty()

    def refresh(self, state: Any, force: bool = False) -> bool:
        """Redraw if the data changed and the panel is visible (or ``force``); True if drawn."""
        self._state = state
        if state is None:
            return False
        key = self.data_key(state)
        if not force and (key == self._drawn_key or not self.is_on_screen()):
            return False
        started = time.thread_time()
        if not force and not self.prepare(state, RULES_PER_TICK):
            self.settle()
            self._paint_after(started)
            return True  # its items made this tick (a tick's work), its data on a later one
        static_display(self.plot_items())  # (items made ahead, still empty: cheap now)
        self.draw(state)
        static_display(self.plot_items())
        self._drawn_key = key
        self.draw_count += 1
        blank, self._blank = self._blank, False
        if force:
            self.settle()
        elif blank:  # a first draw: new ranges widen the axes, which are then drawn twice
            # (bench_gui --rules 7: the weights' first refresh was 35 ms); its layout in a turn
            # of its own (beside a first draw of seven rules it made 25-40 ms ticks)
            self._hold_paint()
            QTimer.singleShot(TURN_MS, self, self._first_lay_out)
        elif time.thread_time() - started >= PAINT_LATER_AFTER_S:
            # a long draw (seven rules' histograms: 10-15 ms) settles in the loop's next turn:
            # its layout round (auto-range, axes: 5-10 ms) in the tick made 20-26 ms ticks,
            # and with the paint or tick beside them lags over a frame (bench_gui.py --rules 7)
            self._settle_later()
        elif self.settle(rounds=1):
            self._paint_after(started)
        else:  # (a wider axis, a new title line) the rest in the loop's next turn
            self._settle_later()
        return True

    def _first_lay_out(self) -> None:
        """A first draw's layout (its new ranges, every axis resized), then its settling rounds
        in the turns after, the paint held until settled."""
        self._lay_out()
        self._settle_later()

    def _settle_later(self) -> None:
        self._hold_paint()
        self._settle_turns_left = SETTLE_ROUNDS
        QTimer.singleShot(TURN_MS, self, self._settle_rest)

    def _settle_rest(self) -> None:
        """One settling round a turn, the paint held until the panel is settled (or the rounds
        are spent): the weights' three rounds in one turn were 17-24 ms of the GUI thread's
        CPU (each round's new axis widths drew the axes again), and with the redraw tick
        before them a lag over a frame (bench/bench_gui.py --rules 7 --profile)."""
        started = time.thread_time()
        self._settle_turns_left -= 1
        if not self.settle(rounds=1) and self._settle_turns_left > 0:
            QTimer.singleShot(TURN_MS, self, self._settle_rest)
            return
        self._paint_after(started)

    def _hold_paint(self) -> None:
        """The panel does not paint until :meth:`_paint_after` lets it (no half-settled frame)."""
        self.glw.setUpdatesEnabled(False)
        self.paint_due = True

    def _paint_after(self, started: float) -> None:
        """Let the panel paint: after a long block of work (``started``: the thread's CPU clock
        when it began), in the event loop's next turn. Queued right behind that block, the
        paint made one block of both (a run's first data: a 20-29 ms refresh and a 9-17 ms
        paint, bench/bench_gui.py --profile), and the input (or timer) that came meanwhile
        waited for the two."""
        if time.thread_time() - started < PAINT_LATER_AFTER_S:
            self._paint_now()
            return
        self._hold_paint()
        QTimer.singleShot(TURN_MS, self, self._paint_now)

    def finish_held(self) -> None:
        """Settle and let the panel paint now, if a refresh left that to a later turn: a
        picture of the window taken now (``--screenshot``) showed a held view blank."""
        if not self.glw.updatesEnabled():
            self.settle()
            self._paint_now()

    def _paint_now(self) -> None:
        if not self.glw.updatesEnabled():
            self.glw.setUpdatesEnabled(True)
        if not self.is_on_screen():  # (hidden or scrolled away meanwhile: no paint will come)
            self.paint_due = False

    def settle(self, rounds: int = SETTLE_ROUNDS) -> bool:
        """Lay the panel out and auto-range it now, in the redraw tick: pyqtgraph does both at
        paint time, and each change then (a two-line title, a wider axis, a new range) queued
        another paint; a run's first data painted a panel three or four times in one
        event-loop turn (bench/bench_gui.py --profile). True if, after the ``rounds``, a paint
        would find the panel settled: laid out, ranged and every axis drawn (an axis that
        changed size, or moved in the layout a round queued, is drawn again in a next round)."""
        for _ in range(rounds):
            self._lay_out()
            for plot in self.plot_items():
                for name in ("left", "bottom"):
                    record_axis(plot.getAxis(name))
        self._lay_out()  # (what the paint would do first: cheap once nothing changed)
        return all(plot.getAxis(name).picture is not None or not plot.getAxis(name).isVisible()
                   for plot in self.plot_items() for name in ("left", "bottom"))

    def _lay_out(self) -> None:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        self.glw.scene().prepareForPaint()

    def clear_data(self) -> None:
        """Empty every curve and image (after a reset), keeping the items for the next run; the
        panel then shows empty axes until new data arrive."""
        for plot in self.plot_items():
            for item in plot.listDataItems():
                item.setData([], [])
            for item in plot.items:
                if isinstance(item, pg.ImageItem):
                    item.clear()
        self._drawn_key = None
        self._state = None
        self._blank = True

    def invalidate(self) -> None:
        """Forget what was drawn (theme or selection changed): the next refresh redraws."""
        self._drawn_key = None
        if self._state is not None:
            self.refresh(self._state)

    # -- theme and highlight -------------------------------------------------------------------
    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.glw.setBackground(theme.background)
        fg = pg.mkPen(theme.foreground)
        for plot in self.plot_items():
            for name in ("left", "bottom", "right", "top"):
                axis = plot.getAxis(name)
                axis.setPen(fg)
                axis.setTextPen(fg)
            plot.showGrid(x=True, y=True, alpha=theme.grid_alpha)
            if plot.titleLabel is not None and plot.titleLabel.text:
                plot.titleLabel.setText(plot.titleLabel.text, color=theme.foreground)
            legend = plot.legend
            if legend is not None:
                legend.setLabelTextColor(theme.foreground)
                for _sample, label in legend.items:  # the colour alone does not re-render them
                    label.setText(label.text)
                legend.setBrush(pg.mkBrush(theme.background + "00"))  # outside the data: no box
                legend.setPen(pg.mkPen(None))
        for bar in self.colorbars:
            theme_colorbar(bar, theme)
        self.theme_changed(theme)
        self._set_frame_style(self.highlighted)
        self.invalidate()

    def theme_changed(self, theme: Theme) -> None:
        """Subclasses recolour their own non-rule items (theory lines, raw series)."""

    def flash(self, ms: int | None = 1800) -> None:
        """Outline the panel for ``ms`` milliseconds, or until :meth:`unflash` when None (the
        tour's "plot to watch" stays outlined for the whole step)."""
        self._set_frame_style(True)
        self._held = ms is None
        if ms is None:
            self._flash_timer.stop()
        else:
            self._flash_timer.start(ms)

    def unflash(self) -> None:
        self._held = False
        self._flash_timer.stop()
        self._set_frame_style(False)

    def _unflash(self) -> None:
        if not getattr(self, "_held", False):
            self._set_frame_style(False)

    def _set_frame_style(self, on: bool) -> None:
        name = self.objectName()
        if on:
            self.setStyleSheet(f"QFrame#{name} {{ border: 3px solid {self.theme.highlight}; }}")
        else:
            c = pg.mkColor(self.theme.foreground)  # Qt style sheets read #AARRGGBB, so use rgba()
            self.setStyleSheet(f"QFrame#{name} {{ border: 1px solid rgba({c.red()}, {c.green()}, {c.blue()}, 60); }}")

    @property
    def highlighted(self) -> bool:
        return self._flash_timer.isActive() or getattr(self, "_held", False)

    # -- export --------------------------------------------------------------------------------
    def make_clone(self) -> PlotPanel:
        """A fresh panel of the same kind, without a parent: every exported figure is drawn on
        one (ui.export.plot_files.figure_clone), at its style's size, whatever this widget's size."""
        return type(self)()

    def copy_view_to(self, clone: PlotPanel) -> None:
        """Give ``clone``, already drawn with this panel's data, this panel's view choices (a
        log axis, the rule or row picked in the header); subclasses with such choices add them."""

    def legends(self) -> list[pg.LegendItem]:
        """The panel's legends (one object once, however many plots share it)."""
        found = {id(p.legend): p.legend for p in self.plot_items() if p.legend is not None}
        return list(found.values())

    def set_legend_on_screen(self, on: bool) -> None:
        self.legend_on_screen = on
        for legend in self.legends():
            show_legend(legend, on)

    def _settle(self) -> None:
        for plot in self.plot_items():
            plot.layout.activate()
        self.glw.ci.layout.activate()

    @contextmanager
    def _without_hover(self) -> Iterator[None]:
        """A hover read-out is for the pointer, never part of a figure; a legend kept off the
        screen (the page has a rule strip) is part of it."""
        shown = [item for item in self.hover_items() if item.isVisible()]
        for item in shown:
            item.hide()
        hidden = [] if self.legend_on_screen else [g for g in self.legends() if not g.isVisible()]
        for legend in hidden:
            show_legend(legend, True)
        if hidden:
            self._settle()
        try:
            yield
        finally:
            for item in shown:
                item.show()
            for legend in hidden:
                show_legend(legend, False)
            if hidden:
                self._settle()

    def png_bytes(self, style: str = "screen") -> bytes:
        """The figure as PNG in export ``style`` (ui.export.plot_files.PRESETS): drawn on a fresh copy of
        the panel at the style's size, so the window's size never shows in it."""
        from ui.export.plot_files import figure_bytes

        return figure_bytes(self, style, "png")

    def svg_bytes(self, style: str = "screen") -> bytes:
        """The figure as SVG, the same picture as :meth:`png_bytes` (same copy, same size)."""
        from ui.export.plot_files import figure_bytes

        return figure_bytes(self, style, "svg")

    def scene_png_bytes(self, width: int, height: int | None = None) -> bytes:
        """This widget's scene as it is now, scaled to ``width`` (x ``height``, default the
        scene's aspect): the figure writers call it on a panel sized for the figure."""

        # pyqtgraph's legends ignore transformations (they float over a view box); ours sit in
        # the layout, and a PNG wider or narrower than the screen drew them unscaled: tiny, or
        # too large for their row (an entry was cut off)
        flag = pg.GraphicsObject.GraphicsItemFlag.ItemIgnoresTransformations
        legends = [i for i in self.glw.scene().items()
                   if isinstance(i, pg.LegendItem) and i.flags() & flag]
        for legend in legends:
            legend.setFlag(flag, False)
        try:
            return self._png_bytes_scaled(width, height)
        finally:
            for legend in legends:
                legend.setFlag(flag, True)

    def _png_bytes_scaled(self, width: int, height: int | None) -> bytes:
        from pyqtgraph.exporters import ImageExporter

        exp = ImageExporter(self.glw.scene())
        src = exp.getSourceRect()
        if src.width() <= 0 or src.height() <= 0:
            raise RuntimeError(f"{self.plot_id}: the plot has no size yet")
        exp.parameters()["width"] = width
        exp.parameters()["height"] = height or max(1, round(width * src.height() / src.width()))
        exp.parameters()["background"] = pg.mkColor(self.theme.background)
        image = exp.export(toBytes=True)
        if height is not None and (image.width(), image.height()) != (width, height):
            # the exporter keeps the scene's aspect: a preset's size is met exactly (< 1 % off)
            image = image.scaled(width, height, Qt.AspectRatioMode.IgnoreAspectRatio,
                                 Qt.TransformationMode.SmoothTransformation)
        meta = self.figure_metadata()
        if meta is not None:  # a PNG text chunk: File -> Open restores the parameters
            image.setText(METADATA_KEY, json.dumps(meta))
        data = QByteArray()
        buf = QBuffer(data)
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buf, "PNG")
        buf.close()
        return bytes(data)

    def scene_svg_bytes(self) -> bytes:
        """This widget's scene as it is now, as portable SVG (its size: the scene's)."""
        from pyqtgraph.exporters import SVGExporter

        from ui.export.svg_portable import portable_svg

        out = SVGExporter(self.glw.scene()).export(toBytes=True)
        # drawn alike by every renderer (resvg, librsvg, browsers), not only by Qt's
        data = portable_svg(out if isinstance(out, bytes) else bytes(out))
        meta = self.figure_metadata()
        return data if meta is None else svg_with_metadata(data, meta)

    def figure_metadata(self) -> dict[str, Any] | None:
        """Everything behind the figure (None before any data), so that File -> Open reopens it
        into its page (``page``): the simulation's parameters under "config", the training's
        under "training" (as in a session file), or what the page's ``figure_source`` says; the
        panel's view choices (log y, the heatmap's rule, ...) under "view"."""
        meta: dict[str, Any] = {"app": "attention-scaling-lab", "kind": "figure",
                                "page": self.figure_page, "plot": self.plot_id}
        if self.figure_source is not None:
            extra = self.figure_source()
            if extra is None:
                return None
            meta.update(extra)
        else:
            snap = getattr(self._state, "snapshot", None)
            cfg = getattr(snap, "config", None)
            if cfg is None or not hasattr(cfg, "to_dict"):
                return None
            key = "training" if type(cfg).__name__ == "TrainingConfig" else "config"
            meta[key] = cfg.to_dict()
        view = self.view_state()
        if view:
            meta["view"] = {**view, **meta.get("view", {})}
        return meta

    # -- view choices (they travel with an exported figure) -----------------------------------
    def view_controls(self) -> dict[str, QWidget]:
        """The panel's own choices that change its picture (a "log y" box, the heatmap's rule):
        name -> check box, combo box or spin box."""
        return {}

    def view_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for name, w in self.view_controls().items():
            if isinstance(w, QCheckBox):
                state[name] = w.isChecked()
            elif isinstance(w, QComboBox):
                state[name] = w.currentText()
            elif isinstance(w, QSpinBox):
                state[name] = w.value()
        return state

    def apply_view_state(self, state: Any) -> list[str]:
        """Set the choices ``state`` holds (as the user would: the panel follows); anything
        unknown or out of range is skipped. Returns what was set, in words ("log y on")."""
        done: list[str] = []
        self.clear_hover()  # an opened figure: the read-out of what was drawn before goes
        if not isinstance(state, dict):
            return done
        for name, w in self.view_controls().items():
            value = state.get(name)
            words = name.replace("_", " ")
            if isinstance(w, QCheckBox) and isinstance(value, bool):
                w.setChecked(value)
                done.append(f"{words} {'on' if value else 'off'}")
            elif isinstance(w, QComboBox) and isinstance(value, str) and w.findText(value) >= 0:
                w.setCurrentIndex(w.findText(value))
                done.append(f"{words} {value}")
            elif isinstance(w, QSpinBox) and isinstance(value, int) and not isinstance(value, bool) \
                    and w.minimum() <= value <= w.maximum():
                w.setValue(value)
                done.append(f"{words} {value}")
        return done

    def csv_text(self) -> str:
        rows = self.data_rows()
        columns: list[str] = []
        for row in rows:  # union of keys, first-seen order (series may differ in columns)
            columns += [k for k in row if k not in columns]
        return csv_text(rows, columns)

    def export(self, path: str | Path, kind: str) -> Path:
        """Write PNG, SVG or CSV atomically (temp file + rename); PNG and SVG in the "screen"
        style."""
        if kind == "png":
            data = self.png_bytes()
        elif kind == "svg":
            data = self.svg_bytes()
        elif kind == "csv":
            data = self.csv_text().encode("utf-8")
        else:
            raise ValueError(f"unknown export kind {kind!r}")
        return atomic_write_bytes(path, data)


#: (menu text, kind for ``export_requested``) of every plot's export menu
EXPORT_ACTIONS = (("Export as PNG…", "png"), ("Export as SVG…", "svg"),
                  ("Export data as CSV…", "csv"),
                  ("Export for a slide (1920×1080 PNG)…", "slide"),
                  ("Export for a paper (single-column SVG)…", "paper"))


def panel_grid(
    parent: QWidget,
    classes: Any,
    cells: dict[str, tuple[int, int, int]],
    min_height: int,
    margin: int = 4,
    spacing: int = 6,
) -> tuple[QGridLayout, dict[str, Any]]:
    """Build one panel per class into a grid on ``parent``: ``cells[plot_id] = (row, col, span)``;
    the three columns share the width. Returns the layout and the panels by plot id."""
    grid = QGridLayout(parent)
    grid.setContentsMargins(margin, margin, margin, margin)
    grid.setSpacing(spacing)
    panels: dict[str, Any] = {}
    for cls in classes:
        panel = cls(parent)
        panel.setMinimumHeight(min_height)
        row, col, span = cells[cls.plot_id]
        grid.addWidget(panel, row, col, 1, span)
        panels[cls.plot_id] = panel
    for c in range(3):
        grid.setColumnStretch(c, 1)
    return grid, panels


def _relax_min_width(label: pg.LabelItem, minimum: float = 40.0) -> None:
    """A long title must not widen its plot past a narrow panel (the scene would then be cut off
    at the right, axis and legend included): the label asks for little width and its text,
    centred, may run over the plot's margins instead."""
    original = label.updateMin

    def update_min() -> None:
        original()
        label.setMinimumWidth(min(minimum, label.minimumWidth()))
        hint = getattr(label, "_sizeHint", None)  # pyqtgraph's LabelItem reports these sizes
        if isinstance(hint, dict):
            hint = dict(hint)
            for key in (Qt.SizeHint.MinimumSize, Qt.SizeHint.PreferredSize):
                if key in hint:
                    width, height = hint[key]
                    hint[key] = (min(minimum, width), height)
            label._sizeHint = hint
        label.updateGeometry()

    label.updateMin = update_min
    update_min()
