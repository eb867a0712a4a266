"""The grid's cell numbers never run into each other: with 16 columns in a 1280x720 panel they
did; each number is shown only while every one fits its cell (the hover read-out has it)."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from ui.pages.experiments.grid import GridPanel
from ui.pages.experiments.grid_data import Cell, GridData


def _grid(cols: int, rows: int = 3) -> GridData:
    cells = tuple(tuple(Cell(0.123456 + r + c, 0.1, 0.2, 3) for c in range(cols))
                  for r in range(rows))
    return GridData("final_loss", "lr", tuple(f"{c}" for c in range(cols)),
                    tuple(f"rule{r}" for r in range(rows)), cells,
                    tuple((c,) for c in range(cols)), "± 1 SE")


def _overlaps(panel: GridPanel) -> int:
    rects = [t.sceneBoundingRect() for t in panel.texts if t.isVisible()]
    return sum(a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1:])


def test_cell_numbers_show_only_while_they_fit(show_widget, qtbot):
    panel = show_widget(GridPanel(), (640, 300))
    panel.draw(_grid(16))
    QApplication.processEvents()
    assert _overlaps(panel) == 0
    assert not any(t.isVisible() for t in panel.texts)  # 16 columns of 40 px: too narrow
    panel.draw(_grid(4))
    QApplication.processEvents()
    assert sum(t.isVisible() for t in panel.texts) == 12  # 4 columns: every number shows
    assert _overlaps(panel) == 0
