"""Every file dialog opens in the last folder used, else the user's Pictures (figures) or
Documents folder, never the working directory the app was started from."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home with Documents and Pictures, fresh settings, and a working directory elsewhere."""
    home = tmp_path / "home"
    for name in ("Documents", "Pictures"):
        (home / name).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("ATTENTION_LAB_SETTINGS", str(tmp_path / "settings.ini"))
    work = tmp_path / "started_here"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


@pytest.fixture
def dialogs(monkeypatch, tmp_path):
    """Every QFileDialog call records where it opens and answers ``answer[kind]`` (or cancels)."""
    seen: list[tuple[str, str]] = []
    answer: dict[str, str] = {}

    def save(_parent, _title, start, _filters="", *a, **k):
        seen.append(("save", start))
        return answer.get("save", ""), ""

    def open_(_parent, _title, start, _filters="", *a, **k):
        seen.append(("open", start))
        return answer.get("open", ""), ""

    def folder(_parent, _title, start="", *a, **k):
        seen.append(("folder", start))
        return answer.get("folder", "")

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(open_))
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(folder))
    return seen, answer


def test_first_dialogs_open_in_pictures_or_documents_then_in_the_last_folder(
        window, home, dialogs, tmp_path, qtbot):
    seen, answer = dialogs
    # a figure: Pictures; a session, CSV or folder: Documents; never the working directory
    window.exports.export_panel_dialog(window.page.panels["scores"], "png")
    assert Path(seen[-1][1]) == home / "Pictures" / "scores.png"
    window.sessions.save_dialog()
    assert Path(seen[-1][1]) == home / "Documents" / "session.json"
    inspector = window.ensure_page("InspectorPage")
    inspector._on_save_csv()
    assert Path(seen[-1][1]) == home / "Documents" / "inspector.csv"
    experiments = window.ensure_page("ExperimentsPage")
    experiments._open_dialog()
    assert Path(seen[-1][1]) == home / "Documents"
    training = window.ensure_page("TrainingPage")
    training.export_all_dialog()
    assert Path(seen[-1][1]) == home / "Documents"
    assert all(str(Path.cwd()) not in start for _kind, start in seen)

    # a figure saved into a folder of the user's choice: every next dialog opens there
    chosen = tmp_path / "lecture"
    chosen.mkdir()
    answer["save"] = str(chosen / "hist.csv")
    window.exports.export_panel_dialog(window.page.panels["scores"], "csv")
    answer.clear()
    window.sessions.save_dialog()
    assert Path(seen[-1][1]) == chosen / "session.json"
    window.sessions.open_dialog()
    assert Path(seen[-1][1]) == chosen
    experiments._open_dialog()
    assert Path(seen[-1][1]) == chosen
    real = window.ensure_page("RealModelPage")
    real._choose_folder()
    assert Path(seen[-1][1]) == chosen
    # a last folder that no longer exists: back to Documents / Pictures
    import shutil

    shutil.rmtree(chosen)
    inspector._on_save_png()
    assert Path(seen[-1][1]) == home / "Pictures" / "inspector.png"
