"""Portable SVG: an exported SVG drawn by independent renderers (resvg, CairoSVG) looks like the PNG
export of the same plot, for a sweep (curves and bands), a bar chart and a heatmap; heatmap
cells stay crisp even in a renderer that smooths images. The comparison itself must fail on a
garbled bar chart, an extra frame and a blurred heatmap."""

from __future__ import annotations

import numpy as np
import pytest

from engine.config import SimulationConfig, SweepConfig
from engine.simulate import run_simulation, sweep

#: block size (px) of the grey-level comparison, and what "the same picture" allows: text is
#: hinted differently by each renderer, so single glyphs differ; a wrong element differs widely
BLOCK = 4
MEAN_TOL = 1.5  #: mean |difference| of the blocks (their most different channel, 0..255)
BAD_BLOCK = 40  #: a block this far off is "different"
BAD_FRAC = 0.002  #: ... and at most this fraction of them may be


def _rgb(image: object) -> np.ndarray:
    """rows x columns x 3 (R, G, B): colour counts (a viridis heatmap is nearly flat in grey)."""
    from PySide6.QtGui import QImage

    img = image.convertToFormat(QImage.Format.Format_RGB888)
    a = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine())
    return a[:, : img.width() * 3].reshape(img.height(), img.width(), 3).astype(np.float64)


def _png(data: bytes) -> np.ndarray:
    from PySide6.QtGui import QImage

    img = QImage.fromData(data, "PNG")
    assert not img.isNull()
    return _rgb(img)


def _blocks(a: np.ndarray) -> np.ndarray:
    h, w = a.shape[0] // BLOCK * BLOCK, a.shape[1] // BLOCK * BLOCK
    return a[:h, :w].reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK, 3).mean(axis=(1, 3))


def resvg(svg: bytes, shape: tuple[int, int], smooth_images: bool = False) -> np.ndarray:
    """``svg`` rasterized by resvg at ``shape`` (rows, columns), with Qt's own sans-serif font
    (resvg-py comes with the ``test`` extra)."""
    resvg_py = pytest.importorskip("resvg_py")
    from ui.export.svg_portable import qt_font_family

    family = qt_font_family("Sans Serif")
    out = resvg_py.svg_to_bytes(svg_string=svg.decode("utf-8"), width=shape[1], height=shape[0],
                                sans_serif_family=family, font_family=family,
                                image_rendering="optimize_quality" if smooth_images
                                else "optimize_speed")
    return _png(bytes(out))


def cairo_svg(svg: bytes, shape: tuple[int, int]) -> np.ndarray:
    """``svg`` rasterized by CairoSVG (Cairo, the library behind librsvg's output) at ``shape``
    (the ``test`` extra installs it; it needs the system's libcairo)."""
    try:
        import cairosvg
    except (ImportError, OSError) as exc:  # cairocffi raises OSError without libcairo
        pytest.skip(f"CairoSVG is not available: {exc}")
    out = cairosvg.svg2png(bytestring=svg, output_width=shape[1], output_height=shape[0],
                           background_color="white")
    return _png(out)


def qt_svg(svg: bytes, shape: tuple[int, int]) -> np.ndarray:
    """``svg`` drawn by Qt's own SVG renderer (it drew a frame round every plot)."""
    from PySide6.QtCore import QByteArray
    from PySide6.QtGui import QColor, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    img = QImage(shape[1], shape[0], QImage.Format.Format_RGB32)
    img.fill(QColor("white"))
    painter = QPainter(img)
    QSvgRenderer(QByteArray(svg)).render(painter)
    painter.end()
    return _rgb(img)


def difference(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(mean block difference, fraction of blocks off by more than BAD_BLOCK)."""
    assert abs(a.shape[0] - b.shape[0]) <= 1 and abs(a.shape[1] - b.shape[1]) <= 1  # rounding
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    a, b = a[:h, :w], b[:h, :w]
    d = np.abs(_blocks(a) - _blocks(b)).max(axis=2)  # the channel that differs most
    return float(d.mean()), float((d > BAD_BLOCK).mean())


def same_picture(a: np.ndarray, b: np.ndarray) -> bool:
    mean, bad = difference(a, b)
    return mean < MEAN_TOL and bad < BAD_FRAC


@pytest.fixture(scope="module")
def state():
    from ui.simulation_run import LabState

    cfg = SimulationConfig(trials=400, n_keys=12, scalings=("none", "sqrt", "dk"))
    snap = run_simulation(cfg)
    # few trials at small d_k: bands wide enough to see
    points = tuple(sweep(SweepConfig(SimulationConfig(trials=60, n_keys=12,
                                                      scalings=cfg.scalings), (1, 8, 64, 512))))
    return LabState(cfg, snap, points, len(points), "done")


def _export(cls, state, size=(900, 560)):
    """(the plain PNG export as an array, the plain SVG export, the figure's image rect or None):
    both exports as the plot's menu writes them (a copy of the panel at the figure's size)."""
    from ui.export.plot_files import figure_clone
    from ui.headless import offscreen_panel

    with offscreen_panel(cls, size) as panel:
        panel.refresh(state, force=True)
        png = _png(panel.png_bytes())
        svg = panel.svg_bytes()
        with figure_clone(panel, "screen") as clone:  # the same layout: where the heatmap is
            image = getattr(clone, "image", None)
            rect = image.sceneBoundingRect() if image is not None else None
        return png, svg, rect


def _raw_svg(cls, state):
    """pyqtgraph's own SVG of the figure (before :func:`portable_svg`)."""
    from pyqtgraph.exporters import SVGExporter

    from ui.export.plot_files import figure_clone
    from ui.headless import offscreen_panel

    with offscreen_panel(cls, (900, 560)) as panel:
        panel.refresh(state, force=True)
        with figure_clone(panel, "screen") as clone:
            return bytes(SVGExporter(clone.glw.scene()).export(toBytes=True))


@pytest.fixture(scope="module")
def figures(state, qapp):
    from ui.plots.histograms import ScoresPanel
    from ui.plots.sweep import SweepPanel
    from ui.plots.weights import WeightsPanel

    return {"sweep": _export(SweepPanel, state, (1500, 420)),
            "scores": _export(ScoresPanel, state),
            "weights": _export(WeightsPanel, state)}


@pytest.fixture(scope="module")
def training_loss(qapp):
    """The Training loss figure (log y, three runs): its SVG drew two curves past the plot."""
    pytest.importorskip("torch")
    from engine.training.config import TrainingConfig
    from engine.training.trainer import run_training
    from ui.plots.training.panels import LossPanel, TrainingView

    cfg = TrainingConfig(d_model=16, heads=2, items_max=5, classes=4, batch=8, probe_size=2,
                         scalings=("none", "sqrt", "dk"), steps=30, log_every=3, device="cpu",
                         hist_bins=20, lr=0.05)
    _, snap = run_training(cfg)
    return _export(LossPanel, TrainingView(snap), (420, 260))  # a small panel, as at 1280x720


@pytest.mark.parametrize("renderer", [resvg, cairo_svg, qt_svg], ids=["resvg", "cairosvg", "qt"])
@pytest.mark.parametrize("plot", ["sweep", "scores", "weights", "train_loss"])
@pytest.mark.slow
def test_svg_drawn_by_another_renderer_matches_the_png(request, plot, renderer):
    source = request.getfixturevalue("training_loss" if plot == "train_loss" else "figures")
    png, svg, _rect = source if plot == "train_loss" else source[plot]
    drawn = renderer(svg, png.shape)
    mean, bad = difference(png, drawn)
    assert same_picture(png, drawn), f"{plot}: mean {mean:.2f}, {bad:.2%} of blocks differ"


def test_sweep_bands_are_drawn(figures):
    """The ±1.96 SE bands (they were empty paths: edge curves without a pen had no path)."""
    import xml.etree.ElementTree as ET

    _png, svg, _rect = figures["sweep"]
    root = ET.fromstring(svg)
    bands = [g for g in root.iter("{http://www.w3.org/2000/svg}g")
             if (g.get("id") or "").startswith("FillBetweenItem")]
    assert bands
    for band in bands:
        paths = band.findall(".//{http://www.w3.org/2000/svg}path")
        assert paths and all(len(p.get("d", "")) > 20 for p in paths)


def test_svg_is_self_describing(figures):
    import xml.etree.ElementTree as ET

    _png, svg, _rect = figures["weights"]
    root = ET.fromstring(svg)
    assert root.get("width") and root.get("height")  # renderers need a size
    families = {el.get("font-family") for el in root.iter() if el.get("font-family")}
    assert families and all(f.endswith("sans-serif") for f in families)  # a generic fallback
    assert 'vector-effect' not in svg.decode()


def test_comparison_fails_on_a_garbled_bar_chart(figures, state):
    """pyqtgraph's own bars (rects under a scaled transform, non-scaling strokes) come out as
    spikes in resvg: the comparison must say so."""

    from ui.export.svg_portable import portable_svg
    from ui.plots.weights import WeightsPanel

    png, _svg, _rect = figures["weights"]
    garbled = portable_svg(_raw_svg(WeightsPanel, state), bake_rects=False)
    assert not same_picture(png, resvg(garbled, png.shape))


def test_comparison_fails_on_an_extra_frame(figures):
    png, svg, _rect = figures["scores"]
    h, w = png.shape[:2]
    frame = (f'<rect x="1" y="1" width="{w - 2}" height="{h - 2}" fill="none" stroke="#000000" '
             'stroke-width="2"/></svg>')
    framed = svg.decode().replace("</svg>", frame).encode()
    assert not same_picture(png, resvg(framed, png.shape))


def _ignoring_hints(svg: bytes) -> bytes:
    """``svg`` as a renderer that ignores ``image-rendering`` sees it (Qt's, older librsvg)."""
    import re

    text = re.sub(r'\s(image-rendering="[^"]*"|style="image-rendering:[^"]*")', "", svg.decode())
    return re.sub(r"<style>.*?</style>", "", text, flags=re.S).encode()


def _heat_area(img: np.ndarray, rect) -> np.ndarray:
    x0, y0 = round(rect.left()) + 3, round(rect.top()) + 3
    x1, y1 = round(rect.right()) - 3, round(rect.bottom()) - 3
    return img[y0:y1, x0:x1]


def test_heatmap_cells_stay_crisp_in_a_smoothing_renderer(figures, state):
    """Even drawn by a renderer that smooths images and ignores the hints not to, the heatmap's
    cells look as in Qt's PNG; the image left as pyqtgraph wrote it (a few pixels stretched)
    blurs there, and the comparison with the PNG fails."""

    from ui.export.svg_portable import portable_svg
    from ui.plots.weights import WeightsPanel

    png, svg, rect = figures["weights"]
    qt = _heat_area(png, rect)
    crisp = np.abs(_heat_area(resvg(_ignoring_hints(svg), png.shape, smooth_images=True), rect)
                   - qt).mean()
    assert crisp < 1.5  # Qt's PNG draws the cells crisp

    blurred = resvg(_ignoring_hints(portable_svg(_raw_svg(WeightsPanel, state),
                                                 crisp_images=False)), png.shape, smooth_images=True)
    assert np.abs(_heat_area(blurred, rect) - qt).mean() > max(2.0, 2 * crisp)
    assert not same_picture(png, blurred)


def test_png_legend_scales_with_the_export_width(state, qapp):
    """pyqtgraph's legends ignore transformations: a PNG exported at twice the screen's width
    drew the legend's text at screen size (and one narrower than the screen cut an entry off).
    The legend's dark text must be twice as tall, like everything else."""
    from pyqtgraph.exporters import ImageExporter

    from ui.headless import offscreen_panel, settle_layout
    from ui.plots.histograms import ScoresPanel

    def text_rows(img: np.ndarray, top: float, bottom: float, scale: float) -> int:
        band = img[max(0, round(scale * top) - 4): round(scale * bottom) + 4]
        dark = (band < 90).all(axis=2).any(axis=1)  # rows with the foreground's text
        rows = np.nonzero(dark)[0]
        return int(rows[-1] - rows[0] + 1) if rows.size else 0

    with offscreen_panel(ScoresPanel, (900, 560)) as panel:
        panel.refresh(state, force=True)
        settle_layout(panel)
        source = ImageExporter(panel.glw.scene()).getSourceRect()
        legend = panel.plot.legend.sceneBoundingRect().translated(-source.left(), -source.top())
        width = source.width()
        one = text_rows(_png(panel.scene_png_bytes(round(width))), legend.top(), legend.bottom(), 1)
        two = text_rows(_png(panel.scene_png_bytes(round(2 * width))), legend.top(), legend.bottom(),
                        2)
        assert one > 5
        assert two == pytest.approx(2 * one, rel=0.2)
        # the on-screen legend is left as pyqtgraph has it
        flag = panel.plot.legend.GraphicsItemFlag.ItemIgnoresTransformations
        assert panel.plot.legend.flags() & flag
