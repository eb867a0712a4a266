"""Rows of the CSV a plot exports (the numbers it draws): helpers shared by the panels."""

from __future__ import annotations

from typing import Any

import numpy as np


def hist_rows(series: str, edges: np.ndarray, density: np.ndarray, **extra: Any) -> list[dict[str, Any]]:
    """CSV rows of one histogram series (bin edges and density)."""
    rows = []
    for lo, hi, d in zip(edges[:-1], edges[1:], density, strict=False):
        rows.append({"series": series, "bin_lo": float(lo), "bin_hi": float(hi),
                     "density": float(d), **extra})
    return rows
