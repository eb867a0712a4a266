"""Inspector data as CSV (atomic, via engine.io), testable without any dialog.

``<name>.csv`` has one row per score; the row-level numbers (Jacobian size, entropy, the sum of
the weights, the sink's weight, the soft-cap, sink and sigmoid settings, ...) are repeated on every
row so the file stands alone. ``<name>_jacobian.csv`` holds the n x n Jacobian
when n <= JACOBIAN_CSV_MAX (a 4096 x 4096 matrix would be ~400 MB of text).
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.inspect import InspectResult
from engine.io import write_csv

JACOBIAN_CSV_MAX = 512

ENTRY_COLUMNS = (
    "index", "score", "scale", "scaled_score", "weight", "p_one_minus_p",
    "jacobian_fro", "log10_jacobian_fro", "jacobian_max_abs", "entropy", "entropy_norm",
    "key_mass", "sink_weight", "softcap", "sink", "sigmoid",
)


def entry_rows(result: InspectResult) -> list[dict[str, object]]:
    summary = {
        "scale": result.scale,
        "jacobian_fro": result.jacobian_fro,
        "log10_jacobian_fro": result.log10_jacobian_fro,
        "jacobian_max_abs": result.jacobian_max_abs,
        "entropy": result.entropy,
        "entropy_norm": result.entropy_norm,
        "key_mass": result.key_mass,
        "sink_weight": result.sink_weight,
        "softcap": "" if result.softcap is None else result.softcap,
        "sink": "" if result.sink is None else result.sink,
        "sigmoid": result.sigmoid,
    }
    return [
        {
            "index": i,
            "score": float(result.scores[i]),
            "scaled_score": float(result.scaled[i]),
            "weight": float(result.weights[i]),
            "p_one_minus_p": float(result.p_one_minus_p[i]),
            **summary,
        }
        for i in range(result.scores.size)
    ]


def jacobian_rows(result: InspectResult) -> tuple[list[dict[str, object]], list[str]]:
    """The full matrix, row by row (none when n is above the engine's JACOBIAN_FULL_MAX)."""
    n = result.jacobian.shape[0]
    columns = ["row", *(f"j_{j}" for j in range(n))]
    rows = [
        {"row": i, **{f"j_{j}": float(result.jacobian[i, j]) for j in range(n)}} for i in range(n)
    ]
    return rows, columns


def jacobian_path(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path.with_name(f"{path.stem}_jacobian{path.suffix or '.csv'}")


def write_inspection_csv(path: str | os.PathLike[str], result: InspectResult) -> list[Path]:
    """Write the per-score CSV (and the Jacobian CSV for n <= 512); return the paths written."""
    path = Path(path)
    written = [write_csv(path, entry_rows(result), ENTRY_COLUMNS)]
    if result.scores.size <= JACOBIAN_CSV_MAX:
        rows, columns = jacobian_rows(result)
        written.append(write_csv(jacobian_path(path), rows, columns))
    return written
