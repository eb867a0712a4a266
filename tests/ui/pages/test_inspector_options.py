"""The inspector's formula line, its "s_i / scale" column under a cap, and worked examples that
set every option they depend on (issue 31, item 9)."""

from __future__ import annotations

import math

import pytest

from ui.pages.inspector.page import EXAMPLES, InspectorPage


@pytest.fixture
def page(qtbot):
    w = InspectorPage()
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    return w


def test_the_sigmoid_formula_with_a_cap_keeps_ln_n_inside_sigma(page) -> None:
    page.softcap_edit.setText("5")
    page.sigmoid_box.setChecked(True)
    page.set_scores([1, 0, -1])
    text = page.formula.text()
    assert "σ(c·tanh(z/c) − ln n), c = 5" in text
    assert "c = 5 − ln n" not in text


def test_the_scaled_column_is_uncapped_under_a_cap(page) -> None:
    page.softcap_edit.setText("5")
    page.set_scores([16, 0, -4], 2)
    # by hand: 16 / 2 = 8 (the capped logit is 5 tanh(8/5) = 4.61, what the softmax sees)
    assert page.model.column("scaled") == pytest.approx([8.0, 0.0, -2.0], abs=1e-15)
    assert float(page.result.scaled[0]) == pytest.approx(5 * math.tanh(8 / 5), rel=1e-14)
    page.softcap_edit.setText("")
    page.set_scores([16, 0, -4], 2)
    assert page.model.column("scaled") == pytest.approx([8.0, 0.0, -2.0], abs=1e-15)


def test_a_worked_example_switches_off_cap_sink_and_sigmoid(page) -> None:
    """"3 among 999 x -2" is a plain softmax: e^3 / (e^3 + 999 e^-2) = 0.1293 by hand, even
    after the user left a cap of 5 and sigmoid weights on (0.0144 then)."""
    page.softcap_edit.setText("5")
    page.sigmoid_box.setChecked(True)
    page.refresh()
    first = next(i for i, e in enumerate(EXAMPLES) if e[1] == "3, -2*999")
    page.examples.activated.emit(first + 1)
    want = math.exp(3) / (math.exp(3) + 999 * math.exp(-2))
    assert round(want, 4) == 0.1293
    assert float(page.result.weights[0]) == pytest.approx(want, rel=1e-12)
    assert page.softcap_edit.text() == "" and not page.sigmoid_box.isChecked()
    page.sink_edit.setText("8")
    page.refresh()
    page.examples.activated.emit(first + 1)
    assert page.sink_edit.text() == "" and page.result.sink is None
