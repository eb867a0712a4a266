"""Export all of an experiment into a new folder: every figure (PNG, SVG and its points as CSV),
the grid view, and the engine's own result files (summary.csv, points.csv, metrics.csv,
experiment.json),
written into a staging folder that becomes the new folder only when complete."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ui.export.plot_files import ExportError, export_figures, new_export_dir


def export_experiment(parent: str | Path, spec: Any, results: list[dict[str, Any]],
                      panels: Iterable[Any], status: str, workers: int = 1,
                      executor: str = "") -> Path:
    """Everything into a new time-stamped folder under ``parent``; returns the folder."""
    from engine.experiments.runner import write_outputs

    if spec is None or not results:
        raise ExportError("Nothing to export yet: run the experiment first.")
    with new_export_dir(parent) as (stage, out):
        export_figures(list(panels), stage)
        write_outputs(stage, spec, list(results), status, workers, executor)
    return out
