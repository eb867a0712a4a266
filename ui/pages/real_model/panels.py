"""The Real-model page's plots: layer x head grids, and the detail of one head.

Every number comes from the engine (``engine.probe``): the grids show ``head_table`` columns, the
detail shows a ``HeadDetail``. Items are created once and updated with setImage / setData.
``state`` passed to ``refresh`` is a :class:`ProbeView`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer, Signal
from PySide6.QtWidgets import QComboBox, QGraphicsRectItem, QLabel

from engine.probe.analyze import HeadDetail, ProbeResult
from ui.plots.base import PlotPanel
from ui.plots.csv_rows import hist_rows
from ui.plots.finite import finite
from ui.plots.rule_pens import symbol_style
from ui.theme import Theme, rule_color

#: the probe rules' colours: the model's own rule is the standard 1/sqrt(d_k) in BERT and GPT-2
PROBE_COLORS = {"model": rule_color("sqrt"), "none": rule_color("none"), "dk": rule_color("dk")}
PROBE_NAMES = {"model": "model's scale", "none": "no scale", "dk": "1/d_k"}


HOVER_HINT = "hover a cell for its value; click to open that head"


@dataclass(frozen=True)
class GridSpec:
    column: str  #: a head_table / heads.csv column
    title: str
    #: colour levels: "unit" [0, 1], "shared" (same range across the group), "ratio" (around 1)
    levels: str = "shared"


#: group id -> (menu text, the grids side by side)
GRID_GROUPS: dict[str, tuple[str, tuple[GridSpec, ...]]] = {
    "spread": ("Raw score spread vs. i.i.d. theory", (
        GridSpec("raw_std", "raw score std (measured)"),
        GridSpec("iid_pred_std", "i.i.d. prediction from q, k moments"),
        GridSpec("std_ratio", "ratio measured / i.i.d.", "ratio"),
    )),
    "entropy": ("Entropy / log n", tuple(
        GridSpec(f"entropy_norm_{r}", f"H / log n, {PROBE_NAMES[r]}", "unit") for r in PROBE_COLORS)),
    "top": ("Top weight", tuple(
        GridSpec(f"top_weight_{r}", f"top weight, {PROBE_NAMES[r]}", "unit") for r in PROBE_COLORS)),
    "saturated": ("Saturated fraction", tuple(
        GridSpec(f"saturated_frac_{r}", f"saturated rows, {PROBE_NAMES[r]}", "unit")
        for r in PROBE_COLORS)),
    # (plot titles are HTML: "‖J‖<sub>F</sub>"; "||J||_F" read as four bars around a J)
    "jacobian": ("Jacobian size ‖J‖_F", tuple(
        GridSpec(f"jacobian_fro_{r}", f"mean ‖J‖<sub>F</sub>, {PROBE_NAMES[r]}")
        for r in PROBE_COLORS)),
}


@dataclass(frozen=True)
class ProbeView:
    """What the panels draw: the result, its per-head table, the selected head and its detail."""

    result: ProbeResult
    table: dict[str, np.ndarray]
    layer: int
    head: int
    detail: HeadDetail


def _int_ticks(count: int, most: int) -> list[list[tuple[float, str]]]:
    """Layer / head numbers as ticks (never 0.5), every k-th when there are many."""
    step = max(1, int(np.ceil(count / most)))
    return [[(i, str(i)) for i in range(0, count, step)], []]


def recolour_legend(legend: pg.LegendItem | None, colour: str) -> None:
    """Legend labels in ``colour`` for a legend outside a PlotItem (the base panel themes those
    inside): pyqtgraph 0.14's setLabelTextColor keeps the drawn text grey until it is set again."""
    if legend is None:
        return
    legend.setLabelTextColor(colour)
    for _sample, label in legend.items:
        label.setText(label.text, color=colour)


class Placeholder:
    """A centred hint shown in a plot while it has nothing to draw (before the first Analyze)."""

    def __init__(self, plot: pg.PlotItem, text: str) -> None:
        self.plot = plot
        self.item = pg.TextItem(text, anchor=(0.5, 0.5))
        plot.addItem(self.item, ignoreBounds=True)
        plot.getViewBox().sigRangeChanged.connect(self._centre)
        self._centre()

    def _centre(self, *_args: Any) -> None:
        (x0, x1), (y0, y1) = self.plot.getViewBox().viewRange()
        self.item.setPos((x0 + x1) / 2, (y0 + y1) / 2)

    def show(self, text: str | None = None, colour: str | None = None) -> None:
        if text is not None:
            self.item.setText(text, color=colour)
        elif colour is not None:
            self.item.setColor(colour)
        self.item.setVisible(True)
        self._centre()

    def hide(self) -> None:
        self.item.setVisible(False)

    def recolour(self, colour: str) -> None:
        self.item.setColor(colour)

    @property
    def visible(self) -> bool:
        return self.item.isVisible()

    @property
    def text(self) -> str:
        return self.item.textItem.toPlainText()


class HeadGridPanel(PlotPanel):
    figure_page = "real_model"
    """Three layer x head heatmaps of one group; hover shows values, a click selects a head."""

    plot_id = "head_grids"
    title = "Per head"
    head_clicked = Signal(int, int)

    def build(self) -> None:
        self.group_box = QComboBox(self)
        for gid, (text, _specs) in GRID_GROUPS.items():
            self.group_box.addItem(text, gid)
        self.group_box.setToolTip("Which per-head figures the three grids show")
        self.header.insertWidget(1, self.group_box)
        self.hover_label = QLabel(HOVER_HINT)
        self.header.insertWidget(3, self.hover_label)
        self.group_box.currentIndexChanged.connect(lambda _i: self._group_changed())
        self.plots: list[pg.PlotItem] = []
        self.images: list[pg.ImageItem] = []
        self.bars: list[pg.ColorBarItem] = []
        self.marks: list[QGraphicsRectItem] = []
        for col in range(3):
            plot = self.add_plot(0, col, "head", "layer", legend=False)
            plot.invertY(True)
            plot.setMenuEnabled(True)
            plot.getViewBox().setMouseEnabled(x=False, y=False)
            image, bar = self.add_heatmap(plot, width=10, row_major=True)
            mark = QGraphicsRectItem(QRectF(-0.5, -0.5, 1, 1))
            mark.setZValue(10)
            mark.setVisible(False)  # no head is selected before the first result
            plot.addItem(mark)
            self.plots.append(plot)
            self.images.append(image)
            self.bars.append(bar)
            self.marks.append(mark)
        self.placeholder = Placeholder(self.plots[1], "")
        self.glw.scene().sigMouseMoved.connect(self._on_move)
        self.glw.scene().sigMouseClicked.connect(self._on_click)
        self._table: dict[str, np.ndarray] | None = None
        self._rows: list[dict[str, Any]] = []
        self._empty_shape = (6, 12)
        self.show_empty(*self._empty_shape)

    def show_empty(self, n_layers: int, n_heads: int,
                   message: str = "Press Analyze (Ctrl+Enter)\nto measure every head") -> None:
        """No result yet: blank grids of the model's shape, their titles, and a hint."""
        self._empty_shape = (max(1, n_layers), max(1, n_heads))
        n_layers, n_heads = self._empty_shape
        self._table, self._rows, self._state, self._drawn_key = None, [], None, None
        for i, spec in enumerate(GRID_GROUPS[self.group][1]):
            self.images[i].clear()
            self.marks[i].setVisible(False)
            self._frame(i, spec.title, n_layers, n_heads)
        self.placeholder.show(message, self.theme.foreground)
        self.hover_label.setText(HOVER_HINT)

    def _frame(self, i: int, title: str, n_layers: int, n_heads: int) -> None:
        """Title, integer ticks and a range of exactly the layer x head cells."""
        self.plots[i].setTitle(title, color=self.theme.foreground, size="9pt")
        self.plots[i].getAxis("bottom").setTicks(_int_ticks(n_heads, 16))
        self.plots[i].getAxis("left").setTicks(_int_ticks(n_layers, 24))
        self.plots[i].setXRange(-0.5, n_heads - 0.5, padding=0)
        self.plots[i].setYRange(-0.5, n_layers - 0.5, padding=0)

    def _group_changed(self) -> None:
        if self._state is None:
            self.show_empty(*self._empty_shape, self.placeholder.text)
        else:
            self.invalidate()

    @property
    def group(self) -> str:
        return self.group_box.currentData()

    def set_group(self, gid: str) -> None:
        self.group_box.setCurrentIndex(list(GRID_GROUPS).index(gid))

    def copy_view_to(self, clone: PlotPanel) -> None:
        """The group of grids shown."""
        clone.set_group(self.group)
        clone.refresh(self._state, force=True)

    def theme_changed(self, theme: Theme) -> None:
        self.placeholder.recolour(theme.foreground)
        for mark in self.marks:
            mark.setPen(pg.mkPen(theme.highlight, width=3))

    def data_key(self, state: Any) -> Any:
        if state is None:
            return None
        return (id(state.result), self.group, state.layer, state.head)

    def draw(self, state: ProbeView) -> None:
        self.placeholder.hide()
        self._table = state.table
        shown = (id(state.result), self.group)
        if shown != getattr(self, "_hover_for", None):  # new analysis or grid view: old read-out is stale
            self._hover_for = shown
            self.hover_label.setText(HOVER_HINT)
        specs = GRID_GROUPS[self.group][1]
        values = [finite(state.table[s.column]) for s in specs]
        shared_hi = max(float(v.max()) for v in values) if values else 1.0
        self._rows = []
        for i, (spec, v) in enumerate(zip(specs, values, strict=True)):
            n_layers, n_heads = v.shape
            self.images[i].setImage(v, autoLevels=False)
            self.images[i].setRect(QRectF(-0.5, -0.5, n_heads, n_layers))
            if spec.levels == "unit":
                levels, cmap = (0.0, 1.0), "viridis"
            elif spec.levels == "ratio":
                dev = max(abs(float(v.max()) - 1.0), abs(1.0 - float(v.min())), 0.05)
                levels, cmap = (1.0 - dev, 1.0 + dev), "CET-D1"
            else:
                levels, cmap = (0.0, max(shared_hi, 1e-12)), "viridis"
            self.bars[i].setColorMap(pg.colormap.get(cmap))
            self.bars[i].setLevels(levels)
            self._frame(i, spec.title, n_layers, n_heads)
            self.marks[i].setRect(QRectF(state.head - 0.5, state.layer - 0.5, 1, 1))
            self.marks[i].setVisible(True)
            for layer in range(n_layers):
                for head in range(n_heads):
                    self._rows.append({"grid": spec.column, "layer": layer, "head": head,
                                       "value": float(v[layer, head])})

    def _cell_at(self, pos: Any) -> tuple[int, int, int] | None:
        if self._table is None:
            return None
        for i, plot in enumerate(self.plots):
            if plot.sceneBoundingRect().contains(pos):
                p = plot.getViewBox().mapSceneToView(pos)
                head, layer = round(p.x()), round(p.y())
                shape = next(iter(self._table.values())).shape
                if 0 <= layer < shape[0] and 0 <= head < shape[1]:
                    return i, layer, head
        return None

    def hover_text(self, layer: int, head: int) -> str:
        """'layer 2, head 5: ...' with every figure of the current group (± its bootstrap SE)."""
        t = self._table
        assert t is not None
        parts = []
        for spec in GRID_GROUPS[self.group][1]:
            v = float(t[spec.column][layer, head])
            text = f"{spec.column} {v:.4g}"
            if f"{spec.column}_se" in t:  # raw_std, iid_pred_std, std_ratio: bootstrap SE
                text += _pm(float(t[f"{spec.column}_se"][layer, head]))
            parts.append(text)
        return f"layer {layer}, head {head}: " + ", ".join(parts)

    def _on_move(self, pos: Any) -> None:
        cell = self._cell_at(pos)
        self.hover_label.setText(HOVER_HINT if cell is None else self.hover_text(cell[1], cell[2]))

    def clear_hover(self) -> None:
        super().clear_hover()
        self.hover_label.setText(HOVER_HINT)

    def _on_click(self, event: Any) -> None:
        cell = self._cell_at(event.scenePos())
        if cell is not None:
            self.head_clicked.emit(cell[1], cell[2])

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)


class HeadScoresPanel(PlotPanel):
    figure_page = "real_model"
    """Histograms of one head's raw and scaled scores with the i.i.d. normal overlay."""

    plot_id = "head_scores"
    title = "Head scores"

    def build(self) -> None:
        self.raw_plot = self.add_plot(0, 0, "raw score q·k", "probability density")
        self.scaled_plot = self.add_plot(1, 0, "logit (scale × q·k)", "probability density")
        self.raw_curve = pg.PlotDataItem(stepMode="center", name="measured")
        self.raw_theory = pg.PlotDataItem(name="i.i.d. normal")
        self.scaled_curve = pg.PlotDataItem(stepMode="center", name="measured")
        self.scaled_theory = pg.PlotDataItem(name="i.i.d. normal")
        for plot, items in ((self.raw_plot, (self.raw_curve, self.raw_theory)),
                            (self.scaled_plot, (self.scaled_curve, self.scaled_theory))):
            for item in items:
                plot.addItem(item)
        self.scaled_curve.setPen(pg.mkPen(PROBE_COLORS["model"], width=2))
        self.placeholder = Placeholder(self.raw_plot, "")
        self._rows: list[dict[str, Any]] = []
        self.show_empty()

    def show_empty(self, message: str = "the selected head's scores\nappear here after Analyze") -> None:
        for item in (self.raw_curve, self.raw_theory, self.scaled_curve, self.scaled_theory):
            item.setData([], [])
        self.raw_plot.setTitle("raw scores of one head", color=self.theme.foreground, size="9pt")
        self.scaled_plot.setTitle("scaled scores (logits)", color=self.theme.foreground, size="9pt")
        self._rows, self._state, self._drawn_key = [], None, None
        self.placeholder.show(message, self.theme.foreground)

    def theme_changed(self, theme: Theme) -> None:
        self.placeholder.recolour(theme.foreground)
        self.raw_curve.setPen(pg.mkPen(theme.raw, width=2))
        self.raw_theory.setPen(pg.mkPen(theme.foreground, width=1.5, style=pg.QtCore.Qt.PenStyle.DashLine))
        self.scaled_theory.setPen(pg.mkPen(theme.foreground, width=1.5,
                                           style=pg.QtCore.Qt.PenStyle.DashLine))

    def data_key(self, state: Any) -> Any:
        if state is None:
            return None
        return (id(state.result), state.layer, state.head, state.detail.rule)

    def draw(self, state: ProbeView) -> None:
        self.placeholder.hide()
        d = state.detail
        rule = d.rule
        self.scaled_curve.setPen(pg.mkPen(PROBE_COLORS[rule], width=2))
        self.raw_curve.setData(d.raw_hist.edges, finite(d.raw_hist.density()))
        self.raw_theory.setData(*(finite(a) for a in d.raw_overlay))
        self.scaled_curve.setData(d.scaled_hist.edges, finite(d.scaled_hist.density()))
        self.scaled_theory.setData(*(finite(a) for a in d.scaled_overlay))
        ss = state.result.score_stats
        raw_std = float(ss.raw_std[d.layer, d.head])
        ratio, ratio_se = float(ss.std_ratio[d.layer, d.head]), float(ss.std_ratio_se[d.layer, d.head])
        fg = self.theme.foreground
        self.raw_plot.setTitle(
            f"layer {d.layer}, head {d.head}: std {raw_std:.3g} measured, "
            f"{d.raw_theory[1]:.3g} i.i.d. (ratio {ratio:.2f}{_pm(ratio_se)})", color=fg, size="9pt")
        self.scaled_plot.setTitle(
            f"{PROBE_NAMES[rule]} (× {d.scale:.4g}): std {raw_std * d.scale:.3g} measured, "
            f"{d.scaled_theory[1]:.3g} i.i.d.", color=fg, size="9pt")
        self._rows = (hist_rows("raw", d.raw_hist.edges, d.raw_hist.density(), layer=d.layer,
                                head=d.head)
                      + hist_rows(f"scaled_{rule}", d.scaled_hist.edges, d.scaled_hist.density(),
                                  layer=d.layer, head=d.head))

    def data_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)


#: pixels one token label needs along each axis (every k-th token is labelled beyond that)
X_LABEL_PX = 60
Y_LABEL_PX = 14


def _pm(se: float) -> str:
    """' ± 0.05' for a bootstrap standard error, nothing when none was computed (bootstrap 0)."""
    return f" ± {se:.2g}" if se > 0 else ""


def token_ticks(tokens: tuple[str, ...], most: int) -> list[list[tuple[float, str]]]:
    step = max(1, int(np.ceil(len(tokens) / most)))
    return [[(i, tokens[i][:10]) for i in range(0, len(tokens), step)], []]


class HeadAttentionPanel(PlotPanel):
    figure_page = "real_model"
    """One head's attention matrix (token labels) and the Jacobian size of each query row."""

    plot_id = "head_attention"
    title = "Head attention"

    def build(self) -> None:
        self.matrix_plot = self.add_plot(0, 0, "key token", "query token", legend=False)
        self.matrix_plot.invertY(True)
        self.matrix_plot.getViewBox().setAspectLocked(False)
        self.image, self.cbar = self.add_heatmap(self.matrix_plot, "weight p", width=10,
                                                 row_major=True)
        # the legend gets its own row between the two plots: inside the plot it would cover curves
        self.jac_legend = pg.LegendItem(colCount=3, labelTextSize="8pt")
        self.glw.addItem(self.jac_legend, row=1, col=0)
        self.jac_plot = self.add_plot(2, 0, "query token", "‖J‖<sub>F</sub> of the row",
                                      legend=False)
        self.jac_curves = {}
        for rule, colour in PROBE_COLORS.items():
            curve = pg.PlotDataItem(pen=pg.mkPen(colour, width=2), symbol="o", symbolSize=4,
                                    name=PROBE_NAMES[rule], **symbol_style(colour, None))
            self.jac_plot.addItem(curve)
            self.jac_legend.addItem(curve, PROBE_NAMES[rule])
            self.jac_curves[rule] = curve
        # ‖J‖_F of a softmax row never exceeds 1/2 (p = (1/2, 1/2))
        self.jac_plot.setYRange(0.0, 0.52, padding=0)
        self.jac_plot.getViewBox().setMouseEnabled(x=True, y=False)
        self.glw.ci.layout.setRowStretchFactor(0, 3)
        self.glw.ci.layout.setRowStretchFactor(2, 2)
        self.placeholder = Placeholder(self.matrix_plot, "")
        self._rows_of: ProbeView | None = None
        self.show_empty()

    def show_empty(self, message: str = "the selected head's attention\nappears here after Analyze") -> None:
        self.image.clear()
        for curve in self.jac_curves.values():
            curve.setData([], [])
        for plot in (self.matrix_plot, self.jac_plot):
            plot.getAxis("bottom").setTicks([[], []])
        self.matrix_plot.getAxis("left").setTicks([[], []])
        self.matrix_plot.setXRange(0, 1, padding=0)
        self.matrix_plot.setYRange(0, 1, padding=0)
        self.matrix_plot.setTitle("attention of one head", color=self.theme.foreground, size="9pt")
        self._rows_of, self._state, self._drawn_key = None, None, None
        self.placeholder.show(message, self.theme.foreground)

    def theme_changed(self, theme: Theme) -> None:
        self.placeholder.recolour(theme.foreground)
        recolour_legend(self.jac_legend, theme.foreground)
        self.jac_legend.setBrush(pg.mkBrush(theme.background + "00"))
        self.jac_legend.setPen(pg.mkPen(None))

    def data_key(self, state: Any) -> Any:
        if state is None:
            return None
        vb = self.matrix_plot.getViewBox()  # the token labels depend on the size
        return (id(state.result), state.layer, state.head, state.detail.rule,
                int(vb.width() / X_LABEL_PX), int(vb.height() / Y_LABEL_PX))

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        if self._state is not None:  # after the layout settles; dropped if the panel is gone
            QTimer.singleShot(0, self, self._refresh_labels)

    def _refresh_labels(self) -> None:
        if self._state is not None:
            self.refresh(self._state)

    def draw(self, state: ProbeView) -> None:
        self.placeholder.hide()
        d, res = state.detail, state.result
        n = len(d.tokens)
        self.image.setImage(finite(d.weights), autoLevels=False)
        self.image.setRect(QRectF(-0.5, -0.5, n, n))
        self.cbar.setLevels((0.0, 1.0))
        vb = self.matrix_plot.getViewBox()
        x_ticks = token_ticks(d.tokens, max(3, int(vb.width() / X_LABEL_PX)))
        self.matrix_plot.getAxis("bottom").setTicks(x_ticks)
        self.matrix_plot.getAxis("left").setTicks(
            token_ticks(d.tokens, max(4, int(vb.height() / Y_LABEL_PX))))
        self.jac_plot.getAxis("bottom").setTicks(x_ticks)
        self.matrix_plot.setXRange(-0.5, n - 0.5, padding=0)
        self.matrix_plot.setYRange(-0.5, n - 0.5, padding=0)
        ok = d.row_ok
        x = np.flatnonzero(ok)
        for rule, curve in self.jac_curves.items():
            jac = finite(res.rows[rule].jacobian_fro[d.layer, d.head])
            curve.setData(x, jac[ok])
            curve.setPen(pg.mkPen(PROBE_COLORS[rule], width=3 if rule == d.rule else 1.2))
        self.matrix_plot.setTitle(f"layer {d.layer}, head {d.head}, {PROBE_NAMES[d.rule]}",
                                  color=self.theme.foreground, size="9pt")
        self._rows_of = state  # the CSV rows (n^2 of them) are built only when exported

    def data_rows(self) -> list[dict[str, Any]]:
        state = self._rows_of
        if state is None:
            return []
        d, res = state.detail, state.result
        x = np.flatnonzero(d.row_ok)
        rows: list[dict[str, Any]] = []
        for rule in self.jac_curves:
            jac = finite(res.rows[rule].jacobian_fro[d.layer, d.head])
            rows += [{"series": f"jacobian_fro_{rule}", "layer": d.layer, "head": d.head,
                      "query": int(i), "token": d.tokens[i], "value": float(jac[i])} for i in x]
        w = finite(d.weights)
        n = len(d.tokens)
        rows += [{"series": f"weights_{d.rule}", "layer": d.layer, "head": d.head,
                  "query": i, "key": j, "value": float(w[i, j])} for i in range(n) for j in range(n)]
        return rows
