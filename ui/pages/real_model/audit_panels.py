"""The Real-model page's scale audit and what-if plots.

* :class:`AuditPanel`: a layer x head grid of s * sqrt(d_k) on a diverging colour scale centred on
  1 (log2 scale, colour bar), the verdict of every layer in words, a hover read-out of one head,
  and the "break it" controls (inject a bug into a layer and rerun).
* :class:`WhatIfPanel`: entropy / log n, saturated fraction and output similarity (or perplexity)
  against the logit multiplier m on a log axis with the model's own scale marked, and a slider for
  m that picks the per-head grids shown below.

The page runs the engine (``engine.probe.audit`` / ``whatif``) in its worker and hands the
results here; items are created once and updated with setImage / setData.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QRectF, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QLabel,
    QPushButton,
    QScrollArea,
    QSlider,
    QSpinBox,
)

from engine.probe.audit import AuditResult, position_text
from engine.probe.inject import BUG_KINDS
from engine.probe.scale_fit import is_flagged
from engine.probe.whatif import WhatIfResult
from ui.pages.real_model.panels import Placeholder, _int_ticks, recolour_legend
from ui.plots.base import PlotPanel
from ui.plots.finite import finite
from ui.plots.rule_pens import symbol_brush, symbol_pen
from ui.theme import Theme, rule_color

AUDIT_HOVER_HINT = "hover a head for its fit"
#: the most height the per-layer verdict lines take before they scroll (px)
VERDICT_HEIGHT = 150
#: the colour scale spans at least 2^-3 .. 2^3 of s * sqrt(d_k) (twice / unscaled at d_k = 64)
MIN_LOG2_SPAN = 3.0


def multiplier_ticks(m: np.ndarray) -> list[list[tuple[float, str]]]:
    """Ticks of a log axis of m: powers of two labelled as fractions (1/8 ... 8), the other
    multipliers unlabelled. pyqtgraph's own log ticks label 0.5 ... 0.9 on top of each other."""
    lo, hi = float(np.min(m)), float(np.max(m))
    major = [(math.log10(2.0**e), f"1/{2**-e}" if e < 0 else f"{2**e}")
             for e in range(math.floor(math.log2(lo) + 1e-9), math.ceil(math.log2(hi) - 1e-9) + 1)
             if lo * (1 - 1e-9) <= 2.0**e <= hi * (1 + 1e-9)]
    labelled = {round(v, 9) for v, _ in major}
    minor = [(math.log10(float(x)), "") for x in m if round(math.log10(float(x)), 9) not in labelled]
    return [major, minor]


@dataclass(frozen=True)
class AuditView:
    result: AuditResult


@dataclass(frozen=True)
class WhatIfView:
    result: WhatIfResult
    index: int  #: the multiplier the grids show
    standard_m: float | None  #: m that would give 1/sqrt(d_k) (from the audit), if known


class _LeaveFilter(QObject):
    """Calls ``on_leave`` when the pointer leaves the watched widget."""

    def __init__(self, parent: QObject, on_leave: Any) -> None:
        super().__init__(parent)
        self.on_leave = on_leave

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Leave:
            self.on_leave()
        return False


class AuditPanel(PlotPanel):
    figure_page = "real_model"
    plot_id = "scale_audit"
    title = "Scale audit"
    run_requested = Signal()
    inject_requested = Signal(int, str)  #: (layer, kind)
    clear_requested = Signal()
    run_changed = Signal(int)  #: the Training lab run to show (index)

    def build(self) -> None:
        self.run_button = QPushButton("Audit", self)
        self.run_button.setToolTip("Fit the scale every head applies (one forward pass, eager "
                                   "attention)")
        self.run_button.clicked.connect(self.run_requested.emit)
        self.layer_spin = QSpinBox(self)
        self.layer_spin.setPrefix("layer ")
        self.layer_spin.setRange(0, 0)
        self.kind_box = QComboBox(self)
        for kind, text in BUG_KINDS.items():
            self.kind_box.addItem(kind, kind)
            self.kind_box.setItemData(self.kind_box.count() - 1, text, Qt.ItemDataRole.ToolTipRole)
        self.inject_button = QPushButton("Break it", self)
        self.inject_button.setToolTip("Plant this scaling bug in this layer of the loaded model "
                                      "and audit again")
        self.inject_button.clicked.connect(
            lambda: self.inject_requested.emit(self.layer_spin.value(), self.kind_box.currentData()))
        self.clear_button = QPushButton("Repair", self)
        self.clear_button.setToolTip("Remove every planted bug and audit again")
        self.clear_button.clicked.connect(self.clear_requested.emit)
        self.run_box = QComboBox(self)
        self.run_box.setToolTip("The Training lab run (scaling rule) whose audit is shown")
        self.run_box.currentIndexChanged.connect(self.run_changed.emit)
        self.run_box.setVisible(False)
        self._training = False
        for i, w in enumerate((self.run_button, self.run_box, self.layer_spin, self.kind_box,
                               self.inject_button, self.clear_button)):
            self.header.insertWidget(1 + i, w)
        self.hover_label = QLabel(AUDIT_HOVER_HINT)
        self.hover_label.setWordWrap(True)
        self.verdict_label = QLabel("")
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        # one line per layer with its block and features: a 32-layer model scrolls, the grid
        # keeps its room
        self.verdict_scroll = QScrollArea(self)
        self.verdict_scroll.setObjectName("audit_verdicts")
        self.verdict_scroll.setWidgetResizable(True)
        self.verdict_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.verdict_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.verdict_scroll.setWidget(self.verdict_label)
        self.verdict_scroll.setMaximumHeight(VERDICT_HEIGHT)
        outer = self.layout()
        outer.addWidget(self.hover_label)
        outer.addWidget(self.verdict_scroll)
        self.plot = self.add_plot(0, 0, "head", "layer", legend=False)
        self.plot.invertY(True)
        self.plot.getViewBox().setMouseEnabled(x=False, y=False)
        self.image, self.bar = self.add_heatmap(
            self.plot, "log2(s·√d_k): 0 = 1/√d_k, −1 = half, +1 = double", "CET-D1",
            (-MIN_LOG2_SPAN, MIN_LOG2_SPAN), row_major=True)
        self.placeholder = Placeholder(self.plot, "")
        self.glw.scene().sigMouseMoved.connect(self._on_move)
        self._leave = _LeaveFilter(self, self.reset_hover)
        self.glw.viewport().installEventFilter(self._leave)
        self._rows: list[dict[str, Any]] = []
        self._result: AuditResult | None = None
        self.show_empty()

    def set_layers(self, n_layers: int) -> None:
        self.layer_spin.setRange(0, max(0, n_layers - 1))

    def set_training(self, on: bool) -> None:
        """Training lab weights: a run box instead of the break-it controls (they are audited
        as saved)."""
        self._training = on
        for w in (self.layer_spin, self.kind_box, self.inject_button, self.clear_button):
            w.setVisible(not on)
        self.run_box.setVisible(on)

    def set_runs(self, names: list[str]) -> None:
        keep = self.run_box.currentIndex()
        self.run_box.blockSignals(True)
        self.run_box.clear()
        self.run_box.addItems(names)
        self.run_box.setCurrentIndex(keep if 0 <= keep < len(names) else 0)
        self.run_box.blockSignals(False)

    def set_busy(self, busy: bool) -> None:
        for w in (self.run_button, self.inject_button, self.clear_button, self.run_box):
            w.setEnabled(not busy)

    def show_empty(self, message: str = "Press Audit to measure the scale\nevery head applies") -> None:
        self.image.clear()
        self._rows, self._result, self._state, self._drawn_key = [], None, None, None
        self.plot.setTitle("s·√d_k per head (1 = the standard 1/√d_k)",
                           color=self.theme.foreground, size="9pt")
        self.placeholder.show(message, self.theme.foreground)
        self.verdict_label.setText("")
        self.reset_hover()

    def reset_hover(self) -> None:
        self.hover_label.setText(AUDIT_HOVER_HINT)

    def theme_changed(self, theme: Theme) -> None:
        self.placeholder.recolour(theme.foreground)

    def data_key(self, state: Any) -> Any:
        return None if state is None else id(state.result)

    def draw(self, state: AuditView) -> None:
        self.placeholder.hide()
        res = state.result
        self._result = res
        self.reset_hover()
        x = res.grid()
        logx = finite(np.log2(np.where(x > 0, x, np.nan)))
        span = max(MIN_LOG2_SPAN, float(np.abs(logx).max()))
        self.image.setImage(logx, autoLevels=False)
        self.image.setRect(QRectF(-0.5, -0.5, res.n_heads, res.n_layers))
        self.bar.setLevels((-span, span))
        self.plot.getAxis("bottom").setTicks(_int_ticks(res.n_heads, 16))
        self.plot.getAxis("left").setTicks(_int_ticks(res.n_layers, 24))
        self.plot.setXRange(-0.5, res.n_heads - 0.5, padding=0)
        self.plot.setYRange(-0.5, res.n_layers - 0.5, padding=0)
        what = f"run {res.run}" if res.run else res.model_name
        self.plot.setTitle(f"s·√d_k per head, {what} (d_k {res.d_k_text()}, {res.n_tokens} tokens)",
                           color=self.theme.foreground, size="9pt")
        self.set_layers(res.n_layers)
        self.verdict_label.setText(self.verdict_html(res))
        self._rows = [{"layer": layer, "head": h, "scale_x_sqrt_dk": float(x[layer, h]),
                       "verdict": res.head_verdicts[layer][h]}
                      for layer in range(res.n_layers) for h in range(res.heads_at(layer))]

    def verdict_html(self, res: AuditResult) -> str:
        """The summary and one line per layer: block, scale, verdict, declared, features."""
        lines = []
        for i, v in enumerate(res.layer_verdicts):
            site = res.sites[i] if res.sites else None
            bad = is_flagged(v) if site is None else not site.matches_declared
            colour = self.theme.error if bad else self.theme.foreground
            inj = f" — injected: {res.inject[i]}" if i in res.inject else ""
            text = f"layer {i}: {v}; {res.scale_text(i, unicode=True)}{inj}"
            if site is not None:
                decl = f"{site.block}, {res.declared_text(i, unicode=True)}"
                text += (f" — {decl}: {res.state_text(i)}" if site.matches_declared
                         else f" — {decl}: <b>{site.mismatch}</b>")
                note = f" ({site.declared_note})" if site.declared_note else ""
                if site.shares_weights_with is not None:
                    note += f" (layer {site.shares_weights_with}'s module again: same weights)"
                if site.position:
                    note += f"<br>&nbsp;&nbsp;&nbsp;s(position): {position_text(site.position)}"
                text += f"<br>&nbsp;&nbsp;&nbsp;<small>{'; '.join(site.features)}{note}</small>"
            lines.append(f"<span style='color:{colour}'>{text}</span>")
        flagged = res.flagged_layers()
        head = (f"<b>{len(flagged)} of {res.n_layers} layers not at 1/√d_k</b>" if flagged else
                "<b>every layer applies 1/√d_k</b>")
        if res.sites:
            mism, unknown = res.mismatched_layers(), res.unknown_layers()
            head += (f"; <b>{len(mism)} differ from what the model declares</b>" if mism
                     else "; every layer as the model declares" if not unknown
                     else "; no layer differs from what the model declares")
            head += (f"; {len(unknown)} with a declaration that does not account for their "
                     "code's factors" if unknown else "")
            head += f"; <b>{res.coverage_text()}</b>" if res.not_seen else \
                f"; {res.coverage_text()}"
            lines += [f"<span style='color:{self.theme.error}'>not seen: {m.name} ({m.why})"
                      "</span>" for m in res.not_seen]
        return f"{head} ({res.note})<br>" + "<br>".join(lines)

    def hover_text(self, layer: int, head: int) -> str:
        res = self._result
        assert res is not None
        f = res.head_fits[layer]
        tol = float(f.tol_log[head])
        tol_txt = f"± {math.expm1(tol):.1e} (relative)" if math.isfinite(tol) else "not identifiable"
        extra = ""
        if res.sites:
            site = res.sites[layer]
            extra = f"; reads key head {int(site.kv_head[head])}"
            if site.softcap is not None:
                c = float(site.softcap[head])
                extra += f", soft-cap {c:.4g}" if math.isfinite(c) else ", soft-cap not reached"
        return (f"layer {layer}, head {head}: s = {f.scale[head]:.6g}, s·√d_k = "
                f"{f.scale[head] * math.sqrt(res.d_k_at(layer)):.6g} {tol_txt}; residual "
                f"{f.residual_max_abs[head]:.1e} (at 0.9 s {f.residual_probe[head, 0]:.1e}, at 1.1 s "
                f"{f.residual_probe[head, 1]:.1e}); {res.head_verdicts[layer][head]}{extra}")

    def _on_move(self, pos: Any) -> None:
        res = self._result
        if res is None:
            return
        if self.plot.sceneBoundingRect().contains(pos):
            p = self.plot.getViewBox().mapSceneToView(pos)
            head, layer = round(p.x()), round(p.y())
            if 0 <= layer < res.n_layers and 0 <= head < res.heads_at(layer):
                self.hover_label.setText(self.hover_text(layer, head))
                return
        self.reset_hover()

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)


class WhatIfPanel(PlotPanel):
    figure_page = "real_model"
    plot_id = "whatif"
    title = "What-if: logits × m"
    run_requested = Signal(object)  #: the layer (None = all)
    index_changed = Signal(int)

    def build(self) -> None:
        self.layer_box = QComboBox(self)
        self.layer_box.addItem("every layer", None)
        self.layer_box.setToolTip("Multiply the logits of every layer, or of one layer, by m")
        self.run_button = QPushButton("Run what-if", self)
        self.run_button.setToolTip("Rerun the model with its logits × m for m = 1/8 … 8")
        self.run_button.clicked.connect(lambda: self.run_requested.emit(self.layer_box.currentData()))
        self._training = False
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(0, 0)
        self.slider.setMinimumWidth(120)
        self.slider.valueChanged.connect(self.index_changed.emit)
        self.m_label = QLabel("m = –")
        for i, w in enumerate((self.layer_box, self.run_button, QLabel("grids at"), self.slider,
                               self.m_label)):
            self.header.insertWidget(1 + i, w)
        self._build_curves()
        self._build_grids()
        self.placeholder = Placeholder(self.attn_plot, "")
        self._rows: list[dict[str, Any]] = []
        self._relabel_legend(causal=False)
        self.show_empty()

    def _build_curves(self) -> None:
        """The two plots along m, their legends and the marks (model's scale, 1/√d_k, grids)."""
        # the legends get their own row above the plots: inside, they covered the curves of a
        # narrow window (the similarity peaks in the middle and falls to both sides)
        self.attn_legend = pg.LegendItem(colCount=2, labelTextSize="8pt")
        self.out_legend = pg.LegendItem(colCount=2, labelTextSize="8pt")
        self.glw.addItem(self.attn_legend, row=0, col=0)
        self.glw.addItem(self.out_legend, row=0, col=1)
        self.attn_plot = self.add_plot(1, 0, "logit multiplier m", "fraction", legend=False)
        self.out_plot = self.add_plot(1, 1, "logit multiplier m", "cosine to the model",
                                      legend=False)
        for p in (self.attn_plot, self.out_plot):
            p.setLogMode(x=True, y=False)
        self.ent_curve = self.attn_plot.plot([], [], name="entropy / log n", symbol="o",
                                             symbolSize=5)
        self.sat_curve = self.attn_plot.plot([], [], name="saturated fraction", symbol="s",
                                             symbolSize=5)
        self.cos_curve = self.out_plot.plot([], [], name="final hidden states", symbol="o",
                                            symbolSize=5)
        self.pool_curve = self.out_plot.plot([], [], name="pooled embedding", symbol="t",
                                             symbolSize=5)
        self.attn_legend.addItem(self.ent_curve, "entropy / log n")
        self.attn_legend.addItem(self.sat_curve, "saturated fraction")
        self.model_lines = []
        self.std_lines = []
        self.pick_lines = []
        for p in (self.attn_plot, self.out_plot):
            own = pg.InfiniteLine(pos=0.0, angle=90, label="model's own scale",
                                  labelOpts={"position": 0.95})
            std = pg.InfiniteLine(pos=0.0, angle=90, label="1/√d_k", labelOpts={"position": 0.8})
            pick = pg.InfiniteLine(pos=0.0, angle=90, label="grids", labelOpts={"position": 0.05})
            for line in (own, std, pick):
                line.setVisible(False)
                p.addItem(line, ignoreBounds=True)
            self.model_lines.append(own)
            self.std_lines.append(std)
            self.pick_lines.append(pick)

    def _build_grids(self) -> None:
        """Per-head heatmaps (entropy, saturation) at the m the slider picks."""
        self.grid_plots = []
        self.grid_images = []
        self.grid_bars = []
        for col, title in enumerate(("H / log n per head", "saturated fraction per head")):
            p = self.add_plot(2, col, "head", "layer", legend=False)
            p.invertY(True)
            p.getViewBox().setMouseEnabled(x=False, y=False)
            p.setTitle(title, size="9pt")
            img, bar = self.add_heatmap(p, width=10, row_major=True)
            self.grid_plots.append(p)
            self.grid_images.append(img)
            self.grid_bars.append(bar)
        self.glw.ci.layout.setRowStretchFactor(1, 1)
        self.glw.ci.layout.setRowStretchFactor(2, 1)

    def set_layers(self, n_layers: int) -> None:
        keep = self.layer_box.currentData()
        self.layer_box.blockSignals(True)
        self.layer_box.clear()
        self.layer_box.addItem("every layer", None)
        for i in range(n_layers):
            self.layer_box.addItem(f"layer {i} only", i)
        idx = self.layer_box.findData(keep) if keep is not None and keep < n_layers else 0
        self.layer_box.setCurrentIndex(max(0, idx))
        self.layer_box.blockSignals(False)

    def set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy and not self._training)

    def set_training(self, on: bool) -> None:
        """Training lab weights: no what-if (it reruns transformers models)."""
        self._training = on
        self.run_button.setEnabled(not on)
        self.run_button.setToolTip("The what-if reruns transformers models; Training lab weights "
                                   "are audited as saved" if on else
                                   "Rerun the model with its logits × m for m = 1/8 … 8")

    def show_empty(self, message: str = "Press Run what-if to rerun the model\nwith its logits × m") -> None:
        for c in (self.ent_curve, self.sat_curve, self.cos_curve, self.pool_curve):
            c.setData([], [])
        for img in self.grid_images:
            img.clear()
        for line in (*self.model_lines, *self.std_lines, *self.pick_lines):
            line.setVisible(False)
        self._rows, self._state, self._drawn_key = [], None, None
        self.slider.setRange(0, 0)
        self.m_label.setText("m = –")
        self.attn_plot.setTitle("attention vs m", color=self.theme.foreground, size="9pt")
        self.out_plot.setTitle("output vs m", color=self.theme.foreground, size="9pt")
        self.placeholder.show(message, self.theme.foreground)

    def theme_changed(self, theme: Theme) -> None:
        self.placeholder.recolour(theme.foreground)
        for legend in (self.attn_legend, self.out_legend):
            recolour_legend(legend, theme.foreground)
            legend.setBrush(pg.mkBrush(theme.background + "00"))
            legend.setPen(pg.mkPen(None))
        # symbols outlined in their curve's colour, with shared pens and brushes (pyqtgraph's
        # grey default outline, a tuple, made a new pen and a new atlas entry at each setData)
        self.ent_curve.setPen(pg.mkPen(rule_color("sqrt"), width=2))
        self.ent_curve.setSymbolBrush(symbol_brush(rule_color("sqrt")))
        self.ent_curve.setSymbolPen(symbol_pen(rule_color("sqrt")))
        self.sat_curve.setPen(pg.mkPen(rule_color("none"), width=2))
        self.sat_curve.setSymbolBrush(symbol_brush(rule_color("none")))
        self.sat_curve.setSymbolPen(symbol_pen(rule_color("none")))
        self.cos_curve.setPen(pg.mkPen(theme.foreground, width=2))
        self.cos_curve.setSymbolBrush(symbol_brush(theme.foreground))
        self.cos_curve.setSymbolPen(symbol_pen(theme.foreground))
        self.pool_curve.setPen(pg.mkPen(rule_color("dk"), width=2))
        self.pool_curve.setSymbolBrush(symbol_brush(rule_color("dk")))
        self.pool_curve.setSymbolPen(symbol_pen(rule_color("dk")))
        dash = Qt.PenStyle.DashLine
        for line in self.model_lines:
            line.setPen(pg.mkPen(theme.foreground, width=1.5, style=dash))
            line.label.setColor(theme.foreground)
        for line in self.std_lines:
            line.setPen(pg.mkPen(rule_color("sqrt"), width=1.5, style=Qt.PenStyle.DotLine))
            line.label.setColor(rule_color("sqrt"))
        for line in self.pick_lines:  # the m of the grids: thin, under the model's own mark
            line.setPen(pg.mkPen(theme.highlight + "A0", width=4))
            line.label.setColor(theme.highlight)
            line.setZValue(-1)

    def data_key(self, state: Any) -> Any:
        return None if state is None else (id(state.result), state.index, state.standard_m)

    def draw(self, state: WhatIfView) -> None:
        self.placeholder.hide()
        w = state.result
        m = w.multipliers
        self.ent_curve.setData(m, finite(w.entropy_norm.mean(axis=(1, 2))))
        self.sat_curve.setData(m, finite(w.saturated.mean(axis=(1, 2))))
        causal = w.perplexity is not None
        if causal:
            ppl = finite(w.perplexity)
            # a log axis only when the perplexity spans a decade (else it would show no ticks)
            self.out_plot.setLogMode(x=True, y=bool(ppl.min() > 0 and ppl.max() / ppl.min() > 10))
            self.out_plot.setLabel("left", "perplexity of the text")
            self.cos_curve.setData(m, finite(w.perplexity))
            self.cos_curve.opts["name"] = "perplexity"
            self.pool_curve.setData([], [])
            self.pool_curve.setVisible(False)
        else:
            self.out_plot.setLogMode(x=True, y=False)
            self.out_plot.setLabel("left", "cosine to the unmodified model")
            self.cos_curve.setData(m, finite(w.output_cosine))
            self.pool_curve.setVisible(w.pooled_cosine is not None)
            self.pool_curve.setData(m, finite(w.pooled_cosine) if w.pooled_cosine is not None
                                    else [])
        self._relabel_legend(causal)
        for p in (self.attn_plot, self.out_plot):
            p.getAxis("bottom").setTicks(multiplier_ticks(m))
        self.attn_plot.setYRange(0.0, 1.0, padding=0.02)
        where = "every layer" if w.layer is None else f"layer {w.layer}"
        fg = self.theme.foreground
        self.attn_plot.setTitle(f"attention, logits of {where} × m, {w.model_state}", color=fg,
                                size="9pt")
        self.out_plot.setTitle("perplexity vs m" if causal else "output similarity vs m",
                               color=fg, size="9pt")
        i = self._draw_marks(state)
        self._draw_grids(w, i)
        L, H = w.entropy_norm.shape[1:]
        self._rows = [{**row, "series": "summary"} for row in w.rows()]
        self._rows += [{"series": "head", "multiplier": float(m[k]), "layer": layer, "head": h,
                        "entropy_norm": float(w.entropy_norm[k, layer, h]),
                        "saturated_frac": float(w.saturated[k, layer, h])}
                       for k in range(len(m)) for layer in range(L) for h in range(H)]

    def _draw_marks(self, state: WhatIfView) -> int:
        """The model's own scale, the standard one and the m of the grids; the slider. Returns
        the index of that m."""
        m = state.result.multipliers
        for line in self.model_lines:
            line.setPos(0.0)
            line.setVisible(True)
        for line in self.std_lines:
            ok = state.standard_m is not None and abs(math.log10(state.standard_m)) > 1e-3
            if ok:
                line.setPos(math.log10(state.standard_m))
            line.setVisible(ok)
        i = min(max(state.index, 0), len(m) - 1)
        for line in self.pick_lines:
            line.setPos(math.log10(float(m[i])))
            line.setVisible(True)
        self.slider.blockSignals(True)
        self.slider.setRange(0, len(m) - 1)
        self.slider.setValue(i)
        self.slider.blockSignals(False)
        self.m_label.setText(f"m = {m[i]:.3g}")
        return i

    def _draw_grids(self, w: WhatIfResult, i: int) -> None:
        """The per-head entropy and saturation grids at the i-th multiplier."""
        m = w.multipliers
        L, H = w.entropy_norm.shape[1:]
        for p, img, bar, data, title in zip(
                self.grid_plots, self.grid_images, self.grid_bars,
                (w.entropy_norm[i], w.saturated[i]),
                (f"H / log n per head at m = {m[i]:.3g}", f"saturated fraction at m = {m[i]:.3g}"),
                strict=True):
            img.setImage(finite(data), autoLevels=False)
            img.setRect(QRectF(-0.5, -0.5, H, L))
            bar.setLevels((0.0, 1.0))
            p.getAxis("bottom").setTicks(_int_ticks(H, 16))
            p.getAxis("left").setTicks(_int_ticks(L, 24))
            p.setXRange(-0.5, H - 0.5, padding=0)
            p.setYRange(-0.5, L - 0.5, padding=0)
            p.setTitle(title, color=self.theme.foreground, size="9pt")

    def _relabel_legend(self, causal: bool) -> None:
        legend = self.out_legend
        legend.clear()
        legend.addItem(self.cos_curve, "perplexity" if causal else "final hidden states")
        if not causal:
            legend.addItem(self.pool_curve, "pooled embedding")
        recolour_legend(legend, self.theme.foreground)

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)
