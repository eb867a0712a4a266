"""How the measures move with d_k, or with the number of keys n (log axis): one curve per rule
with a ±1.96 SE band.

Six small plots side by side, x linked. Hovering shows the exact values at the nearest point.
The vertical line marks the d_k (or n) of the main simulation. The header's switch chooses the
axis. Along n, dashed curves are the asymptotic predictions for i.i.d. Gaussian logits
(entropy -> ln n - sigma^2/2, needle weight 1/(1 + (n-1) e^{sigma^2/2 - Delta}); engine.theory),
drawn only where they apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtWidgets import QComboBox, QGraphicsView, QMenu, QSizePolicy

from engine.rules import rule_label
from engine.simulate import RuleResult, SimulationSnapshot
from engine.stats import Estimate
from engine.theory import length_theory
from ui.plots.base import TURN_MS, PlotPanel
from ui.plots.elided_label import ElidedLabel
from ui.plots.finite import finite
from ui.plots.legends import fit_legend_columns, set_legend_slot
from ui.plots.log_ticks import log_ticks
from ui.plots.rule_pens import rule_pen, symbol_style
from ui.theme import Theme, rule_color

Z95 = 1.959964
#: a marker per rule as well as a colour and line pattern: coinciding curves stay apart
RULE_SYMBOLS = {"none": "o", "sqrt": "s", "dk": "t", "temperature": "d", "cosine": "+",
                "qknorm": "x", "logn": "p", "ssmax": "h", "softcap": "star", "sink": "t1",
                "sigmoid": "t2", "yarn": "t3", "yarn_dynamic": "arrow_down"}
LOG_FLOOR = 1e-300
#: d_k axis: powers of 8 labelled, other powers of 2 as minor ticks
D_K_TICKS = [[(math.log10(8**i), str(8**i)) for i in range(5)],
             [(math.log10(2**i), "") for i in range(13) if i % 3]]  #: lower band edge on a log axis (a band cannot reach 0 there)
#: n axis: 2, 64, 2,048, 65,536 labelled (every 5 octaves: narrow plots), other powers of 2 minor
N_TICKS = [[(math.log10(2 ** (1 + 5 * i)), f"{2 ** (1 + 5 * i):,}") for i in range(4)],
           [(math.log10(2**i), "") for i in range(1, 17) if (i - 1) % 5]]
#: the two axes: (config field, axis label, hover name, ticks)
AXES = {"d_k": ("d_k", "d_k", "d_k", D_K_TICKS), "n_keys": ("n_keys", "keys n", "n", N_TICKS)}


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    y_label: str
    log_y: bool
    get: Callable[[RuleResult], Estimate]


METRICS = (
    Metric("logit_std", "score std", "std (grey: q·k)", True, lambda r: r.logit_std),
    Metric("top_weight", "mean top weight", "mean max_j p_j", False, lambda r: r.top_weight),
    Metric("saturated_frac", "saturated fraction", "fraction saturated", False,
           lambda r: r.saturated_frac),
    Metric("jacobian_fro", "mean Jacobian size", "mean ‖J‖<sub>F</sub>", True, lambda r: r.jacobian_fro),
    Metric("entropy_norm", "mean entropy / log n", "mean H / log n", False, lambda r: r.entropy_norm),
    Metric("target_weight", "target weight (key 0)", "mean p_0", True,
           lambda r: r.target_weight),
)
#: metric key -> what the asymptotic theory predicts for it (engine.theory.LengthTheory)
THEORY = {"entropy_norm": "entropy_norm", "target_weight": "target_weight"}
#: at correlation 0 key 0 is a key like any other: its weight is noise around 1/n, not a needle
NO_TARGET_TITLE = "key 0 (no target: ρ = 0)"


def metric_title(m: Metric, correlation: float) -> str:
    """The plot's title; the target-key plot says when there is no target (ρ = 0)."""
    return NO_TARGET_TITLE if m.key == "target_weight" and correlation == 0.0 else m.title



def ci95(e: Estimate, trials: int) -> str:
    """"± half-width of the 95% interval", or "(no SE: 1 trial)" where none exists."""
    if trials < 2:
        return "(SE n/a: 1 trial)"
    return f"± {Z95 * e.se:.2g}"


def read_out(e: Estimate, trials: int) -> str:
    """A hover line's value: the mean and its interval, or why there is none (a skewed mean
    the trials cannot estimate: engine.stats.normal_interval_ok)."""
    if not e.estimable:
        return f"not estimable from {trials:,} trials"
    return f"{e.mean:.4g} {ci95(e, trials)}"


#: the sweep's curves keep their display data when only the y range changes: pyqtgraph's
#: dynamicRangeLimit (clipping values beyond a million view heights, which an auto-ranged plot
#: never shows) recomputed every curve, band edge and symbol set of a plot on each new point's
#: y auto-range, ~40% of the sweep's refresh (bench/bench_gui.py --rules 7 --profile)
STATIC_DISPLAY = {"dynamicRangeLimit": None}


class _Series:
    """A curve and its band (two invisible edge curves and the fill between them)."""

    def __init__(self, plot: pg.PlotItem, colour: str, pen: Any, name: str | None,
                 symbol: str = "o") -> None:
        self.curve = pg.PlotDataItem(pen=pen, symbol=symbol, symbolSize=6, name=name,
                                     **symbol_style(colour, colour), **STATIC_DISPLAY)
        # invisible edges, but a pen (NoPen), not None: with pen=None pyqtgraph never builds the
        # edge curve's path, and the band between them stayed empty
        self.lo = pg.PlotDataItem(pen=pg.mkPen(None), **STATIC_DISPLAY)
        self.hi = pg.PlotDataItem(pen=pg.mkPen(None), **STATIC_DISPLAY)
        self.band = pg.FillBetweenItem(self.lo, self.hi, brush=pg.mkBrush(colour + "40"))
        # the band's extent is its edges': its own bounds add nothing to the auto-range, but
        # an empty band's (a point at 0) moved an empty plot's y range to -0.5 … 0.5 when the
        # band was made ahead of the sweep's first point
        plot.addItem(self.band, ignoreBounds=True)
        for item in (self.lo, self.hi, self.curve):
            plot.addItem(item)
        self.plot = plot

    def set(self, x: np.ndarray, mean: np.ndarray, se: np.ndarray, log_y: bool,
            shown: np.ndarray | None = None) -> None:
        """``shown``: which points to draw (a point whose mean is not estimable has no curve
        point and no band)."""
        if shown is not None:
            x, mean, se = x[shown], mean[shown], se[shown]
        lo, hi = mean - Z95 * se, mean + Z95 * se
        if log_y:
            positive = mean > 0
            x, mean, lo, hi = x[positive], mean[positive], lo[positive], hi[positive]
            lo = np.maximum(lo, np.maximum(mean * 1e-3, LOG_FLOOR))
        self.curve.setData(x, mean)
        # the band follows both edges: its path is made once, after the second (the first
        # edge's change made it too, a tenth of the sweep's refresh)
        self.lo.blockSignals(True)
        try:
            self.lo.setData(x, lo)
        finally:
            self.lo.blockSignals(False)
        self.hi.setData(x, hi)

    def remove(self) -> None:
        for item in (self.band, self.lo, self.hi, self.curve):
            self.plot.removeItem(item)


#: sweep plots drawn per redraw tick (of six): a new point takes six ticks (~0.2 s) to show
PLOTS_PER_REFRESH = 1
#: rule curves (curve, band and its two edges: ~5 ms each) made per redraw tick at most: a plot
#: of twelve rules made at once was a 60 ms block; its data is drawn once all its curves exist
SERIES_PER_REFRESH = 3
#: rules whose data a plot takes per redraw tick (~3 ms each, plus the y auto-range and the
#: paint of the plot, 10-18 ms with seven rules' symbols): a plot of seven rules set at once made
#: a tick and its paint ~45 ms of the GUI thread's CPU, four ~35 ms (bench_gui.py --rules 7)
RULES_PER_REFRESH = 2
#: plots of the strip painted in one event-loop turn at most when it is repainted whole (a
#: new point's first refresh): the strip's six plots of seven rules in one paint were 25-40 ms
#: of the GUI thread (bench/bench_gui.py --rules 7 --profile); two plots are 8-13 ms
PLOTS_PER_PAINT = 2
#: entries a call a legend kept off the screen takes (``SweepPanel._add_legend_entries``)
LEGEND_ENTRIES_PER_CALL = 2
#: rule curves made per redraw tick ahead of a sweep (``SweepPanel.make_items_ahead``)
PREPARED_PER_TICK = 1


class SweepPanel(PlotPanel):
    plot_id = "sweep"
    title = "Sweep vs d_k"
    #: a strip of six plots: wide and low, as on the page
    screen_figure_size = (1200, 440)
    #: the user picked another axis: "d_k" or "n_keys" (the window reruns the sweep)
    axis_requested = Signal(str)
    #: a point of a sweep along d_k was clicked: its d_k (the window sets d_k, the page follows)
    d_k_clicked = Signal(int)
    #: a point of a sweep along n was clicked: its n (the window sets n_keys, the page follows)
    n_clicked = Signal(int)

    #: the scene area whose paint waits for the loop's next turn (_paint_plots_later)
    _held_plots: QRectF | None = None
    #: the measures drawn, one small plot each (a single-measure panel has one: export_single)
    metrics: tuple[Metric, ...] = METRICS

    def build(self) -> None:
        #: the pieces of a held area not painted yet, one a turn (_paint_next_piece)
        self._pieces_left: list[QRect] = []
        self.axis = "d_k"
        self.axis_box = QComboBox(self)
        self.axis_box.setObjectName("sweep_axis")
        self.axis_box.addItems(["along d_k (1 … 4,096)", "along n (2 … 65,536 keys)"])
        self.axis_box.setToolTip("Sweep the head width d_k at the chosen n, or the number of keys n "
                                 "at the chosen d_k (the length axis)")
        self.axis_box.currentIndexChanged.connect(
            lambda i: self.axis_requested.emit(("d_k", "n_keys")[i]))
        # what was run and what the bands mean: cut to the room there is (its tooltip has it
        # all), never widening the page (the title and the axis switch stay whole)
        self.info_label = ElidedLabel("", self)
        self.info_label.setObjectName("sweep_info")
        self.header.insertWidget(1, self.info_label, 100)
        self.header.insertWidget(2, self.axis_box)
        self.plots: list[pg.PlotItem] = []
        for i, m in enumerate(self.metrics):  # (each links its x to the first)
            self.plots.append(self._add_metric_plot(i, m))
        self._add_legend_row()
        self.series: dict[tuple[int, str], _Series] = {}
        self.theory: dict[tuple[int, str], pg.PlotDataItem] = {}
        self.theory_key = pg.PlotDataItem(pen=pg.mkPen("#808080", width=1.5, style=Qt.PenStyle.DashLine))
        self._theory_in_legend = False
        self.raw: _Series | None = None
        self.markers = [pg.InfiniteLine(angle=90, movable=False) for _ in self.metrics]
        for p, line in zip(self.plots, self.markers, strict=False):
            p.addItem(line)
        # the hovered d_k, marked in all six plots at once (linked views)
        self.hover_lines = [pg.InfiniteLine(angle=90, movable=False) for _ in self.metrics]
        for p, line in zip(self.plots, self.hover_lines, strict=False):
            p.addItem(line, ignoreBounds=True)
            line.hide()
        self.glw.scene().sigMouseClicked.connect(self._on_click)
        self.hover = [pg.TextItem(anchor=(0, 0)) for _ in self.metrics]
        for t in self.hover:
            # in the scene, not in a view box: a view box clips its items, and a read-out of
            # seven rules is wider than one plot of the strip (it was cut at the plot's edge);
            # placed in scene pixels and kept inside the visible scene (show_values_at)
            self.glw.scene().addItem(t)
            t.setZValue(1000)
            t.hide()
        self._points: tuple = ()
        self._proxy = pg.SignalProxy(self.glw.scene().sigMouseMoved, rateLimit=30, slot=self._on_move)
        self.hover_text = ""  #: the read-out shown now ("" when none; tests read it)
        self._hover_at: tuple[int, float] | None = None  #: (plot, log10 d_k) of the read-out
        #: a change being drawn over several refreshes: its key and the plots still to draw
        self._pending_key: Any = None
        self._pending: list[int] = []
        self._rules: tuple[str, ...] = ()
        self._x = np.zeros(0)
        #: per plot, the sweep its curves show (its first point's config): a plot may take a
        #: new point's data a few rules per tick only while it shows the same sweep
        self._plot_sweep: dict[int, Any] = {}
        self._rules_left: list[str] | None = None  #: rules of plot _pending[0] still to draw

    def _add_legend_row(self) -> None:
        """One legend for the six plots, in its own row under them (never over a curve), and the
        strip's equal fixed columns."""
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=8, horSpacing=14, verSpacing=-4,
                                    frame=False)
        # its width never moves the plots' columns (its columns follow the panel's width instead)
        self.legend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.glw.addItem(self.legend, row=1, col=0, colspan=len(self.metrics))
        set_legend_slot(self.legend,
                        lambda: self.glw.ci.addItem(self.legend, row=1, col=0, colspan=len(self.metrics)),
                        lambda: self.glw.ci.removeItem(self.legend))
        self.plots[0].legend = self.legend
        # the legend's row keeps one line's height while empty: its first entries (on a sweep's
        # first point) then move no plot (a reflow repaints the whole strip)
        probe = pg.PlotDataItem(pen=pg.mkPen("#808080"), symbol="o")
        self.legend.addItem(probe, "raw q·k")
        self.legend.setMinimumHeight(self.legend.preferredHeight())
        self.legend.removeItem(probe)
        # equal columns whatever the tick labels: a y axis growing by a digit then changes its
        # own plot only; column widths from the axes reflowed (and repainted) all six plots on
        # almost every new point, the longest GUI block while a sweep streamed
        self.glw.ci.geometryChanged.connect(self._fix_columns)
        # (fixed columns would also fix the layout's own width: the view could then no longer
        # widen or narrow it, and the strip kept the width it first had)
        self.glw.ci.setMinimumWidth(0)
        self.glw.ci.setMaximumWidth(1e6)

    def _add_metric_plot(self, i: int, m: Metric) -> pg.PlotItem:
        """Plot ``i`` of the row (measure ``m``), x linked to the first one."""
        p = self.add_plot(0, i, "d_k", m.y_label, legend=False)
        p.setLogMode(x=True, y=m.log_y)
        p.setTitle(m.title, size="9pt")
        p.getAxis("bottom").setTicks(D_K_TICKS)
        # the room for the y tick labels only grows: pyqtgraph's shrank it to the first
        # point's labels and widened it for the next ones, each time a relayout and a second
        # paint of the whole plot, axes included (16 ms of GUI CPU at the sweep's start)
        p.getAxis("left").setStyle(autoReduceTextSpace=False)
        if m.log_y:
            p.getViewBox().sigYRangeChanged.connect(self._log_ticker(p.getAxis("left")))
        if self.plots:
            p.setXLink(self.plots[0])
        if len(self.metrics) > 1:  # right-click in a plot: export that plot alone
            p.getViewBox().on_menu(lambda menu, i=i, m=m: self._single_menu(menu, i, m.title))
        return p

    def _single_menu(self, menu: Any, i: int, title: str) -> None:
        """Right-click in plot ``i``: export that plot alone."""
        menu.addSeparator()
        self._add_single_actions(self._submenu(menu, f"Export only “{title}”"), i)

    def _raw_plot(self) -> int | None:
        """Index of the score-std plot, where the raw q·k std is drawn (None: not shown)."""
        keys = [m.key for m in self.metrics]
        return keys.index("logit_std") if "logit_std" in keys else None

    def export_menu(self, parent: Any) -> Any:
        menu = super().export_menu(parent)
        if len(self.metrics) > 1:
            menu.addSeparator()
            one = self._submenu(menu, "Export one panel")
            for i, m in enumerate(self.metrics):
                self._add_single_actions(self._submenu(one, m.title), i)
        return menu

    def _submenu(self, menu: Any, title: str) -> Any:
        """A submenu parented to ``menu`` and kept referenced (PySide deleted the C++ object of
        one made by ``addMenu(title)`` once its Python wrapper went)."""
        sub = QMenu(title, menu)
        menu.addMenu(sub)
        if not hasattr(self, "_submenus"):
            self._submenus: list[Any] = []
        self._submenus.append(sub)
        return sub

    def _add_single_actions(self, menu: Any, index: int) -> None:
        for text, kind in SINGLE_EXPORTS:
            menu.addAction(text, lambda k=kind, i=index: self.export_single(i, k))

    def export_single(self, index: int, kind: str) -> None:
        """Ask the owner to export plot ``index`` alone (``export_requested`` with a panel of
        that one measure, drawn offscreen at SINGLE_SIZE from the same results; it lives until
        the owner's handler returns). ``kind``: png, svg, csv, slide or paper."""
        from ui.headless import offscreen_panel, settle_layout

        if self._state is None or not getattr(self._state, "sweep", ()):
            return
        with offscreen_panel(single_metric_panel(self.metrics[index].key), SINGLE_SIZE,
                             self.theme.name) as single:
            single.refresh(self._state, force=True)
            settle_layout(single)
            self.export_requested.emit(single, kind)

    def _fix_columns(self) -> None:
        """Every plot's column the same fixed width: the strip's width shared out."""
        layout = self.glw.ci.layout
        n = len(self.plots)
        left, _top, right, _bottom = layout.getContentsMargins()
        room = self.glw.ci.size().width() - left - right - (n - 1) * layout.horizontalSpacing()
        width = max(1.0, room / n)
        if all(abs(layout.columnMinimumWidth(i) - width) < 0.5 for i in range(n)):
            return
        for i in range(n):
            layout.setColumnFixedWidth(i, width)

    def resizeEvent(self, event: Any) -> None:
        self._release_plot_paint()  # (a change of the strip is dropped while held)
        super().resizeEvent(event)
        fit_legend_columns(self.legend, room=0.95 * self.glw.width())

    @staticmethod
    def _log_ticker(axis: pg.AxisItem) -> Callable[..., None]:
        """Decade labels that follow the view (pyqtgraph's own log labels crowd)."""
        return lambda _vb, rng: axis.setTicks(log_ticks(*rng))

    def theme_changed(self, theme: Theme) -> None:
        self._release_plot_paint()  # (a change of the strip is dropped while held)
        for line in self.markers:
            line.setPen(pg.mkPen(theme.foreground, width=1, style=Qt.PenStyle.DotLine))
        for line in self.hover_lines:
            line.setPen(pg.mkPen(theme.highlight, width=2))
        for t in self.hover:
            t.fill = pg.mkBrush(theme.background + "E0")
            t.border = pg.mkPen(theme.foreground + "80")
        if self.raw is not None:
            self.raw.remove()
            self.raw = None
        self._raw_in_legend = False
        if self._raw_plot() is not None:  # made now, not on a sweep's first point (a long tick)
            self.raw = _Series(self.plots[self._raw_plot()], theme.raw,
                               pg.mkPen(theme.raw, width=2), None)

    def data_key(self, state: Any) -> Any:
        snap = getattr(state, "snapshot", None)
        # (the configuration too: an empty sweep is the same () for every one, and a new
        # configuration's empty sweep clears what the last one drew; the plots' titles follow
        # its correlation. By d_k, n and ρ alone, a run of other trials or rules kept the last
        # one's half-drawn points under "no points yet")
        return (id(state.sweep), len(state.sweep), snap.config if snap is not None else None)

    def view_state(self) -> dict[str, Any]:
        """What the sweep ran along ("d_k" or "n_keys"): the window sets it again on opening."""
        return {"sweep_axis": self.axis}

    def set_axis(self, axis: str) -> None:
        """Show the switch at ``axis`` without asking for a rerun."""
        self.axis_box.blockSignals(True)
        self.axis_box.setCurrentIndex(("d_k", "n_keys").index(axis))
        self.axis_box.blockSignals(False)

    def _use_axis(self, axis: str) -> None:
        self._release_plot_paint()  # (a change of the strip is dropped while held)
        if axis == self.axis:
            return
        self.axis = axis
        self.title = "Sweep vs d_k" if axis == "d_k" else "Sweep vs n (sequence length)"
        _field, label, _name, ticks = AXES[axis]
        for p in self.plots:
            p.setLabel("bottom", label)
            p.getAxis("bottom").setTicks(ticks)
        self.set_axis(axis)

    def _sync(self, rules: tuple[str, ...]) -> int:
        """Drop the items of rules no longer shown (returns how many series and theory curves);
        each plot makes its own new items when it is drawn (``_plot_items``: making all six
        plots' at once was a long block itself)."""
        gone = [k for k in self.series if k[1] not in rules]
        for key in gone:
            self.series.pop(key).remove()
        gone_theory = [k for k in self.theory if k[1] not in rules]
        for key in gone_theory:
            item = self.theory.pop(key)
            self.plots[key[0]].removeItem(item)
        return len(gone) + len(gone_theory)

    def _plot_items(self, i: int, rules: tuple[str, ...], most: int | None = None) -> bool:
        """Plot ``i``'s curve and band per rule (and its dashed theory curves), made once; at
        most ``most`` new curves per call. True once all of the plot's items exist."""
        for name in rules:
            if (i, name) not in self.series:
                if most is not None and most <= 0:
                    return False
                most = None if most is None else most - 1
                self.series[(i, name)] = self._new_series(i, name)
            if self.metrics[i].key in THEORY and (i, name) not in self.theory:
                item = pg.PlotDataItem(pen=pg.mkPen(rule_color(name), width=1.5,
                                                    style=Qt.PenStyle.DashLine), **STATIC_DISPLAY)
                self.plots[i].addItem(item)
                self.theory[(i, name)] = item
        if i == 0:
            self._add_legend_entries(rules)
        return True

    def _new_series(self, i: int, name: str) -> _Series:
        """Rule ``name``'s curve and band in plot ``i``. Plot 0's curves are the legend's
        entries, added together once all of them exist (``_add_legend_entries``): one entry a
        tick (a curve made ahead per tick) reflowed the legend and repainted the whole strip on
        each, ~40 ms ticks with seven rules (bench_gui.py --rules 7)."""
        if i != 0:
            return _Series(self.plots[i], rule_color(name), rule_pen(name), None,
                           RULE_SYMBOLS.get(name, "o"))
        legend, self.plots[0].legend = self.plots[0].legend, None
        try:
            return _Series(self.plots[0], rule_color(name), rule_pen(name), rule_label(name),
                           RULE_SYMBOLS.get(name, "o"))
        finally:
            self.plots[0].legend = legend

    def _add_legend_entries(self, rules: tuple[str, ...]) -> bool:
        """The legend entries of plot 0's rule curves not in it yet, in the rules' order (the
        raw q·k first), and the legend's columns fitted for them: all in one call, one reflow
        and one repaint. A legend kept off the screen (the Simulation page's, whose rule strip
        names the series) moves nothing: its entries go in LEGEND_ENTRIES_PER_CALL a call, with
        no repaint (eight entries and the strip's repaint in one tick were 20-30 ms of the GUI
        thread in a seven-rule run's first second). True once every entry is in."""
        listed = {id(sample.item) for sample, _label in self.legend.items}
        missing = [name for name in rules if id(self.series[(0, name)].curve) not in listed]
        raw = self.raw is not None and not self._raw_in_legend
        if not (missing or raw):
            return True
        most = None if self.legend_on_screen else LEGEND_ENTRIES_PER_CALL
        if raw:
            self.legend.addItem(self.raw.curve, "raw q·k")
            self._raw_in_legend = True
            most = None if most is None else most - 1
        for name in missing[:most]:
            self.legend.addItem(self.series[(0, name)].curve, rule_label(name))
        whole = most is None or len(missing) <= most
        if whole:
            self._fit_legend()
        if self.legend_on_screen:
            # a row more moves every plot, and the whole strip paints: laid out and its axes
            # drawn in the loop's next turn, then painted once
            self._settle_later()
        return whole

    def make_items_ahead(self, rules: tuple[str, ...], most: int = PREPARED_PER_TICK) -> bool:
        """Make up to ``most`` of the items a sweep of ``rules`` will draw into, a few each tick
        while the simulation before the sweep streams: a new rule set's items made
        at its first point were the sweep's longest blocks (seven rules, bench_gui.py --rules 7
        --profile: 30-50 ms of the GUI thread's CPU per tick for a second). True once all exist."""
        removed = 0
        if rules != getattr(self, "_prepared_for", None):
            removed = self._sync(rules)
            self._prepared_for = rules
            self._legend_fitted = False
        if getattr(self, "_legend_fitted", False) and all(
                (i, name) in self.series for i in range(len(self.plots)) for name in rules):
            return True  # (all made: nothing to make, nothing to hold)
        if not removed:
            self._hold_scene_updates()  # (new items have no data yet: nothing to paint)
        for i in range(len(self.plots)):
            made_before = len(self.series)
            if not self._plot_items(i, rules, most):
                return False
            most -= len(self.series) - made_before
        if not getattr(self, "_legend_fitted", False):  # the legend's rows for these rules,
            # now: fitted at the sweep's first point, a row more shortened all six plots there
            # and repainted the whole panel (~60 ms of the GUI thread's CPU with seven rules)
            self._fit_legend()
            self._legend_fitted = True
        return True

    def _draw_theory(self, i: int) -> None:
        """Plot ``i``'s dashed asymptotic predictions along n, only at points where they apply."""
        for (j, name), item in self.theory.items():
            if j != i:
                continue
            xs, ys = [], []
            if self.axis == "n_keys":
                for p in self._points:
                    th = length_theory(p.snapshot.config, name)
                    if th is not None and th.reliable:
                        xs.append(p.x)
                        ys.append(getattr(th, THEORY[self.metrics[i].key]))
            ok = [k for k, y in enumerate(ys) if math.isfinite(y) and (y > 0 or not self.metrics[i].log_y)]
            item.setData(np.array([xs[k] for k in ok], dtype=float), np.array([ys[k] for k in ok]))

    def _theory_legend(self) -> None:
        """"dashed: asymptotic theory" in the legend while a theory curve is drawn."""
        shown = any(item.xData is not None and len(item.xData) for item in self.theory.values())
        legend = self.plots[0].legend
        if shown and not self._theory_in_legend:
            legend.addItem(self.theory_key, "dashed: asymptotic theory")
        elif not shown and self._theory_in_legend:
            legend.removeItem(self.theory_key)
        self._theory_in_legend = shown

    # -- drawing: the six plots of a new sweep point over a few redraw ticks --------------------
    def refresh(self, state: Any, force: bool = False) -> bool:
        """Like every panel, but a change is drawn ``PLOTS_PER_REFRESH`` plots at a time: all
        six at once (curves, bands, symbols, the linked x ranges and each y auto-range, then
        the paint) was the GUI thread's longest block while a run streamed (bench/bench_gui.py
        --profile). The panel counts as drawn (``_drawn_key``) once every plot is."""
        if force or state is None:
            self._pending, self._pending_key = [], None
            return super().refresh(state, force)
        self._state = state
        key = self.data_key(state)
        if key == self._drawn_key or not self.is_on_screen():
            return False
        self._release_plot_paint()
        going_on = key == self._pending_key and bool(self._pending)
        if key != self._pending_key:  # new data: the shared part now, the plots in turns
            self._pending_key = key
            before = self._sweep_config()
            # the plots the last data had not reached first, the one half drawn going on with
            # its other rules (a rule one point short for a while is the same sweep): points
            # arriving faster than a pass over the six plots (seven rules: ~0.8 s) never
            # starved the last ones
            order = self._pending + [i for i in range(len(self.plots)) if i not in self._pending]
            self._pending = order if self._draw_shared(state) else []
            now = self._sweep_config()
            if not self._pending or now != before:
                self._rules_left = None
        budget = SERIES_PER_REFRESH
        drawn: list[int] = []
        for _ in range(PLOTS_PER_REFRESH):
            if not self._pending:
                break
            i = self._pending[0]
            drawn.append(i)
            made_before = len(self.series)
            if not self._plot_items(i, self._rules, budget):
                break  # the rest of its curves next tick, then its data
            budget -= len(self.series) - made_before
            if not self._draw_plot_in_turns(i):
                break  # the rest of its rules next tick
            self._pending.pop(0)
            self._show_count(state)  # (a plot shows these points now)
            if i == 0:  # the legend is whole now (its entries are plot 0's curves)
                self._fit_legend()
                going_on = False  # (its columns may have changed: the strip moves)
        self.glw.scene().prepareForPaint()  # (as PlotPanel.refresh: one paint, not two)
        if not self._pending:
            self._draw_done(state)
            self._drawn_key = key
            self.draw_count += 1
        if going_on and self._pending:  # only the plots drawn changed
            self._paint_plots_later(drawn)
        else:
            # a new point (its shared part may change every plot: markers, legend, titles) or
            # a new run's emptied strip: the whole strip, in pieces from the loop's next turn.
            # In this turn the paint joined the refresh (6-11 ms and 10-16 ms, seven rules);
            # PlotPanel's hold repainted the strip in one 25-40 ms block (bench_gui.py
            # --rules 7 --profile, the sweep's points)
            self._paint_plots_later((), whole=True)
        return True

    def _paint_plots_later(self, plots: Iterable[int], whole: bool = False) -> None:
        """Paint plots ``plots`` (all that changed) in the event loop's next turn. A plot's
        rules set in a redraw tick (5-13 ms of the GUI thread's CPU with seven rules) and its
        paint (10-16 ms) in one turn made the 7-rule runs' lags over a frame (bench/bench_gui.py
        --rules 7 --profile). Not PlotPanel's hold: a widget whose updates come back on
        repaints whole, and the whole strip is a 13-25 ms paint; this one repaints the plots
        only. The view drops the scene's updates meanwhile, so anything else that changes the
        strip releases it first (``_release_plot_paint``). ``whole``: the whole strip (its
        legend and titles too), painted in pieces."""
        rect = QRectF()
        for i in plots:
            rect = rect.united(self.plots[i].sceneBoundingRect())
        if whole:
            rect = self.glw.mapToScene(self.glw.viewport().rect()).boundingRect()
        if rect.isEmpty():
            return
        if self._held_plots is None:
            self.glw.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.NoViewportUpdate)
            QTimer.singleShot(TURN_MS, self, self._release_plot_paint)
            self._held_plots = rect
        else:
            self._held_plots = self._held_plots.united(rect)
        self.paint_due = True

    def _hold_scene_updates(self) -> None:
        """The view drops the scene's updates until the loop's next turn, with nothing of its
        own to repaint then. For items made ahead, without data: adding an item to an
        auto-ranging plot queues its auto-range through a repaint, which repainted the whole
        strip (5-15 ms a curve, one curve a tick through a seven-rule run's first second, each
        beside a tick, bench_gui.py --rules 7 --profile) to show nothing new. Anything that
        changes the strip meanwhile releases the hold first (``_release_plot_paint``) or adds
        its plots to it (``_paint_plots_later``)."""
        if self._held_plots is None:
            # what changed before (this tick's draw of the strip) reaches the view first: the
            # scene hands its changes to the view in a queued call
            QCoreApplication.sendPostedEvents(self.glw.scene(), QEvent.Type.MetaCall)
            self.glw.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.NoViewportUpdate)
            QTimer.singleShot(TURN_MS, self, self._release_plot_paint)
            self._held_plots = QRectF()  # (a null rect: united with a plot's, the plot's)

    def _release_plot_paint(self) -> None:
        """The view takes the scene's updates again, and paints the plots held back."""
        rect, self._held_plots = self._held_plots, None
        if rect is None:
            return
        self.glw.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate)
        if rect.isNull():  # (held for items without data: nothing to paint)
            return
        if not self.is_on_screen():
            self.paint_due = False
            return
        area = self.glw.mapFromScene(rect).boundingRect().adjusted(-2, -2, 2, 2)
        self._pieces_left = self._paint_pieces(area)
        self._paint_next_piece()

    def _paint_pieces(self, area: QRect) -> list[QRect]:
        """``area`` (viewport pixels) cut at the plots' edges into pieces of at most
        PLOTS_PER_PAINT plots, full height each: a piece paints only the items it crosses."""
        cuts = sorted(round(self.glw.mapFromScene(self.plots[i].sceneBoundingRect().topLeft()).x())
                      for i in range(PLOTS_PER_PAINT, len(self.plots), PLOTS_PER_PAINT))
        edges = [area.left()] + [x for x in cuts if area.left() < x <= area.right()] \
            + [area.right() + 1]
        return [QRect(a, area.top(), b - a, area.height()) for a, b in pairwise(edges)
                if b > a]

    def _paint_next_piece(self) -> None:
        """One piece of the held area now, the next one in the loop's next turn (the pieces
        left keep ``paint_due``: the page's ticks wait for the last)."""
        pieces = self._pieces_left
        if not pieces:
            return
        if not self.is_on_screen():
            self._pieces_left, self.paint_due = [], False
            return
        self.paint_due = True
        self.glw.viewport().update(pieces.pop(0))
        if pieces:
            QTimer.singleShot(TURN_MS, self, self._paint_next_piece)

    def eventFilter(self, obj: Any, event: Any) -> bool:
        handled = super().eventFilter(obj, event)
        pieces_left = getattr(self, "_pieces_left", None)  # (events may come before build)
        if pieces_left and event.type() == QEvent.Type.Paint and obj is self.glw.viewport():
            self.paint_due = True  # (the strip's next piece is still to paint)
        return handled

    def finish_held(self) -> None:
        self._release_plot_paint()
        super().finish_held()

    def set_legend_on_screen(self, on: bool) -> None:
        self._release_plot_paint()  # (a change of the strip is dropped while held)
        super().set_legend_on_screen(on)
        rules = self._rules or getattr(self, "_prepared_for", None) or ()
        if on and rules and all((0, name) in self.series for name in rules):
            self._add_legend_entries(rules)  # (entries still to come off the screen: all now)

    def _draw_plot_in_turns(self, i: int) -> bool:
        """Plot ``i``'s data, RULES_PER_REFRESH rules a call (a rule still one point short for a
        tick is the same sweep). A plot that shows another configuration is emptied first:
        its old curves never stay beside the new ones (all seven rules set at once there, the
        sweep's first point, made a tick and its paint ~50 ms of the GUI thread's CPU). True
        once the plot is whole."""
        sweep = self._sweep_config()
        if self._rules_left is None:
            if len(self._rules) <= RULES_PER_REFRESH:
                self._draw_plot(i)
                return True
            if self._plot_sweep.get(i) != sweep:
                self._empty_plot(i)
            self._show_plot_title(i)
            self._draw_theory(i)
            self._draw_raw(i)
            self._rules_left = list(self._rules)
        now, self._rules_left = (self._rules_left[:RULES_PER_REFRESH],
                                 self._rules_left[RULES_PER_REFRESH:])
        self._draw_rules(i, now)
        if self._rules_left:
            return False
        self._rules_left = None
        self._plot_sweep[i] = sweep
        return True

    def _sweep_config(self) -> Any:
        """The sweep the drawn points belong to (its first point's configuration; None before
        a point): what a plot records as shown, and what a new point is compared with."""
        return self._points[0].snapshot.config if self._points else None

    def _empty_plot(self, i: int) -> None:
        """Plot ``i``'s rule curves and bands without data (their items kept)."""
        for (j, _name), series in self.series.items():
            if j == i:
                for item in (series.curve, series.lo, series.hi):
                    item.setData([], [])
        self._plot_sweep.pop(i, None)

    def invalidate(self) -> None:
        self._release_plot_paint()  # (a change of the strip is dropped while held)
        self._pending, self._pending_key, self._rules_left = [], None, None
        self._plot_sweep.clear()
        super().invalidate()

    def clear_data(self) -> None:
        self._release_plot_paint()  # (a change of the strip is dropped while held)
        self._pending, self._pending_key, self._rules_left = [], None, None
        self._plot_sweep.clear()
        super().clear_data()

    def draw(self, state: Any) -> None:
        """Everything at once (an export, or a forced redraw)."""
        if self._draw_shared(state):
            for i in range(len(self.plots)):
                self._draw_plot(i)
        self._draw_done(state)

    def _draw_shared(self, state: Any) -> bool:
        """The axis, the markers, the series items, the theory curves, the raw q·k and the x
        range; False when there is no point to draw."""
        axis = state.sweep[0].axis if state.sweep else getattr(state, "sweep_axis", self.axis)
        self._use_axis(axis)
        field = AXES[axis][0]
        points = tuple(sorted(state.sweep, key=lambda p: p.x))
        self._points = points
        snap = state.snapshot
        if snap is not None:
            for line in self.markers:
                line.setValue(math.log10(getattr(snap.config, field)))
        self._set_x_range(axis, [p.x for p in points],
                          getattr(snap.config, field) if snap is not None else None)
        if not points:  # a new configuration, no point of it yet: none of the last one's stay
            # (its last plot kept the previous step's ~0.125 under the new title)
            self.clear_hover()
            self._plot_sweep.clear()
            for plot in self.plots:
                for item in plot.listDataItems():
                    item.setData([], [])
            self.info_label.set_text("no points yet for these parameters")
            if snap is not None:  # the empty plots are titled for the configuration they wait
                # for (at ρ = 0 the target plot said "target weight (key 0)" until a point came)
                self._show_titles(snap.config.correlation)
            return False
        rules = tuple(points[0].snapshot.rules)
        self._rules = rules
        # each plot's title changes with its data, in _draw_plot: a plot still waiting for its
        # turn keeps the title of the data it shows (the target plot showed the last
        # configuration's ~0.125 under the new "target weight (key 0)" for a few ticks)
        self._correlation = points[0].snapshot.config.correlation
        self._sync(rules)
        self._x = np.array([p.x for p in points], dtype=np.float64)
        return True

    def _set_x_range(self, axis: str, xs: list[int], marker: float | None) -> None:
        """The whole sweep's range before its first point (its ticks span it: the axis does not
        move as points arrive, so a new point repaints only the plots it changes), the current
        d_k's marker included, with room for the end tick labels, which pyqtgraph hides when
        they would overflow the axis."""
        ticks = AXES[axis][3]
        span = [10 ** v for v, _label in (*ticks[0], *ticks[1])] + list(xs)
        if marker is not None:
            span.append(marker)
        self.plots[0].setXRange(math.log10(min(span)), math.log10(max(span)), padding=0.1)

    def _draw_plot(self, i: int) -> None:
        """Plot ``i``'s curves and bands, one per rule, and its theory curves."""
        self._show_plot_title(i)
        self._plot_items(i, self._rules)
        self._draw_theory(i)
        self._draw_raw(i)
        self._draw_rules(i, self._rules)
        self._plot_sweep[i] = self._sweep_config()

    def _draw_raw(self, i: int) -> None:
        """The raw q·k curve, with the plot it is in (``i``): set with every new point, it
        repainted that plot beside the one being drawn."""
        if self.raw is not None and i == self._raw_plot():
            raw = [p.snapshot.raw_std for p in self._points]
            self.raw.set(self._x, finite([e.mean for e in raw]), finite([e.se for e in raw]), True)

    def _draw_rules(self, i: int, rules: Any) -> None:
        """Plot ``i``'s curve and band of each of ``rules``."""
        m = self.metrics[i]
        for name in rules:
            ests = [m.get(p.snapshot.rules[name]) for p in self._points]
            self.series[(i, name)].set(self._x, finite([e.mean for e in ests]),
                                       finite([e.se for e in ests]), m.log_y,
                                       np.array([e.estimable for e in ests], dtype=bool))

    def _draw_done(self, state: Any) -> None:
        """The header's count and a read-out on screen, once every plot shows the new points."""
        points = self._points
        if not points:
            return
        self._theory_legend()
        self._fit_legend()
        self._show_count(state)
        if self._hover_at is not None:  # a read-out on screen shows the new numbers, never old ones
            self.show_values_at(*self._hover_at)

    def _show_count(self, state: Any) -> None:
        """The header's count of the points drawn, and what the bands mean. Also set as soon as
        a plot shows new points: with seven rules, points arrive faster than a pass over the six
        plots, and the header said "no points yet" over a sweep of ten drawn points until its
        last point."""
        points = self._points
        first: SimulationSnapshot = points[0].snapshot
        total = state.sweep[0].total if state.sweep else len(points)
        self.header_label.setText(f"<b>{self.title}</b>")
        self.info_label.set_text(
            f"{len(points)}/{total} points, {first.trials_done:,} trials each; bands and "
            "read-outs ±1.96 SE (95%), the table's ± is 1 SE"
            + ("; dashed: asymptotic theory" if self._theory_in_legend else ""))

    def _fit_legend(self) -> None:
        """The legend's columns for the room there is. Fitted as soon as plot 0 (whose curves
        are its entries) is drawn, while the other plots of a new rule set are still empty: a
        legend that gained a row once all six plots were drawn (seven rules: eight columns ->
        four) reflowed and repainted the whole strip, a 90 ms block (tests/ui/
        test_sweep_incremental.py)."""
        fit_legend_columns(self.legend, room=0.95 * self.glw.width())

    def _show_titles(self, correlation: float) -> None:
        self._correlation = correlation
        for i in range(len(self.plots)):
            self._show_plot_title(i)

    def _show_plot_title(self, i: int) -> None:
        """Plot ``i``'s title for the configuration its data comes from (``_correlation``)."""
        title = metric_title(self.metrics[i], getattr(self, "_correlation", 1.0))
        if self.plots[i].titleLabel.text != title:
            self.plots[i].setTitle(title, size="9pt")

    def data_rows(self) -> list[dict[str, Any]]:
        """The CSV rows of every plot, made when asked: made on every new point, they were most
        of the refresh's shared part (~1.3 of 1.6 ms with seven rules)."""
        field, points = AXES[self.axis][0], self._points
        if not points:
            return []
        x = np.array([p.x for p in points], dtype=np.float64)
        rows: list[dict[str, Any]] = []
        for m in self.metrics:
            for name in self._rules:
                ests = [m.get(p.snapshot.rules[name]) for p in points]
                rows += [{"metric": m.key, "rule": name, field: int(d),
                          "mean": float(a) if e.estimable else "",
                          "se": float(b) if e.estimable else ""} for d, a, b, e in
                         zip(x, finite([e.mean for e in ests]), finite([e.se for e in ests]),
                             ests, strict=False)]
        if self.raw is not None:
            rows += [{"metric": "raw_score_std", "rule": "raw", field: p.x, "mean": p.snapshot.raw_std.mean,
                      "se": p.snapshot.raw_std.se} for p in points]
        return rows

    # -- hover ---------------------------------------------------------------------------------
    def hover_items(self) -> list[Any]:
        return [*self.hover, *self.hover_lines]

    def _nearest(self, log10_dk: float) -> int | None:
        if not self._points:
            return None
        xs = np.log10([p.x for p in self._points])
        return int(self._points[int(np.argmin(np.abs(xs - log10_dk)))].x)

    def _on_click(self, event: Any) -> None:
        pos = event.scenePos()
        for p in self.plots:
            vb = p.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                value = self._nearest(vb.mapSceneToView(pos).x())
                if value is not None:  # the point's own axis: d_k, or n along n
                    (self.n_clicked if self.axis == "n_keys" else self.d_k_clicked).emit(value)
                return

    def clear_hover(self) -> None:
        self._release_plot_paint()  # (a change of the strip is dropped while held)
        super().clear_hover()
        self.hover_text = ""
        self._hover_at = None

    def _on_move(self, event: Any) -> None:
        pos = event[0]
        for i, p in enumerate(self.plots):
            vb = p.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                self.show_values_at(i, vb.mapSceneToView(pos).x())
                return
        self.clear_hover()

    def _hover_pos(self, plot_index: int, size: Any, x_point: float) -> tuple[float, float]:
        """Scene position of a read-out of ``size``: in the plot's top corner away from the point
        (at the point, a read-out of six rules ran past the plot's edge), then moved inside the
        visible scene (a read-out wider than its plot reaches over the neighbour, never out)."""
        vb = self.plots[plot_index].getViewBox()
        (x0, x1), _ = vb.viewRange()
        box = vb.sceneBoundingRect()
        left = x_point > (x0 + x1) / 2 or size.width() > box.width()
        x = box.left() if left else box.right() - size.width()
        seen = self.glw.mapToScene(self.glw.viewport().rect()).boundingRect()
        return (_clamp(x, seen.left(), seen.right() - size.width()),
                _clamp(box.top(), seen.top(), seen.bottom() - size.height()))

    def show_values_at(self, plot_index: int, log10_dk: float) -> str:
        """Show the exact values at the sweep point nearest to 10**log10_dk; returns the text."""
        self._release_plot_paint()  # (a change of the strip is dropped while held)
        if not self._points:
            self.clear_hover()
            return ""
        for k, t in enumerate(self.hover):
            if k != plot_index:
                t.hide()
        self._hover_at = (plot_index, log10_dk)
        xs = np.log10([p.x for p in self._points])
        j = int(np.argmin(np.abs(xs - log10_dk)))
        point = self._points[j]
        m = self.metrics[plot_index]
        trials = point.snapshot.trials_done
        value = f"{point.x:,}" if self.axis == "n_keys" else str(point.x)
        lines = [f"<b>{AXES[self.axis][2]} = {value}</b>"]
        if plot_index == self._raw_plot():
            e = point.snapshot.raw_std
            lines.append(f'<span style="color:{self.theme.raw}">raw: {e.mean:.4g} {ci95(e, trials)}</span>')
        for name, r in point.snapshot.rules.items():
            e = m.get(r)
            lines.append(f'<span style="color:{rule_color(name)}">{name}: {read_out(e, trials)}</span>')
        html = f'<div style="color:{self.theme.foreground}">' + "<br>".join(lines) + "</div>"
        t = self.hover[plot_index]
        t.setHtml(html)
        for line in self.hover_lines:
            line.setValue(xs[j])
            line.show()
        t.setAnchor((0, 0))
        t.setPos(*self._hover_pos(plot_index, t.boundingRect(), xs[j]))
        t.show()
        self.hover_text = "\n".join(lines)
        return self.hover_text


def _clamp(v: float, lo: float, hi: float) -> float:
    """v within [lo, hi]; lo when the span is too short (the text's start stays readable)."""
    return max(lo, min(v, hi))


#: the exports of one sweep plot alone: (menu text, kind for ``export_requested``)
SINGLE_EXPORTS = (("as PNG…", "png"), ("as SVG…", "svg"), ("data as CSV…", "csv"),
                  ("for a slide (1920×1080 PNG)…", "slide"),
                  ("for a paper (single-column SVG)…", "paper"))
#: on-screen size of a single-plot panel drawn for export (a plot's own aspect, not the strip's)
SINGLE_SIZE = (760, 540)
_SINGLE: dict[str, type[SweepPanel]] = {}


def single_metric_panel(key: str) -> type[SweepPanel]:
    """A SweepPanel class drawing only the measure ``key`` (one class per measure, so that
    ``type(panel)()`` rebuilds it, as the export presets do); plot id ``sweep_<key>``."""
    if key not in _SINGLE:
        metric = next(m for m in METRICS if m.key == key)

        class SingleSweepPanel(SweepPanel):
            plot_id = f"sweep_{key}"
            title = f"{metric.title} vs d_k"
            metrics = (metric,)
            screen_figure_size = (900, 640)  # one plot's own aspect, not the strip's

            def build(self) -> None:
                super().build()
                self.axis_box.hide()
                self._show_title()

            def _show_title(self) -> None:
                """The figure is the plot alone: its title says what it is and along what."""
                what = metric_title(metric, getattr(self, "_correlation", 1.0))
                self.title = f"{what} vs {'d_k' if self.axis == 'd_k' else 'keys n'}"
                self.plots[0].setTitle(self.title, color=self.theme.foreground, size="11pt")

            def _show_titles(self, correlation: float) -> None:
                self._correlation = correlation
                self._show_title()

            def _show_plot_title(self, i: int) -> None:
                self._show_title()

            def _use_axis(self, axis: str) -> None:
                super()._use_axis(axis)
                if not self.plots[0].titleLabel.text.startswith(self.title):
                    self._show_title()

            def theme_changed(self, theme: Theme) -> None:
                super().theme_changed(theme)
                self._show_title()

        SingleSweepPanel.__name__ = SingleSweepPanel.__qualname__ = f"SweepPanel_{key}"
        _SINGLE[key] = SingleSweepPanel
    return _SINGLE[key]
