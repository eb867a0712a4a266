"""The "export this plot" dialog every page shares: ask for a file, write the plot, report; and
the question every writer asks before it replaces files the user did not pick in a dialog."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QMessageBox, QWidget

from ui.export.plot_files import PRESETS, ExportError, export_panel, export_preset
from ui.file_dialogs import save_file

FILTERS = {"png": "PNG image (*.png)", "svg": "SVG image (*.svg)", "csv": "CSV data (*.csv)",
           "slide": "PNG image for a slide (*.png)", "paper": "SVG image for a paper (*.svg)"}


def ask_overwrite(parent: QWidget, folder: str | Path, files: list[str]) -> bool:
    """Ask before replacing ``files`` in ``folder`` (a few named, then a count); True: replace.
    No is the default: a user's files are never replaced by accident."""
    shown = "\n".join(files[:8]) + (f"\n… and {len(files) - 8:,} more" if len(files) > 8 else "")
    answer = QMessageBox.question(
        parent, "Replace files?",
        f"{folder} already holds files this would replace:\n\n{shown}\n\nReplace them?",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No)
    return answer == QMessageBox.StandardButton.Yes


def export_panel_dialog(parent: QWidget, panel: Any, kind: str,
                        report: Callable[[str, bool], None]) -> Path | None:
    """Ask where (the last folder used, else Pictures or Documents), then write ``panel`` as
    ``kind`` (png, svg, csv or a preset); ``report(text, error)`` tells the user what happened.
    Returns the path written (None: cancelled or failed)."""
    suffix = PRESETS[kind]["kind"] if kind in PRESETS else kind
    name = f"{panel.plot_id}_{kind}" if kind in PRESETS else panel.plot_id
    path = save_file(parent, f"Export {panel.title}", f"{name}.{suffix}",
                     FILTERS.get(kind, f"*.{suffix}"))
    if not path:
        return None
    try:
        if kind in PRESETS:
            export_preset(panel, path, kind)
        else:
            export_panel(panel, path, kind)
    except ExportError as exc:
        report(str(exc), True)
        return None
    report(f"wrote {path}", False)
    return Path(path)
