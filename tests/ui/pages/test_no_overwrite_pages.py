"""The GUI asks before it replaces files the user did not pick: the Experiments page's output
folder holding a user's summary.csv, metrics.csv or jobs/, and the Score inspector's files beside
the one chosen in the save dialog (its Jacobian CSV, its plots)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from engine.training.config import TrainingConfig

TINY = TrainingConfig(d_model=16, heads=1, items_max=4, classes=4, batch=8, probe_size=4,
                      scalings=("none", "sqrt"), steps=6, log_every=2, device="cpu",
                      hist_bins=20)


@pytest.mark.parametrize("answer", [False, True])
def test_experiments_page_asks_before_replacing_the_users_files(window, tmp_path: Path,
                                                                monkeypatch, answer) -> None:
    page = window.open_page("ExperimentsPage")
    out = tmp_path / "mine"
    (out / "jobs").mkdir(parents=True)
    (out / "summary.csv").write_text("mine")
    (out / "jobs" / "job-00000.json").write_text("{}")
    page.form.set_base(TINY)
    page.form.axes.set_axes([("seed", "0")])
    page.form.out_edit.setText(str(out))
    asked, launched = [], []
    monkeypatch.setattr(page, "ask_overwrite", lambda folder, files: asked.append(files) or answer)
    monkeypatch.setattr(page, "_launch", lambda spec, where, resume, force=False:
                        launched.append((where, resume, force)) or True)
    assert page.start() is answer
    assert asked == [["jobs/job-00000.json", "summary.csv"]]
    assert launched == ([(out, False, True)] if answer else [])
    if not answer:
        assert "not started" in page.message and (out / "summary.csv").read_text() == "mine"


def test_experiments_page_does_not_ask_for_a_new_folder(window, tmp_path: Path,
                                                        monkeypatch) -> None:
    page = window.open_page("ExperimentsPage")
    page.form.set_base(TINY)
    page.form.axes.set_axes([("seed", "0")])
    page.form.out_edit.setText(str(tmp_path / "new"))
    launched = []
    monkeypatch.setattr(page, "ask_overwrite", lambda *a: pytest.fail("asked"))
    monkeypatch.setattr(page, "_launch", lambda spec, where, resume, force=False:
                        launched.append(force) or True)
    assert page.start() and launched == [False]


def test_the_inspector_asks_about_the_files_beside_the_one_chosen(qtbot, tmp_path: Path,
                                                                  monkeypatch) -> None:
    import ui.export.dialog
    from ui.pages.inspector.page import InspectorPage

    page = InspectorPage()
    qtbot.addWidget(page)
    asked = []
    monkeypatch.setattr(ui.export.dialog, "ask_overwrite",
                        lambda parent, folder, files: asked.append(files) or False)
    chosen = tmp_path / "mine.png"
    assert page._may_replace(page.plot_paths(chosen))  # nothing there yet: no question
    (tmp_path / "mine_gauge.svg").write_text("mine")
    assert not page._may_replace(page.plot_paths(chosen))
    assert asked == [["mine_gauge.svg"]]
    page.close()
