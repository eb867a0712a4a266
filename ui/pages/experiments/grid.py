"""The grid view: a heatmap of one metric over (value of an axis) x (rule) that fills as jobs
finish, with a colour bar, the value (± its uncertainty) written in small grids, a hover read-out
that disappears when the pointer leaves, and a click that asks to open the cell's job.

Empty cells (no finished job, or no value such as never reaching the target) are drawn as a
light grey: the image is RGBA from the colour map, so nothing non-finite reaches the plot.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QWidget

from engine.experiments.figures import label
from ui.pages.experiments.grid_data import EVERY_JOB, GRID_METRICS, GridData
from ui.plots.base import PlotPanel

#: cells whose value is written into them at most (larger grids: hover for the numbers)
TEXT_CELLS_MAX = 48
#: the grid's plot area at least: less than a panel's usual 200 px, so that the grid, a row of
#: figures and the verdict fit a 1280x720 window in presentation mode too
GRID_MIN_HEIGHT = 150
#: the grid's height besides its rows (title, x ticks and title, margins), and a row's height
#: at least: with more rules the grid grows, and its rules' names keep a readable size
GRID_FRAME_PX = 100
ROW_PX = 12
EMPTY_RGBA = (200, 200, 200, 90)
COLOR_MAP = "viridis"


class GridPanel(PlotPanel):
    """``refresh(grid_data)`` draws it; ``choice_changed`` fires when the metric or x changes;
    ``job_clicked(index)`` when a cell with a finished job is clicked."""

    plot_id = "experiment_grid"
    title = "Grid"
    figure_page = "experiments"
    choice_changed = Signal()
    job_clicked = Signal(int)

    def build(self) -> None:
        self.plot = self.add_plot(0, 0, "", "scaling rule", legend=False)
        self.glw.setMinimumHeight(GRID_MIN_HEIGHT)
        # every column named (two lines, then a smaller type if need be), every rule named
        self.plot.getAxis("bottom").stagger = self.plot.getAxis("bottom").categories = True
        self.plot.getAxis("left").categories = True
        self.plot.getViewBox().setMouseEnabled(x=False, y=False)
        self.plot.getViewBox().invertY(True)
        self.plot.hideButtons()
        self.image = pg.ImageItem()
        self.plot.addItem(self.image)
        self.cmap = pg.colormap.get(COLOR_MAP)
        self.cbar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=self.cmap, interactive=False,
                                    width=14, label="")
        self.glw.addItem(self.cbar, row=0, col=1)
        self.texts: list[pg.TextItem] = []
        self._shown_texts = 0  #: how many of ``texts`` hold a cell's number now
        self.plot.getViewBox().sigResized.connect(self._fit_texts)
        self.grid: GridData | None = None
        self.hover_text = ""  #: the current hover read-out (tests read it)
        self.metric_box = QComboBox(self)
        for m in GRID_METRICS:
            self.metric_box.addItem(label(m), m)
        self.metric_box.setToolTip("The result each cell shows (over the finished jobs there)")
        self.x_box = QComboBox(self)
        self.x_box.setToolTip("The columns: one per value of this axis (the mean over the other "
                              "axes and seeds), or one per job")
        self.metric_box.currentIndexChanged.connect(self.choice_changed)
        self.x_box.currentIndexChanged.connect(self.choice_changed)
        self.header.insertWidget(1, QLabel("  metric:"))
        self.header.insertWidget(2, self.metric_box)
        self.header.insertWidget(3, QLabel(" columns:"))
        self.header.insertWidget(4, self.x_box)
        self.readout = QLabel(self)
        self.readout.setWordWrap(True)
        self.readout.setMinimumHeight(18)
        self.layout().addWidget(self.readout)
        scene = self.glw.scene()
        scene.sigMouseMoved.connect(self._on_move)
        scene.sigMouseClicked.connect(self._on_click)
        self._leave_filter = _LeaveFilter(self._clear_hover, self)
        self.glw.installEventFilter(self._leave_filter)

    # -- choices -------------------------------------------------------------------------------
    @property
    def metric(self) -> str:
        return self.metric_box.currentData() or GRID_METRICS[0]

    @property
    def x(self) -> str:
        return self.x_box.currentData() or EVERY_JOB

    def set_choices(self, xs: tuple[str, ...], x: str | None = None,
                    metric: str | None = None) -> None:
        """The x choices of a new spec (keeping the current one where it still exists)."""
        want = x if x in xs else (self.x if self.x in xs else (xs[0] if xs else EVERY_JOB))
        self.x_box.blockSignals(True)
        self.x_box.clear()
        for name in xs:
            self.x_box.addItem("every job" if name == EVERY_JOB else label(name), name)
        self.x_box.setCurrentIndex(max(self.x_box.findData(want), 0))
        self.x_box.blockSignals(False)
        if metric in GRID_METRICS:
            self.metric_box.blockSignals(True)
            self.metric_box.setCurrentIndex(self.metric_box.findData(metric))
            self.metric_box.blockSignals(False)
        self.choice_changed.emit()

    # -- drawing -------------------------------------------------------------------------------
    def data_key(self, state: Any) -> Any:
        return id(state) if state is not None else None

    def draw(self, grid: GridData) -> None:
        self.grid = grid
        n_rows, n_cols = len(grid.rules), len(grid.x_labels)
        vals = [c.value for row in grid.cells for c in row if c is not None]
        lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
        if grid.metric == "success":
            lo, hi = 0.0, 1.0
        if hi <= lo:
            lo, hi = lo - 0.5 * (abs(lo) or 1.0), hi + 0.5 * (abs(hi) or 1.0)
        rgba = np.zeros((max(n_cols, 1), max(n_rows, 1), 4), dtype=np.ubyte)
        rgba[...] = EMPTY_RGBA
        for r, row in enumerate(grid.cells):
            for c, cell in enumerate(row):
                if cell is not None:
                    t = (cell.value - lo) / (hi - lo)
                    rgba[c, r] = self.cmap.map(np.array([min(max(t, 0.0), 1.0)]), mode="byte")[0]
        self.image.setImage(rgba, autoLevels=False, levels=None)
        self.image.setRect(QRectF(-0.5, -0.5, max(n_cols, 1), max(n_rows, 1)))
        self.cbar.setLevels((lo, hi))
        # (no title on the colour bar: the plot's title names the metric; along the bar it was
        # cut at 1280x720 and ran over the bar's numbers in presentation mode)
        bottom = self.plot.getAxis("bottom")
        step = max(1, n_cols // 12)  # no crowded labels: every k-th column
        bottom.setTicks([[(float(c), _tick(grid.x_labels[c]))
                          for c in range(0, n_cols, step)]])
        self.plot.getAxis("left").setTicks([[(float(r), rule) for r, rule in enumerate(grid.rules)]])
        # rows of about ROW_PX for their names (seven rules took 8 px type in 150 px)
        self.glw.setMinimumHeight(max(GRID_MIN_HEIGHT, GRID_FRAME_PX + ROW_PX * n_rows))
        self.plot.setLabel("bottom", "job" if grid.x == EVERY_JOB else label(grid.x))
        self.plot.setTitle(f"{label(grid.metric)} ({grid.error}; grey: no value yet)",
                           size="9pt", color=self.theme.foreground)
        self.plot.setXRange(-0.5, n_cols - 0.5, padding=0)
        self.plot.setYRange(-0.5, n_rows - 0.5, padding=0)
        self._draw_texts(grid, lo, hi)

    def _draw_texts(self, grid: GridData, lo: float, hi: float) -> None:
        n = len(grid.rules) * len(grid.x_labels)
        cells = [(r, c, cell) for r, row in enumerate(grid.cells) for c, cell in enumerate(row)
                 if cell is not None] if n <= TEXT_CELLS_MAX else []
        while len(self.texts) < len(cells):
            t = pg.TextItem(anchor=(0.5, 0.5))
            self.plot.addItem(t, ignoreBounds=True)
            self.texts.append(t)
        for i, t in enumerate(self.texts):
            if i >= len(cells):
                t.hide()
                continue
            r, c, cell = cells[i]
            dark = (cell.value - lo) / (hi - lo) < 0.6  # viridis: light text on the dark part
            t.setColor("#FFFFFF" if dark else "#202020")
            t.setText(f"{cell.value:.2f}" if grid.metric == "success" else f"{cell.value:.3g}")
            t.setPos(float(c), float(r))
            t.show()
        self._shown_texts = len(cells)
        self._fit_texts()

    def _fit_texts(self, *_args: Any) -> None:
        """The cells' numbers only while each fits its cell (with 16 columns they ran into each
        other): otherwise none, and the hover read-out gives a cell's number."""
        shown = self.texts[:self._shown_texts]
        if not shown or self.grid is None:
            return
        view = self.plot.getViewBox()
        cols, rows = max(len(self.grid.x_labels), 1), max(len(self.grid.rules), 1)
        cell_w, cell_h = view.width() / cols, view.height() / rows
        widest = max(t.textItem.boundingRect().width() - 2 * t.textItem.document().documentMargin()
                     for t in shown)
        tallest = max(t.textItem.boundingRect().height() - 2 * t.textItem.document().documentMargin()
                      for t in shown)
        fits = widest <= cell_w - 2 and tallest <= cell_h
        for t in shown:
            t.setVisible(fits)

    def data_rows(self) -> list[dict[str, Any]]:
        grid = self.grid
        if grid is None:
            return []
        rows = []
        for r, rule in enumerate(grid.rules):
            for c, text in enumerate(grid.x_labels):
                cell = grid.cells[r][c]
                if cell is not None:
                    rows.append({"scaling": rule, "column": text, grid.metric: cell.value,
                                 "lo": cell.lo, "hi": cell.hi, "n": cell.n})
        return rows

    # -- hover and click -----------------------------------------------------------------------
    def cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        grid = self.grid
        if grid is None or not self.plot.getViewBox().sceneBoundingRect().contains(scene_pos):
            return None
        p = self.plot.getViewBox().mapSceneToView(scene_pos)
        c, r = round(p.x()), round(p.y())
        if 0 <= r < len(grid.rules) and 0 <= c < len(grid.x_labels):
            return r, c
        return None

    def scene_pos_of(self, row: int, col: int) -> QPointF:
        """Scene position of a cell's centre (tests click there)."""
        return self.plot.getViewBox().mapViewToScene(QPointF(float(col), float(row)))

    def _on_move(self, pos: QPointF) -> None:
        at = self.cell_at(pos)
        if at is None:
            self._clear_hover()
            return
        self.hover_text = self.grid.describe(*at)
        self.readout.setText(self.hover_text)

    def _clear_hover(self) -> None:
        self.hover_text = ""
        self.readout.setText("")

    def _on_click(self, event: Any) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        at = self.cell_at(event.scenePos())
        if at is None:
            return
        jobs = self.grid.jobs[at[1]]
        if jobs:
            self.job_clicked.emit(jobs[0])


def _tick(text: str) -> str:
    """"lr=0.01" -> "0.01" (the axis title names the field); "job 3 (seed=1)" -> "3" (the axis
    title is "job": sixteen "job N" were too wide for their columns, and the last went missing)."""
    text = text.split(" (")[0]
    return text.removeprefix("job ") if text.startswith("job ") else text.split("=", 1)[-1]


class _LeaveFilter(QObject):
    """Calls ``on_leave`` when the pointer leaves the watched widget."""

    def __init__(self, on_leave: Any, parent: QWidget) -> None:
        super().__init__(parent)
        self._on_leave = on_leave

    def eventFilter(self, obj: Any, event: Any) -> bool:
        if event.type() == QEvent.Type.Leave:
            self._on_leave()
        return False
