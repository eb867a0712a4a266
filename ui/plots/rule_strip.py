"""One line naming each rule by its colour and line pattern: the on-screen legend of a page
(the plots keep their own legends for exported figures, where they must name their series)."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from engine.rules import rule_label
from ui.plots.rule_pens import RULE_STYLES
from ui.theme import Theme, rule_color, rule_text_color

#: how each line pattern reads in the strip
PATTERNS = {Qt.PenStyle.DotLine: "┈┈┈", Qt.PenStyle.DashDotLine: "━ · ━",
            Qt.PenStyle.DashDotDotLine: "━ ·· ━"}
SEPARATOR = "&nbsp;&nbsp; "


def rule_parts(rules: Iterable[str], theme: Theme | None = None) -> list[str]:
    """Each rule's line (its colour and pattern) and label, as HTML spans: the line in the
    rule's own colour (as drawn), the label in its text colour for ``theme`` (readable)."""
    parts = []
    for rule in rules:
        line = PATTERNS.get(RULE_STYLES.get(rule, Qt.PenStyle.SolidLine), "━━━")
        parts.append(f'<span style="color:{rule_color(rule)}"><b>{line}</b></span> '
                     f'<span style="color:{rule_text_color(rule, theme)}">{rule_label(rule)}</span>')
    return parts


class StripLabel(QLabel):
    """A one-line label whose fixed height follows its font (presentation mode's larger type,
    and back)."""

    def fit_height(self) -> None:
        self.setFixedHeight(self.fontMetrics().height() + 6)

    def changeEvent(self, event: QEvent) -> None:  # Qt's name
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self.fit_height()


def strip_label(parent: QWidget | None = None, name: str = "rule_strip") -> QLabel:
    """A one-line label of fixed height: a strip that re-wrapped when the rules changed would
    move every plot under it; it never asks for width either (the tooltip has the whole text)."""
    label = StripLabel(parent)
    label.setObjectName(name)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(False)
    label.fit_height()
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
    return label


def show_parts(label: QLabel, parts: list[str]) -> None:
    label.setText(SEPARATOR.join(parts))
    label.setToolTip("<br>".join(parts))
