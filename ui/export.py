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

    axis = state.sweep[0].axis if state.sweep else "d_k"
    extra = {"source": "gui", "sweep_axis": axis,
             "sweep_d_ks": [p.d_k for p in state.sweep],
             "sweep_n_keys": [p.n_keys for p in state.sweep],
             "sweep_trials": state.sweep[0].snapshot.trials_done if state.sweep else 0,
             "sweep_trials_per_point": [p.snapshot.trials_done for p in state.sweep]}
    try:
        write_simulation_outputs(out, [state.snapshot], extra)
    except OSError as exc:
        raise ExportError(f"Cannot write into {out}: {exc.strerror or exc}") from exc
    return out


#: export presets: "slide" (a 1920x1080 PNG for a projector: text at least 18 px, thick lines, the
#: panel's title on the figure) and "paper" (a single-column vector figure)
PRESETS: dict[str, dict[str, Any]] = {
    "slide": {"size": (1920, 1080), "kind": "png", "tick_px": 18, "label_px": 20, "title_px": 24,
              "legend_px": 18, "line": 2.0},
    "paper": {"size": (700, 460), "kind": "svg", "tick_px": 11, "label_px": 12, "title_px": 13,
              "legend_px": 11, "line": 1.0},
}


def preset_bytes(panel: PlotPanel, preset: str) -> bytes:
    """``panel``'s current picture redrawn offscreen at the preset's size and type sizes."""
    import pyqtgraph as pg
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFont

    from ui.headless import ensure_app, settle_layout

    spec = PRESETS[preset]
    state = getattr(panel, "_state", None)
    if state is None:
        raise ExportError(f"{panel.title}: nothing to export yet")
    app = ensure_app()
    clone = type(panel)()
    try:
        clone.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        width, height = spec["size"]
        header = clone.header_label.sizeHint().height() + 8
        clone.resize(width + 4, height + header)
        clone.apply_theme(panel.theme)
        clone.show()
        app.processEvents()
        clone.refresh(state, force=True)
        tick = QFont()
        tick.setPixelSize(spec["tick_px"])
        for i, plot in enumerate(clone.plot_items()):
            for name in ("left", "bottom"):
                axis = plot.getAxis(name)
                axis.setStyle(tickFont=tick)
                if axis.labelText:
                    axis.setLabel(axis.labelText, units=axis.labelUnits or None,
                                  **{"font-size": f"{spec['label_px']}px",
                                     "color": panel.theme.foreground})
            title = plot.titleLabel.text if plot.titleLabel is not None else ""
            if i == 0 and clone.title not in title:  # the panel's own title on the figure
                title = f"<b>{clone.title}</b>" + (f": {title}" if title else "")
            if title:
                plot.setTitle(title, size=f"{spec['title_px']}px", color=panel.theme.foreground)
            for item in plot.listDataItems():
                pen = item.opts.get("pen")
                if pen is not None and hasattr(item, "setPen"):
                    pen = pg.mkPen(pen)
                    pen.setWidthF(max(1.0, pen.widthF() * spec["line"]))
                    item.setPen(pen)
        for legend in clone.legends():
            legend.opts["labelTextSize"] = f"{spec['legend_px']}px"
            for _sample, label in legend.items:
                label.setText(label.text, size=f"{spec['legend_px']}px")
        settle_layout(clone)
        if spec["kind"] == "png":
            return clone._png_bytes(width, height)  # exactly the slide's size
        return clone._svg_bytes()
    finally:
        clone.close()
        clone.deleteLater()
        app.processEvents()


def export_preset(panel: PlotPanel, path: str | Path, preset: str) -> Path:
    from engine.io import atomic_write_bytes

    path = Path(path)
    try:
        return atomic_write_bytes(path, preset_bytes(panel, preset))
    except OSError as exc:
        raise ExportError(f"Cannot write {path}: {exc.strerror or exc}") from exc
    except (RuntimeError, ValueError) as exc:
        raise ExportError(f"Cannot export {panel.title}: {exc}") from exc
