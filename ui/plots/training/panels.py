"""The Training page's plots: curves vs step and two heatmaps, one colour per rule everywhere.

Each panel is a :class:`ui.plots.base.PlotPanel` (theming, redraw-when-changed-and-visible,
PNG/SVG/CSV export). ``state`` is a :class:`TrainingView`: the latest snapshot plus the chosen
run/layer/head of the heatmaps. Panels only draw what the engine measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QCheckBox

from engine.rules import rule_label
from ui.plots.finite import finite
from ui.plots.log_ticks import log_ticks
from ui.plots.rule_pens import symbol_style
from ui.plots.training.base import TrainingPanel, TrainingView
from ui.plots.training.lengths import LengthPanel
from ui.theme import rule_color  # one colour per rule on every page, the two bugs included

#: per-head curves drawn per run at most (more heads: their mean only)
MAX_HEAD_CURVES = 32
LOG_FLOOR = 1e-12  #: values drawn on a log axis are clipped here (a zero has no logarithm)


class _CurvesPanel(TrainingPanel):
    """One curve per run (``per_head``: one per run, layer and head; the legend names runs)."""

    y_label = ""
    y_units: str | None = None
    log_y = False
    per_head = True
    log_toggle = False

    def build(self) -> None:
        self.plot = self.add_plot(0, 0, "step", self.y_label, y_units=self.y_units)
        self.log_box: QCheckBox | None = None
        if self.log_toggle:
            self.log_box = QCheckBox("log y", self)
            self.log_box.setChecked(self.log_y)
            self.log_box.setToolTip("Logarithmic y axis")
            self.log_box.toggled.connect(self._set_log)
            self.header.insertWidget(2, self.log_box)
        self.plot.setLogMode(y=self.log_y)
        self.plot.getViewBox().sigYRangeChanged.connect(self._log_ticks)
        self._log_ticks(None, self.plot.viewRange()[1])  # the empty plot too (no range change yet)
        self.curves: dict[tuple, pg.PlotDataItem] = {}
        self._layout: Any = None
        self._rows: list[dict[str, Any]] = []
        self.extra_items()

    def extra_items(self) -> None:
        """Subclasses add fixed items (threshold lines, markers)."""

    def extra_key(self) -> Any:
        return self.log_box.isChecked() if self.log_box is not None else None

    def view_controls(self) -> dict[str, Any]:
        return {"log_y": self.log_box} if self.log_box is not None else {}

    def _log_ticks(self, _vb: Any, rng: Any) -> None:
        """Decade labels that follow the view (pyqtgraph's own log labels crowd); within less
        than a decade, where they would label fewer than two ticks, pyqtgraph's own."""
        ticks = log_ticks(*rng) if self.is_log else None
        self.plot.getAxis("left").setTicks(ticks if ticks and len(ticks[0]) >= 2 else None)

    def _set_log(self, on: bool) -> None:
        self.plot.setLogMode(y=on)
        if not on:
            self.plot.getAxis("left").setTicks(None)
        self.invalidate()

    @property
    def is_log(self) -> bool:
        return self.log_box.isChecked() if self.log_box is not None else self.log_y

    def copy_view_to(self, clone: Any) -> None:
        """log y as the user set it."""
        if clone.log_box is not None and clone.log_box.isChecked() != self.is_log:
            clone.log_box.setChecked(self.is_log)
            clone.refresh(self._state, force=True)

    def series(self, snap: Any) -> list[tuple[tuple, str, Qt.PenStyle, float, bool]]:
        """(key, rule, style, width, named) of every curve for this snapshot's shape."""
        out = []
        _, _, n_layers, n_heads = snap.heads["entropy_norm"].shape
        many = n_layers * n_heads > MAX_HEAD_CURVES
        for rule in snap.rules:
            if self.per_head and not many:
                for layer in range(n_layers):
                    for head in range(n_heads):
                        first = layer == 0 and head == 0
                        out.append(((rule, layer, head), rule, Qt.PenStyle.SolidLine,
                                    2.0 if n_layers * n_heads == 1 else 1.3, first))
            else:
                out.append(((rule, -1, -1), rule, Qt.PenStyle.SolidLine, 2.0, True))
        return out

    def _sync(self, snap: Any) -> None:
        shape = (snap.rules, snap.heads["entropy_norm"].shape[2:])
        if shape == self._layout:
            return
        for item in self.curves.values():
            self.plot.removeItem(item)
        self.curves = {}
        for key, rule, style, width, named in self.series(snap):
            item = pg.PlotDataItem(pen=pg.mkPen(rule_color(rule), width=width, style=style),
                                   name=self.curve_name(key, rule) if named else None)
            self.plot.addItem(item)
            self.curves[key] = item
        self._layout = shape

    def curve_name(self, key: tuple, rule: str) -> str:
        return rule_label(rule)

    def values(self, snap: Any, key: tuple, r: int) -> np.ndarray:
        """(n_logs,) values of one curve (all logs; invalid ones are dropped by the caller)."""
        raise NotImplementedError

    def draw(self, state: Any) -> None:
        snap = state.snapshot
        self._sync(snap)
        self._rows = []
        steps = snap.log_steps
        for key, item in self.curves.items():
            r = snap.rules.index(key[0])
            ok = snap.valid[:, r]
            y = finite(self.values(snap, key, r))[ok]
            x = steps[ok].astype(np.float64)
            if self.is_log:
                y = np.maximum(y, LOG_FLOOR)
            item.setData(x, y)
            layer, head = key[1], key[2]
            self._rows += [{"scaling": key[0], "layer": layer, "head": head, "step": int(s),
                            "value": float(v)} for s, v in zip(x, y, strict=True)]
        self.draw_extra(snap)

    def draw_extra(self, snap: Any) -> None:
        """Markers that depend on the snapshot."""

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)


class LossPanel(_CurvesPanel):
    plot_id = "train_loss"
    title = "Training loss"
    y_label = "cross-entropy loss (nats)"
    log_y = True
    log_toggle = True
    per_head = False

    def extra_items(self) -> None:
        self.diverged = pg.ScatterPlotItem(symbol="x", size=14, brush=None)
        self.plot.addItem(self.diverged)

    def theme_changed(self, theme: Any) -> None:
        super().theme_changed(theme)
        self.diverged.setPen(pg.mkPen(theme.error, width=2.5))

    def values(self, snap: Any, key: tuple, r: int) -> np.ndarray:
        return snap.scalars["loss"][:, r]

    def draw_extra(self, snap: Any) -> None:
        """A red cross at the last good loss of each diverged run."""
        pts = []
        for r, _rule in enumerate(snap.rules):
            if snap.diverged_step[r] < 0:
                continue
            ok = np.flatnonzero(snap.valid[:, r])
            y = float(snap.scalars["loss"][ok[-1], r]) if ok.size else 1.0
            y = max(y, LOG_FLOOR)
            pts.append({"pos": (float(snap.diverged_step[r]), np.log10(y) if self.is_log else y),
                        "data": r})
        self.diverged.setData(pts)


class AccuracyPanel(_CurvesPanel):
    plot_id = "train_accuracy"
    title = "Accuracy"
    y_label = "accuracy (training batches)"
    per_head = False

    def extra_items(self) -> None:
        self.plot.setYRange(0.0, 1.0, padding=0.02)
        self.chance = pg.InfiniteLine(angle=0, movable=False,
                                      pen=pg.mkPen("#7F7F7F", width=1, style=Qt.PenStyle.DashLine),
                                      # above the line, ending at its right end: centred on
                                      # the line the label was cut at the plot's edge and lay
                                      # on the curves
                                      label="chance",
                                      labelOpts={"position": 0.98, "anchors": [(1, 1), (1, 1)],
                                                 "color": "#7F7F7F"})
        self.plot.addItem(self.chance)

    def values(self, snap: Any, key: tuple, r: int) -> np.ndarray:
        return snap.scalars["accuracy"][:, r]

    def draw_extra(self, snap: Any) -> None:
        self.chance.setValue(1.0 / snap.config.classes)


class _HeadMetricPanel(_CurvesPanel):
    metric = ""

    def values(self, snap: Any, key: tuple, r: int) -> np.ndarray:
        arr = snap.heads[self.metric][:, r]
        if key[1] < 0:
            return arr.mean(axis=(1, 2))
        return arr[:, key[1], key[2]]


class EntropyPanel(_HeadMetricPanel):
    plot_id = "train_entropy"
    title = "Attention entropy per head"
    y_label = "entropy / log(n)"
    metric = "entropy_norm"

    def extra_items(self) -> None:
        self.plot.setYRange(0.0, 1.0, padding=0.02)
        # a low-entropy marker, not a failure: a right answer may attend to one key (one-hot);
        # neutral colours, never the error red
        self.threshold = pg.InfiniteLine(angle=0, movable=False, label="low entropy",
                                         labelOpts={"position": 0.98,
                                                    "anchors": [(1, 1), (1, 1)]})
        self.plot.addItem(self.threshold)
        self.collapsed = pg.ScatterPlotItem(symbol="d", size=11)
        self.plot.addItem(self.collapsed)

    def theme_changed(self, theme: Any) -> None:
        super().theme_changed(theme)
        self.threshold.setPen(pg.mkPen(theme.foreground, width=1, style=Qt.PenStyle.DotLine))
        self.threshold.label.setColor(theme.foreground)
        self.collapsed.setPen(pg.mkPen(theme.foreground, width=1.5))

    def draw_extra(self, snap: Any) -> None:
        """A diamond in the rule's colour where each head's entropy went and stayed below the
        low-entropy line (the threshold)."""
        self.threshold.setValue(snap.config.collapse_threshold)
        pts = []
        for r, layer, head in zip(*np.nonzero(snap.collapse_step >= 0), strict=True):
            s = int(snap.collapse_step[r, layer, head])
            i = np.flatnonzero(snap.log_steps == s)
            y = float(snap.heads["entropy_norm"][i[0], r, layer, head]) if i.size else 0.0
            pts.append({"pos": (float(s), y), "brush": pg.mkBrush(rule_color(snap.rules[r]))})
        self.collapsed.setData(pts)


class LogitStdPanel(_HeadMetricPanel):
    plot_id = "train_logit_std"
    title = "Logit std per head"
    y_label = "pre-softmax logit std"
    metric = "logit_std"
    log_y = True
    log_toggle = True


class JacobianPanel(_HeadMetricPanel):
    plot_id = "train_jacobian"
    title = "Jacobian size per head"
    y_label = "mean ‖diag(p) − ppᵀ‖<sub>F</sub>"
    metric = "jacobian_fro"


class GradPanel(_CurvesPanel):
    plot_id = "train_grads"
    title = "Gradient norms"
    y_label = "‖∂loss/∂W‖"
    log_y = True
    log_toggle = True
    STYLES = (("grad_norm_q", Qt.PenStyle.SolidLine), ("grad_norm_k", Qt.PenStyle.DashLine),
              ("grad_norm_v", Qt.PenStyle.DotLine))

    #: which weight matrix each line style is (the colour is the rule's): on screen an entry
    #: of the page's rule strip (:func:`ui.plots.rule_strip.style_key_part`); as the plot's title
    #: it took a row of a plot 140 px high in presentation mode, and its y title shrank to what
    #: was left
    STYLE_KEY = tuple(zip(("W_Q", "W_K", "W_V"), (style for _m, style in STYLES)))
    EXPORT_TITLE = "solid W_Q · dash W_K · dot W_V"

    def extra_items(self) -> None:
        # an exported figure has no strip: there the key is its title (style_panel reads the
        # hidden title's text)
        self.plot.titleLabel.setText(self.EXPORT_TITLE, size="8pt")
        self.plot.setTitle(None)

    def series(self, snap: Any) -> list[tuple[tuple, str, Qt.PenStyle, float, bool]]:
        return [((rule, metric, -1), rule, style, 1.8, metric == "grad_norm_q")
                for rule in snap.rules for metric, style in self.STYLES]

    def values(self, snap: Any, key: tuple, r: int) -> np.ndarray:
        return snap.heads[key[1]][:, r].mean(axis=(1, 2))


#: the links of dL/dq = (1/c) sum_j (J g)_j k_j, then W_Q: (metric, tick label), in the order the
#: gradient meets them on its way back (engine.training.gradients)
CHAIN_LINKS = (("grad_norm_attn", "p"), ("grad_norm_logits", "z"), ("grad_norm_scores", "q·k"),
               ("grad_norm_query", "q"), ("grad_norm_q", "W_Q"))
RULE_SYMBOLS = {"none": "o", "sqrt": "s", "dk": "t"}


class GradChainPanel(_CurvesPanel):
    """The gradient link by link at one log step: upstream at the weights p, after the softmax
    Jacobian (logits z), after the divisor 1/c (raw scores q·k), at the query q, at W_Q. One line
    per rule (means over layers and heads): where a line falls, that link shrinks the gradient."""

    plot_id = "train_grad_chain"
    title = "Gradient chain"
    y_label = "‖∂L/∂x‖"
    log_y = True
    log_toggle = False
    per_head = False

    def build(self) -> None:
        super().build()
        self.plot.setLabel("bottom", "x, back from p to W_Q")
        axis = self.plot.getAxis("bottom")
        axis.setTicks([[(float(i), text) for i, (_, text) in enumerate(CHAIN_LINKS)]])
        # all five labels, even in a narrow panel (the defaults dropped "W_Q", the last one)
        axis.setStyle(hideOverlappingLabels=False, textFillLimits=[(0, 1.0)])
        self.plot.setXRange(-0.6, len(CHAIN_LINKS) - 0.4, padding=0)
        self.plot.getViewBox().setMouseEnabled(x=False)  # five fixed links, nothing to pan
        self.at_init = QCheckBox("step 0", self)
        self.at_init.setToolTip("Show the chain at initialization instead of the latest logged "
                                "step")
        self.at_init.toggled.connect(lambda _on: self.invalidate())
        self.header.insertWidget(2, self.at_init)

    def extra_key(self) -> Any:
        return self.at_init.isChecked()

    def series(self, snap: Any) -> list[tuple[tuple, str, Qt.PenStyle, float, bool]]:
        return [((rule, -1, -1), rule, Qt.PenStyle.SolidLine, 2.0, True) for rule in snap.rules]

    def draw(self, state: Any) -> None:
        snap = state.snapshot
        self._sync(snap)
        self._rows = []
        step = None
        for key, item in self.curves.items():
            rule = key[0]
            r = snap.rules.index(rule)
            logs = np.flatnonzero(snap.valid[:, r])
            if logs.size == 0:
                item.setData([], [])
                continue
            i = int(logs[0] if self.at_init.isChecked() else logs[-1])
            step = int(snap.log_steps[i])
            y = finite(np.array([snap.heads[m][i, r].mean() for m, _ in CHAIN_LINKS]))
            y = np.maximum(y, LOG_FLOOR)
            x = np.arange(len(CHAIN_LINKS), dtype=np.float64)
            item.setData(x, y, symbol=RULE_SYMBOLS.get(rule, "o"), symbolSize=7,
                         **symbol_style(rule_color(rule), rule_color(rule)))
            self._rows += [{"scaling": rule, "step": step, "link": m, "value": float(v)}
                           for (m, _), v in zip(CHAIN_LINKS, y, strict=True)]
        self.plot.setXRange(-0.6, len(CHAIN_LINKS) - 0.4, padding=0)  # (refresh autoranges)
        self.plot.setTitle(f"at step {step}" if step is not None else "", size="9pt",
                           color=self.theme.foreground)

    def clear_data(self) -> None:
        super().clear_data()
        self.plot.titleLabel.setText("")  # it named the step of the old run
        self.plot.setTitle(None)


class LogitDistributionPanel(TrainingPanel):
    """Step x bin heatmap of the chosen head's logits (every bin kept) with percentile lines."""

    plot_id = "train_logit_dist"
    title = "Logit distribution over steps"
    uses_selection = True

    def build(self) -> None:
        # y is drawn in bin-index space (the engine's bins are asinh-spaced), labelled in logits
        # short labels: four panels share a 1280 px row, and the longer ones (a three-line y
        # label, "fraction of logits per bin" on the bar) left the heatmap 40 px wide
        self.plot = self.add_plot(0, 0, "step", "logit (asinh)", legend=False)
        self.image, self.cbar = self.add_heatmap(self.plot, "fraction per bin", width=10)
        self.lines: list[pg.PlotDataItem] = []
        self._rows: list[dict[str, Any]] = []

    def draw(self, state: Any) -> None:
        snap = state.snapshot
        r, layer, head = _clamp_selection(snap, state)
        ok = snap.valid[:, r]
        steps = snap.log_steps[ok].astype(np.float64)
        counts = snap.logit_hist[ok, r, layer, head].astype(np.float64)
        outside = snap.logit_outside[ok, r, layer, head]
        pct = finite(snap.logit_percentiles[ok, r, layer, head])
        edges = snap.hist_edges
        rule = snap.rules[r]
        self.plot.setTitle(f"{rule}, layer {layer}, head {head}", size="9pt",
                           color=self.theme.foreground)
        self._rows = []
        if steps.size == 0:
            self.image.clear()
            for line in self.lines:
                line.setData([], [])
            return
        totals = np.maximum(counts.sum(axis=1) + outside.sum(axis=1), 1)
        frac = counts / totals[:, None]
        self.image.setImage(frac, autoLevels=False)
        top = float(frac.max()) if frac.size else 1.0
        self.cbar.setLevels((0.0, max(top, 1e-9)))
        dx = float(np.median(np.diff(steps))) if steps.size > 1 else 1.0
        bins = len(edges) - 1
        self.image.setRect(QRectF(steps[0] - dx / 2, 0.0, steps[-1] - steps[0] + dx, bins))
        n_lines = pct.shape[1]
        while len(self.lines) < n_lines:
            self.lines.append(self.plot.plot([], []))
        for j, line in enumerate(self.lines):
            mid = j == n_lines // 2
            line.setPen(pg.mkPen("#FFFFFF" if mid else "#FFFFFFA0", width=2.0 if mid else 1.0,
                                 style=Qt.PenStyle.SolidLine if mid else Qt.PenStyle.DashLine))
            line.setData(steps, self.to_y(pct[:, j], edges))
        lo, hi = (float(v) for v in self.to_y(np.array([pct.min(), pct.max()]), edges))
        pad = 0.05 * max(hi - lo, 2.0)
        lo, hi = max(lo - pad, 0.0), min(hi + pad, float(bins))
        self.plot.setYRange(lo, hi, padding=0)
        self.plot.getAxis("left").setTicks([self.ticks(edges, lo, hi)])
        self.plot.setXRange(steps[0] - dx / 2, steps[-1] + dx / 2, padding=0)
        for i, s in enumerate(steps):
            row = {"scaling": rule, "layer": layer, "head": head, "step": int(s)}
            row.update({f"p{p:g}": float(v) for p, v in zip(snap.percentiles, pct[i], strict=True)})
            self._rows.append(row)

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)

    @staticmethod
    def to_y(logits: np.ndarray, edges: np.ndarray) -> np.ndarray:
        """Logit values -> the image's y (bin-index space: bin i spans [i, i + 1])."""
        return np.interp(logits, edges, np.arange(len(edges), dtype=np.float64))

    @classmethod
    def ticks(cls, edges: np.ndarray, lo: float, hi: float) -> list[tuple[float, str]]:
        """Ticks at 0 and ±{1, 2, 5} x 10^k logits inside the visible y range [lo, hi] (bin
        index), at least a tenth of the range apart: 0 and the largest decades win."""
        mags = [m * 10.0**k for k in range(6, -5, -1) for m in (1, 5, 2)]
        candidates = [0.0, *(v for m in mags for v in (m, -m))]
        candidates.sort(key=lambda v: (v != 0, not np.isclose(np.log10(abs(v) or 1) % 1, 0)))
        gap = (hi - lo) / 10
        out: list[tuple[float, str]] = []
        for v in candidates:
            if not edges[0] <= v <= edges[-1]:
                continue
            y = float(cls.to_y(np.array([v]), edges)[0])
            if lo <= y <= hi and all(abs(y - t) >= gap for t, _ in out):
                out.append((y, f"{v:g}"))
        return sorted(out)


class ProbeAttentionPanel(TrainingPanel):
    """The fixed probe example's attention weights for the chosen run/layer/head."""

    plot_id = "train_probe_attention"
    title = "Probe attention weights"
    uses_selection = True

    def build(self) -> None:
        self.plot = self.add_plot(0, 0, "key position", "query position", legend=False)
        self.plot.invertY(True)
        self.image, self.cbar = self.add_heatmap(self.plot, "weight p")
        self._rows: list[dict[str, Any]] = []

    def draw(self, state: Any) -> None:
        snap = state.snapshot
        r, layer, head = _clamp_selection(snap, state)
        w = finite(snap.probe_weights[r, layer, head])  # (query, key)
        self.image.setImage(w.T, autoLevels=False)  # image[x = key, y = query]
        # cell (key k, query q) centred on (k, q), so the tick k sits in the middle of its cell
        n_q, n_k = w.shape
        self.image.setRect(QRectF(-0.5, -0.5, n_k, n_q))
        self.plot.getAxis("bottom").setTicks(cell_ticks(n_k, self.plot.getViewBox().width()))
        self.plot.getAxis("left").setTicks(cell_ticks(n_q, self.plot.getViewBox().height()))
        self.cbar.setLevels((0.0, 1.0))
        task = "query 0, items 1.." if snap.config.task == "retrieval" else "k v pairs, kq last"
        self.plot.setTitle(f"{snap.rules[r]}, layer {layer}, head {head}, step {snap.step} "
                           f"({task})", size="9pt", color=self.theme.foreground)
        self._rows = [{"query": int(i), "key": int(j), "weight": float(w[i, j])}
                      for i in range(w.shape[0]) for j in range(w.shape[1])]

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)


def cell_ticks(n: int, pixels: float, min_px: float = 14.0) -> list[list[tuple[float, str]]]:
    """One tick at the centre of each of ``n`` cells, every one labelled where ``pixels`` leave
    ``min_px`` per label (else every k-th labelled, the rest minor ticks)."""
    step = 1
    while n / step * min_px > max(pixels, min_px) and step < n:
        step += 1
    major = [(float(i), str(i)) for i in range(0, n, step)]
    minor = [(float(i), "") for i in range(n) if i % step]
    return [major, minor]


def _clamp_selection(snap: Any, state: TrainingView) -> tuple[int, int, int]:
    _, n_runs, n_layers, n_heads = snap.heads["entropy_norm"].shape
    return (min(max(state.run, 0), n_runs - 1), min(max(state.layer, 0), n_layers - 1),
            min(max(state.head, 0), n_heads - 1))


#: every panel, in page order
PANEL_CLASSES: tuple[type[TrainingPanel], ...] = (
    LossPanel, AccuracyPanel, EntropyPanel, LogitStdPanel, GradPanel, JacobianPanel,
    GradChainPanel, LogitDistributionPanel, ProbeAttentionPanel, LengthPanel,
)
