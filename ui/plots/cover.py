"""A sheet over a widget that hides what it shows, with a sentence saying why: the tour covers the
plots that would give its question's answer away until the user has answered. It lies on top of
the widget (a child of the widget's parent, following its geometry), so nothing in the layout
moves when it comes or goes."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QWidget

from ui.theme import current_theme


class Cover(QObject):
    """Covers ``target`` while shown; ``show(text)`` / ``hide()``."""

    def __init__(self, target: QWidget) -> None:
        super().__init__(target)
        self.target = target
        self.sheet = QLabel(target.parentWidget() or target)
        self.sheet.setObjectName("plot_cover")
        self.sheet.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.sheet.setWordWrap(True)
        self.sheet.hide()
        self.wanted = False  #: covering (the sheet also hides while the target is hidden)
        target.installEventFilter(self)

    @property
    def shown(self) -> bool:
        return self.wanted

    def show(self, text: str) -> None:
        theme = current_theme()
        self.sheet.setText(text)
        self.sheet.setStyleSheet(f"QLabel#plot_cover {{ background: {theme.background}; "
                                 f"color: {theme.foreground}; padding: 12px; }}")
        self.wanted = True
        self._follow()
        self.sheet.setVisible(self.target.isVisible() or self.sheet.parentWidget() is self.target)
        self.sheet.raise_()

    def hide(self) -> None:
        self.wanted = False
        self.sheet.hide()

    def _follow(self) -> None:
        if self.sheet.parentWidget() is self.target:
            self.sheet.setGeometry(self.target.rect())
        else:
            self.sheet.setGeometry(self.target.geometry())

    def eventFilter(self, obj: Any, event: Any) -> bool:
        kind = event.type()
        if obj is self.target and kind in (QEvent.Type.Resize, QEvent.Type.Move, QEvent.Type.Show,
                                           QEvent.Type.Hide):
            self._follow()
            if self.sheet.parentWidget() is not self.target:  # a sibling: hide with the target
                self.sheet.setVisible(self.wanted and kind != QEvent.Type.Hide)
            if self.wanted:
                self.sheet.raise_()
        return super().eventFilter(obj, event)
