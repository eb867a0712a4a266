"""Number formatting for the inspector (display only: no statistics here)."""

from __future__ import annotations

import math


def sig(x: float, digits: int = 8) -> str:
    """``digits`` significant digits, as in docs/SCIENCE.md's worked examples (0.99966454, 1.1249742e-07)."""
    return f"{x:.{digits}g}"


def cell(x: float, compact: bool = False) -> str:
    """Short text for a heatmap cell: 0.223, -0.163, 3.4e-4, 0 (compact: 0.22, -0.16, 3e-4)."""
    if x == 0:
        return "0"
    if abs(x) >= 0.01:
        return f"{x:.2f}" if compact else f"{x:.3f}"
    mant, exp = f"{x:.0e}".split("e") if compact else f"{x:.1e}".split("e")
    return f"{mant}e{int(exp)}"


def plain(x: float) -> str:
    """A number as the user would type it back (integers without '.0'; floats round-trip)."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))
