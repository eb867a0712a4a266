"""The inspector's three plots, as plot panels like every other page's: the same ⋯ menu (PNG,
SVG, CSV, slide, paper), the same figure writers (drawn on a copy at the export style's size,
never the window's), listed by File -> Export plot. Items are created once and updated in place.

Series colours come from the theme (``Theme.weight``, ``Theme.jacobian``, ``Theme.limit``), like
every other page's; ``theme_changed`` recolours them on a theme switch. ``state`` passed to
``refresh`` is an :class:`InspectorView` (the result drawn).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QSizePolicy

from engine.inspect import InspectResult
from engine.softmax import JACOBIAN_ENTRY_MAX
from ui.pages.inspector.fmt import cell
from ui.plots.base import PlotPanel
from ui.theme import LIGHT, Theme

#: above this many scores the heatmap shows no numbers in the cells (hover shows them)
CELL_TEXT_MAX = 12
_DIVERGING = pg.ColorMap([0.0, 0.5, 1.0], [(33, 102, 172), (247, 247, 247), (178, 24, 43)])


@dataclass(frozen=True)
class InspectorView:
    """What the inspector's panels draw: one result (a new object for every valid input)."""

    result: InspectResult


def _limit_pen(theme: Theme) -> Any:
    return pg.mkPen(theme.limit, width=2, style=Qt.PenStyle.DashLine)


class InspectorPanel(PlotPanel):
    """One inspector plot: its title follows the result (in the header on screen, on the plot
    in an exported figure), and ``update_result`` draws a result at once."""

    figure_page = "inspector"
    #: True on the offscreen copy an exported figure is drawn on: the title goes on the plot
    for_figure = False

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        # a long formula in the header never widens the page (its text is cut instead)
        self.header_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.header_label.setMinimumWidth(80)
        spacer = next(i for i in range(self.header.count())
                      if self.header.itemAt(i).spacerItem() is not None)
        self.header.takeAt(spacer)  # the title takes the width the stretch had
        self.header.setStretchFactor(self.header_label, 1)

    def make_clone(self) -> PlotPanel:
        clone = type(self)()
        clone.for_figure = True
        return clone

    def show_title(self, text: str) -> None:
        """``text`` (plain: "Σp < 1" stays whole) in the header, or on a figure's plot."""
        self.header_label.setText(f"<b>{html.escape(text)}</b>")
        self.header_label.setToolTip(text)
        if self.for_figure:  # (ui.export.plot_files.style_panel puts the title on the figure)
            self.title = html.escape(text)

    def invalidate_now(self) -> None:
        """A view choice changed: redraw now (shown or not)."""
        if self._state is not None:
            self.refresh(self._state, force=True)

    def data_key(self, state: Any) -> Any:
        result = getattr(state, "result", None)
        return None if result is None else (id(result), tuple(self.view_state().items()))

    def update_result(self, r: InspectResult) -> None:
        """Draw ``r`` now, shown or not (the inspector computes on each valid input)."""
        self.refresh(InspectorView(r), force=True)

    @property
    def result(self) -> InspectResult | None:
        return getattr(self._state, "result", None)


class WeightsPlot(InspectorPanel):
    """Bars of p_i and of p_i(1 - p_i), with the 0.25 ceiling of the latter."""

    plot_id = "inspector_weights"
    title = "Softmax weights"

    def build(self) -> None:
        self.log_box = QCheckBox("log₁₀ axis", self)
        self.log_box.setToolTip("A log₁₀ value axis: saturated rows have weights like 1e-7 that "
                                "a linear axis cannot show")
        self.header.insertWidget(2, self.log_box)
        self.log_box.toggled.connect(lambda _on: self.invalidate_now())
        self.plot = self.add_plot(0, 0, "score index i", "value (probability, no unit)")
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.legend = self.plot.legend
        self.weights = pg.BarGraphItem(x=[0], height=[0], width=0.4, brush=LIGHT.weight,
                                       pen=pg.mkPen(None), name="p_i")
        self.diag = pg.BarGraphItem(x=[0], height=[0], width=0.4, brush=LIGHT.jacobian,
                                    pen=pg.mkPen(None), name="p_i (1 − p_i) = J_ii")
        self.plot.addItem(self.weights)
        self.plot.addItem(self.diag)
        self.limit = pg.InfiniteLine(pos=JACOBIAN_ENTRY_MAX, angle=0, pen=_limit_pen(LIGHT))
        self.plot.addItem(self.limit)
        self.limit_sample = pg.PlotDataItem(pen=_limit_pen(LIGHT))
        self.legend.addItem(self.limit_sample, "max of p(1 − p) = 0.25")
        self.plot.setYRange(0, 1.02, padding=0)
        self.plot.getViewBox().setMouseEnabled(x=True, y=False)
        self.show_title(self.title)

    @property
    def log(self) -> bool:
        """log₁₀ axis: saturated rows have weights like 1e-7 that a linear axis cannot show."""
        return self.log_box.isChecked()

    def view_controls(self) -> dict[str, Any]:
        return {"log_axis": self.log_box}

    def theme_changed(self, theme: Theme) -> None:
        self.weights.setOpts(brush=theme.weight)
        self.diag.setOpts(brush=theme.jacobian)
        self.limit.setPen(_limit_pen(theme))
        self.limit_sample.setPen(_limit_pen(theme))
        self.plot.showGrid(x=False, y=True, alpha=theme.grid_alpha)
        self.legend.update()

    def draw(self, state: Any) -> None:
        r: InspectResult = state.result
        title = r.weights_name[0].upper() + r.weights_name[1:]
        if r.sink is not None:
            title += f" (the sink takes {cell(r.sink_weight, compact=True)})"
        self.show_title(title)
        self.plot.setLabel("left", "log₁₀ value (probability, no unit)" if self.log
                           else "value (probability, no unit)")
        n = r.weights.size
        x = np.arange(n, dtype=float)
        width = 0.4 if n <= 256 else 0.5
        if self.log:
            lw, ld, floor = log_heights(r.weights, r.p_one_minus_p)
            self.weights.setOpts(x=x - width / 2, y0=floor, height=lw - floor, width=width)
            self.diag.setOpts(x=x + width / 2, y0=floor, height=ld - floor, width=width)
            self.limit.setValue(float(np.log10(JACOBIAN_ENTRY_MAX)))
            self.plot.setYRange(floor, 0.05, padding=0)
        else:
            self.weights.setOpts(x=x - width / 2, y0=0.0, height=r.weights, width=width)
            self.diag.setOpts(x=x + width / 2, y0=0.0, height=r.p_one_minus_p, width=width)
            self.limit.setValue(JACOBIAN_ENTRY_MAX)
            self.plot.setYRange(0, 1.02, padding=0)
        self.plot.setXRange(-0.7, n - 0.3, padding=0)
        ticks = [(i, str(i)) for i in range(n)] if n <= 24 else None
        self.plot.getAxis("bottom").setTicks([ticks] if ticks else None)

    def data_rows(self) -> list[dict[str, Any]]:
        """Each score's weight and p(1 − p), as drawn (log₁₀ values too on a log axis)."""
        r = self.result
        if r is None:
            return []
        rows = [{"index": i, "score": float(r.scores[i]), "weight": float(r.weights[i]),
                 "p_one_minus_p": float(r.p_one_minus_p[i])} for i in range(r.weights.size)]
        if self.log:
            lw, ld, _floor = log_heights(r.weights, r.p_one_minus_p)
            for row, a, b in zip(rows, lw, ld, strict=True):
                row["log10_weight_drawn"], row["log10_p_one_minus_p_drawn"] = float(a), float(b)
        return rows


def log_heights(weights: np.ndarray, diag: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """log₁₀ of both series for display, and the floor they stand on: exact zeros (underflowed
    weights) sit on the floor, a decade below the smallest finite value (never -inf)."""
    with np.errstate(divide="ignore"):
        lw, ld = np.log10(weights), np.log10(diag)
    finite_values = np.concatenate([lw[np.isfinite(lw)], ld[np.isfinite(ld)]])
    floor = float(np.floor(finite_values.min())) - 1.0 if finite_values.size else -1.0
    floor = max(floor, -330.0)
    lw = np.maximum(np.nan_to_num(lw, neginf=floor), floor)
    ld = np.maximum(np.nan_to_num(ld, neginf=floor), floor)
    return lw, ld, floor


def jacobian_title(r: InspectResult) -> str:
    """The heatmap's title: the formula of this result's Jacobian."""
    if r.sigmoid:
        text = "Sigmoid Jacobian J = diag(p_i (1 − p_i))"
    elif r.sink is not None:
        text = "Jacobian with a sink J = diag(p) − p pᵀ (Σp < 1)"
    else:
        text = "Softmax Jacobian J = diag(p) − p pᵀ"
    return text + (" × tanh′(z_j/c)" if r.softcap else "")


class JacobianHeatmap(InspectorPanel):
    """diag(p) − p pᵀ as a heatmap, values in the cells for small n, hover value for any n."""

    plot_id = "inspector_jacobian"
    title = "Softmax Jacobian"
    hovered = Signal(str)

    def build(self) -> None:
        self.fit_box = QCheckBox("colours fit the data", self)
        self.fit_box.setToolTip("Colour range ±max|J| of these scores (else ±0.25, the largest "
                                "possible entry)")
        self.header.insertWidget(2, self.fit_box)
        self.fit_box.toggled.connect(lambda _on: self.invalidate_now())
        # J is the derivative with respect to the logits z = s / scale, not the raw scores s:
        # per unit of raw score the softmax passes back J_ij / scale
        self.plot = self.add_plot(0, 0, "column j (J_ij = ∂p_i/∂z_j, z = s / scale)", "row i",
                                  legend=False)
        self.plot.setAspectLocked(True)
        self.plot.invertY(True)
        self.image, self.colorbar = self.add_heatmap(
            self.plot, "J_ij", _DIVERGING, (-JACOBIAN_ENTRY_MAX, JACOBIAN_ENTRY_MAX), 14,
            row_major=True)
        # short tick labels (-2e-4, 0.10): the bar's axis is narrow and would clip -0.0002
        self.colorbar.axis.tickStrings = lambda values, scale, spacing: [
            cell(v * scale, compact=True) for v in values]
        self.colorbar.axis.setWidth(50)
        self._texts: list[pg.TextItem] = []
        self.glw.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.plot.vb.sigResized.connect(self._fit_fonts)
        self.plot.vb.sigRangeChanged.connect(self._fit_fonts)
        self.show_title("Softmax Jacobian J = diag(p) − p pᵀ")

    @property
    def fit_colors(self) -> bool:
        """Colour range ±0.25 (the largest possible entry; fixed) or ±max|J| of these scores."""
        return self.fit_box.isChecked()

    def view_controls(self) -> dict[str, Any]:
        return {"fit_colours": self.fit_box}

    def theme_changed(self, theme: Theme) -> None:
        self.plot.showGrid(x=False, y=False)  # grid lines would cross the cells' numbers

    def draw(self, state: Any) -> None:
        r: InspectResult = state.result
        self.show_title(jacobian_title(r))
        self.hovered.emit("")  # a read-out of the old matrix (e.g. J[4, 3] of a 5x5) is stale
        jac = r.jacobian
        n = jac.shape[0]
        if n == 0:  # more scores than the full matrix is kept for: only its size is shown
            self.image.clear()
            self._update_texts(jac, JACOBIAN_ENTRY_MAX)
            return
        limit = JACOBIAN_ENTRY_MAX
        if self.fit_colors:
            limit = max(float(np.abs(jac).max()), np.finfo(float).tiny)
        self.colorbar.setLevels(low=-limit, high=limit)
        self.image.setImage(jac, levels=(-limit, limit), autoLevels=False)
        self.image.setRect(-0.5, -0.5, n, n)
        self.plot.setRange(xRange=(-0.5, n - 0.5), yRange=(-0.5, n - 0.5), padding=0.02)
        axis_ticks = [[(i, str(i)) for i in range(n)]] if n <= 24 else None
        for name in ("bottom", "left"):
            self.plot.getAxis(name).setTicks(axis_ticks)
        self._update_texts(jac, limit)

    def data_rows(self) -> list[dict[str, Any]]:
        """The matrix row by row (empty above the engine's JACOBIAN_FULL_MAX: none is kept)."""
        from ui.pages.inspector.export import jacobian_rows

        r = self.result
        return [] if r is None else jacobian_rows(r)[0]

    def cell_texts(self) -> list[str]:
        """The numbers written in the cells, row by row (empty when n > CELL_TEXT_MAX)."""
        return [t.textItem.toPlainText() for t in self._texts if t.isVisible()]

    def _update_texts(self, jac: np.ndarray, limit: float) -> None:
        n = jac.shape[0]
        shown = n * n if n <= CELL_TEXT_MAX else 0
        while len(self._texts) < shown:
            t = pg.TextItem(anchor=(0.5, 0.5))
            self.plot.addItem(t)
            self._texts.append(t)
        for k, t in enumerate(self._texts):
            if k >= shown:
                t.setVisible(False)
                continue
            i, j = divmod(k, n)
            v = float(jac[i, j])
            t.setText(cell(v, compact=n > 6), color=QColor("white" if abs(v) > 0.6 * limit else "black"))
            t.setPos(j, i)
            t.setVisible(True)
        self._fit_fonts()

    def _fit_fonts(self) -> None:
        """Cell text as large as one cell allows (TextItems keep their pixel size when zooming)."""
        r = self.result
        if r is None or r.jacobian.shape[0] > CELL_TEXT_MAX:
            return
        n = r.jacobian.shape[0]
        vb = self.plot.vb
        cell_px = min(vb.width() / max(vb.viewRect().width(), 1e-9),
                      vb.height() / max(vb.viewRect().height(), 1e-9))
        longest = max((len(t.textItem.toPlainText()) for t in self._texts[: n * n]), default=4)
        px = int(max(6, min(16, cell_px * 0.9 / (0.6 * longest), cell_px * 0.35)))
        for t in self._texts[: n * n]:
            font = t.textItem.font()
            if font.pixelSize() != px:
                font.setPixelSize(px)
                t.setFont(font)

    def clear_hover(self) -> None:
        self.hovered.emit("")

    def leaveEvent(self, event: Any) -> None:
        """The read-out goes when the pointer leaves the heatmap."""
        self.hovered.emit("")
        super().leaveEvent(event)

    def _on_mouse_moved(self, pos: QPointF) -> None:
        r = self.result
        if r is None or not self.plot.vb.sceneBoundingRect().contains(pos):
            self.hovered.emit("")
            return
        p = self.plot.vb.mapSceneToView(pos)
        i, j = int(np.floor(p.y() + 0.5)), int(np.floor(p.x() + 0.5))
        n = r.jacobian.shape[0]
        if 0 <= i < n and 0 <= j < n:
            text = f"J[{i}, {j}] = ∂p_{i}/∂z_{j} = {r.jacobian[i, j]:.8g}"
            if r.scale != 1.0:  # the raw score s = scale * z: per unit of s, J / scale
                text += f"; ∂p_{i}/∂s_{j} = J/{r.scale:g} = {r.jacobian[i, j] / r.scale:.8g}"
            self.hovered.emit(text)
        else:
            self.hovered.emit("")


GAUGE_TITLE = "Largest |J_ij| against its maximum 0.25"
#: above this largest |J_ij| the gauge writes the number on the bar (beside it there is no room)
VALUE_INSIDE = 0.17


class MaxEntryGauge(InspectorPanel):
    """The largest |J_ij| as a horizontal bar against the 0.25 maximum."""

    plot_id = "inspector_gauge"
    title = "Largest |J_ij|"
    #: a bar, not a square plot: its "screen" figure is a wide strip
    screen_figure_size = (1200, 320)

    def build(self) -> None:
        self.glw.setMinimumSize(260, 90)
        self.plot = self.add_plot(0, 0, "largest |J_ij| (no unit)", "")
        self.plot.hideAxis("left")
        self.legend = self.plot.legend
        self.bar = pg.BarGraphItem(x0=[0], y=[0], height=[0.6], width=[0.0],
                                   brush=LIGHT.jacobian, pen=pg.mkPen(None),
                                   name="largest |J_ij|")
        self.plot.addItem(self.bar)
        self.limit = pg.InfiniteLine(pos=JACOBIAN_ENTRY_MAX, angle=90, pen=_limit_pen(LIGHT))
        self.plot.addItem(self.limit)
        self.limit_sample = pg.PlotDataItem(pen=_limit_pen(LIGHT))
        self.legend.addItem(self.limit_sample, "maximum 0.25")
        self.plot.setXRange(0, 0.27, padding=0)
        self.plot.setYRange(-0.4, 1.1, padding=0)
        self.plot.getViewBox().setMouseEnabled(x=False, y=False)
        self.value = 0.0
        self.value_text = pg.TextItem(anchor=(0.0, 0.5), color=LIGHT.jacobian)
        self.plot.addItem(self.value_text)
        self.show_title(GAUGE_TITLE)

    def theme_changed(self, theme: Theme) -> None:
        self.bar.setOpts(brush=theme.jacobian)
        self.limit.setPen(_limit_pen(theme))
        self.limit_sample.setPen(_limit_pen(theme))
        self.plot.showGrid(x=True, y=False, alpha=theme.grid_alpha)
        self.legend.update()
        self._colour_value()

    def _colour_value(self) -> None:
        """Beside the bar: the bar's colour; on it: the background colour (reads on the bar)."""
        right = self.value < VALUE_INSIDE
        self.value_text.setColor(self.theme.jacobian if right else self.theme.background)

    def draw(self, state: Any) -> None:
        r: InspectResult = state.result
        self.show_title(GAUGE_TITLE)
        self.value = r.jacobian_max_abs
        self.bar.setOpts(x0=[0.0], y=[0.0], width=[r.jacobian_max_abs], height=[0.6])
        # the number sits right of the bar (left of it when the bar nearly fills the plot)
        self.value_text.setAnchor((0.0, 0.5) if self.value < VALUE_INSIDE else (1.0, 0.5))
        self._colour_value()
        self.value_text.setText(f" {r.jacobian_max_abs:.3g} " if r.jacobian_max_abs >= 1e-3
                                else f" {cell(r.jacobian_max_abs)} ")
        self.value_text.setPos(r.jacobian_max_abs, 0.0)

    def data_rows(self) -> list[dict[str, Any]]:
        r = self.result
        if r is None:
            return []
        return [{"largest_abs_jacobian_entry": r.jacobian_max_abs,
                 "maximum": JACOBIAN_ENTRY_MAX,
                 "share_of_maximum": r.jacobian_max_abs / JACOBIAN_ENTRY_MAX,
                 "n": int(r.scores.size)}]


#: the inspector's plots in their order on the page
PANEL_CLASSES = (WeightsPlot, JacobianHeatmap, MaxEntryGauge)
