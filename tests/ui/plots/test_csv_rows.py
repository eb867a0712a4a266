"""The numbers a plot exports: one row per histogram bin; nothing non-finite is drawn."""

from __future__ import annotations

import numpy as np

from ui.plots.csv_rows import hist_rows
from ui.plots.finite import finite


def test_hist_rows_give_each_bin_its_edges_and_density() -> None:
    rows = hist_rows("sqrt", np.array([0.0, 0.5, 1.0]), np.array([0.4, 1.6]), d_k=64)
    assert rows == [
        {"series": "sqrt", "bin_lo": 0.0, "bin_hi": 0.5, "density": 0.4, "d_k": 64},
        {"series": "sqrt", "bin_lo": 0.5, "bin_hi": 1.0, "density": 1.6, "d_k": 64},
    ]
    assert all(type(v) is float for row in rows for k, v in row.items() if k.startswith(("bin", "den")))


def test_finite_replaces_nan_and_inf_with_zero() -> None:
    out = finite(np.array([1.0, np.nan, np.inf, -np.inf, -2.0], dtype=np.float32))
    assert out.dtype == np.float64 and out.tolist() == [1.0, 0.0, 0.0, 0.0, -2.0]
