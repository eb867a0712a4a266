"""Every plot of a simulation as PNG and SVG, rendered offscreen with the window's own panels.

Used by ``simulate --figures``: no window is shown (panels render with WA_DontShowOnScreen; with
no display the Qt platform defaults to offscreen).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ui.headless import ensure_app

#: panel size in pixels (the sweep has five small plots, so it is wider)
SIZES = {"sweep": (1600, 450)}
DEFAULT_SIZE = (900, 600)


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


def write_simulation_figures(
    snapshot: Any,
    sweep_points: Sequence[Any],
    out_dir: str | os.PathLike[str],
    theme: str = "light",
) -> list[Path]:
    """Render every plot to ``<plot_id>.png`` and ``<plot_id>.svg`` in ``out_dir``; returns the paths."""
    app = ensure_app()
    from PySide6.QtCore import Qt

    from ui.export import export_figures
    from ui.pages.simulation.run import LabState
    from ui.plots import PANEL_CLASSES
    from ui.theme import THEMES

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    points = _sweep_points(sweep_points)
    state = LabState(snapshot.config, snapshot, points, len(points), "done")
    written: list[Path] = []
    for cls in PANEL_CLASSES:
        panel = cls()
        try:
            panel.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
            panel.resize(*SIZES.get(cls.plot_id, DEFAULT_SIZE))
            panel.apply_theme(THEMES[theme])
            panel.show()
            app.processEvents()
            panel.refresh(state, force=True)
            app.processEvents()
            written += export_figures([panel], out, with_csv=False)
        finally:
            panel.close()
            panel.deleteLater()
            app.processEvents()
    return written
