"""Sessions carry the Real model page's parameters too (model folder, text, detail scale), both
when the page is open and when it is built after the session was opened; a bad part is refused
before anything changes."""

from __future__ import annotations

import json

import pytest

from engine.config import SimulationConfig


def test_a_session_round_trips_the_real_model_parameters(qtbot, window, tmp_path):
    page = window.open_page("RealModelPage")
    assert page is not None
    page.text_edit.setPlainText("the query meets the key")
    page.rule_box.setCurrentIndex(page.rule_box.findData("none"))
    page.budget_box.setValue(2.5)
    path = window.save_session(tmp_path / "s.json")
    data = json.loads(path.read_text())
    assert data["real_model"] == {"model": None, "text": "the query meets the key", "rule": "none",
                                  "memory_budget": 2.5}
    page.text_edit.setPlainText("something else")
    page.rule_box.setCurrentIndex(page.rule_box.findData("dk"))
    page.budget_box.setValue(7.0)
    window.open_session(path)
    assert page.text_edit.toPlainText() == "the query meets the key"
    assert page.rule == "none" and page.budget_box.value() == 2.5
    assert page.session_params() == data["real_model"]


def test_a_session_from_before_the_memory_budget_keeps_the_pages(qtbot, window, tmp_path):
    page = window.open_page("RealModelPage")
    page.budget_box.setValue(3.0)
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"real_model": {"model": None, "text": "older", "rule": "dk"}}))
    window.open_session(path)
    assert page.text_edit.toPlainText() == "older" and page.budget_box.value() == 3.0


def test_a_session_fills_the_real_model_page_when_it_is_built(qtbot, tmp_path):
    from ui.window.main_window import MainWindow

    part = {"model": None, "text": "softmax of scaled scores", "rule": "dk", "memory_budget": 1.5}
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"config": SimulationConfig(trials=500).to_dict(), "real_model": part}))
    w = MainWindow(theme="light", restore=False, persist=False)
    try:
        w.open_session(path)
        assert "RealModelPage" not in w.pages
        assert json.loads(w.save_session(tmp_path / "again.json").read_text())["real_model"] == part
        page = w.open_page("RealModelPage")
        assert page.session_params() == part
        # a blank text in a session is refused (naming the field) and changes nothing
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"config": SimulationConfig(trials=900).to_dict(),
                                   "real_model": {**part, "text": "  "}}))
        with pytest.raises(ValueError, match="text"):
            w.open_session(bad)
        assert page.session_params() == part
        assert w.params.config_from_widgets().trials == 500
        # a budget out of the field's range is refused the same way
        bad.write_text(json.dumps({"real_model": {**part, "memory_budget": 0.01}}))
        with pytest.raises(ValueError, match="memory_budget"):
            w.open_session(bad)
        assert page.session_params() == part
    finally:
        w.shutdown()
        w.close()
        w.deleteLater()
