"""The four distribution plots: scores/logits, top weight, entropy/log(n), Jacobian size.

Each rule is one step curve in its own colour (ui.theme.RULE_COLORS); curves are created when a
rule appears and updated with setData afterwards. The engine computed every number shown.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QCheckBox

from engine.rules import rule_label
from engine.simulate import RuleResult, SimulationSnapshot
from engine.stats import Estimate, Histogram
from ui.plots.base import PlotPanel
from ui.plots.csv_rows import hist_rows
from ui.plots.finite import finite
from ui.plots.rule_pens import rule_pen
from ui.theme import Theme, rule_color

THEORY_POINTS = 400
#: on a log density axis, densities below this fraction of the tallest bin are drawn at it
LOG_DECADES_SHOWN = 1e-5


def _pct(e: Estimate) -> str:
    """Mean ± one standard error, as in the results table (a bare ± must mean the same there)."""
    return f"{100 * e.mean:.1f}% ± {100 * e.se:.1f}"


TITLE_PT = 9.0  #: the size of the plots' titles


#: seconds between two re-layouts of a header while a run streams (its numbers change every
#: snapshot; fitting and laying out the HTML of four headers every ~33 ms frame took a good part
#: of the frame): a new configuration and a run's final snapshot are shown at once
HEADER_MIN_S = 0.25

#: lines a plot's title may take on screen: a fixed-height header that never runs over the data
HEADER_LINES = 2
#: what ends a header cut short (the whole header is the title's tooltip)
MORE = " …"


def _title_font(px: float | None = None) -> Any:
    """The titles' font: TITLE_PT on screen, ``px`` pixels in an exported figure."""
    from PySide6.QtGui import QFont

    font = QFont()
    if px is None:
        font.setPointSizeF(TITLE_PT)
    else:
        font.setPixelSize(round(px))
    return font


_METRICS: dict[tuple[float | None, str], tuple[Any, Any]] = {}


def _metrics(px: float | None) -> tuple[Any, Any]:
    """The plain and bold font metrics of the titles at ``px`` (made once per size and
    application font: a header is measured many times a frame)."""
    from PySide6.QtGui import QFontMetricsF

    font = _title_font(px)
    key = (px, font.key())
    found = _METRICS.get(key)
    if found is None:
        bold_font = _title_font(px)
        bold_font.setBold(True)
        found = _METRICS[key] = (QFontMetricsF(font), QFontMetricsF(bold_font))
    return found


def _title_width(text: str, px: float | None = None) -> float:
    """Pixels ``text`` (HTML) takes at the titles' size (bold where it is bold)."""
    import re

    from ui.plots.tidy_axis import plain_text

    plain, bold = _metrics(px)
    width = 0.0
    for chunk_bold, chunk in enumerate(re.split(r"</?b>", text)):
        metrics = bold if chunk_bold % 2 else plain
        width += metrics.horizontalAdvance(plain_text(chunk))
    return width


def _elided(text: str, room: float, px: float | None = None) -> str:
    """Plain ``text`` cut to ``room`` pixels at the titles' size, ending in "…"."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFontMetricsF

    return QFontMetricsF(_title_font(px)).elidedText(text, Qt.TextElideMode.ElideRight, room)


def fit_lines(prefix: str, parts: list[str], room: float, sep: str = ", ",
              px: float | None = None) -> str:
    """``prefix`` then the per-rule summaries (HTML), as many to a line as fit ``room`` pixels
    at the title's size: a title never runs past the edges of its plot."""
    def width(text: str) -> float:
        return _title_width(text, px)

    lines: list[str] = []
    line = prefix
    for part in parts:
        joined = line + (sep if line and line != prefix else "") + part
        if line and line != prefix and width(joined) > room:
            lines.append(line + sep.rstrip())
            line = part
        elif line == prefix and prefix and width(joined) > room:
            lines.append(prefix.rstrip())
            line = part
        else:
            line = joined
    lines.append(line)
    return "<br>".join(lines)


def fit_header(prefix: str, parts: list[str], note: str, room: float,
               px: float | None = None) -> tuple[str, bool]:
    """The title on exactly HEADER_LINES lines of at most ``room`` pixels: ``prefix`` and the
    per-rule ``parts``, then ``note`` on a line of its own when there is one to spare; what does
    not fit is cut, the last line ending in MORE. Returns (HTML, whether anything was cut)."""
    lines = fit_lines(prefix, parts, room, px=px).split("<br>")
    cut = False
    if note and len(lines) < HEADER_LINES:
        if _title_width(note, px) <= room:
            lines.append(note)
        elif "<" not in note:  # a plain note: cut at the right (whole on hover)
            lines.append(_elided(note, room, px))
            cut = True
        else:
            lines.append(MORE.strip())
            cut = True
    elif note:
        lines.append(note)  # no room: cut below
    if len(lines) > HEADER_LINES:
        cut = True
        lines = fit_lines(prefix, parts, room - _title_width(MORE, px), px=px).split("<br>")
        lines = lines[:HEADER_LINES]
        last = lines[-1].removesuffix(",")
        while _title_width(last + MORE, px) > room and ", " in last:  # (a narrow plot)
            last = last.rsplit(", ", 1)[0]
        lines[-1] = last + MORE if _title_width(last + MORE, px) <= room else MORE.strip()
    lines += ["&nbsp;"] * (HEADER_LINES - len(lines))  # one line: the same height as two
    return "<br>".join(lines), cut


def _theory_rows(rule: str, x: np.ndarray, y: np.ndarray) -> list[dict[str, Any]]:
    """CSV rows of a rule's theory curve."""
    return [{"series": f"{rule}_theory", "x": float(a), "density": float(b)}
            for a, b in zip(x, y, strict=False)]


def _span(rule: str, text: str) -> str:
    return f'<span style="color:{rule_color(rule)}">{text}</span>'



def _is_range(rng: Any) -> bool:
    """[[x0, x1], [y0, y1]] of finite numbers, each increasing."""
    import math

    try:
        (x0, x1), (y0, y1) = rng
        return all(isinstance(v, (int, float)) and math.isfinite(v) for v in (x0, x1, y0, y1)) \
            and x0 < x1 and y0 < y1
    except (TypeError, ValueError):
        return False

class RuleHistogramPanel(PlotPanel):
    """One step curve per rule of ``hist_of(rule_result)``; subclasses add markers and titles.
    Hovering reads out every rule's density in the bin under the pointer."""


    x_label = ""
    x_units: str | None = None
    log_toggle = False  #: a "log y" box in the header (a tall spike beside a flat, wide curve)
    #: a "fixed axes" box in the header: the view keeps its range when d_k changes, so the
    #: spread is seen growing instead of the axes rescaling
    fixed_toggle = False

    def build(self) -> None:
        self.plot = self.add_plot(0, 0, self.x_label, "probability density", x_units=self.x_units)
        self.plot.getViewBox().sigResized.connect(self._fit_title)  # the title re-flows
        self.curves: dict[str, pg.PlotDataItem] = {}
        #: the CSV rows: a dict, or a function that makes rows (made on export, not per frame)
        self._rows: list[dict[str, Any] | Callable[[], list[dict[str, Any]]]] = []
        self._hists: dict[str, Histogram] = {}
        self._title_config: Any = None  #: the configuration the header was last fitted for
        self._title_at = 0.0  #: when (perf_counter) the header was last fitted
        self._live_config: Any = None  #: the config of a snapshot still streaming, else None
        self._title_timer = QTimer(self)  # a header held back by HEADER_MIN_S, shown then
        self._title_timer.setSingleShot(True)
        self._title_timer.timeout.connect(self._fit_title)
        self.log_box: QCheckBox | None = None
        if self.log_toggle:
            self.log_box = QCheckBox("log y", self)
            self.log_box.setToolTip("Logarithmic density axis: a wide, flat curve (no scaling at "
                                    "large d_k) stays visible beside a tall, narrow one")
            self.log_box.toggled.connect(self._set_log)
            self.header.insertWidget(2, self.log_box)
        self.fixed_box: QCheckBox | None = None
        if self.fixed_toggle:
            self.fixed_box = QCheckBox("fixed axes", self)
            self.fixed_box.setObjectName(f"{self.plot_id}_fixed_axes")
            self.fixed_box.setToolTip("Keep the current x and y ranges when d_k (or anything else) "
                                      "changes: the histograms widen and narrow in a fixed frame")
            self.fixed_box.toggled.connect(self.set_fixed_axes)
            self.header.insertWidget(2, self.fixed_box)
        self.hover = pg.TextItem(anchor=(0, 0))
        self.hover.setZValue(100)
        self.plot.addItem(self.hover, ignoreBounds=True)
        self.hover.hide()
        self.hover_text = ""  #: the read-out shown now ("" when none)
        self._hover_x: float | None = None
        self._proxy = pg.SignalProxy(self.glw.scene().sigMouseMoved, rateLimit=30, slot=self._on_move)

    # -- log y ---------------------------------------------------------------------------------
    @property
    def is_log(self) -> bool:
        return self.log_box is not None and self.log_box.isChecked()

    def _set_log(self, on: bool) -> None:
        x_range = self.view_range()[0] if self.fixed_axes else None
        self.plot.setLogMode(y=on)  # (pyqtgraph turns auto-range back on for both axes)
        self.plot.enableAutoRange(y=True)
        self.invalidate()
        if x_range is not None:  # a new y scale is fitted once, then kept; x stays as fixed
            self.plot.getViewBox().updateAutoRange()
            self.plot.disableAutoRange()
            self.plot.setXRange(*x_range, padding=0)

    # -- fixed axes ----------------------------------------------------------------------------
    @property
    def fixed_axes(self) -> bool:
        return self.fixed_box is not None and self.fixed_box.isChecked()

    def set_fixed_axes(self, on: bool, view_range: Any = None) -> None:
        """Keep the view's range (``view_range`` [[x0, x1], [y0, y1]], default the current one)
        through every redraw, or follow the data again."""
        if self.fixed_box is not None and self.fixed_box.isChecked() != on:
            self.fixed_box.blockSignals(True)
            self.fixed_box.setChecked(on)
            self.fixed_box.blockSignals(False)
        if on:
            self.plot.disableAutoRange()
            if view_range is not None:
                (x0, x1), (y0, y1) = view_range
                self.plot.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)
        else:
            self.plot.enableAutoRange()
            self.invalidate()

    def view_range(self) -> list[list[float]]:
        return self.plot.getViewBox().viewRange()

    # -- view choices of an exported figure ------------------------------------------------------
    def view_controls(self) -> dict[str, Any]:
        controls: dict[str, Any] = {}
        if self.log_box is not None:
            controls["log_y"] = self.log_box
        if self.fixed_box is not None:
            controls["fixed_axes"] = self.fixed_box
        return controls

    def view_state(self) -> dict[str, Any]:
        state = super().view_state()
        if self.fixed_axes:  # the frame the figure was drawn in
            state["view_range"] = [[float(a), float(b)] for a, b in self.view_range()]
        return state

    def apply_view_state(self, state: Any) -> list[str]:
        done = super().apply_view_state(state)
        rng = state.get("view_range") if isinstance(state, dict) else None
        if self.fixed_axes and _is_range(rng):
            self.set_fixed_axes(True, rng)
        return done
    def copy_view_to(self, clone: PlotPanel) -> None:
        """log y, and the frame the user fixed (the figure shows it)."""
        if self.is_log and clone.log_box is not None:
            clone.log_box.setChecked(True)
            clone.refresh(self._state, force=True)
        if self.fixed_axes:
            clone.set_fixed_axes(True, self.view_range())

    def y_values(self, density: np.ndarray, floor: float) -> np.ndarray:
        """Densities as drawn: on a log axis, empty bins sit at ``floor`` (log 0 does not exist)."""
        return np.maximum(density, floor) if self.is_log else density

    def log_floor(self, peak: float) -> float:
        return max(peak, 1e-300) * LOG_DECADES_SHOWN

    # -- hover ---------------------------------------------------------------------------------
    def hover_items(self) -> list[Any]:
        return [self.hover]

    def clear_hover(self) -> None:
        super().clear_hover()
        self.hover_text = ""
        self._hover_x = None

    def _on_move(self, event: Any) -> None:
        pos = event[0]
        vb = self.plot.getViewBox()
        if vb.sceneBoundingRect().contains(pos):
            self.show_values_at(vb.mapSceneToView(pos).x())
        else:
            self.clear_hover()

    def show_values_at(self, x: float) -> str:
        """Every rule's density in the bin containing ``x``; returns the text shown."""
        if not self._hists:
            self.clear_hover()
            return ""
        self._hover_x = x
        lines = [f"<b>x = {x:.4g}</b>"]
        plain = [f"x = {x:.4g}"]
        for name, h in self._hists.items():
            i = int(np.searchsorted(h.edges, x, side="right")) - 1
            if 0 <= i < len(h.edges) - 1:
                d = float(finite(h.density())[i])
                text = f"{name}: {d:.4g}"
            else:
                text = f"{name}: outside the bins"
            lines.append(f'<span style="color:{rule_color(name)}">{text}</span>')
            plain.append(text)
        self.hover.setHtml(f'<div style="color:{self.theme.foreground}">density<br>'
                           + "<br>".join(lines) + "</div>")
        self.hover.fill = pg.mkBrush(self.theme.background + "E0")
        self.hover.border = pg.mkPen(self.theme.foreground + "80")
        (x0, x1), (_y0, y1) = self.plot.getViewBox().viewRange()
        right = x > (x0 + x1) / 2  # the box sits in the top corner away from the pointer
        self.hover.setAnchor((0, 0) if right else (1, 0))
        self.hover.setPos(x0 if right else x1, y1)
        self.hover.show()
        self.hover_text = "\n".join(plain)
        return self.hover_text

    def hist_of(self, r: RuleResult) -> Histogram:
        raise NotImplementedError

    def sync_rules(self, rules: tuple[str, ...], most: int | None = None) -> bool:
        """Create curves for new rules (at most ``most``) and drop those no longer compared
        (legend follows); True once every rule has its curve."""
        for name in [n for n in self.curves if n not in rules]:
            self.plot.removeItem(self.curves.pop(name))
            self.rule_removed(name)
        for name in rules:
            if name not in self.curves:
                if most is not None and most <= 0:
                    return False
                most = None if most is None else most - 1
                curve = pg.PlotDataItem(stepMode="center", pen=rule_pen(name), name=rule_label(name))
                self.plot.addItem(curve)
                self.curves[name] = curve
                self.rule_added(name)
        return True

    def prepare(self, state: Any, most: int) -> bool:
        return self.sync_rules(tuple(state.snapshot.rules), most)

    def rule_added(self, rule: str) -> None: ...

    def rule_removed(self, rule: str) -> None: ...

    def data_key(self, state: Any) -> Any:
        return (super().data_key(state), self.is_log)

    def draw(self, state: Any) -> None:
        snap: SimulationSnapshot = state.snapshot
        self._live_config = None if snap.done else snap.config
        rules = tuple(snap.rules)
        self.sync_rules(rules)
        self._rows = []
        self._hists = {name: self.hist_of(snap.rules[name]) for name in rules}
        peak = max((float(finite(h.density()).max(initial=0.0)) for h in self._hists.values()),
                   default=1.0)
        self._floor = self.log_floor(peak)
        for name, h in self._hists.items():
            dens = finite(h.density())
            self.curves[name].setData(h.edges, self.y_values(dens, self._floor))
            self._rows.append(partial(hist_rows, name, h.edges, dens))
        self.draw_extra(snap)
        if self._hover_x is not None:  # an open read-out shows the new numbers
            self.show_values_at(self._hover_x)

    def draw_extra(self, snap: SimulationSnapshot) -> None: ...

    def data_rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for row in self._rows:
            if callable(row):
                rows += row()
            else:
                rows.append(row)
        return rows

    def set_title(self, prefix: str, parts: list[str] = (), note: str = "") -> None:
        """The plot's title: ``prefix``, the per-rule ``parts`` as many to a line as the plot's
        width holds (again when it is resized), then ``note`` on a line of its own. While one
        configuration's run streams, the header is laid out at most every HEADER_MIN_S (a
        timer shows the latest); a new configuration's or a final snapshot's at once."""
        self._title = (prefix, list(parts), note)
        live = self._live_config
        wait = HEADER_MIN_S - (time.perf_counter() - self._title_at)
        if live is not None and live == self._title_config and wait > 0:
            if not self._title_timer.isActive():
                self._title_timer.start(max(1, round(wait * 1000)))
            return
        self._fit_title()

    def _fit_title(self, *_args: Any) -> None:
        self._title_timer.stop()
        prefix, parts, note = getattr(self, "_title", ("", [], ""))
        if not (prefix or parts) or self.figure_style is not None:  # (an export keeps its own)
            return
        self._title_config, self._title_at = self._live_config, time.perf_counter()
        room = max(60.0, self.plot.width() - 8)
        text, cut = fit_header(prefix, list(parts), note, room)
        if text != getattr(self, "_title_text", None):
            self._title_text = text
            self.plot.setTitle(text, color=self.theme.foreground, size=f"{TITLE_PT:g}pt")
            whole = prefix + ", ".join(parts) + (f"<br>{note}" if note else "")
            self.plot.titleLabel.setToolTip(whole if cut else "")


    def export_title(self, px: float, room: float) -> str | None:
        """The figure's title: the panel's name and its header, fitted to ``room`` pixels at
        ``px`` (two lines, as on screen)."""
        prefix, parts, note = getattr(self, "_title", ("", [], ""))
        return fit_header(f"<b>{self.title}</b>: {prefix}", list(parts), note, room, px)[0]


class ScoresPanel(RuleHistogramPanel):
    """Raw q·k and each rule's logits, with the normal density theory predicts (dashed)."""

    plot_id = "scores"
    title = "Score histograms"
    x_label = "score q·k / logit (dimensionless)"
    log_toggle = True
    fixed_toggle = True

    def build(self) -> None:
        super().build()
        self.raw_curve = pg.PlotDataItem(stepMode="center", fillLevel=0, name="raw q·k")
        self.raw_theory = pg.PlotDataItem(name="normal theory (dashed)")
        self.plot.addItem(self.raw_curve)
        self.plot.addItem(self.raw_theory)
        self.theory: dict[str, pg.PlotDataItem] = {}
        self.set_title("raw scores and scaled logits")

    def theme_changed(self, theme: Theme) -> None:
        self.raw_curve.setPen(pg.mkPen(theme.raw, width=1.5))
        self.raw_curve.setBrush(pg.mkBrush(theme.raw + "40"))
        self.raw_theory.setPen(pg.mkPen(theme.raw, width=1.5, style=Qt.PenStyle.DashLine))

    def rule_added(self, rule: str) -> None:
        item = pg.PlotDataItem(pen=rule_pen(rule, 1.5, Qt.PenStyle.DashLine))
        self.plot.addItem(item)
        self.theory[rule] = item

    def rule_removed(self, rule: str) -> None:
        self.plot.removeItem(self.theory.pop(rule))

    def hist_of(self, r: RuleResult) -> Histogram:
        return r.logit_hist

    def draw(self, state: Any) -> None:
        snap: SimulationSnapshot = state.snapshot
        super().draw(state)
        raw = snap.raw_hist
        dens = finite(raw.density())
        self.raw_curve.setFillLevel(None if self.is_log else 0)  # a fill to 0 has no log
        self.raw_curve.setData(raw.edges, self.y_values(dens, self._floor))
        rows: list[Any] = [partial(hist_rows, "raw", raw.edges, dens)]
        x = np.linspace(raw.edges[0], raw.edges[-1], THEORY_POINTS)
        self.raw_theory.setData(x, self.y_values(finite(snap.raw_theory.pdf(x)), self._floor))
        for name, r in snap.rules.items():
            e = r.logit_hist.edges
            x = np.linspace(e[0], e[-1], THEORY_POINTS)
            y = finite(r.logit_theory.pdf(x))
            self.theory[name].setData(x, self.y_values(y, self._floor))
            rows.append(partial(_theory_rows, name, x, y))
        self._rows = rows + self._rows
        approx = [name for name, r in snap.rules.items() if not r.logit_theory.exact_moments]
        # on its own line: appended, it ran past both edges of the panel
        # (the dashed normal theory is named by the page's rule strip and by the legend)
        note = f"({', '.join(approx)}: large-d_k approximation)" if approx else ""
        self.set_title(f"raw q·k std {snap.raw_std.mean:.3g} "
                       f"(theory {math.sqrt(snap.raw_theory.var):.3g})", note=note)


class TopWeightPanel(RuleHistogramPanel):
    """Distribution of the largest softmax weight per row, threshold marked, saturation read out."""

    plot_id = "top_weight"
    title = "Top weight"
    x_label = "top softmax weight max_j p_j"

    def build(self) -> None:
        super().build()
        self.threshold = pg.InfiniteLine(angle=90, movable=False,
                                         label="threshold {value:.3g}",
                                         labelOpts={"position": 0.55, "anchors": [(1, 0), (1, 0)]})
        self.plot.addItem(self.threshold)
        self.plot.setXRange(0, 1, padding=0.02)

    def theme_changed(self, theme: Theme) -> None:
        self.threshold.setPen(pg.mkPen(theme.foreground, width=1, style=Qt.PenStyle.DashLine))
        self.threshold.label.setColor(theme.foreground)

    def hist_of(self, r: RuleResult) -> Histogram:
        return r.top_weight_hist

    def draw_extra(self, snap: SimulationSnapshot) -> None:
        self.threshold.setValue(snap.config.saturation_threshold)
        parts = [_span(n, f"{n} {_pct(r.saturated_frac)}") for n, r in snap.rules.items()]
        self.set_title(f"saturated (&gt;{snap.config.saturation_threshold:g}): ", parts)
        for n, r in snap.rules.items():
            self._rows.append({"series": f"{n}_saturated_frac", "value": r.saturated_frac.mean,
                               "se": r.saturated_frac.se})


class EntropyPanel(RuleHistogramPanel):
    """Attention entropy divided by its ceiling log(n): 0 = one-hot, 1 = uniform."""

    plot_id = "entropy"
    title = "Entropy / log(n)"
    x_label = "normalized entropy H / log n"

    def build(self) -> None:
        super().build()
        self.plot.setXRange(0, 1, padding=0.02)

    def hist_of(self, r: RuleResult) -> Histogram:
        return r.entropy_norm_hist

    def draw_extra(self, snap: SimulationSnapshot) -> None:
        parts = [_span(n, f"{n} {r.entropy_norm.mean:.3f}") for n, r in snap.rules.items()]
        self.set_title("mean H/log n: ", parts)


class JacobianPanel(RuleHistogramPanel):
    """Frobenius norm of each row's softmax Jacobian on a log10 axis, with the mean marked."""

    plot_id = "jacobian"
    title = "Jacobian size"
    x_label = "log₁₀ ‖J‖<sub>F</sub> of the softmax Jacobian"

    def build(self) -> None:
        super().build()
        self.means: dict[str, pg.InfiniteLine] = {}

    def rule_added(self, rule: str) -> None:
        line = pg.InfiniteLine(angle=90, movable=False, pen=rule_pen(rule, 1.5, Qt.PenStyle.DashLine))
        self.plot.addItem(line)
        self.means[rule] = line

    def rule_removed(self, rule: str) -> None:
        self.plot.removeItem(self.means.pop(rule))

    def hist_of(self, r: RuleResult) -> Histogram:
        return r.log10_jacobian_hist

    def draw_extra(self, snap: SimulationSnapshot) -> None:
        lo, hi = math.inf, -math.inf
        parts = []
        for n, r in snap.rules.items():
            m = r.jacobian_fro.mean
            if m > 0 and math.isfinite(m):
                self.means[n].setValue(math.log10(m))
                self.means[n].show()
            else:
                self.means[n].hide()
            parts.append(_span(n, f"{n} {m:.3g}"))
            self._rows.append({"series": f"{n}_jacobian_fro_mean", "value": m, "se": r.jacobian_fro.se})
            h = r.log10_jacobian_hist
            nz = np.nonzero(h.counts)[0]
            if nz.size:
                lo, hi = min(lo, h.edges[nz[0]]), max(hi, h.edges[nz[-1] + 1])
        if hi > lo:
            self.plot.setXRange(lo, hi, padding=0.05)
        # rows below the first edge are counted but not drawn: a rule with all its rows there
        # showed a flat line at 0 and nothing else
        below, edge = [], 0.0
        for n, r in snap.rules.items():
            h = r.log10_jacobian_hist
            edge = float(h.edges[0])
            if h.underflow and h.total:
                below.append(_span(n, f"{n} {100 * h.underflow / h.total:.3g}%"))
        note = f"not drawn, below 1e{edge:.0f}: " + ", ".join(below) if below else ""
        self.set_title("mean ‖J‖_F (dashed): ", parts, note)
