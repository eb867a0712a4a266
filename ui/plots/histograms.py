"""The four distribution plots: scores/logits, top weight, entropy/log(n), Jacobian size.

Each rule is one step curve in its own colour (ui.theme.RULE_COLORS); curves are created when a
rule appears and updated with setData afterwards. The engine computed every number shown.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from engine.simulate import RuleResult, SimulationSnapshot
from engine.stats import Estimate, Histogram
from ui.plots.base import PlotPanel, finite, hist_rows, rule_label, rule_pen
from ui.theme import Theme, rule_color

THEORY_POINTS = 400


def _pct(e: Estimate) -> str:
    """Mean ± one standard error, as in the results table (a bare ± must mean the same there)."""
    return f"{100 * e.mean:.1f}% ± {100 * e.se:.1f}"


def _join(parts: list[str], per_line: int = 3) -> str:
    """Per-rule summaries, three to a line: six on one line run past both edges of the panel."""
    return ",<br>".join(", ".join(parts[i:i + per_line]) for i in range(0, len(parts), per_line))


def _span(rule: str, text: str) -> str:
    return f'<span style="color:{rule_color(rule)}">{text}</span>'


class RuleHistogramPanel(PlotPanel):
    """One step curve per rule of ``hist_of(rule_result)``; subclasses add markers and titles."""

    x_label = ""
    x_units: str | None = None

    def build(self) -> None:
        self.plot = self.add_plot(0, 0, self.x_label, "probability density", x_units=self.x_units)
        self.curves: dict[str, pg.PlotDataItem] = {}
        self._rows: list[dict[str, Any]] = []

    def hist_of(self, r: RuleResult) -> Histogram:
        raise NotImplementedError

    def sync_rules(self, rules: tuple[str, ...]) -> None:
        """Create curves for new rules and drop those no longer compared (legend follows)."""
        for name in [n for n in self.curves if n not in rules]:
            self.plot.removeItem(self.curves.pop(name))
            self.rule_removed(name)
        for name in rules:
            if name not in self.curves:
                curve = pg.PlotDataItem(stepMode="center", pen=rule_pen(name), name=rule_label(name))
                self.plot.addItem(curve)
                self.curves[name] = curve
                self.rule_added(name)

    def rule_added(self, rule: str) -> None: ...

    def rule_removed(self, rule: str) -> None: ...

    def draw(self, state: Any) -> None:
        snap: SimulationSnapshot = state.snapshot
        rules = tuple(snap.rules)
        self.sync_rules(rules)
        self._rows = []
        for name in rules:
            h = self.hist_of(snap.rules[name])
            dens = finite(h.density())
            self.curves[name].setData(h.edges, dens)
            self._rows += hist_rows(name, h.edges, dens)
        self.draw_extra(snap)

    def draw_extra(self, snap: SimulationSnapshot) -> None: ...

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)

    def set_title(self, html: str) -> None:
        self.plot.setTitle(html, color=self.theme.foreground, size="9pt")


class ScoresPanel(RuleHistogramPanel):
    """Raw q·k and each rule's logits, with the normal density theory predicts (dashed)."""

    plot_id = "scores"
    title = "Score histograms"
    x_label = "score q·k / logit (dimensionless)"

    def build(self) -> None:
        super().build()
        self.raw_curve = pg.PlotDataItem(stepMode="center", fillLevel=0, name="raw q·k")
        self.raw_theory = pg.PlotDataItem(name="normal theory (dashed)")
        self.plot.addItem(self.raw_curve)
        self.plot.addItem(self.raw_theory)
        self.theory: dict[str, pg.PlotDataItem] = {}
        self.set_title("raw scores and scaled logits; dashed: normal theory")

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
        self.raw_curve.setData(raw.edges, dens)
        rows = hist_rows("raw", raw.edges, dens)
        x = np.linspace(raw.edges[0], raw.edges[-1], THEORY_POINTS)
        self.raw_theory.setData(x, finite(snap.raw_theory.pdf(x)))
        for name, r in snap.rules.items():
            e = r.logit_hist.edges
            x = np.linspace(e[0], e[-1], THEORY_POINTS)
            y = finite(r.logit_theory.pdf(x))
            self.theory[name].setData(x, y)
            rows += [{"series": f"{name}_theory", "x": float(a), "density": float(b)}
                     for a, b in zip(x, y, strict=False)]
        self._rows = rows + self._rows
        approx = [name for name, r in snap.rules.items() if not r.logit_theory.exact_moments]
        # on its own line: appended, it ran past both edges of the panel
        note = f"<br>({', '.join(approx)}: large-d_k approximation)" if approx else ""
        self.plot.setTitle(
            f"raw q·k std {snap.raw_std.mean:.3g} (theory {math.sqrt(snap.raw_theory.var):.3g});"
            f" dashed: normal theory{note}", color=self.theme.foreground, size="9pt")


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
        self.set_title(f"saturated (&gt;{snap.config.saturation_threshold:g}): "
                       + _join(parts, per_line=2))  # "none 36.1% ± 0.8" is long
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
        self.set_title("mean H/log n: " + _join(parts))


class JacobianPanel(RuleHistogramPanel):
    """Frobenius norm of each row's softmax Jacobian on a log10 axis, with the mean marked."""

    plot_id = "jacobian"
    title = "Jacobian size"
    x_label = "log10 ‖J‖_F of the softmax Jacobian"

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
        note = f"<br>not drawn, below 1e{edge:.0f}: " + ", ".join(below) if below else ""
        self.set_title("mean ‖J‖_F (dashed): " + _join(parts) + note)
