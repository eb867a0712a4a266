"""The preset texts: the bundled file is read whole; a broken one (the bundled file or a user's) is
one FileFormatError naming the file and the field, never replaced by a text of the program's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import FileFormatError
from engine.probe.texts import PRESETS_FILE, default_text, load_text_presets


def test_the_bundled_presets_are_read_in_order() -> None:
    bundled = json.loads(PRESETS_FILE.read_text(encoding="utf-8"))["presets"]
    got = load_text_presets()
    assert got == [(p["name"], p["text"]) for p in bundled] and len(got) >= 2
    assert default_text() == got[0][1]


def _good() -> dict:
    return {"presets": [{"name": "A", "text": "one two"}, {"name": "B", "text": "three"}]}


def _with(change) -> dict:
    data = _good()
    change(data)
    return data


@pytest.mark.parametrize(("doc", "where", "says"), [
    (_with(lambda d: d["presets"][1].update(text=5)), "presets[1].text", "must be a string"),
    (_with(lambda d: d["presets"][0].pop("name")), "presets[0].name", "required, but missing"),
    (_with(lambda d: d["presets"][1].update(name="   ")), "presets[1].name", "must not be blank"),
    (_with(lambda d: d["presets"][0].update(text="")), "presets[0].text", "must not be blank"),
    (_with(lambda d: d.update(presets=[])), "presets", "at least 1"),
    (_with(lambda d: d.update(presets="text")), "presets", "must be"),
    (_with(lambda d: d.update(presets=[["A", "x"]])), "presets[0]", "must be"),
    ({"about": "no presets"}, "presets", "required, but missing"),
    ([1, 2], "", "must be"),
])
def test_a_broken_texts_file_names_the_file_and_the_field(tmp_path: Path, doc, where: str,
                                                          says: str) -> None:
    path = tmp_path / "texts.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(FileFormatError) as info:
        load_text_presets(path)
    err = info.value
    line = str(err)
    assert err.file == str(path) and line.startswith(f"{path}: ") and "\n" not in line, line
    assert err.where == where and says in err.problem, line


@pytest.mark.parametrize(("raw", "says"), [
    (b"", "empty"),
    (b'{"presets": [', "not valid JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b'{"presets": [{"name": "A", "text": NaN}]}', "finite"),
    (b"[" * 100_000 + b"]" * 100_000, "nested more than"),
])
def test_a_texts_file_that_is_not_sound_json_is_named(tmp_path: Path, raw: bytes,
                                                      says: str) -> None:
    path = tmp_path / "texts.json"
    path.write_bytes(raw)
    with pytest.raises(FileFormatError) as info:
        load_text_presets(path)
    assert info.value.file == str(path) and says in str(info.value), str(info.value)


def test_a_missing_or_huge_texts_file_is_refused_unread(tmp_path: Path, monkeypatch) -> None:
    import engine.probe.texts as texts

    with pytest.raises(FileFormatError, match="no such file"):
        load_text_presets(tmp_path / "absent.json")
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"presets": [{"name": "A", "text": "x" * 2000}]}))
    monkeypatch.setattr(texts, "PRESETS_FILE_MAX", 1000)
    with pytest.raises(FileFormatError, match="more than the 1,000"):
        load_text_presets(big)


def test_the_default_text_comes_from_the_bundled_file_at_call_time(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """A broken bundled file reaches ``default_text`` (audit-model without --text) as its error,
    not as a built-in sentence."""
    import engine.probe.texts as texts

    bad = tmp_path / "probe_texts.json"
    bad.write_text(json.dumps(_with(lambda d: d["presets"][0].update(text=None))))
    monkeypatch.setattr(texts, "PRESETS_FILE", bad)
    with pytest.raises(FileFormatError) as info:
        default_text()
    assert str(info.value).startswith(f"{bad}: presets[0].text: must be a string")


def _written(tmp_path: Path, doc) -> Path:
    path = tmp_path / "texts.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _problem(path: Path) -> tuple[str, str]:
    with pytest.raises(FileFormatError) as info:
        load_text_presets(path)
    return info.value.where, info.value.problem


def test_the_limits_are_held_at_their_documented_values(tmp_path: Path) -> None:
    """A name of 200 characters, a text of 500,000 and 100 presets are read; one more is not."""
    name, text = "n" * 200, "t" * 500_000
    path = _written(tmp_path, {"presets": [{"name": name, "text": text}] +
                               [{"name": f"P{i}", "text": "x"} for i in range(99)]})
    got = load_text_presets(path)
    assert len(got) == 100 and got[0] == (name, text) and got[99] == ("P98", "x")
    where, problem = _problem(_written(tmp_path, {"presets": [{"name": name + "n", "text": "x"}]}))
    assert where == "presets[0].name" and "200" in problem, problem
    where, problem = _problem(_written(tmp_path, {"presets": [{"name": "A", "text": text + "t"}]}))
    assert where == "presets[0].text" and "500,000" in problem, problem
    where, problem = _problem(_written(tmp_path, {"presets": [{"name": "A", "text": "x"}] * 101}))
    assert where == "presets" and "100" in problem, problem


def test_other_top_level_keys_are_kept_but_a_preset_takes_only_its_two(tmp_path: Path) -> None:
    path = _written(tmp_path, {"about": "notes", "presets": [{"name": "A", "text": "x y"}]})
    assert load_text_presets(path) == [("A", "x y")]
    where, problem = _problem(_written(tmp_path, {"presets": [{"name": "A", "text": "x",
                                                                "lang": "en"}]}))
    assert where.startswith("presets[0]") and "lang" in where + problem, (where, problem)
    where, problem = _problem(_written(tmp_path, {"presets": [{"text": "x"}]}))
    assert (where, problem) == ("presets[0].name", "required, but missing")


def test_the_blank_check_names_the_preset_and_a_blank_name_is_checked_before_its_text(
        tmp_path: Path) -> None:
    path = _written(tmp_path, {"presets": [{"name": "A", "text": "x"},
                                           {"name": " ", "text": "\t"}]})
    assert _problem(path) == ("presets[1].name", "must not be blank")


def test_the_default_file_is_looked_up_at_call_time_and_a_huge_one_named_as_probe_texts(
        tmp_path: Path, monkeypatch) -> None:
    import engine.probe.texts as texts

    path = _written(tmp_path, {"presets": [{"name": "Mine", "text": "first text"},
                                           {"name": "B", "text": "second"}]})
    monkeypatch.setattr(texts, "PRESETS_FILE", path)
    assert load_text_presets() == [("Mine", "first text"), ("B", "second")]
    assert default_text() == "first text"
    monkeypatch.setattr(texts, "PRESETS_FILE_MAX", 10)
    with pytest.raises(FileFormatError) as info:
        load_text_presets()
    assert info.value.file == str(path)
    assert info.value.problem == (f"{path.stat().st_size:,} bytes, more than the 10 any probe "
                                  "texts file needs (refused unread)")
