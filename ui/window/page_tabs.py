"""The main window's tabs, each page in a scroll area of its own.

A QTabWidget asks for the largest minimum size of all its pages, shown or not: a wide page once
visited (a row of buttons in presentation mode's larger type) widened the window for good, past
a 1280x720 projector. Here a page that needs more room than the window has scrolls inside its tab
instead, and the window's minimum size never depends on the pages. ``widget``,
``currentWidget``, ``indexOf`` and ``setCurrentWidget`` speak of the pages themselves, so callers
never see the scroll areas.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QTabWidget, QWidget

WRAPPER_NAME = "page_scroll"


def page_of(widget: QWidget | None) -> QWidget | None:
    """The page a tab holds (inside its scroll area, if it has one)."""
    if isinstance(widget, QScrollArea) and widget.objectName() == WRAPPER_NAME:
        return widget.widget()
    return widget


class PageTabs(QTabWidget):
    """QTabWidget whose pages scroll instead of widening the window."""

    @staticmethod
    def _wrap(page: QWidget) -> QWidget:
        if isinstance(page, QScrollArea):  # (the Simulation page scrolls by itself)
            return page
        area = QScrollArea()
        area.setObjectName(WRAPPER_NAME)
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        area.setWidget(page)
        return area

    def scroll_area(self, page: QWidget) -> QScrollArea | None:
        """The scroll area around ``page`` (the page itself if it is one), or None."""
        index = self.indexOf(page)
        area = super().widget(index) if index >= 0 else None
        return area if isinstance(area, QScrollArea) else None

    def addTab(self, page: QWidget, title: str) -> int:  # Qt's names from here on
        return super().addTab(self._wrap(page), title)

    def insertTab(self, index: int, page: QWidget, title: str) -> int:
        return super().insertTab(index, self._wrap(page), title)

    def removeTab(self, index: int) -> None:
        """The tab goes and so does its scroll area; the page stays (its owner deletes it)."""
        area = super().widget(index)
        super().removeTab(index)
        if area is not None and page_of(area) is not area:
            page = area.takeWidget()
            page.setParent(None)
            area.deleteLater()

    def widget(self, index: int) -> QWidget | None:
        return page_of(super().widget(index))

    def currentWidget(self) -> QWidget | None:
        return page_of(super().currentWidget())

    def indexOf(self, page: QWidget) -> int:
        for index in range(self.count()):
            if self.widget(index) is page or super().widget(index) is page:
                return index
        return -1

    def setCurrentWidget(self, page: QWidget) -> None:
        index = self.indexOf(page)
        if index >= 0:
            self.setCurrentIndex(index)
