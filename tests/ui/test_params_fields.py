"""Form fields in a long scrolling form: a wheel changes a field only when it has the focus; a
typed value outside the range is clamped and the user is told (it was silently cut: 999999 in
d_k became 9,999)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLineEdit, QVBoxLayout, QWidget

from ui.params.panel import ParamPanel


def _wheel(widget, steps: int = -3) -> None:
    """``steps`` notches of the wheel over the centre of ``widget`` (negative: scroll down)."""
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    event = QWheelEvent(pos, widget.mapToGlobal(pos), QPoint(), QPoint(0, 120 * steps),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


@pytest.fixture
def panel(show_widget):
    return show_widget(ParamPanel(), (320, 400))


def test_a_wheel_over_an_unfocused_field_scrolls_the_form_not_the_field(panel):
    spin = panel.fields["q_std"]
    before = spin.value()
    bar = panel.verticalScrollBar()
    assert bar.maximum() > 0  # the form is taller than its 400 px
    bar.setValue(0)
    panel.ensureWidgetVisible(spin)
    top = bar.value()
    _wheel(spin)
    assert spin.value() == before
    assert bar.value() > top  # the wheel went to the scroll area


def test_a_wheel_over_the_focused_field_changes_it(panel, qtbot):
    spin = panel.fields["q_std"]
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    before = spin.value()
    _wheel(spin, steps=1)
    assert spin.value() != before


def test_wheel_does_not_give_a_field_the_focus(panel):
    assert panel.fields["d_k"].focusPolicy() == Qt.FocusPolicy.StrongFocus
    assert panel.fields["dist"].focusPolicy() == Qt.FocusPolicy.StrongFocus


def test_a_typed_value_above_the_range_is_clamped_and_said(panel, qtbot):
    spin = panel.fields["d_k"]
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    spin.selectAll()
    with qtbot.waitSignal(panel.clamped, timeout=2000) as sig:
        QTest.keyClicks(spin, "999999")
        QTest.keyClick(spin, Qt.Key.Key_Return)
    assert spin.value() == spin.maximum() == 65536
    message = sig.args[0]
    assert "d_k" in message and "999999" in message and "65,536" in message
    assert panel.clamp_label.isVisible() and "999999" in panel.clamp_label.text()


def test_a_typed_value_below_the_range_is_clamped_on_leaving_the_field(show_widget, qtbot):
    from ui.params.fields import ClampDoubleSpinBox

    host = show_widget(QWidget(), (300, 120))
    lay = QVBoxLayout(host)
    box = ClampDoubleSpinBox(host)
    box.setObjectName("q_std")
    box.setRange(0.0, 1000.0)
    box.setKeyboardTracking(False)
    other = QLineEdit(host)
    lay.addWidget(box)
    lay.addWidget(other)
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    box.selectAll()
    QTest.keyClicks(box, "-3")
    other.setFocus()
    qtbot.waitUntil(lambda: box.last_clamp != "")
    assert box.value() == 0.0 and "q_std: -3" in box.last_clamp


def test_the_training_form_guards_the_wheel_too(show_widget):
    from ui.pages.training.controls import TrainingControls

    controls = show_widget(TrainingControls(), (320, 600))
    spin = controls.widgets["temperature"]
    before = spin.value()
    _wheel(spin, steps=-20)
    assert spin.value() == before
