"""Tick labels for log10 axes: decades, 1-2-5 values, or round linear values in a narrow range."""

from __future__ import annotations

import math


def log_ticks(lo: float, hi: float) -> list[list[tuple[float, str]]]:
    """Major/minor ticks for a log10 axis spanning [lo, hi] (in log10 units): decades labelled,
    plus 2 and 5 when the span is under two decades (pyqtgraph's own labels crowd)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [[], []]
    k0, k1 = math.floor(lo), math.ceil(hi)
    if k1 - k0 > 12:
        step = math.ceil((k1 - k0) / 8)
        k0 -= k0 % step
    else:
        step = 1
    major, minor = [], []
    for k in range(k0, k1 + 1):
        for m in range(1, 10):
            v = math.log10(m) + k
            if not lo - 1e-9 <= v <= hi + 1e-9:
                continue
            if m == 1 and (k - k0) % step == 0:
                major.append((v, _pow10_label(m, k)))
            elif m in (2, 5) and hi - lo < 2:
                major.append((v, _pow10_label(m, k)))
            elif step == 1:
                minor.append((v, ""))
    if len(major) < 2:  # within a decade, between 1-2-5 values: a plot with one label or none
        major = _linear_ticks_in_log(lo, hi)
    return [major, minor]


def _linear_ticks_in_log(lo: float, hi: float, most: int = 4) -> list[tuple[float, str]]:
    """Evenly spaced round values (a 1-2-5 step) between 10**lo and 10**hi, at their log10
    positions: a narrow log range still gets two or more labels."""
    a, b = 10.0**lo, 10.0**hi
    raw = (b - a) / most
    if not (math.isfinite(raw) and raw > 0):
        return []
    unit = 10.0 ** math.floor(math.log10(raw))
    step = next(m * unit for m in (1, 2, 5, 10) if m * unit >= raw)
    ticks = []
    k = math.ceil(a / step - 1e-9)
    while k * step <= b * (1 + 1e-9):
        v = k * step
        if v > 0:
            ticks.append((math.log10(v), f"{v:.3g}"))
        k += 1
    return ticks


def _pow10_label(m: int, k: int) -> str:
    v = m * 10.0**k
    return f"{v:g}" if -3 <= k <= 3 else f"{m}e{k}"
