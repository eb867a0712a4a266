"""A panel header that holds only its title ends in "…" where its column is narrow, the whole
title on hover: Qt cut "Attention entropy per hea" mid-letter in a quarter of a 1280 px row."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QFont, QFontMetricsF
from PySide6.QtWidgets import QBoxLayout, QLabel, QSizePolicy


class _ElideTitle(QObject):
    def __init__(self, label: QLabel, title: str) -> None:
        super().__init__(label)
        self.label, self.title = label, title
        label.setToolTip(title)

    def eventFilter(self, obj: Any, event: Any) -> bool:  # Qt's name
        if event.type() in (QEvent.Type.Resize, QEvent.Type.FontChange):
            self.fit()
        return False

    def fit(self) -> None:
        font = QFont(self.label.font())
        font.setBold(True)
        room = max(1.0, self.label.contentsRect().width() - 2.0)
        shown = QFontMetricsF(font).elidedText(self.title, Qt.TextElideMode.ElideRight, room)
        text = f"<b>{html.escape(shown)}</b>"
        if self.label.text() != text:
            self.label.setText(text)


def elide_title(label: QLabel, title: str, header: QBoxLayout) -> None:
    """``label`` shows ``title`` in bold, cut with "…" to the width ``header`` (its row) leaves
    it (whole in its tooltip). It takes the row's spare width first: sized by its own elided
    text it only shrank."""
    label.setMinimumWidth(1)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    header.setStretchFactor(label, 100)
    watcher = _ElideTitle(label, title)
    label.installEventFilter(watcher)
    watcher.fit()
