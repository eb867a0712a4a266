"""A broken bundled file is named in the window: the page that needs it says which file and what
is wrong in its tab (and one line on stderr, no traceback); broken simulation presets leave one
disabled menu entry saying the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def broken_training_presets(tmp_path: Path, monkeypatch) -> Path:
    import engine.training.presets as presets

    bad = tmp_path / "training.json"
    data = json.loads(presets.PRESET_FILE.read_text())
    del data["demo"]["title"]
    bad.write_text(json.dumps(data))
    monkeypatch.setattr(presets, "PRESET_FILE", bad)
    presets._bundled_presets.cache_clear()
    yield bad
    presets._bundled_presets.cache_clear()


def test_the_training_tab_names_a_broken_presets_file(window, broken_training_presets, capfd):
    from PySide6.QtWidgets import QLabel

    page = window.open_page("TrainingPage")
    assert isinstance(page, QLabel) and page.objectName() == "page_load_error"
    assert f"{broken_training_presets}: demo.title: required, but missing" in page.text()
    err = capfd.readouterr().err
    assert "Traceback" not in err and f"{broken_training_presets}: demo.title" in err


def test_broken_simulation_presets_leave_one_entry_that_says_why(qtbot, tmp_path, monkeypatch):
    import engine.simulation_presets as sim_presets
    from ui.window.main_window import MainWindow

    bad = tmp_path / "simulation.json"
    bad.write_text('{"default": {"title": "t", "config": {"d_k": "wide"}}}')
    monkeypatch.setattr(sim_presets.load_presets, "__defaults__", (bad,))
    w = MainWindow(theme="light", restore=False, persist=False)
    qtbot.addWidget(w)
    try:
        actions = w.presets_menu.actions()
        assert len(actions) == 1 and not actions[0].isEnabled()
        assert f"{bad}: default.config.d_k: must be an integer" in actions[0].text()
    finally:
        w.close()
        w.deleteLater()


@pytest.mark.parametrize(("text", "says"), [
    ('{"steps": [{"title": "t", "text": "x", "plot": "scores", "config": {"scalings": 5}}]}',
     "step 1: config.scalings: must be a list of names"),
    ("[" * 100_000 + "]" * 100_000, "nested more than"),
    ('{"steps": [{"title": "t", "text": "x", "plot": "scores", "question": {"ask": "q", '
     '"choices": [1, 2], "answer": 0, "measure": {"rule": "sqrt", "statistic": "entropy"}}, '
     '"config": {"scalings": ["none"]}}]}', "not among the step's scalings"),
])
def test_a_broken_tour_file_names_the_file_and_the_problem(tmp_path, text, says):
    from ui.pages.tour.steps import TourError, load_steps

    path = tmp_path / "tour.json"
    path.write_text(text)
    with pytest.raises(TourError) as info:
        load_steps(path)
    assert str(path) in str(info.value) and says in str(info.value)
