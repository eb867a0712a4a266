"""A sweep plot's y range follows each new point (auto-range): that change must not recompute
every curve, band edge and symbol set of the plot again (pyqtgraph's dynamicRangeLimit did,
~40% of the sweep's refresh while a sweep streamed)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from ui.plots.sweep import _Series


def test_a_y_range_change_keeps_the_curves_display_data(qtbot, monkeypatch):
    view = pg.GraphicsLayoutWidget()
    qtbot.addWidget(view)
    plot = view.addPlot()
    series = _Series(plot, "#1f77b4", pg.mkPen("#1f77b4"), "sqrt")
    x = np.array([1.0, 8.0, 64.0, 512.0])
    series.set(x, np.array([0.2, 0.4, 0.5, 0.6]), np.full(4, 0.01), log_y=False)
    view.show()
    qtbot.waitExposed(view)
    recomputed: list[object] = []
    original = pg.PlotDataItem.updateItems

    def counted(self, *args, **kwargs):
        recomputed.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pg.PlotDataItem, "updateItems", counted)
    plot.setYRange(0.0, 2.0)
    view.scene().prepareForPaint()
    view.viewport().repaint()
    assert not [i for i in recomputed if i in (series.curve, series.lo, series.hi)]
    series.set(x, np.array([0.3, 0.4, 0.5, 0.6]), np.full(4, 0.01), log_y=False)
    assert series.curve in recomputed  # (new data is drawn: the counter sees a recompute)


def test_the_band_is_made_once_per_new_data_and_spans_its_edges(qtbot, monkeypatch):
    view = pg.GraphicsLayoutWidget()
    qtbot.addWidget(view)
    plot = view.addPlot()
    series = _Series(plot, "#1f77b4", pg.mkPen("#1f77b4"), "sqrt")
    made: list[object] = []
    original = pg.FillBetweenItem.updatePath

    def counted(self):
        made.append(self)
        return original(self)

    monkeypatch.setattr(pg.FillBetweenItem, "updatePath", counted)
    mean, se = np.array([0.2, 0.4, 0.5, 0.6]), np.array([0.01, 0.02, 0.01, 0.05])
    series.set(np.array([1.0, 8.0, 64.0, 512.0]), mean, se, log_y=False)
    assert made.count(series.band) == 1
    box = series.band.path().boundingRect()
    z = 1.959964  # the band is mean ± 1.96 SE: from the lowest lower edge to the highest upper
    assert np.isclose(box.top(), min(mean - z * se)) and np.isclose(box.bottom(), max(mean + z * se))
