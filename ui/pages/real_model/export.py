"""Export all of the Real-model page: every plot (each grid group), the probe's own files, and
the scale audit / what-if / port audit figures and tables when they were run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.io import write_csv
from engine.probe.audit_export import write_audit_outputs
from engine.probe.export import write_outputs
from ui.export.plot_files import export_panel, new_export_dir
from ui.pages.real_model.panels import GRID_GROUPS


def export_probe(page: Any, parent: str | Path) -> Path:
    """A new time-stamped folder with PNG + SVG (+ CSV) of every plot, heads.csv, scores.npz,
    config.json (model name, text, versions)."""
    with new_export_dir(parent) as (stage, out):  # no half export is ever left behind
        _export_into(page, stage)
    return out


def _export_into(page: Any, out: Path) -> None:
    if page.view is not None:
        _export_probe_into(page, out)
    views = (("audit", page.audit_result is not None), ("whatif", page.whatif_result is not None))
    for name, present in views:
        if present:  # (a tab never shown is built now: its figure is exported)
            panel = page.lazy.get(name)
            page._refresh_audit_views()
            if panel._state is not None:
                panel.refresh(panel._state, force=True)
            for kind in ("png", "svg", "csv"):
                export_panel(panel, out / f"{panel.plot_id}.{kind}", kind)
    port = page.lazy.built("port")  # (never shown: never run)
    if port is not None and port.result is not None:  # the Port audit tab: its figure, table and port.json
        from engine.probe.port.export import write_port_outputs

        port.refresh(port.result, force=True)
        for kind in ("png", "svg", "csv"):
            export_panel(port, out / f"{port.plot_id}.{kind}", kind)
        write_port_outputs(out, port.result)
    if page.audit_result is not None:  # an OSError: new_export_dir names the folder
        runs = page.run_results if page.weights_path is not None else [page.audit_result]
        write_audit_outputs(out, runs or [page.audit_result], page.whatif_result)
    elif page.whatif_result is not None:
        w = page.whatif_result
        write_csv(out / "whatif.csv", w.rows(), w.columns())


def _export_probe_into(page: Any, out: Path) -> None:
    grid = page.grid_panel
    shown = grid.group
    try:
        for gid in GRID_GROUPS:
            grid.set_group(gid)
            grid.refresh(page.view, force=True)
            for kind in ("png", "svg", "csv"):
                export_panel(grid, out / f"grid_{gid}.{kind}", kind)
    finally:
        grid.set_group(shown)
        grid.refresh(page.view, force=True)
    for panel in (page.scores_panel, page.attention_panel):
        for kind in ("png", "svg", "csv"):
            export_panel(panel, out / f"{panel.plot_id}_L{page.layer}_H{page.head}.{kind}", kind)
    write_outputs(page.result, out)
