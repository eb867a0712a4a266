"""Figures (PNG/SVG), plot data (CSV) and "Export all".

Every file goes through ``engine.io.atomic_write_bytes`` (temp name, then rename); the result
files are the CLI's own (``engine.export.write_simulation_outputs``). Failures become
:class:`ExportError` with a message a user can act on.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
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
    """PNG and SVG of every panel in the "screen" style (and its data as CSV) into ``out_dir``,
    named ``<prefix><plot id>``."""
    written = []
    for panel in panels:
        written += write_styled_figures(panel, out_dir, f"{prefix}{panel.plot_id}", "screen",
                                        with_csv)
    return written


@contextmanager
def new_export_dir(parent: str | Path) -> Iterator[tuple[Path, Path]]:
    """``(stage, folder)``: write into ``stage``; it becomes the fresh time-stamped ``folder``
    under ``parent`` only when the block ends without an error (engine.io.staged), so an export
    that fails half-way (disk full, a figure that cannot be drawn) leaves nothing behind. An
    OSError is an ExportError naming the folder."""
    from engine.io import staged

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(parent) / f"attention-lab-{stamp}"
    path, i = base, 1
    while path.exists():
        i += 1
        path = base.with_name(f"{base.name}-{i}")
    stage = None
    try:
        ensure_writable_dir(Path(parent), "folder")
        with staged(path) as stage:
            yield stage, path
    except ExportError as exc:  # a file's error names the stage: name the folder instead
        raise ExportError(str(exc).replace(str(stage), str(path)) if stage else str(exc)) from exc
    except ConfigError as exc:
        raise ExportError(exc.message) from exc
    except OSError as exc:
        raise ExportError(f"Cannot write into {path}: {exc.strerror or exc}") from exc


def export_all(panels: Iterable[PlotPanel], state: Any, parent: str | Path) -> Path:
    """Everything in one new folder: figures, plot data, summary.csv, histograms.npz, config.json."""
    if state is None or state.snapshot is None:
        raise ExportError("Nothing to export yet: wait for the first results.")
    from engine.export import write_simulation_outputs

    axis = state.sweep[0].axis if state.sweep else "d_k"
    extra = {"source": "gui", "sweep_axis": axis,
             "sweep_d_ks": [p.d_k for p in state.sweep],
             "sweep_n_keys": [p.n_keys for p in state.sweep],
             "sweep_trials": state.sweep[0].snapshot.trials_done if state.sweep else 0,
             "sweep_trials_per_point": [p.snapshot.trials_done for p in state.sweep]}
    with new_export_dir(parent) as (stage, out):
        export_figures(panels, stage)
        write_simulation_outputs(stage, [state.snapshot], extra)
    return out


#: export styles: "screen" (a figure of the panel as on screen, 1200 px wide, the strip of
#: sweep plots wider than tall: ``PlotPanel.screen_figure_size``), "slide" (a 1920x1080 PNG for a
#: projector: text at least 18 px, thick lines) and "paper" (a single-column vector figure). Each
#: puts the panel's title on the figure; its size and type sizes never depend on the window.
PRESETS: dict[str, dict[str, Any]] = {
    "screen": {"size": None, "kind": "png", "tick_px": 12, "label_px": 13, "title_px": 14,
               "legend_px": 11, "line": 1.0},
    "slide": {"size": (1920, 1080), "kind": "png", "tick_px": 18, "label_px": 20, "title_px": 24,
              "legend_px": 18, "line": 2.0},
    "paper": {"size": (700, 460), "kind": "svg", "tick_px": 11, "label_px": 12, "title_px": 13,
              "legend_px": 11, "line": 1.0},
}
#: the presets a plot's menu offers besides plain PNG and SVG (which are the "screen" style)
MENU_PRESETS = ("slide", "paper")


#: ``--figure-style`` of the CLI figure writers: one of PRESETS (PNG and SVG alike)
FIGURE_STYLES = tuple(PRESETS)


def figure_size(panel: PlotPanel, style: str) -> tuple[int, int]:
    """The figure's size in pixels: the style's, or (screen) the panel's own figure size."""
    size = PRESETS[style]["size"]
    return tuple(size) if size is not None else tuple(panel.screen_figure_size)


def style_panel(panel: PlotPanel, preset: str) -> None:
    """Restyle ``panel`` in place to the preset's type sizes and line widths, with the panel's
    title on the figure. Call after the last ``refresh`` (a redraw resets titles)."""
    import pyqtgraph as pg
    from PySide6.QtGui import QFont

    spec = PRESETS[preset]
    panel.figure_style = preset
    tick = QFont()
    tick.setPixelSize(spec["tick_px"])
    plots = panel.plot_items()
    # a row of narrow plots (the sweep): titles at the label size, or long ones are cut
    title_px = spec["title_px"] if len(plots) <= 2 else spec["label_px"]
    # every axis of the scene: the plots' and a colour bar's
    for axis in [i for i in panel.glw.scene().items() if isinstance(i, pg.AxisItem)]:
        if not axis.isVisible():
            continue
        axis.setStyle(tickFont=tick)
        if axis.labelText:
            axis.setLabel(axis.labelText, units=axis.labelUnits or None,
                          **{"font-size": f"{spec['label_px']}px",
                             "color": panel.theme.foreground})
    # a line's own label ("row 0 → bars" on the heatmap) at the style's tick size: it kept
    # the screen's 8 px in a slide whose text is 18 px and more
    for label in [i for i in panel.glw.scene().items() if isinstance(i, pg.InfLineLabel)]:
        font = QFont(label.textItem.font())
        font.setPixelSize(spec["tick_px"])
        label.setFont(font)
    # a row of plots: the panel's own title across the figure, over all of them
    across = len(plots) > 2 and panel.title
    if across:
        from ui.export.figure_title import add_title_row

        add_title_row(panel, f"<b>{panel.title}</b>", f"{spec['title_px']}px")
    for i, plot in enumerate(plots):
        title = plot.titleLabel.text if plot.titleLabel is not None else ""
        fitted = None
        if i == 0 and not across and hasattr(panel, "export_title"):  # a header of its own
            room = (plot.width() or figure_size(panel, preset)[0]) - 12
            fitted = panel.export_title(title_px, room)
        if fitted:
            plot.setTitle(fitted, size=f"{title_px}px", color=panel.theme.foreground)
            plot._lab_title = (None, None)  # (fitted already)
        elif i == 0 and not across and panel.title not in title:  # the panel's own title
            title = f"<b>{panel.title}</b>" + (f": {title}" if title else "")
        if title and not fitted:
            plot.setTitle(title, size=f"{title_px}px", color=panel.theme.foreground)
            plot._lab_title = (title, f"{title_px}px")  # (wrap_titles fits it to the plot)
        for item in plot.listDataItems():
            pen = item.opts.get("pen")
            if pen is not None and hasattr(item, "setPen"):
                pen = pg.mkPen(pen)
                pen.setWidthF(max(1.0, pen.widthF() * spec["line"]))
                item.setPen(pen)
    for legend in panel.legends():
        legend.opts["labelTextSize"] = f"{spec['legend_px']}px"
        for _sample, label in legend.items:
            label.setText(label.text, size=f"{spec['legend_px']}px")
        if across:  # one legend under the row: its columns again, at the style's type size
            from ui.plots.legends import fit_legend_columns

            fit_legend_columns(legend, room=0.95 * figure_size(panel, preset)[0])


def wrap_titles(panel: PlotPanel) -> bool:
    """A styled plot's title wider than its plot goes onto as few lines as fit (three at
    most): a paper figure's six sweep titles ran into each other. Call on a settled layout;
    True when a title changed (settle again)."""
    from ui.plots.tidy_axis import MAX_LABEL_LINES, split_lines

    changed = False
    for plot in panel.plot_items():
        title, size = getattr(plot, "_lab_title", (None, None))
        if not title or plot.titleLabel is None or not plot.titleLabel.isVisible():
            continue
        room = plot.width()
        # the panel's own title (bold, first) stays on one line: a figure names itself whole
        head, sep, tail = title.partition("</b>: ")
        for lines in range(1, MAX_LABEL_LINES + 1):
            if lines > 1 and sep:
                text = f"{head}</b>:<br>{split_lines(tail, lines - 1)}"
            else:
                text = split_lines(title, lines)
            if plot.titleLabel.text != text:
                plot.setTitle(text, size=size, color=panel.theme.foreground)
                changed = True
            if plot.titleLabel.item.boundingRect().width() <= room:
                break
    return changed


@contextmanager
def figure_clone(panel: PlotPanel, style: str) -> Iterator[PlotPanel]:
    """A fresh copy of ``panel`` (``make_clone``) drawn offscreen with its data and view choices,
    its plot area exactly the style's figure size, restyled (``style_panel``): the one source
    of every exported figure. Closed and deleted afterwards."""


    from ui.plots.type_scale import unscaled

    state = getattr(panel, "_state", None)
    if state is None:
        raise ExportError(f"{panel.title}: nothing to export yet")
    with unscaled():  # a figure never depends on the window (presentation mode's type)
        with _figure_clone(panel, style, state) as clone:
            yield clone


@contextmanager
def _figure_clone(panel: PlotPanel, style: str, state: Any) -> Iterator[PlotPanel]:
    from PySide6.QtCore import Qt

    from ui.headless import ensure_app, settle_layout

    app = ensure_app()
    width, height = figure_size(panel, style)
    clone = panel.make_clone()
    clone.figure_source = panel.figure_source  # (what drew it: the figure's metadata)
    try:
        clone.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        clone.glw.setFixedSize(width, height)  # the figure; the header beside it is not in it
        clone.apply_theme(panel.theme)
        clone.resize(clone.sizeHint())
        clone.show()
        app.processEvents()
        clone.refresh(state, force=True)
        clone.apply_view_state(panel.view_state())  # its choices that travel with a figure
        panel.copy_view_to(clone)
        style_panel(clone, style)
        settle_layout(clone)
        if wrap_titles(clone):
            settle_layout(clone)
        yield clone
    finally:
        clone.close()
        clone.deleteLater()
        app.processEvents()


def figure_bytes(panel: PlotPanel, style: str, kind: str) -> bytes:
    """``panel``'s current picture as a ``kind`` ("png" or "svg") figure in export ``style``."""
    with figure_clone(panel, style) as clone:
        return styled_bytes(clone, kind, figure_size(panel, style))


def preset_bytes(panel: PlotPanel, preset: str) -> bytes:
    """``panel``'s current picture redrawn offscreen at the preset's size and type sizes."""
    return figure_bytes(panel, preset, PRESETS[preset]["kind"])


def styled_bytes(panel: PlotPanel, kind: str, size: tuple[int, int]) -> bytes:
    """PNG (exactly ``size``) or SVG of a panel as it is now: no redraw, which would undo a
    style; hover read-outs hidden and off-screen legends shown, as in every export."""
    with panel._without_hover():
        if kind == "png":
            return panel.scene_png_bytes(*size)
        return panel.scene_svg_bytes()


def write_styled_figures(panel: PlotPanel, out_dir: Path, name: str, style: str,
                         with_csv: bool = False) -> list[Path]:
    """``<name>.png`` and ``.svg`` (and ``.csv``) of a drawn panel in ``style`` (FIGURE_STYLES),
    both from one figure copy: the figure writers' one path (the CLI's and Export all)."""
    from engine.io import atomic_write_bytes

    if style not in FIGURE_STYLES:
        raise ValueError(f"unknown figure style {style!r} (one of {', '.join(FIGURE_STYLES)})")
    written = []
    try:
        with figure_clone(panel, style) as clone:
            size = figure_size(panel, style)
            for kind in FIGURE_KINDS:
                written.append(atomic_write_bytes(out_dir / f"{name}.{kind}",
                                                  styled_bytes(clone, kind, size)))
        if with_csv:
            written.append(export_panel(panel, out_dir / f"{name}.csv", "csv"))
    except OSError as exc:
        raise ExportError(f"Cannot write into {out_dir}: {exc.strerror or exc}") from exc
    except (RuntimeError, ValueError) as exc:
        raise ExportError(f"Cannot export {panel.title}: {exc}") from exc
    return written


def export_preset(panel: PlotPanel, path: str | Path, preset: str) -> Path:
    from engine.io import atomic_write_bytes

    path = Path(path)
    try:
        return atomic_write_bytes(path, preset_bytes(panel, preset))
    except OSError as exc:
        raise ExportError(f"Cannot write {path}: {exc.strerror or exc}") from exc
    except (RuntimeError, ValueError) as exc:
        raise ExportError(f"Cannot export {panel.title}: {exc}") from exc
