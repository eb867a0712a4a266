"""The rule strip: each rule named by its colour and line pattern, the on-screen legend of a page
(the plots keep their own legends for exported figures, where they must name their series).

Two lines of fixed height, every checked rule in view at 1280x720: the rules' full labels
("sqrt: q·k/√d_k") when they fit in two lines, else their short names with the formulas on
hover (one line cut the seventh rule off, and never showed yarn). A rule's entry never breaks
across the two lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from engine.rules import rule_label
from ui.plots.rule_pens import RULE_STYLES
from ui.theme import Theme, rule_color, rule_text_color

#: how each line pattern reads in the strip (a solid line: SOLID); a rule's, or one of a plot's
#: line styles (:func:`style_key_part`)
PATTERNS = {Qt.PenStyle.DotLine: "┈┈┈", Qt.PenStyle.DashLine: "╍╍╍",
            Qt.PenStyle.DashDotLine: "━ · ━", Qt.PenStyle.DashDotDotLine: "━ ·· ━"}
SOLID = "━━━"
SEPARATOR = "&nbsp;&nbsp; "
#: lines the strip holds (its fixed height)
STRIP_LINES = 2


def entry(line_html: str, text_html: str) -> str:
    """One entry of the strip: a sample line and its text, never broken across lines."""
    return f'<span style="white-space:nowrap">{line_html} {text_html}</span>'


def rule_parts(rules: Iterable[str], theme: Theme | None = None, short: bool = False) -> list[str]:
    """Each rule's line (its colour and pattern) and label, as HTML spans: the line in the
    rule's own colour (as drawn), the label in its text colour for ``theme`` (readable);
    ``short``: the rule's name alone (its formula is in the tooltip)."""
    parts = []
    for rule in rules:
        line = PATTERNS.get(RULE_STYLES.get(rule, Qt.PenStyle.SolidLine), SOLID)
        text = rule if short else rule_label(rule)
        parts.append(entry(f'<span style="color:{rule_color(rule)}"><b>{line}</b></span>',
                           f'<span style="color:{rule_text_color(rule, theme)}">{text}</span>'))
    return parts


def style_key_part(what: str, styles: Iterable[tuple[str, Qt.PenStyle]], theme: Theme,
                   short: bool = False) -> str:
    """One entry naming what each line style of one plot is ("Gradient norms: ━━━ W_Q ╍╍╍ W_K
    ┈┈┈ W_V"), in the theme's muted colour; ``short``: the samples and names alone."""
    samples = " ".join(f"<b>{PATTERNS.get(style, SOLID)}</b> {name}" for name, style in styles)
    head = "" if short else f"{what}: "
    return f'<span style="white-space:nowrap; color:{theme.muted}">{head}{samples}</span>'


class StripLabel(QLabel):
    """A label of STRIP_LINES lines whose fixed height follows its font (presentation mode's
    larger type, and back); given the entries in a long and a short form (:meth:`show_entries`),
    it lays them out on lines itself (an entry is never broken: Qt's rich text broke "logn:
    q·k/ / √d_k·ln n/ln n_ref" at its slash) and shows the long form when it fits its lines at
    the label's width, else the short one."""

    _entries: tuple[list[str], list[str]] = ([], [])

    def fit_height(self) -> None:
        self.setFixedHeight(STRIP_LINES * self.fontMetrics().lineSpacing() + 6)

    def show_entries(self, full: list[str], short: list[str], tip: str) -> None:
        self._entries = (list(full), list(short))
        self.setToolTip(tip)
        self._choose()

    def _width(self, html: str) -> float:
        doc = QTextDocument()
        doc.setDefaultFont(self.font())
        doc.setDocumentMargin(0)
        doc.setHtml(html)
        return doc.idealWidth()

    def lay_out(self, entries: list[str]) -> list[str]:
        """``entries`` on as few lines as fit the label's width (one entry a line at least)."""
        room = self.contentsRect().width()
        lines: list[str] = []
        for part in entries:
            joined = f"{lines[-1]}{SEPARATOR}{part}" if lines else part
            if lines and self._width(joined) <= room:
                lines[-1] = joined
            else:
                lines.append(part)
        return lines

    def _choose(self) -> None:
        full, short = self._entries
        if not (full or short):
            return
        lines = self.lay_out(full)
        room = self.contentsRect().width()
        if len(lines) > STRIP_LINES or any(self._width(line) > room + 1 for line in lines):
            lines = self.lay_out(short)
        text = "<br>".join(lines)
        if text != self.text():
            QLabel.setText(self, text)

    def setText(self, text: str) -> None:  # Qt's name: a plain message, no entries
        self._entries = ([], [])
        super().setText(text)

    def resizeEvent(self, event: Any) -> None:  # Qt's names from here on
        super().resizeEvent(event)
        self._choose()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self.fit_height()
            self._choose()


def strip_label(parent: QWidget | None = None, name: str = "rule_strip") -> StripLabel:
    """A label of fixed height (STRIP_LINES lines): a strip that re-wrapped when the rules
    changed would move every plot under it; it never asks for width either (the tooltip has the
    whole text)."""
    label = StripLabel(parent)
    label.setObjectName(name)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(False)  # (its lines are laid out by StripLabel)
    label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    label.fit_height()
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
    return label


def show_parts(label: StripLabel, parts: list[str], short: list[str] | None = None) -> None:
    """``parts`` (the full entries) in the strip, ``short`` (the same entries, shorter) when
    the full ones do not fit; the tooltip lists the full entries, one a line."""
    label.show_entries(parts, short or parts, "<br>".join(parts))
