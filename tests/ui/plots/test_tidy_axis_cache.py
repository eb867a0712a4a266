"""An axis (with the plot's grid, which it draws) is kept as a pixmap: a repaint after a curve's
new data copies it instead of drawing the tick labels and translucent grid lines again (most of
a panel's paint), and a change of the axis (its range, its pen) draws it again."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from ui.plots import tidy_axis


def _plot(qtbot, monkeypatch):
    paints: list[str] = []
    original = tidy_axis.TidyAxis.paint

    def counted(self, *args) -> None:
        paints.append(self.orientation)
        original(self, *args)

    monkeypatch.setattr(tidy_axis.TidyAxis, "paint", counted)
    view = pg.GraphicsLayoutWidget()
    qtbot.addWidget(view)
    view.resize(400, 260)
    plot = view.addPlot(axisItems=tidy_axis.tidy_axes())
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.setXRange(0, 10, padding=0)
    plot.setYRange(0, 1, padding=0)
    curve = plot.plot(np.arange(11.0), np.full(11, 0.5))
    view.show()
    qtbot.waitExposed(view)
    qtbot.wait(50)  # (laid out)
    view.viewport().repaint()
    assert {"left", "bottom"} <= set(paints)  # both axes drawn once
    return view, plot, curve, paints


def test_new_data_repaints_from_the_cached_axis(qtbot, monkeypatch):
    view, _plot_item, curve, paints = _plot(qtbot, monkeypatch)
    paints.clear()
    for k in range(3):
        curve.setData(np.arange(11.0), np.linspace(0.1, 0.9, 11) * (k + 1) / 3)
        view.viewport().repaint()
    assert paints == []  # the data area was repainted, the axes (and grid) copied


def test_a_changed_axis_is_drawn_again(qtbot, monkeypatch):
    view, plot, _curve, paints = _plot(qtbot, monkeypatch)
    paints.clear()
    plot.setYRange(0, 100, padding=0)  # new tick labels on the left axis
    view.scene().prepareForPaint()  # (the range settles, as after a panel's draw)
    view.viewport().repaint()
    assert "left" in paints
    paints.clear()
    plot.getAxis("bottom").setPen(pg.mkPen("#FF0000"))  # (pyqtgraph resets its drawing only)
    view.viewport().repaint()
    assert "bottom" in paints
    paints.clear()
    plot.getAxis("left").setStyle(tickTextOffset=12)  # (pyqtgraph resets its drawing, no update)
    view.viewport().repaint()
    assert "left" in paints
    image = view.grab().toImage()
    reds = sum(image.pixelColor(x, y).red() > 200 and image.pixelColor(x, y).green() < 80
               for x in range(0, image.width(), 2) for y in range(image.height()))
    assert reds > 100  # the red axis line (and ticks) on screen, not the cached black ones
