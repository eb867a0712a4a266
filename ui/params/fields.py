"""Form fields that behave in a long scrolling form: no wheel edits without focus, no silent clamps.

* :class:`WheelGuard`: a wheel turned over a spin box, combo box or slider that does not have the
  keyboard focus scrolls the form instead of changing the field (scrolling the Training form set
  ``temperature`` to 0 on the way down).
* :class:`ClampSpinBox` / :class:`ClampDoubleSpinBox`: a typed value outside the range is accepted
  while typing, then clamped on Enter or leaving the field, and ``clamped`` says so (Qt dropped the
  keystroke silently: typing 999999 into d_k gave 9,999).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, QPointF, Qt, Signal
from PySide6.QtGui import QValidator, QWheelEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QSpinBox,
    QWidget,
)

WHEEL_TYPES = (QAbstractSpinBox, QComboBox, QAbstractSlider)


def rule_check_boxes(box: QWidget, rules: tuple[str, ...], changed: Any,
                     tips: dict[str, str] | None = None) -> tuple[QGridLayout, dict[str, QCheckBox]]:
    """A grid of one check box per rule in ``box`` (two columns, each in its rule's colour, which
    follows the theme); each toggle calls ``changed``. Returns the grid and the boxes by rule."""
    from ui.theme import color_rule_widget

    grid = QGridLayout(box)
    checks: dict[str, QCheckBox] = {}
    for i, rule in enumerate(rules):
        cb = QCheckBox(rule, box)
        if tips is not None:
            cb.setToolTip(tips.get(rule, ""))
        color_rule_widget(cb, rule)
        cb.toggled.connect(changed)
        grid.addWidget(cb, i // 2, i % 2)
        checks[rule] = cb
    return grid, checks


class WheelGuard(QObject):
    """Event filter: a wheel event reaches a field only when the field has the keyboard focus;
    otherwise it goes to the scroll area around the field (which scrolls the form)."""

    def eventFilter(self, obj: Any, event: Any) -> bool:
        if event.type() != QEvent.Type.Wheel or not isinstance(obj, WHEEL_TYPES) or obj.hasFocus():
            return False
        area = obj.parentWidget()
        while area is not None and not isinstance(area, QAbstractScrollArea):
            area = area.parentWidget()
        if area is None:
            event.ignore()  # no form to scroll: nothing changes
            return True
        viewport = area.viewport()
        pos = QPointF(viewport.mapFromGlobal(event.globalPosition().toPoint()))
        forwarded = QWheelEvent(pos, event.globalPosition(), event.pixelDelta(), event.angleDelta(),
                                event.buttons(), event.modifiers(), event.phase(), event.inverted())
        QApplication.sendEvent(viewport, forwarded)
        event.accept()
        return True


def guard_wheel(root: QWidget, guard: WheelGuard | None = None) -> WheelGuard:
    """Install one guard on every spin box, combo box and slider under ``root``; a wheel no
    longer gives them the focus either (StrongFocus: click or Tab)."""
    guard = guard or WheelGuard(root)
    for w in root.findChildren(QWidget):
        if isinstance(w, WHEEL_TYPES):
            w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            w.installEventFilter(guard)
    return guard


def clamp_message(name: str, typed: str, value: str, lo: str, hi: str) -> str:
    return f"{name}: {typed} is outside {lo} … {hi}; set to {value}"


#: the mark before a notice under a form: U+2139, which common UI fonts have (U+24D8 "ⓘ" drew
#: a missing-glyph box with DejaVu Sans, the usual Linux font)
NOTICE_MARK = "ℹ"


def notice_text(message: str) -> str:
    return f"{NOTICE_MARK} {message}"


class _ClampMixin:
    """Shared by the int and float boxes: out-of-range numbers are Intermediate while typing and
    clamped by ``fixup`` (which Qt calls on Enter / focus out), emitting ``clamped``."""

    def _number(self, text: str) -> float | None:
        t = text.strip()
        for affix in (self.prefix(), self.suffix()):
            if affix:
                t = t.replace(affix.strip(), "")
        t = t.replace(self.locale().groupSeparator(), "").strip()
        try:
            return float(t)
        except ValueError:
            return None

    def _out_of_range(self, text: str) -> float | None:
        v = self._number(text)
        if v is None or self.minimum() <= v <= self.maximum():
            return None
        return v

    def validate(self, text: str, pos: int) -> Any:
        if self._out_of_range(text) is not None:
            return QValidator.State.Intermediate, text, pos
        return super().validate(text, pos)

    def fixup(self, text: str) -> str:
        v = self._out_of_range(text)
        if v is None:
            return super().fixup(text)
        value = self.maximum() if v > self.maximum() else self.minimum()
        shown = self.textFromValue(value)
        name = self.objectName().removeprefix("param_") or "value"
        self.last_clamp = clamp_message(name, text.strip(), shown, self.textFromValue(self.minimum()),
                                        self.textFromValue(self.maximum()))
        self.clamped.emit(self.last_clamp)
        return shown


class ClampSpinBox(_ClampMixin, QSpinBox):
    clamped = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.last_clamp = ""


class ClampDoubleSpinBox(_ClampMixin, QDoubleSpinBox):
    clamped = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.last_clamp = ""
