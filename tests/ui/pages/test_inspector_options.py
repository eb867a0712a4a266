"""The inspector's formula line, its "s_i / scale" column under a cap, and worked examples that
set every option they depend on (issue 31, item 9)."""

from __future__ import annotations

import math

import pytest

from ui.pages.inspector.page import EXAMPLES


def test_the_sigmoid_formula_with_a_cap_keeps_ln_n_inside_sigma(inspector_page) -> None:
    inspector_page.softcap_edit.setText("5")
    inspector_page.sigmoid_box.setChecked(True)
    inspector_page.set_scores([1, 0, -1])
    text = inspector_page.formula.text()
    assert "σ(c·tanh(z/c) − ln n), c = 5" in text
    assert "c = 5 − ln n" not in text


def test_the_scaled_column_is_uncapped_under_a_cap(inspector_page) -> None:
    inspector_page.softcap_edit.setText("5")
    inspector_page.set_scores([16, 0, -4], 2)
    # by hand: 16 / 2 = 8 (the capped logit is 5 tanh(8/5) = 4.61, what the softmax sees)
    assert inspector_page.model.column("scaled") == pytest.approx([8.0, 0.0, -2.0], abs=1e-15)
    assert float(inspector_page.result.scaled[0]) == pytest.approx(5 * math.tanh(8 / 5), rel=1e-14)
    inspector_page.softcap_edit.setText("")
    inspector_page.set_scores([16, 0, -4], 2)
    assert inspector_page.model.column("scaled") == pytest.approx([8.0, 0.0, -2.0], abs=1e-15)


def test_a_worked_example_switches_off_cap_sink_and_sigmoid(inspector_page) -> None:
    """"3 among 999 x -2" is a plain softmax: e^3 / (e^3 + 999 e^-2) = 0.1293 by hand, even
    after the user left a cap of 5 and sigmoid weights on (0.0144 then)."""
    inspector_page.softcap_edit.setText("5")
    inspector_page.sigmoid_box.setChecked(True)
    inspector_page.refresh()
    first = next(i for i, e in enumerate(EXAMPLES) if e[1] == "3, -2*999")
    inspector_page.examples.activated.emit(first + 1)
    want = math.exp(3) / (math.exp(3) + 999 * math.exp(-2))
    assert round(want, 4) == 0.1293
    assert float(inspector_page.result.weights[0]) == pytest.approx(want, rel=1e-12)
    assert inspector_page.softcap_edit.text() == "" and not inspector_page.sigmoid_box.isChecked()
    inspector_page.sink_edit.setText("8")
    inspector_page.refresh()
    inspector_page.examples.activated.emit(first + 1)
    assert inspector_page.sink_edit.text() == "" and inspector_page.result.sink is None
