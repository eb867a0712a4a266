"""Every Training plot as PNG and SVG, rendered offscreen with the page's own panels.

Used by ``train --figures`` (imported only then). The two heatmaps are written once per run
(``train_logit_dist_<rule>.png``, ``train_probe_attention_<rule>.png``), for layer 0, head 0.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SIZE = (900, 560)


def write_training_figures(snap: Any, out_dir: str | os.PathLike[str], theme: str = "light"
                           ) -> list[Path]:
    from ui.export import export_panel
    from ui.headless import offscreen_panel, settle_layout
    from ui.pages.training.plots import PANEL_CLASSES, TrainingView

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for cls in PANEL_CLASSES:
        with offscreen_panel(cls, SIZE, theme) as panel:
            runs = range(len(snap.rules)) if cls.uses_selection else [0]
            for r in runs:
                panel.refresh(TrainingView(snap, run=r), force=True)
                settle_layout(panel)
                name = cls.plot_id + (f"_{snap.rules[r]}" if cls.uses_selection else "")
                for kind in ("png", "svg"):
                    written.append(export_panel(panel, out / f"{name}.{kind}", kind))
    return written
