"""A one-line label that never asks for width: where its row is narrow (a 1280x720 window,
presentation mode's larger type, the tour's dock beside the page) its text ends in "…" and the
tooltip has it whole, instead of the row widening the page and the page scrolling sideways."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """Plain text, cut with an ellipsis to the width it gets; ``full_text`` is all of it."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.set_text(text)

    @property
    def full_text(self) -> str:
        return self._full

    def set_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight,
                                              max(1, self.contentsRect().width()))
        if shown != self.text():
            super().setText(shown)

    def minimumSizeHint(self) -> QSize:  # Qt's names from here on
        return QSize(1, super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + 4, super().sizeHint().height())

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._elide()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._elide()
