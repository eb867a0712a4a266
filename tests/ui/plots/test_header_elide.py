"""A Training panel's header that holds only its title: cut with "…" in a narrow column, the
whole title on hover; whole where it fits (Qt cut "Attention entropy per hea" mid-word)."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from ui.plots.header_elide import elide_title

TITLE = "Attention entropy per head"


def _header(qtbot, width: int) -> tuple[QWidget, QLabel]:
    row = QWidget()
    qtbot.addWidget(row)
    layout = QHBoxLayout(row)
    label = QLabel(f"<b>{TITLE}</b>")
    layout.addWidget(label)
    layout.addStretch(1)
    layout.addWidget(QToolButton(row))
    elide_title(label, TITLE, layout)
    row.resize(width, 30)
    row.show()
    qtbot.waitExposed(row)
    return row, label  # (the row kept: the label lives as long as it)


def test_a_narrow_header_ends_in_an_ellipsis_with_the_title_on_hover(qtbot):
    _row, label = _header(qtbot, 140)
    assert label.text().endswith("…</b>") and label.toolTip() == TITLE
    assert label.sizeHint().width() <= label.width() + 2  # (what it draws fits what it has)


def test_a_wide_header_shows_the_whole_title_taking_the_spare_width(qtbot):
    _row, label = _header(qtbot, 500)
    assert label.text() == f"<b>{TITLE}</b>"
    assert label.width() > 300  # (the row's spare width is the title's, not the stretch's)
