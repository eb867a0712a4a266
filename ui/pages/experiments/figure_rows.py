"""The Experiments page's figures: rows of three, as many rows as the room holds, the rest a
page away (◀ ▶), never a scroll bar. At 1280x720 one row fits: an experiment of four or five
figures (``logit_control``, ``gradient_chain``) had the second row below a scroll bar, and the
whole page scrolled with it.

The room decides the rows, the rows never decide the room: the widget's minimum height is one
row and the page bar, whatever the figures, so a resize cannot feed back into the layout.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

#: figures side by side in a row
COLUMNS = 3
#: in presentation mode (wider figures at the larger type: a five-rule legend on one line, not
#: two, and a y title that reads)
PRESENT_COLUMNS = 2
#: a figure panel's height at least (its header, a plot that reads, the legend)
ROW_MIN = 200
#: its plot's height at least: room in ROW_MIN for a header of two lines at presentation
#: mode's type (a plot panel's own 200 px overflowed the row, whose edge cut the legend off)
PLOT_MIN = 130


class FigureRows(QWidget):
    """``set_panels(panels)`` takes the page's figure panels; ``page`` is the first row shown
    over ``rows_per_page``; ◀ ▶ (or ``show_page``) turn the page."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panels: list[QWidget] = []
        self.page = 0  #: index of the page shown (a page is ``rows_fit`` rows of ``columns``)
        self.columns = COLUMNS  #: figures side by side (``set_columns``)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(2, 2, 2, 2)
        outer.setSpacing(2)
        self.grid = QGridLayout()
        self.grid.setContentsMargins(0, 0, 0, 0)
        outer.addLayout(self.grid, 1)
        nav = QHBoxLayout()
        nav.setContentsMargins(0, 0, 0, 0)
        self.prev_button = QToolButton(self)
        self.prev_button.setText("◀")
        self.prev_button.setToolTip("The previous figures")
        self.next_button = QToolButton(self)
        self.next_button.setText("▶")
        self.next_button.setToolTip("The next figures")
        self.page_label = QLabel(self)
        for w in (self.prev_button, self.page_label, self.next_button):
            nav.addWidget(w)
        nav.addStretch(1)
        self.nav = QWidget(self)
        self.nav.setLayout(nav)
        outer.addWidget(self.nav)
        self.prev_button.clicked.connect(lambda: self.show_page(self.page - 1))
        self.next_button.clicked.connect(lambda: self.show_page(self.page + 1))
        self._rows = 0  #: rows laid out now
        self.setMinimumHeight(ROW_MIN + self.nav.sizeHint().height() + 6)

    def rows_fit(self) -> int:
        """Rows of figures the widget's height holds (one at least)."""
        room = self.height() - self.nav.sizeHint().height() - 6
        return max(1, room // ROW_MIN)

    def set_columns(self, columns: int) -> None:
        """Figures side by side from now on (the first page shown)."""
        if columns != self.columns:
            self.columns = columns
            self.page = 0
            self._lay_out(force=True)

    def pages(self) -> int:
        per = self.rows_fit() * self.columns
        return max(1, -(-len(self.panels) // per))

    def set_panels(self, panels: list[QWidget]) -> None:
        for panel in self.panels:
            self.grid.removeWidget(panel)
        self.panels = list(panels)
        for panel in self.panels:
            panel.setMinimumHeight(ROW_MIN)
            glw = getattr(panel, "glw", None)
            if glw is not None:
                glw.setMinimumHeight(PLOT_MIN)
        self.page = 0
        self._rows = 0
        self._lay_out(force=True)

    def show_page(self, page: int) -> None:
        self.page = min(max(page, 0), self.pages() - 1)
        self._lay_out(force=True)

    def shown(self) -> list[QWidget]:
        """The panels on the page shown."""
        per = self.rows_fit() * self.columns
        return self.panels[self.page * per:(self.page + 1) * per]

    def resizeEvent(self, event: Any) -> None:  # Qt's name
        super().resizeEvent(event)
        self._lay_out()

    def _lay_out(self, force: bool = False) -> None:
        rows = self.rows_fit()
        if rows == self._rows and not force:
            return
        self._rows = rows
        self.page = min(self.page, self.pages() - 1)
        shown = self.shown()
        for panel in self.panels:
            self.grid.removeWidget(panel)
            if panel not in shown:
                panel.hide()
        for i, panel in enumerate(shown):
            self.grid.addWidget(panel, i // self.columns, i % self.columns)
            panel.show()
        for r in range(self.grid.rowCount()):  # rows of an earlier layout take no room
            self.grid.setRowStretch(r, 1 if r < -(-len(shown) // self.columns) else 0)
        for c in range(self.grid.columnCount()):  # (nor do columns of an earlier layout)
            self.grid.setColumnStretch(c, 1 if c < self.columns else 0)
        pages = self.pages()
        self.nav.setVisible(pages > 1)
        first = self.page * rows * self.columns + 1
        self.page_label.setText(f"figures {first}–{first + len(shown) - 1} of {len(self.panels)}")
        self.prev_button.setEnabled(self.page > 0)
        self.next_button.setEnabled(self.page < pages - 1)
