"""File -> Open with every hostile file (as a session, inside a PNG's text chunk, inside an SVG's
metadata): the window says what is wrong in one message naming the file, its parameters and the
pages' pending parts stay as they were, and the window answers at once (the message quotes a short
prefix of a bad value, however long)."""

from __future__ import annotations

import time

import pytest

from tests.fuzz.corpus import HOSTILE_CONTENT, HOSTILE_SVG, HOSTILE_VALUES, paths, replaced, spread
from tests.fuzz.readers import READERS_WITH_DOCUMENTS, readers, valid_session
from tests.fuzz.test_corpus import LINE_MAX, TIME_BOUND_S

READERS = readers()
FORMATS = ("session", "figure_png", "figure_svg")
assert set(FORMATS) <= set(READERS_WITH_DOCUMENTS)


@pytest.fixture(scope="module")
def lab(qapp):
    from ui.window.main_window import MainWindow

    w = MainWindow(theme="light", restore=False, persist=False)
    w.show()
    yield w
    w.shutdown()
    w.close()
    w.deleteLater()


def _open(lab, monkeypatch, path) -> tuple[list[tuple[str, str, bool]], float]:
    from PySide6.QtWidgets import QFileDialog

    said: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(path), ""))
    monkeypatch.setattr(lab, "message", lambda title, text, error=False: said.append(
        (title, text, error)))
    start = time.perf_counter()
    lab.sessions.open_dialog()
    return said, time.perf_counter() - start


def _state(lab) -> tuple:
    return lab.params.widget_values(), lab.sweep_axis, dict(lab.sessions.pending)


def _refused(lab, monkeypatch, tmp_path, fmt: str, doc, raw: bool = False) -> None:
    reader = READERS[fmt]
    path = tmp_path / f"case{reader.suffix}"
    if raw:  # the bytes are the file itself
        path.write_bytes(doc)
    else:
        reader.write(path, doc)
    before = _state(lab)
    said, seconds = _open(lab, monkeypatch, path)
    assert seconds < TIME_BOUND_S
    assert len(said) == 1 and said[0][2], said
    text = said[0][1]
    assert str(path) in text and "\n" not in text and len(text) <= LINE_MAX + 20, text[:500]
    assert _state(lab) == before


@pytest.mark.parametrize("case", HOSTILE_CONTENT)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_hostile_file_is_refused_and_changes_nothing(lab, monkeypatch, tmp_path, fmt, case):
    _refused(lab, monkeypatch, tmp_path, fmt, HOSTILE_CONTENT[case]())


@pytest.mark.parametrize("case", HOSTILE_SVG)
def test_a_hostile_svg_is_refused_at_once(lab, monkeypatch, tmp_path, case):
    _refused(lab, monkeypatch, tmp_path, "figure_svg", HOSTILE_SVG[case](), raw=True)


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_a_session_with_a_hostile_field(lab, monkeypatch, tmp_path, value):
    """Each field of a session replaced by a hostile value: opened (the value was fine there),
    or refused with one line and nothing changed."""
    valid = valid_session()
    for i, path in enumerate(spread(list(paths(valid)))):
        doc = replaced(valid, path, HOSTILE_VALUES[value])
        folder = tmp_path / str(i)
        folder.mkdir()
        target = folder / "s.json"
        READERS["session"].write(target, doc)
        before = _state(lab)
        said, seconds = _open(lab, monkeypatch, target)
        assert seconds < TIME_BOUND_S
        if said:  # refused: one line, the parameters as they were
            assert len(said) == 1 and said[0][2] and str(target) in said[0][1]
            assert "\n" not in said[0][1] and len(said[0][1]) <= LINE_MAX + 20
            assert _state(lab) == before
