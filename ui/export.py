"""Figures (PNG/SVG), plot data (CSV) and "Export all".

Every file goes through ``engine.io.atomic_write_bytes`` (temp name, then rename); the result
files are the CLI's own (``engine.export.write_simulation_outputs``). Failures become
:class:`ExportError` with a message a user can act on.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.io import ensure_writable_dir
from ui.plots.base import PlotPanel

FIGURE_KINDS = ("png", "svg")


class ExportError(Exception):
    """A file could not be written; the message names the path and the reason."""


def export_panel(panel: PlotPanel, path: str | Path, kind: str) -> Path:
    path = Path(path)
    try:
        return panel.export(path, kind)
    except OSError as exc:
        raise ExportError(f"Cannot write {path}: {exc.strerror or exc}") from exc
    except (RuntimeError, ValueError) as exc:
        raise ExportError(f"Cannot export {panel.title}: {exc}") from exc


def export_figures(panels: Iterable[PlotPanel], out_dir: Path, with_csv: bool = True,
                   prefix: str = "") -> list[Path]:
    """PNG and SVG of every panel (and its data as CSV) into ``out_dir``, named
    ``<prefix><plot id>``."""
    written = []
    for panel in panels:
        for kind in (*FIGURE_KINDS, *(("csv",) if with_csv else ())):
            written.append(export_panel(panel, out_dir / f"{prefix}{panel.plot_id}.{kind}", kind))
    return written


def new_export_dir(parent: str | Path) -> Path:
    """A fresh, writable, time-stamped folder under ``parent``."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(parent) / f"attention-lab-{stamp}"
    path, i = base, 1
    while path.exists():
        i += 1
        path = base.with_name(f"{base.name}-{i}")
    try:
        return ensure_writable_dir(path, "folder")
    except ConfigError as exc:
        raise ExportError(exc.message) from exc


def export_all(panels: Iterable[PlotPanel], state: Any, parent: str | Path) -> Path:
    """Everything in one new folder: figures, plot data, summary.csv, histograms.npz, config.json."""
    if state is None or state.snapshot is None:
        raise ExportError("Nothing to export yet: wait for the first results.")
    out = new_export_dir(parent)
    export_figures(panels, out)
    from engine.export import write_simulation_outputs

    extra = {"source": "gui", "sweep_d_ks": [p.d_k for p in state.sweep],
             "sweep_trials": state.sweep[0].snapshot.trials_done if state.sweep else 0}
    try:
        write_simulation_outputs(out, [state.snapshot], extra)
    except OSError as exc:
        raise ExportError(f"Cannot write into {out}: {exc.strerror or exc}") from exc
    return out
