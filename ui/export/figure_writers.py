"""Every plot of a simulation or a training run as PNG and SVG, rendered offscreen with the
app's own panels (the headless commands' figure writers).

Used by ``simulate --figures`` and ``train --figures``: no window is shown (panels render with
WA_DontShowOnScreen; with no display the Qt platform defaults to offscreen). The training heatmaps
are written once per run (``train_logit_dist_<rule>.png``, ``train_probe_attention_<rule>.png``),
for layer 0, head 0.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ui.headless import offscreen_panel

#: size of the panel the data is drawn on first (the figure itself is drawn on a copy of it at
#: its style's size: ui.export.plot_files.figure_clone)
SIZES = {"sweep": (1600, 450)}
DEFAULT_SIZE = (900, 600)
TRAINING_SIZE = (900, 560)


def _sweep_points(items: Sequence[Any]) -> tuple[Any, ...]:
    """Accept SweepPoints or plain SimulationSnapshots (one per d_k)."""
    from engine.simulate import SweepPoint

    points = []
    for i, item in enumerate(items):
        if isinstance(item, SweepPoint):
            points.append(item)
        else:
            points.append(SweepPoint(index=i, total=len(items), snapshot=item))
    # a sweep with one d_k has no curve to show; keep it anyway (the plot says so)
    return tuple(points)


def _render(cls: Any, state: Any, out: Path, prefix: str, theme: str, style: str) -> list[Path]:
    """One panel drawn offscreen and written as ``<prefix><plot_id>.png`` and ``.svg`` in
    ``style`` (ui.export.plot_files.FIGURE_STYLES: the GUI's slide and paper presets, or as on screen)."""
    from ui.export.plot_files import write_styled_figures

    with offscreen_panel(cls, SIZES.get(cls.plot_id, DEFAULT_SIZE), theme) as panel:
        panel.refresh(state, force=True)
        return write_styled_figures(panel, out, prefix + panel.plot_id, style)


def write_simulation_figures(
    snapshot: Any,
    sweep_points: Sequence[Any],
    out_dir: str | os.PathLike[str],
    theme: str = "light",
    prefix: str = "",
    with_sweep: bool = True,
    style: str = "screen",
) -> list[Path]:
    """Render every plot of ``snapshot`` to ``<prefix><plot_id>.png`` / ``.svg`` in ``out_dir``
    (and the sweep plot, unprefixed, when ``with_sweep``); returns the paths."""
    from ui.plots import PANEL_CLASSES
    from ui.simulation_run import LabState

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    points = _sweep_points(sweep_points)
    state = LabState(snapshot.config, snapshot, points, len(points), "done")
    written: list[Path] = []
    for cls in PANEL_CLASSES:
        if cls.plot_id == "sweep":
            if with_sweep:
                written += _render(cls, state, out, "", theme, style)
        else:
            written += _render(cls, state, out, prefix, theme, style)
    return written


def write_sweep_figure_sets(points: Sequence[Any], out_dir: str | os.PathLike[str],
                            theme: str = "light", sweep_points: Sequence[Any] | None = None,
                            style: str = "screen") -> list[Path]:
    """One figure set per point, named ``d{d_k}_<plot_id>`` like the arrays of histograms.npz
    (e.g. ``d64_scores.png``; with several key counts ``d{d_k}_n{n}_<plot_id>``), plus the sweep
    figures once (``sweep.png``, ``sweep.svg``) drawn from ``sweep_points`` (default: all points;
    a sweep has one axis, so with several d_k and several n the caller passes one sweep)."""
    points = _sweep_points(points)
    curve = _sweep_points(sweep_points) if sweep_points is not None else points
    several_n = len({p.snapshot.config.n_keys for p in points}) > 1
    written: list[Path] = []
    for i, point in enumerate(points):
        c = point.snapshot.config
        prefix = f"d{c.d_k}_n{c.n_keys}_" if several_n else f"d{c.d_k}_"
        # the sweep is drawn with the last point's marker (the one the table ends on)
        written += write_simulation_figures(point.snapshot, curve, out_dir, theme, prefix=prefix,
                                            with_sweep=i == len(points) - 1, style=style)
    return written


def write_training_figures(snap: Any, out_dir: str | os.PathLike[str], theme: str = "light",
                           style: str = "screen") -> list[Path]:
    """Every Training plot of ``snap`` (a TrainingSnapshot) to ``<plot_id>[_<rule>].png/.svg``;
    ``style``: ui.export.plot_files.FIGURE_STYLES (the GUI's slide and paper presets, or as on screen)."""
    from ui.export.plot_files import write_styled_figures
    from ui.plots.training.panels import PANEL_CLASSES, TrainingView

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for cls in (c for c in PANEL_CLASSES if c.has_figure(snap)):
        runs = range(len(snap.rules)) if cls.uses_selection else [0]
        for r in runs:  # a fresh panel per figure: a style is applied once
            with offscreen_panel(cls, TRAINING_SIZE, theme) as panel:
                panel.refresh(TrainingView(snap, run=r), force=True)
                name = cls.plot_id + (f"_{snap.rules[r]}" if cls.uses_selection else "")
                written += write_styled_figures(panel, out, name, style)
    return written
