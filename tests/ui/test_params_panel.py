"""Parameter panel: every control maps to its config field both ways; invalid input is refused
with a visible message naming the field."""

from __future__ import annotations

import pytest

from engine.config import BACKENDS, DEVICES, DISTRIBUTIONS, DTYPES, METHODS, RULES, SimulationConfig
from engine.errors import ConfigError
from ui.params.panel import TIPS, ParamPanel, d_k_to_slider, slider_to_d_k


@pytest.fixture
def panel(qtbot):
    p = ParamPanel()
    qtbot.addWidget(p)
    p.show()
    return p


#: a config where every field differs from the default
OTHER = SimulationConfig(
    d_k=512, n_keys=33, trials=12_345, seed=2**40 + 7, dist="uniform", q_mean=0.5, q_std=2.0,
    k_mean=-0.25, k_std=0.5, correlation=0.3, scalings=("sqrt", "temperature", "cosine"),
    temperature=2.5, saturation_threshold=0.95, backend="numpy", device="cpu", dtype="float32",
    method="explicit", n_ref=100, ssmax_s=0.5, softcap=7.5, sink=-1.5, yarn_s=32.0,
)


def test_defaults_round_trip(panel):
    assert panel.config_from_widgets() == SimulationConfig()


def test_config_to_widgets_to_config(panel):
    assert OTHER != SimulationConfig()
    for field in SimulationConfig.__dataclass_fields__:
        assert getattr(OTHER, field) != getattr(SimulationConfig(), field), field
    panel.set_config(OTHER)
    assert panel.config_from_widgets() == OTHER


def test_each_widget_sets_its_field(panel):
    f = panel.fields
    f["d_k"].setValue(300)
    f["n_keys"].setValue(17)
    f["trials"].setValue(777)
    f["seed"].setText("99")
    f["dist"].setCurrentIndex(DISTRIBUTIONS.index("rademacher"))
    f["q_mean"].setValue(0.25)
    f["q_std"].setValue(1.5)
    f["k_mean"].setValue(-0.5)
    f["k_std"].setValue(3.0)
    f["correlation"].setValue(-0.4)
    panel.rule_boxes["none"].setChecked(False)
    panel.rule_boxes["temperature"].setChecked(True)
    f["temperature"].setValue(4.0)
    f["saturation_threshold"].setValue(0.9)
    f["backend"].setCurrentIndex(BACKENDS.index("numpy"))
    f["device"].setCurrentIndex(DEVICES.index("cpu"))
    f["dtype"].setCurrentIndex(DTYPES.index("float32"))
    f["method"].setCurrentIndex(METHODS.index("explicit"))
    cfg = panel.config_from_widgets()
    assert cfg == SimulationConfig(
        d_k=300, n_keys=17, trials=777, seed=99, dist="rademacher", q_mean=0.25, q_std=1.5,
        k_mean=-0.5, k_std=3.0, correlation=-0.4, scalings=("sqrt", "temperature"),
        temperature=4.0, saturation_threshold=0.9, backend="numpy", device="cpu",
        dtype="float32", method="explicit")


def test_log_slider_and_spin_box_agree(panel):
    assert slider_to_d_k(d_k_to_slider(1)) == 1
    assert slider_to_d_k(d_k_to_slider(65_536)) == 65_536
    for d in (1, 2, 64, 1024, 4096):
        assert slider_to_d_k(d_k_to_slider(d)) == d
    panel.d_k_slider.setValue(d_k_to_slider(2048))
    assert panel.config_from_widgets().d_k == 2048
    panel.fields["d_k"].setValue(16)
    assert panel.d_k_slider.value() == d_k_to_slider(16)


def test_changes_emit_changed_but_set_config_does_not(panel, qtbot):
    with qtbot.waitSignal(panel.changed, timeout=1000):
        panel.fields["n_keys"].setValue(9)
    with qtbot.assertNotEmitted(panel.changed):
        panel.set_config(OTHER)


def test_temperature_enabled_only_where_it_applies(panel):
    panel.set_config(SimulationConfig(scalings=("none", "sqrt")))
    assert not panel.fields["temperature"].isEnabled()
    panel.rule_boxes["cosine"].setChecked(True)
    assert panel.fields["temperature"].isEnabled()


def test_new_seed_changes_the_seed(panel, qtbot, monkeypatch):
    import random

    assert panel.config_from_widgets().seed == 0
    monkeypatch.setattr(random, "randrange", lambda lo, hi: 12_345)
    with qtbot.waitSignal(panel.changed, timeout=1000):
        panel.new_seed_button.click()
    assert panel.config_from_widgets().seed == 12_345
    monkeypatch.undo()
    seeds = set()
    for _ in range(3):  # real draws differ (a repeat has probability ~1e-9)
        panel.new_seed_button.click()
        seeds.add(panel.config_from_widgets().seed)
    assert len(seeds) == 3 and all(0 <= s < 2**31 for s in seeds)


@pytest.mark.parametrize(("field", "make_invalid"), [
    ("scalings", lambda p: [cb.setChecked(False) for cb in p.rule_boxes.values()]),
    ("q_std", lambda p: p.fields["q_std"].setValue(0.0)),
    ("saturation_threshold", lambda p: p.fields["saturation_threshold"].setValue(1.0)),
    ("temperature", lambda p: (p.rule_boxes["temperature"].setChecked(True), p.fields["temperature"].setValue(0.0))),
    # (d_k and n_keys cannot leave the config's range: their fields have it, and clamp with a
    # message: tests/ui/test_outdated_results.py)
    ("seed", lambda p: p.fields["seed"].setText("")),
    ("device", lambda p: (p.fields["backend"].setCurrentIndex(BACKENDS.index("numpy")),
                          p.fields["device"].setCurrentIndex(DEVICES.index("cuda")))),
    ("method", lambda p: (p.fields["method"].setCurrentIndex(METHODS.index("exact")),
                          p.rule_boxes["cosine"].setChecked(True))),
])
def test_invalid_values_are_refused_visibly(panel, field, make_invalid):
    make_invalid(panel)
    with pytest.raises(ConfigError) as info:
        panel.config_from_widgets()
    assert info.value.field == field
    assert not panel.error_label.isHidden()
    assert field in panel.error_text
    assert panel.error_field == field
    assert "border" in panel.fields[field].styleSheet()  # the field is marked
    # fixing it clears the mark
    panel.set_config(SimulationConfig())
    panel.config_from_widgets()
    assert panel.error_label.isHidden() and panel.fields[field].styleSheet() == ""


def test_every_control_has_a_tooltip(panel):
    for name, w in panel.fields.items():
        assert w.toolTip(), name
    for name in RULES:
        assert panel.rule_boxes[name].toolTip()
    assert panel.d_k_slider.toolTip() and panel.new_seed_button.toolTip()
    assert set(TIPS) >= set(panel.fields)


def test_every_input_widget_has_a_one_sentence_tooltip(panel):
    """Walk every input widget in the panel (not just the registered fields): a control added
    later without a tooltip fails here."""
    from PySide6.QtWidgets import (
        QAbstractButton,
        QAbstractSlider,
        QAbstractSpinBox,
        QComboBox,
        QLineEdit,
        QScrollBar,
    )

    inputs = [w for kind in (QAbstractSpinBox, QComboBox, QLineEdit, QAbstractButton, QAbstractSlider)
              for w in panel.findChildren(kind)]
    # (a spin box's or combo box's own line edit carries no tooltip of its own: its parent does)
    inputs = [w for w in inputs if not isinstance(w.parent(), (QAbstractSpinBox, QComboBox))]
    inputs = [w for w in inputs if not isinstance(w, QScrollBar)]  # the panel's own scrolling
    assert len(inputs) >= len(panel.fields) + len(RULES)
    for w in inputs:
        tip = w.toolTip().strip()
        assert tip, f"{type(w).__name__} {w.objectName()!r} has no tooltip"
        assert tip.endswith(".") and len(tip.split()) >= 3, f"{w.objectName()}: {tip!r} is not a sentence"
