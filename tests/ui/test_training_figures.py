"""``train --figures`` renders every Training plot offscreen as PNG and SVG."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


@pytest.mark.slow
def test_figures_for_every_plot(tmp_path, qapp):
    from main import main
    from ui.plots.training.panels import PANEL_CLASSES

    args = ["train", "--d-model", "16", "--heads", "1", "--items-max", "5", "--steps", "4",
            "--log-every", "2", "--batch", "4", "--probe-size", "2", "--scaling", "none", "sqrt",
            "--device", "cpu", "--quiet", "--out", str(tmp_path), "--figures",
            "--eval-lengths", "3", "8", "--eval-size", "8"]
    assert main(args) == 0
    for cls in PANEL_CLASSES:
        names = ([f"{cls.plot_id}_{r}" for r in ("none", "sqrt")] if cls.uses_selection
                 else [cls.plot_id])
        for name in names:
            for kind in ("png", "svg"):
                path = tmp_path / f"{name}.{kind}"
                assert path.stat().st_size > 1000, path


@pytest.mark.slow  # two training runs drawing every figure
def test_train_figures_use_the_figure_style(tmp_path, qapp):
    """Default slide (the GUI's preset: 1920x1080, tick text 18 px); --figure-style paper."""
    import xml.etree.ElementTree as ET

    from PySide6.QtGui import QImage

    from main import main

    args = ["train", "--d-model", "16", "--heads", "1", "--items-max", "5", "--steps", "4",
            "--log-every", "2", "--batch", "4", "--probe-size", "2", "--scaling", "sqrt",
            "--device", "cpu", "--quiet", "--figures"]
    for style, size, tick in ((None, (1920, 1080), "18"), ("paper", (700, 460), "11")):
        out = tmp_path / (style or "default")
        assert main([*args, "--out", str(out)] + (["--figure-style", style] if style else [])) == 0
        # no --eval-lengths: the length plot would hold one point per rule, so no file
        assert not list(out.glob("train_lengths*"))
        img = QImage(str(out / "train_loss.png"))
        assert (img.width(), img.height()) == size
        sizes = {el.get("font-size") for el in ET.parse(out / "train_loss.svg").getroot().iter()
                 if el.tag.endswith("text") and "".join(el.itertext()).strip().isdigit()}
        assert sizes == {tick}
