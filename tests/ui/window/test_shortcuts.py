"""The window's shortcuts with a field focused (Ctrl+E right after typing d_k) and the F1 help
made from the actions themselves (issue 31, item 10)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QAction, QKeyEvent
from PySide6.QtWidgets import QLineEdit, QMenu

from ui.window.help import help_text
from ui.window.shortcuts import help_rows


@pytest.fixture(autouse=True)
def no_folder_dialog(monkeypatch):
    """Export all asks for a folder: the user cancels (a modal dialog would wait forever)."""
    asked = []
    monkeypatch.setattr("ui.window.exports.choose_dir", lambda *a, **k: asked.append(a) or "")
    return asked


def _focus(qtbot, window, widget) -> None:
    window.activateWindow()
    qtbot.waitUntil(lambda: window.isActiveWindow(), timeout=5_000)
    widget.setFocus()
    qtbot.waitUntil(lambda: widget.hasFocus(), timeout=5_000)


def _override(key: Qt.Key, mods=Qt.KeyboardModifier.ControlModifier) -> QKeyEvent:
    return QKeyEvent(QEvent.Type.ShortcutOverride, key, mods)


def test_a_field_cannot_claim_a_window_shortcut(window) -> None:
    """On X11 a QLineEdit claims Ctrl+E ("end of line") through its ShortcutOverride, before
    any window shortcut; the window's filter refuses that claim for its menu keys (and only
    for them: Ctrl+A, Ctrl+C and plain keys stay the field's)."""
    edit = window.params.fields["d_k"].lineEdit()
    event = _override(Qt.Key.Key_E)
    assert window.shortcuts_win.eventFilter(edit, event) and not event.isAccepted()
    for key, mods in ((Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier),
                      (Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier),
                      (Qt.Key.Key_2, Qt.KeyboardModifier.NoModifier)):
        assert not window.shortcuts_win.eventFilter(edit, _override(key, mods))
    assert not window.shortcuts_win.eventFilter(window.tabs, _override(Qt.Key.Key_E))  # not a field
    other = QLineEdit()  # a field of another window keeps its keys
    assert not window.shortcuts_win.eventFilter(other, _override(Qt.Key.Key_E))


def test_ctrl_e_exports_while_the_d_k_field_has_focus(qtbot, window, no_folder_dialog) -> None:
    edit = window.params.fields["d_k"].lineEdit()
    _focus(qtbot, window, edit)
    qtbot.keyClicks(edit, "2")  # typing, the usual moment
    with qtbot.waitSignal(window.export_all_action.triggered, timeout=2_000):
        qtbot.keyClick(edit, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    assert len(no_folder_dialog) == 1  # the export asked where to write


def test_copy_stays_the_fields(qtbot, window) -> None:
    edit = window.findChild(QLineEdit)
    _focus(qtbot, window, edit)
    fired = []
    window.export_all_action.triggered.connect(lambda *_: fired.append(1))
    qtbot.keyClick(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)  # select all: the field's
    qtbot.keyClick(edit, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert fired == []


def test_the_help_lists_every_shortcut_of_the_menus(window) -> None:
    rows = dict(help_rows(window))
    for key in ("F11", "Ctrl+P", "Ctrl+E", "F5", "F1", "Esc"):
        assert key in rows, (key, sorted(rows))
    assert any("Left" in k and "Right" in k for k in rows)
    text = help_text(window)
    assert "F11" in text and "Ctrl+P" in text and "Left" in text and "Presentation mode" in text


def test_a_new_action_appears_in_the_help(window) -> None:
    """Model -> help: an action added to a menu is listed without touching the help text."""
    menu = next(m for m in window.menuBar().findChildren(QMenu) if m.title() == "&File")
    act = QAction("&Frobnicate…", window)
    act.setShortcut("Ctrl+Shift+F")
    menu.addAction(act)
    rows = dict(help_rows(window))
    assert rows.get("Ctrl+Shift+F") == "Frobnicate"


def test_the_filter_watches_the_focused_field_only(qtbot, window, monkeypatch) -> None:
    """The filter sees the focused field's ShortcutOverride; it is no application-wide filter
    (one ran in Python for every event of every widget)."""
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QApplication

    from ui.window.shortcuts import WindowShortcutsWin

    seen: list[tuple[object, QEvent.Type]] = []
    original = WindowShortcutsWin.eventFilter

    def recorded(self, watched, event) -> bool:
        seen.append((watched, event.type()))
        return original(self, watched, event)

    monkeypatch.setattr(WindowShortcutsWin, "eventFilter", recorded)
    edit = window.params.fields["d_k"].lineEdit()
    _focus(qtbot, window, edit)
    focused = QApplication.focusWidget()  # (the spin box: its line edit's focus goes to it)
    event = _override(Qt.Key.Key_E)
    QCoreApplication.sendEvent(focused, event)  # where Qt sends it
    assert (focused, QEvent.Type.ShortcutOverride) in seen and not event.isAccepted()
    seen.clear()
    QCoreApplication.sendEvent(window.tabs, QEvent(QEvent.Type.User))
    window.tabs.update()
    qtbot.wait(20)
    assert not [w for w, _t in seen if w is not focused]
