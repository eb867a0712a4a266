"""The base of the objects that each hold one job of the main window (settings, sessions,
exports, the live run, the tour, page links)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject


class WindowPart(QObject):
    """A Qt child of the main window, reaching it through ``window``: the window is not held in a
    Python attribute, so no reference cycle keeps a closed window alive."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)

    @property
    def window(self) -> Any:
        return self.parent()
