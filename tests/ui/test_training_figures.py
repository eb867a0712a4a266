"""``train --figures`` renders every Training plot offscreen as PNG and SVG."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_figures_for_every_plot(tmp_path, qapp):
    from main import main
    from ui.plots.training.panels import PANEL_CLASSES

    args = ["train", "--d-model", "16", "--heads", "1", "--items-max", "5", "--steps", "4",
            "--log-every", "2", "--batch", "4", "--probe-size", "2", "--scaling", "none", "sqrt",
            "--device", "cpu", "--quiet", "--out", str(tmp_path), "--figures"]
    assert main(args) == 0
    for cls in PANEL_CLASSES:
        names = ([f"{cls.plot_id}_{r}" for r in ("none", "sqrt")] if cls.uses_selection
                 else [cls.plot_id])
        for name in names:
            for kind in ("png", "svg"):
                path = tmp_path / f"{name}.{kind}"
                assert path.stat().st_size > 1000, path
