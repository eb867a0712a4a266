"""The Experiments page's figures: as many rows of three as the room holds, the others a page
away, never a scroll bar (logit_control's fourth figure sat under one at 1280x720)."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from ui.pages.experiments.figure_rows import COLUMNS, ROW_MIN, FigureRows


def _rows(qtbot, height: int, n: int) -> FigureRows:
    rows = FigureRows()
    qtbot.addWidget(rows)
    rows.set_panels([QWidget(rows) for _ in range(n)])
    rows.resize(900, height)
    rows.show()
    qtbot.waitExposed(rows)
    return rows


def _shown(rows: FigureRows) -> list[int]:
    return [i for i, p in enumerate(rows.panels) if p.isVisible()]


def test_one_row_of_room_shows_three_and_pages_to_the_fourth(qtbot):
    nav = 40  # (the page bar and margins, about)
    rows = _rows(qtbot, ROW_MIN + nav, 4)
    assert rows.rows_fit() == 1 and _shown(rows) == [0, 1, 2]
    assert rows.nav.isVisible() and "1–3 of 4" in rows.page_label.text()
    rows.next_button.click()
    assert _shown(rows) == [3] and "4–4 of 4" in rows.page_label.text()
    assert not rows.next_button.isEnabled() and rows.prev_button.isEnabled()
    # every shown panel lies inside the widget (nothing under its lower edge)
    for i in _shown(rows):
        panel = rows.panels[i]
        assert panel.geometry().bottom() < rows.nav.geometry().top()


def test_two_rows_of_room_show_all_five_without_pages(qtbot):
    rows = _rows(qtbot, 2 * ROW_MIN + 60, 5)
    assert rows.rows_fit() == 2 and _shown(rows) == list(range(5))
    assert not rows.nav.isVisible()
    tops = sorted({rows.panels[i].geometry().top() for i in _shown(rows)})
    assert len(tops) == 2 and COLUMNS == 3
    rows.resize(900, ROW_MIN + 40)  # the window made shorter: back to pages, the first shown
    qtbot.wait(5)
    assert _shown(rows) == [0, 1, 2] and rows.nav.isVisible()
