"""A sweep point whose mean the trials cannot estimate is neither drawn nor given a band: the
hover says so and the CSV row leaves the mean and SE empty."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from engine.stats import Estimate
from ui.plots.sweep import _Series, read_out


def test_read_out_says_not_estimable_instead_of_a_number():
    assert read_out(Estimate(1e-66, 1e-67, estimable=False), 32) == "not estimable from 32 trials"
    assert read_out(Estimate(0.25, 0.01), 200) == "0.25 ± 0.02"


def test_a_not_estimable_point_has_no_curve_point_and_no_band(qtbot):
    plot = pg.PlotItem()
    s = _Series(plot, "#0072B2", pg.mkPen("#0072B2"), "sqrt")
    x = np.array([2.0, 64.0, 2048.0])
    s.set(x, np.array([0.5, 0.1, 1e-66]), np.array([0.01, 0.01, 1e-67]), True,
          np.array([True, True, False]))
    cx, cy = s.curve.getData()
    assert len(cx) == 2 and np.allclose(cy, [0.5, 0.1])
    lx, _ = s.lo.getData()
    hx, _ = s.hi.getData()
    assert len(lx) == len(hx) == 2
