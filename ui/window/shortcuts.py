"""The window's shortcuts: they win over a text field's own key bindings (Ctrl+E is "end of
line" in a QLineEdit, so Export all did nothing right after typing d_k), and the F1 help lists
them from the actions and shortcuts themselves (a new one is never missing from the help)."""

from __future__ import annotations

import html
import re

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

#: keys a field keeps even if an action used them (the user edits text with them)
EDITING_KEYS = (QKeySequence.StandardKey.Copy, QKeySequence.StandardKey.Paste,
                QKeySequence.StandardKey.Cut, QKeySequence.StandardKey.Undo,
                QKeySequence.StandardKey.Redo, QKeySequence.StandardKey.SelectAll)


#: the fields whose own key bindings hid the window's shortcuts (a spin box's is its line edit)
TEXT_FIELDS = (QLineEdit, QAbstractSpinBox, QTextEdit, QPlainTextEdit)


class WindowShortcutsWin(QObject):
    """An event filter on the window's text fields: a ShortcutOverride that a field would take
    for itself is refused when the key is one of the window's menu actions, so the action runs.

    It watches the fields that get the focus (a ShortcutOverride goes to the focus widget, then
    up its parents), not the whole application: as an application filter it ran in Python for
    every event of every widget, ~43,000 calls in a 46 s run."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)  # the window is its parent, never held from Python: a
        # reference here kept a deleted window's wrapper alive (a cycle with the window's own)
        app = QApplication.instance()
        app.focusChanged.connect(self._focus_changed)
        self._watch(app.focusWidget())

    def _focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        self._watch(new)

    def _watch(self, widget: QWidget | None) -> None:
        """Filter the text fields among ``widget`` and its parents in the window (installing
        twice keeps one filter)."""
        if widget is None or widget.window() is not self.parent():
            return
        while widget is not None:
            if isinstance(widget, TEXT_FIELDS):
                widget.installEventFilter(self)
            if widget.isWindow():
                break
            widget = widget.parentWidget()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt's name
        if event.type() != QEvent.Type.ShortcutOverride or not isinstance(watched, QWidget):
            return False
        window = self.parent()
        if not isinstance(watched, TEXT_FIELDS) or watched.window() is not window:
            return False  # other widgets keep the keys they claim (the tour's Esc)
        key = QKeySequence(event.keyCombination())
        if any(key.matches(QKeySequence(k)) == QKeySequence.SequenceMatch.ExactMatch
               for sk in EDITING_KEYS for k in QKeySequence.keyBindings(sk)):
            return False
        if key in window_keys(window):
            event.ignore()  # not taken by the field: the shortcut map gets the key
            return True
        return False


def menu_actions(window: QWidget) -> list[QAction]:
    """The window's own actions (its menus' entries are its children) with a shortcut, in the
    order they were made (menu order). Only direct children: the Export plot submenu is
    refilled while it opens, and its deleted entries must never be walked."""
    return [act for act in window.findChildren(QAction, options=Qt.FindChildOption.FindDirectChildrenOnly)
            if not act.shortcut().isEmpty()]


def window_keys(window: QWidget) -> set[QKeySequence]:
    """The key sequences of the window's menu actions."""
    return {k for act in menu_actions(window) for k in act.shortcuts()}


def _plain(text: str) -> str:
    """A menu text without its mnemonic and ellipsis ("&Export all…" -> "Export all")."""
    return re.sub(r"&(?!&)", "", text).replace("…", "").strip()


def help_rows(window: QWidget) -> list[tuple[str, str]]:
    """(keys, what they do) for every menu action with a shortcut and every QShortcut of the
    window that says what it does (its whatsThis: the arrow keys of presentation mode, a page's
    own keys), in that order; keys as the platform writes them."""
    rows: list[tuple[str, str]] = []
    for act in menu_actions(window):
        keys = " / ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in act.shortcuts())
        tip = act.statusTip() or act.toolTip()
        what = _plain(act.text())
        rows.append((keys, f"{what}: {tip}" if tip and _plain(tip) != what else what))
    seen: dict[str, list[str]] = {}
    for sc in window.findChildren(QShortcut):
        if sc.whatsThis():
            seen.setdefault(sc.whatsThis(), []).append(
                sc.key().toString(QKeySequence.SequenceFormat.NativeText))
    rows.extend((" / ".join(keys), what) for what, keys in seen.items())
    return rows


def help_table(window: QWidget) -> str:
    """The rows as an HTML table for the help box."""
    return "<table>" + "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in help_rows(window)
    ) + "</table>"
