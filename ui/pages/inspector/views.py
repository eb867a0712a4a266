"""The inspector's three plots. Items are created once and updated in place (setOpts/setImage).

Series colours come from the theme (``Theme.weight``, ``Theme.jacobian``, ``Theme.limit``), like
every other page's; :func:`apply_plot_theme` recolours them on a theme switch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, Qt, Signal
from PySide6.QtGui import QColor

from engine.inspect import InspectResult
from engine.io import atomic_write_bytes
from engine.softmax import JACOBIAN_ENTRY_MAX
from ui.pages.inspector.fmt import cell
from ui.plots.heatmap import heatmap_with_colorbar, theme_colorbar
from ui.plots.legends import outside_legend
from ui.theme import LIGHT, Theme

#: above this many scores the heatmap shows no numbers in the cells (hover shows them)
CELL_TEXT_MAX = 12
_DIVERGING = pg.ColorMap([0.0, 0.5, 1.0], [(33, 102, 172), (247, 247, 247), (178, 24, 43)])


def apply_plot_theme(plot: pg.PlotWidget, theme: Theme) -> None:
    """Background, axes, title and legend colours from a ui.theme.Theme (as ui/plots does)."""
    plot.setBackground(theme.background)
    item = plot.getPlotItem()
    fg = pg.mkPen(theme.foreground)
    axes = [item.getAxis(name) for name in ("left", "bottom", "right", "top")]
    colorbar = getattr(plot, "colorbar", None)
    if colorbar is not None:
        theme_colorbar(colorbar, theme)
    for axis in axes:
        axis.setPen(fg)
        axis.setTextPen(fg)
    if item.titleLabel is not None and item.titleLabel.text:
        item.titleLabel.setText(item.titleLabel.text, color=theme.foreground)
    legend = item.legend
    if legend is not None:
        legend.setLabelTextColor(theme.foreground)
        for _, label in legend.items:  # setLabelTextColor alone does not re-render the text
            label.setText(label.text)
        legend.setBrush(pg.mkBrush(theme.background + "00"))  # outside the data: no box
        legend.setPen(pg.mkPen(None))
    recolor = getattr(plot, "recolor", None)
    if callable(recolor):
        recolor(theme)


def _limit_pen(theme: Theme) -> pg.mkPen:
    return pg.mkPen(theme.limit, width=2, style=Qt.PenStyle.DashLine)


def export_png(plot: pg.PlotWidget, path: str) -> None:
    """The plot as a PNG (pyqtgraph ImageExporter), written atomically."""
    from pyqtgraph.exporters import ImageExporter

    image = ImageExporter(plot.getPlotItem()).export(toBytes=True)
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buf, "PNG"):
        raise OSError(f"could not encode {path} as PNG")
    buf.close()
    atomic_write_bytes(path, bytes(data.data()))


def export_svg(plot: pg.PlotWidget, path: str) -> None:
    """The plot as SVG (pyqtgraph SVGExporter), written atomically."""
    from pyqtgraph.exporters import SVGExporter

    out = SVGExporter(plot.getPlotItem()).export(toBytes=True)
    atomic_write_bytes(path, out if isinstance(out, bytes) else bytes(out))


class WeightsPlot(pg.PlotWidget):
    """Bars of p_i and of p_i(1 - p_i), with the 0.25 ceiling of the latter."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        item = self.getPlotItem()
        item.setTitle("Softmax weights")
        item.setLabel("bottom", "score index i")
        item.setLabel("left", "value (probability, no unit)")
        item.showGrid(y=True, alpha=0.25)
        item.setMenuEnabled(True)
        self.legend = outside_legend(item)  # below the axis: inside, it covered the bars
        self.weights = pg.BarGraphItem(x=[0], height=[0], width=0.4, brush=LIGHT.weight,
                                       pen=pg.mkPen(None), name="p_i")
        self.diag = pg.BarGraphItem(x=[0], height=[0], width=0.4, brush=LIGHT.jacobian,
                                    pen=pg.mkPen(None), name="p_i (1 − p_i) = J_ii")
        item.addItem(self.weights)
        item.addItem(self.diag)
        self.limit = pg.InfiniteLine(pos=JACOBIAN_ENTRY_MAX, angle=0, pen=_limit_pen(LIGHT))
        item.addItem(self.limit)
        self.limit_sample = pg.PlotDataItem(pen=_limit_pen(LIGHT))
        self.legend.addItem(self.limit_sample, "max of p(1 − p) = 0.25")
        item.setYRange(0, 1.02, padding=0)
        self.setMouseEnabled(x=True, y=False)
        self.log = False
        self._result: InspectResult | None = None

    def recolor(self, theme: Theme) -> None:
        """Series colours of ``theme`` (called by :func:`apply_plot_theme`)."""
        self.weights.setOpts(brush=theme.weight)
        self.diag.setOpts(brush=theme.jacobian)
        self.limit.setPen(_limit_pen(theme))
        self.limit_sample.setPen(_limit_pen(theme))
        self.legend.update()

    def set_log(self, log: bool) -> None:
        """log₁₀ axis: saturated rows have weights like 1e-7 that a linear axis cannot show."""
        self.log = log
        self.getPlotItem().setLabel(
            "left", "log₁₀ value (probability, no unit)" if log else "value (probability, no unit)")
        if self._result is not None:
            self.update_result(self._result)

    def update_result(self, r: InspectResult) -> None:
        self._result = r
        title = r.weights_name[0].upper() + r.weights_name[1:]
        if r.sink is not None:
            title += f" (the sink takes {cell(r.sink_weight, compact=True)})"
        self.getPlotItem().setTitle(title)
        n = r.weights.size
        x = np.arange(n, dtype=float)
        width = 0.4 if n <= 256 else 0.5
        if self.log:
            lw, ld = _log10(r.weights), _log10(r.p_one_minus_p)
            finite = np.concatenate([lw[np.isfinite(lw)], ld[np.isfinite(ld)]])
            floor = max(float(np.floor(finite.min())) - 1.0 if finite.size else -1.0, -330.0)
            lw, ld = np.maximum(np.nan_to_num(lw, neginf=floor), floor), np.maximum(
                np.nan_to_num(ld, neginf=floor), floor)
            self.weights.setOpts(x=x - width / 2, y0=floor, height=lw - floor, width=width)
            self.diag.setOpts(x=x + width / 2, y0=floor, height=ld - floor, width=width)
            self.limit.setValue(float(np.log10(JACOBIAN_ENTRY_MAX)))
            self.getPlotItem().setYRange(floor, 0.05, padding=0)
        else:
            self.weights.setOpts(x=x - width / 2, y0=0.0, height=r.weights, width=width)
            self.diag.setOpts(x=x + width / 2, y0=0.0, height=r.p_one_minus_p, width=width)
            self.limit.setValue(JACOBIAN_ENTRY_MAX)
            self.getPlotItem().setYRange(0, 1.02, padding=0)
        self.getPlotItem().setXRange(-0.7, n - 0.3, padding=0)
        ticks = [(i, str(i)) for i in range(n)] if n <= 24 else None
        self.getPlotItem().getAxis("bottom").setTicks([ticks] if ticks else None)


def _log10(values: np.ndarray) -> np.ndarray:
    """log10 for display; exact zeros (underflowed weights) give -inf, put on the floor above."""
    with np.errstate(divide="ignore"):
        return np.log10(values)


def jacobian_title(r: InspectResult) -> str:
    """The heatmap's title: the formula of this result's Jacobian."""
    if r.sigmoid:
        text = "Sigmoid Jacobian J = diag(p_i (1 − p_i))"
    elif r.sink is not None:
        text = "Jacobian with a sink J = diag(p) − p pᵀ (Σp < 1)"
    else:
        text = "Softmax Jacobian J = diag(p) − p pᵀ"
    return text + (" × tanh′(z_j/c)" if r.softcap else "")


class JacobianHeatmap(pg.PlotWidget):
    """diag(p) − p pᵀ as a heatmap, values in the cells for small n, hover value for any n."""

    hovered = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        item = self.getPlotItem()
        item.setTitle("Softmax Jacobian J = diag(p) − p pᵀ")
        # J is the derivative with respect to the logits z = s / scale, not the raw scores s:
        # per unit of raw score the softmax passes back J_ij / scale
        item.setLabel("bottom", "column j (J_ij = ∂p_i/∂z_j, z = s / scale)")
        item.setLabel("left", "row i")
        item.setAspectLocked(True)
        item.invertY(True)
        self.image, self.colorbar = heatmap_with_colorbar(
            item, "J_ij", _DIVERGING, (-JACOBIAN_ENTRY_MAX, JACOBIAN_ENTRY_MAX), 14, row_major=True)
        # short tick labels (-2e-4, 0.10): the bar's axis is narrow and would clip -0.0002
        self.colorbar.axis.tickStrings = lambda values, scale, spacing: [
            cell(v * scale, compact=True) for v in values]
        self.colorbar.axis.setWidth(50)
        self._texts: list[pg.TextItem] = []
        self._result: InspectResult | None = None
        self.fit_colors = False
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        item.vb.sigResized.connect(self._fit_fonts)
        item.vb.sigRangeChanged.connect(self._fit_fonts)

    def set_fit_colors(self, fit: bool) -> None:
        """Colour range ±0.25 (the largest possible entry; fixed) or ±max|J| of these scores."""
        self.fit_colors = fit
        if self._result is not None:
            self.update_result(self._result)

    def update_result(self, r: InspectResult) -> None:
        self._result = r
        self.getPlotItem().setTitle(jacobian_title(r))
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
        self.getPlotItem().setRange(xRange=(-0.5, n - 0.5), yRange=(-0.5, n - 0.5), padding=0.02)
        axis_ticks = [[(i, str(i)) for i in range(n)]] if n <= 24 else None
        for name in ("bottom", "left"):
            self.getPlotItem().getAxis(name).setTicks(axis_ticks)
        self._update_texts(jac, limit)

    def cell_texts(self) -> list[str]:
        """The numbers written in the cells, row by row (empty when n > CELL_TEXT_MAX)."""
        return [t.textItem.toPlainText() for t in self._texts if t.isVisible()]

    def _update_texts(self, jac: np.ndarray, limit: float) -> None:
        n = jac.shape[0]
        shown = n * n if n <= CELL_TEXT_MAX else 0
        while len(self._texts) < shown:
            t = pg.TextItem(anchor=(0.5, 0.5))
            self.getPlotItem().addItem(t)
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
        r = self._result
        if r is None or r.jacobian.shape[0] > CELL_TEXT_MAX:
            return
        n = r.jacobian.shape[0]
        vb = self.getPlotItem().vb
        cell_px = min(vb.width() / max(vb.viewRect().width(), 1e-9),
                      vb.height() / max(vb.viewRect().height(), 1e-9))
        longest = max((len(t.textItem.toPlainText()) for t in self._texts[: n * n]), default=4)
        px = int(max(6, min(16, cell_px * 0.9 / (0.6 * longest), cell_px * 0.35)))
        for t in self._texts[: n * n]:
            font = t.textItem.font()
            if font.pixelSize() != px:
                font.setPixelSize(px)
                t.setFont(font)

    def leaveEvent(self, event: Any) -> None:
        """The read-out goes when the pointer leaves the heatmap."""
        self.hovered.emit("")
        super().leaveEvent(event)

    def _on_mouse_moved(self, pos: QPointF) -> None:
        r = self._result
        if r is None or not self.getPlotItem().vb.sceneBoundingRect().contains(pos):
            self.hovered.emit("")
            return
        p = self.getPlotItem().vb.mapSceneToView(pos)
        i, j = int(np.floor(p.y() + 0.5)), int(np.floor(p.x() + 0.5))
        n = r.jacobian.shape[0]
        if 0 <= i < n and 0 <= j < n:
            text = f"J[{i}, {j}] = ∂p_{i}/∂z_{j} = {r.jacobian[i, j]:.8g}"
            if r.scale != 1.0:  # the raw score s = scale * z: per unit of s, J / scale
                text += f"; ∂p_{i}/∂s_{j} = J/{r.scale:g} = {r.jacobian[i, j] / r.scale:.8g}"
            self.hovered.emit(text)
        else:
            self.hovered.emit("")


class MaxEntryGauge(pg.PlotWidget):
    """The largest |J_ij| as a horizontal bar against the 0.25 maximum."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        item = self.getPlotItem()
        item.setTitle("Largest |J_ij| against its maximum 0.25")
        item.setLabel("bottom", "largest |J_ij| (no unit)")
        item.hideAxis("left")
        item.getAxis("bottom").enableAutoSIPrefix(False)
        self.legend = outside_legend(item)
        self.bar = pg.BarGraphItem(x0=[0], y=[0], height=[0.6], width=[0.0],
                                   brush=LIGHT.jacobian, pen=pg.mkPen(None),
                                   name="largest |J_ij|")
        item.addItem(self.bar)
        self.limit = pg.InfiniteLine(pos=JACOBIAN_ENTRY_MAX, angle=90, pen=_limit_pen(LIGHT))
        item.addItem(self.limit)
        self.limit_sample = pg.PlotDataItem(pen=_limit_pen(LIGHT))
        self.legend.addItem(self.limit_sample, "maximum 0.25")
        item.setXRange(0, 0.27, padding=0)
        item.setYRange(-0.4, 1.1, padding=0)
        self.setMouseEnabled(x=False, y=False)
        self.setMaximumHeight(170)
        self.value = 0.0
        self.theme: Theme = LIGHT
        self.value_text = pg.TextItem(anchor=(0.0, 0.5), color=LIGHT.jacobian)
        item.addItem(self.value_text)
        self._result: InspectResult | None = None

    def recolor(self, theme: Theme) -> None:
        """Series colours of ``theme`` (called by :func:`apply_plot_theme`)."""
        self.theme = theme
        self.bar.setOpts(brush=theme.jacobian)
        self.limit.setPen(_limit_pen(theme))
        self.limit_sample.setPen(_limit_pen(theme))
        self.legend.update()
        if self._result is not None:
            self.update_result(self._result)

    def update_result(self, r: InspectResult) -> None:
        self._result = r
        self.value = r.jacobian_max_abs
        self.bar.setOpts(x0=[0.0], y=[0.0], width=[r.jacobian_max_abs], height=[0.6])
        # the number sits right of the bar (left of it when the bar nearly fills the plot)
        right = r.jacobian_max_abs < 0.17
        self.value_text.setAnchor((0.0, 0.5) if right else (1.0, 0.5))
        # beside the bar: the bar's colour; on it: the background colour (reads on the bar)
        self.value_text.setColor(self.theme.jacobian if right else self.theme.background)
        self.value_text.setText(f" {r.jacobian_max_abs:.3g} " if r.jacobian_max_abs >= 1e-3
                                else f" {cell(r.jacobian_max_abs)} ")
        self.value_text.setPos(r.jacobian_max_abs, 0.0)
