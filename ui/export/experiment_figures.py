"""Draw the engine's experiment figure data (``engine.experiments.figures.FigureData``): a plot
panel the Experiments page can embed, and the PNG/SVG writer of ``experiment --figures``.

One colour per rule (``ui.theme``); points with error bars (a Wilson interval or ± 1 standard
error, as the figure says) for ``by_rule`` and ``vs_axis``, mean curves with a ± 1 SE band for
``vs_step``. Items are created once per series name and updated with setData afterwards.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from engine.experiments.figures import RATE_ERROR
from ui.plots.base import PlotPanel
from ui.plots.log_ticks import log_ticks
from ui.plots.rule_pens import rule_pen, symbol_brush, symbol_pen, symbol_style
from ui.plots.tidy_axis import shorter_titles
from ui.theme import rule_color, themed_css

SIZE = (900, 600)
#: rules' points at one x are drawn this fraction of the x span apart (the data keep the true x)
DODGE = 0.012
#: line styles that tell apart the series of one rule (e.g. one per learning rate)
_STYLES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine,
           Qt.PenStyle.DashDotLine, Qt.PenStyle.DashDotDotLine)
_SYMBOLS = ("o", "s", "t", "d", "+", "x")


def short_error(error: str) -> str:
    """The error convention in a few words, for a caption ("± 1 SE over seeds")."""
    return error.replace("mean ± 1 standard error", "± 1 SE")


#: series in a figure beyond which its on-page legend names rules and variants apart
MAX_SERIES_NAMED = 6


def factored_legend(fig: Any, colour: str) -> list[tuple[Any, str]] | None:
    """(sample, text) entries naming each rule once (its colour) and each variant once (its
    line pattern and marker, as ``draw`` gives the k-th series of every rule), or None when the
    figure has few series or its series are not one set of variants per rule."""
    series = list(fig.series)
    if len(series) <= MAX_SERIES_NAMED:
        return None
    rules = list(dict.fromkeys(s.rule for s in series))
    variants: list[str] = []
    per_rule: dict[str, int] = {}
    for s in series:
        k = per_rule.get(s.rule, 0)
        per_rule[s.rule] = k + 1
        prefix = f"{s.rule}, "
        if not s.name.startswith(prefix):
            return None
        variant = s.name[len(prefix):]
        if k == len(variants):
            variants.append(variant)
        elif k > len(variants) or variants[k] != variant:
            return None
    entries: list[tuple[Any, str]] = []
    for rule in rules:
        entries.append((pg.PlotDataItem([], [], pen=rule_pen(rule, 3.0, Qt.PenStyle.SolidLine)),
                        rule))
    for k, variant in enumerate(variants):
        symbol = None if fig.kind == "vs_step" else _SYMBOLS[k % len(_SYMBOLS)]
        entries.append((pg.PlotDataItem([], [], pen=pg.mkPen(colour, width=1.5,
                                                             style=_STYLES[k % len(_STYLES)]),
                                        symbol=symbol, **symbol_style(colour, colour)),
                        variant))
    return entries


def _log(values: Iterable[float], on: bool) -> np.ndarray:
    a = np.asarray(list(values), dtype=np.float64)
    return np.log10(a) if on else a


class ExperimentFigurePanel(PlotPanel):
    """One experiment figure; ``refresh(figure_data)`` draws it (the state is the FigureData)."""

    plot_id = "experiment_figure"
    title = "Experiment"
    figure_page = "experiments"

    def __init__(self, figure: Any = None, parent: QWidget | None = None,
                 compact: bool = False) -> None:
        #: in a page: the title and a short error caption once, in the header; the y label
        #: without the error convention (the long one is cut at a panel's height)
        self.compact = compact
        super().__init__(parent)
        self.caption = QLabel(self)  #: the error convention, in the header (compact panels)
        themed_css(self.caption, "color: $muted; font-size: 11px;")
        self.caption.setMinimumWidth(1)  # (cut in a narrow panel, its tooltip has it whole)
        self.caption.setVisible(False)  # (its text follows the title in a compact header)
        self.header.insertWidget(2, self.caption)  # after the title and the stretch, before ⋯
        if compact:  # the title and the error caption wrap to the panel's width: three
            # figures share a 1280 px row, and on one line both were cut ("Seeds that reach
            # 90% trai"); it never widens the row past the window either
            self.header_label.setWordWrap(True)
            self.header_label.setMinimumWidth(1)
            spacer = next(i for i in range(self.header.count())
                          if self.header.itemAt(i).spacerItem() is not None)
            self.header.takeAt(spacer)  # the title takes the width the stretch had
            self.header.setStretchFactor(self.header_label, 1)
        self._items: dict[str, tuple[Any, Any, Any, Any]] = {}
        self._figure = None
        if figure is not None:
            self.set_identity(figure)

    def set_identity(self, figure: Any) -> None:
        """Take the figure's id (file name, object name) and title."""
        self.plot_id = figure.id
        self.title = figure.title
        self.setObjectName(f"plot_{figure.id}")
        self.caption.setText(f"error bars: {short_error(figure.error)}")
        self.caption.setToolTip(f"error bars: {figure.error}")
        self._show_header()
        self.header_label.setToolTip(f"{figure.title}: {figure.y_label} ({figure.error})")

    def _show_header(self) -> None:
        """The title, and in a compact panel the error caption after it, small and muted."""
        text = f"<b>{html.escape(self.title)}</b>"
        if self.compact:
            text += (f' <span style="color: {self.theme.muted}; font-size: 11px;">'
                     f"· {html.escape(self.caption.text())}</span>")
        self.header_label.setText(text)

    def theme_changed(self, theme: Any) -> None:
        if getattr(self, "caption", None) is not None:  # (built after the first theming)
            self._show_header()

    def build(self) -> None:
        self.plot = self.add_plot(0, 0, "", "")
        vb = self.plot.getViewBox()
        vb.sigXRangeChanged.connect(lambda _vb, rng: self._log_ticks("bottom", rng))
        vb.sigYRangeChanged.connect(lambda _vb, rng: self._log_ticks("left", rng))

    def make_clone(self) -> ExperimentFigurePanel:
        """The full figure: its title on it, the error convention in the y label."""
        return type(self)(self._figure)

    def _log_ticks(self, side: str, rng: Any) -> None:
        """Decade labels on a log axis (pyqtgraph's own labels crowd into each other)."""
        fig = self._figure
        if fig is None or not (fig.x_log if side == "bottom" else fig.y_log):
            return
        ticks = log_ticks(*rng)
        self.plot.getAxis(side).setTicks(ticks if len(ticks[0]) >= 2 else None)

    def data_key(self, state: Any) -> Any:
        return id(state)

    def draw(self, fig: Any) -> None:
        self._figure = fig
        self._set_axes(fig)
        per_rule: dict[str, int] = {}
        seen = set()
        rules = list(dict.fromkeys(s.rule for s in fig.series))
        all_x = [x for s in fig.series for x in _log(s.x, fig.x_log)]
        span = (max(all_x) - min(all_x)) if len(all_x) > 1 else 1.0
        for s in fig.series:
            k = per_rule.get(s.rule, 0)
            per_rule[s.rule] = k + 1
            seen.add(s.name)
            items = self._items.get(s.name)
            if items is None:
                items = self._make_items(s.name, s.rule, k, fig.kind, s.colour)
                self._items[s.name] = items
            curve, bars, lo_curve, hi_curve = items
            x, y = np.asarray(s.x, dtype=float), np.asarray(s.y, dtype=float)
            lx = _log(s.x, fig.x_log)
            if fig.kind != "vs_step" and len(rules) > 1:  # side by side, so equal points all show
                lx = lx + (rules.index(s.rule) - (len(rules) - 1) / 2) * DODGE * (span or 1.0)
                x = 10 ** lx if fig.x_log else lx
            curve.setData(x, y)
            if fig.kind == "vs_step":
                lo_curve.setData(x, np.asarray(s.lo, dtype=float))
                hi_curve.setData(x, np.asarray(s.hi, dtype=float))
            else:  # the error bar item does not follow the log mode: give it log10 values
                ly = _log(s.y, fig.y_log)
                top = _log(s.hi, fig.y_log) - ly
                bottom = ly - _log(s.lo, fig.y_log)
                bars.setData(x=lx, y=ly, top=np.maximum(top, 0), bottom=np.maximum(bottom, 0))
        for name, (curve, bars, lo_curve, hi_curve) in self._items.items():
            if name not in seen:
                curve.setData([], [])
                if lo_curve is not None:
                    lo_curve.setData([], [])
                    hi_curve.setData([], [])
                if bars is not None:
                    bars.setData(x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0))
        if self.compact:
            self._compact_legend(fig)

    def _set_axes(self, fig: Any) -> None:
        """Title, labels, log modes, ticks and ranges of ``fig``."""
        plot = self.plot
        if self.compact:  # (the header has the title and the error caption)
            plot.setTitle(None)
            # TidyAxis fits it (lines, a shorter form, "…"); the full title on hover
            axis = plot.getAxis("left")
            axis.shorter = tuple(html.escape(t) for t in shorter_titles(fig.y_label))
            plot.setLabel("left", html.escape(fig.y_label))
            axis.label.setToolTip(fig.y_label)
        else:
            plot.setTitle(fig.title, color=self.theme.foreground)
            plot.setLabel("left", f"{fig.y_label} ({fig.error})")
        plot.setLabel("bottom", fig.x_label)
        plot.setLogMode(x=fig.x_log, y=fig.y_log)
        axis = plot.getAxis("bottom")
        axis.setTicks([list(fig.x_ticks)] if fig.x_ticks else None)
        # every rule named: a crowded one a line lower, then all in a smaller type
        axis.stagger = axis.categories = bool(fig.x_ticks)
        plot.enableAutoRange()
        if fig.x_ticks:  # categories: room on both sides
            plot.setXRange(-0.5, len(fig.x_ticks) - 0.5, padding=0)
        if fig.error == RATE_ERROR:  # a rate: always the whole 0..1
            plot.setYRange(0.0, 1.0, padding=0.02)
        elif not fig.y_log and not any(np.isfinite(np.asarray(s.y, dtype=float)).any()
                                       for s in fig.series):
            # nothing yet: 0..1, not pyqtgraph's -0.5..0.5 (no step count or loss is negative)
            plot.setYRange(0.0, 1.0, padding=0.02)
            if not fig.x_ticks and not fig.x_log:  # (no negative steps either)
                plot.setXRange(0.0, 1.0, padding=0.02)
        if not fig.y_log:
            plot.getAxis("left").setTicks(None)
        x_range, y_range = plot.getViewBox().viewRange()
        self._log_ticks("bottom", x_range)
        self._log_ticks("left", y_range)

    def _compact_legend(self, fig: Any) -> None:
        """On the page, a figure of many series (a rule per colour times, e.g., five learning
        rates) names each rule once by its colour and each variant once by its line pattern and
        marker: fifteen entries, one per series, took the whole panel from the plot."""
        legend = self.plot.legend
        entries = factored_legend(fig, self.theme.foreground)
        if legend is None or entries is None:
            return
        if [name for _item, name in entries] == [label.text for _s, label in legend.items]:
            return
        legend.clear()
        self._legend_samples = [item for item, _name in entries]  # (kept alive: the legend draws them)
        for item, name in entries:
            legend.addItem(item, name)

    def _make_items(self, name: str, rule: str, k: int, kind: str, own_colour: str = ""
                    ) -> tuple[Any, Any, Any, Any]:
        """A series' items in its own colour, else its rule's; the k-th style of its group."""
        plot = self.plot
        colour = own_colour or rule_color(rule)
        style = _STYLES[k % len(_STYLES)]
        pen = pg.mkPen(colour, width=2.0, style=style) if kind != "by_rule" else None
        curve = plot.plot([], [], pen=pen, name=name, symbol=_SYMBOLS[k % len(_SYMBOLS)],
                          symbolSize=8, **symbol_style(colour, colour))
        # the legend draws its sample from the scatter's own options, which pyqtgraph sets only
        # with the first data: before a job finished every rule's sample was the same grey dot
        curve.scatter.setBrush(symbol_brush(colour))
        curve.scatter.setPen(symbol_pen(colour))
        if kind == "vs_step":
            curve.setSymbol(None)
            c = pg.mkColor(colour)
            lo_curve = pg.PlotDataItem([], [], pen=pg.mkPen(None))
            hi_curve = pg.PlotDataItem([], [], pen=pg.mkPen(None))
            plot.addItem(lo_curve)
            plot.addItem(hi_curve)
            c.setAlpha(50)
            band = pg.FillBetweenItem(lo_curve, hi_curve, brush=pg.mkBrush(c))
            plot.addItem(band)
            return curve, None, lo_curve, hi_curve
        bar_pen = pg.mkPen(colour, width=1.5) if own_colour else rule_pen(rule, 1.5)
        bars = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), pen=bar_pen, beam=0.05)
        plot.addItem(bars)
        return curve, bars, None, None

    def data_rows(self) -> list[dict[str, Any]]:
        fig = self._figure
        if fig is None:
            return []
        rows = []
        for s in fig.series:
            for x, y, lo, hi, n in zip(s.x, s.y, s.lo, s.hi, s.n):
                rows.append({"series": s.name, "scaling": s.rule, "x": x, "y": y, "lo": lo,
                             "hi": hi, "n": n})
        return [r for r in rows if all(math.isfinite(r[k]) for k in ("x", "y", "lo", "hi"))]


def write_experiment_figures(figures: Iterable[Any], out_dir: str | os.PathLike[str],
                             theme: str = "light", style: str = "screen",
                             source: dict[str, Any] | None = None) -> list[Path]:
    """``<figure id>.png`` and ``.svg`` (and the points drawn as ``.csv``) of every figure, in
    ``style`` (ui.export.plot_files.FIGURE_STYLES: the GUI's slide and paper presets, or as on screen)."""
    from ui.export.plot_files import write_styled_figures
    from ui.headless import offscreen_panel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for fig in figures:
        with offscreen_panel(partial(ExperimentFigurePanel, fig), SIZE, theme) as panel:
            if source is not None:
                panel.figure_source = lambda: source
            panel.refresh(fig, force=True)
            written += write_styled_figures(panel, out, panel.plot_id, style, with_csv=True)
    return written
