"""A refused value: one range and one message at a time, and plots that no longer show the
parameters set now say so (dimmed, the strip above them and presentation mode's bar)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from engine.config import D_K_MAX, N_KEYS_MAX, SimulationConfig
from engine.errors import ConfigError


def _type(qtbot, spin, text: str) -> None:
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    spin.selectAll()
    QTest.keyClicks(spin, text)
    QTest.keyClick(spin, Qt.Key.Key_Return)


def test_each_field_takes_the_configs_own_range(window):
    f = window.params.fields
    assert (f["d_k"].minimum(), f["d_k"].maximum()) == (1, D_K_MAX)
    assert (f["n_keys"].minimum(), f["n_keys"].maximum()) == (2, N_KEYS_MAX)
    assert f["n_ref"].minimum() == 2
    for field, lo in (("d_k", 1), ("n_keys", 2)):  # the config agrees: one range
        SimulationConfig(**{field: lo})
        try:
            SimulationConfig(**{field: lo - 1})
        except ConfigError as exc:
            assert exc.field == field
        else:
            raise AssertionError(f"{field} = {lo - 1} was accepted")


def test_typing_999999_names_the_real_range_and_0_is_clamped_the_same_way(qtbot, window):
    spin = window.params.fields["d_k"]
    with qtbot.waitSignal(window.params.clamped, timeout=2000) as sig:
        _type(qtbot, spin, "999999")
    assert sig.args[0] == "d_k: 999999 is outside 1 … 65,536; set to 65,536"
    with qtbot.waitSignal(window.params.clamped, timeout=2000) as sig:
        _type(qtbot, spin, "0")
    assert sig.args[0] == "d_k: 0 is outside 1 … 65,536; set to 1"
    assert spin.value() == 1 and window.params.error_label.isHidden()


def test_one_message_at_a_time(qtbot, window):
    p = window.params
    p.fields["q_std"].setValue(0.0)  # refused by the config
    assert not window.rerun()
    assert not p.error_label.isHidden() and p.clamp_label.isHidden()
    _type(qtbot, p.fields["d_k"], "999999")  # the newest message shows, alone
    qtbot.waitUntil(lambda: not p.clamp_label.isHidden())
    assert p.error_label.isHidden()
    qtbot.wait(400)  # the rerun after the change finds the same error: the notice stays
    assert not p.clamp_label.isHidden() and p.error_label.isHidden()
    assert "border" in p.fields["q_std"].styleSheet()  # (the field stays marked)
    p._clamp_timer.timeout.emit()  # the notice is over: the error that still holds is back
    assert p.clamp_label.isHidden() and not p.error_label.isHidden()
    window.apply_config({"q_std": 1.0})  # a fresh error replaces the notice too
    p.fields["n_keys"].setValue(2)
    p.show_clamp("x")
    p.show_error(ConfigError("q_std", "must be > 0"))
    assert p.clamp_label.isHidden() and not p.error_label.isHidden()


def test_outdated_plots_are_marked_until_a_run_replaces_them(qtbot, window, wait_complete):
    window.apply_config({"d_k": 4096, "trials": 500})
    wait_complete(window)
    page, bar = window.page, window.presenter.bar
    window.set_presentation(True)
    try:
        assert page.outdated_reason is None
        window.params.fields["q_std"].setValue(0.0)
        assert not window.rerun()
        QApplication.processEvents()
        assert "q_std" in page.outdated_reason and "d_k 4,096" in page.outdated_reason
        assert "Not run" in page.rule_strip.text()
        for panel in page.panels.values():  # every plot is dimmed
            effect = panel.glw.graphicsEffect()
            assert effect is not None and effect.opacity() < 0.5
        assert bar.outdated_label.isVisible() and "d_k 4,096" in bar.outdated_label.text()
        window.params.fields["q_std"].setValue(1.0)
        assert window.rerun()
        wait_complete(window)
        assert page.outdated_reason is None and not bar.outdated_label.isVisible()
        assert all(p.glw.graphicsEffect() is None for p in page.panels.values())
        assert "Not run" not in page.rule_strip.text()
    finally:
        window.set_presentation(False)
