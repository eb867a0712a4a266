"""Every Training plot as PNG and SVG, rendered offscreen with the page's own panels.

Used by ``train --figures`` (imported only then). The two heatmaps are written once per run
(``train_logit_dist_<rule>.png``, ``train_probe_attention_<rule>.png``), for layer 0, head 0.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SIZE = (900, 560)


def write_training_figures(snap: Any, out_dir: str | os.PathLike[str], theme: str = "light",
                           style: str = "screen") -> list[Path]:
    """``style``: ui.export.FIGURE_STYLES (the GUI's slide and paper presets, or as on screen)."""
    from ui.export import style_size, write_styled_figures
    from ui.headless import offscreen_panel, settle_layout
    from ui.pages.training.plots import PANEL_CLASSES, TrainingView

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for cls in PANEL_CLASSES:
        runs = range(len(snap.rules)) if cls.uses_selection else [0]
        for r in runs:  # a fresh panel per figure: a style is applied once
            with offscreen_panel(cls, style_size(SIZE, style), theme) as panel:
                panel.refresh(TrainingView(snap, run=r), force=True)
                settle_layout(panel)
                name = cls.plot_id + (f"_{snap.rules[r]}" if cls.uses_selection else "")
                written += write_styled_figures(panel, out, name, style)
    return written
