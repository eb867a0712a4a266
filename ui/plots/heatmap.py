"""A heatmap with its colour bar, set up one way for every page: an image item in a plot, a
non-interactive colour bar beside it (inside the plot's layout), and the bar's axis themed with
the panel. Pages call :meth:`ui.plots.base.PlotPanel.add_heatmap` (which themes the bar) or,
outside a panel, :func:`heatmap_with_colorbar` and :func:`theme_colorbar`."""

from __future__ import annotations

import pyqtgraph as pg

from ui.theme import Theme


def heatmap_with_colorbar(plot: pg.PlotItem, label: str | None = None,
                          colormap: str | pg.ColorMap = "viridis",
                          values: tuple[float, float] = (0.0, 1.0), width: int = 12,
                          row_major: bool = False) -> tuple[pg.ImageItem, pg.ColorBarItem]:
    """An image in ``plot`` and its colour bar (``label`` on the bar, range ``values``).
    ``row_major``: the image's first index is the row (y), as NumPy prints a matrix."""
    image = pg.ImageItem(axisOrder="row-major") if row_major else pg.ImageItem()
    plot.addItem(image)
    cmap = pg.colormap.get(colormap) if isinstance(colormap, str) else colormap
    bar = pg.ColorBarItem(values=values, colorMap=cmap, label=label, interactive=False, width=width)
    _tidy_bar_axis(bar)
    bar.setImageItem(image, insert_in=plot)
    return image, bar


def _tidy_bar_axis(bar: pg.ColorBarItem) -> None:
    """The bar's numbers on a TidyAxis: never drawn over each other (a short heatmap in
    presentation mode's larger type ran "1.0 0.8 0.6 0.4" together), set up as pyqtgraph sets
    up its own (ColorBarItem.__init__)."""
    from ui.plots.tidy_axis import TidyAxis

    side = "bottom" if bar.horizontal else "right"
    # the bar's title is on its other side ("left": pyqtgraph puts it there) and on a TidyAxis
    # too, so that it wraps or takes a shorter form where the bar is short: presentation mode's
    # larger type cut "fraction per bin" to "fraction per b" at the top of a 1280x720 panel
    titled = "bottom" if bar.horizontal else "left"
    label = bar.getAxis(titled).labelText
    bar.setAxisItems({side: TidyAxis(side), titled: TidyAxis(titled)} if titled != side
                     else {side: TidyAxis(side)})
    if titled != side:
        frame = bar.getAxis(titled)
        frame.setZValue(0.5)
        frame.setTicks([])
        frame.setStyle(showValues=False)
    if label:
        bar.getAxis(titled).setLabel(label)
    axis = bar.getAxis(side)
    axis.setZValue(0.5)
    if not bar.horizontal:
        axis.setWidth(45)
    axis.setStyle(showValues=True)
    axis.unlinkFromView()
    axis.setRange(*bar.values)
    bar.axis = axis


def theme_colorbar(bar: pg.ColorBarItem, theme: Theme) -> None:
    """Axis, tick labels and label of a colour bar in the theme's foreground."""
    for name in ("left", "right", "bottom", "top"):  # a ColorBarItem (a PlotItem) has all four
        axis = bar.getAxis(name)
        axis.setPen(theme.foreground)
        axis.setTextPen(theme.foreground)
        if axis.labelText:
            axis.setLabel(axis.labelText, color=theme.foreground)
