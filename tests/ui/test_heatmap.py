"""The one heatmap-with-colour-bar set-up: the bar sits beside its image and follows the panel's
theme (the weights heatmap's bar kept the light theme's dark text on the dark background)."""

from __future__ import annotations

from ui.theme import DARK, LIGHT


def _bar_colours(bar) -> tuple[str, str]:
    """The colour of the bar's tick labels and of its title."""
    ticks = bar.axis.textPen().color().name().lower()
    return ticks, bar.getAxis("left").labelStyle.get("color", "").lower()


def test_a_panel_heatmap_bar_is_themed_with_its_panel(qtbot):
    from ui.plots.weights import WeightsPanel

    panel = WeightsPanel()
    qtbot.addWidget(panel)
    assert panel.colorbars == [panel.cbar]
    assert panel.cbar.getAxis("left").labelText == "weight p"  # the bar's title
    panel.apply_theme(DARK)
    assert _bar_colours(panel.cbar) == (DARK.foreground.lower(), DARK.foreground.lower())
    panel.apply_theme(LIGHT)
    assert _bar_colours(panel.cbar) == (LIGHT.foreground.lower(), LIGHT.foreground.lower())


def test_heatmap_with_colorbar_links_image_and_bar(qtbot):
    import numpy as np
    import pyqtgraph as pg

    from ui.plots.heatmap import heatmap_with_colorbar

    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    plot = widget.addPlot()
    image, bar = heatmap_with_colorbar(plot, "J_ij", "CET-D1", (-2.0, 2.0), 10, row_major=True)
    assert image in plot.items
    image.setImage(np.array([[0.0, 1.0], [2.0, 3.0]]))
    assert image.image.shape == (2, 2) and image.axisOrder == "row-major"
    assert tuple(bar.levels()) == (-2.0, 2.0)
    assert tuple(image.getLevels()) == (-2.0, 2.0)  # the bar sets the image's levels


def test_the_row_marker_label_takes_each_export_styles_type_size(qtbot):
    """"row 0 → bars" kept the screen's 8 px in a slide export whose text is 18 px and more."""
    from ui.export.plot_files import PRESETS, style_panel
    from ui.plots.weights import WeightsPanel

    for style in ("slide", "paper"):
        panel = WeightsPanel()
        qtbot.addWidget(panel)
        assert panel.row_marker.label.textItem.font().pixelSize() != PRESETS[style]["tick_px"]
        style_panel(panel, style)
        assert panel.row_marker.label.textItem.font().pixelSize() == PRESETS[style]["tick_px"]
