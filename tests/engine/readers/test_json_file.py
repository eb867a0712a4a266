"""The bounded JSON reader: size before reading, depth and non-finite numbers after parsing,
each refusal one FileFormatError naming the file and the field path."""

from __future__ import annotations

import json
import os

import pytest

from engine.errors import FileFormatError
from engine.readers.json_file import MAX_DEPTH, format_path, parse_json, read_json


def _read(tmp_path, text: str | bytes, max_bytes: int = 10_000):
    path = tmp_path / "f.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return read_json(path, max_bytes=max_bytes, kind="test file")


def test_a_valid_file_is_read(tmp_path):
    assert _read(tmp_path, '{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}
    assert _read(tmp_path, b'\xef\xbb\xbf{"bom": 1}') == {"bom": 1}  # a BOM is allowed


@pytest.mark.parametrize(("text", "where", "problem"), [
    ('{"a": {"b": [1, NaN]}}', "a.b[1]", "nan is not a number"),
    ('{"a": Infinity}', "a", "inf is not a number"),
    ('[-Infinity]', "[0]", "-inf"),
    ('{"x": 1e999}', "x", "inf is not a number"),
    ("{", "", "not valid JSON"),
    ("", "", "empty"),
    ("   \n", "", "empty"),
    ('{"a": 1} x', "", "not valid JSON"),
    ("1" * 5000, "", "not valid JSON"),  # more digits than Python converts
])
def test_bad_json_is_refused_naming_where(tmp_path, text, where, problem):
    with pytest.raises(FileFormatError) as info:
        _read(tmp_path, text)
    assert info.value.where == where
    assert problem in info.value.problem
    assert str(info.value).startswith(str(tmp_path / "f.json") + ": ")


def test_deep_nesting_is_refused_at_any_depth(tmp_path):
    for depth in (33, 500, 100_000):
        with pytest.raises(FileFormatError, match="nested more than 32 levels"):
            _read(tmp_path, "[" * depth + "]" * depth, max_bytes=10**6)
    assert _read(tmp_path, "[" * 32 + "]" * 32) is not None


def test_the_default_depth_is_32_levels_of_objects_or_lists(tmp_path):
    """The default limit, written as a number (a session nests 3 levels, a job file 4): 32
    containers deep is read, 33 is refused, whether lists or objects, and a scalar at the
    bottom does not count as a level."""
    assert MAX_DEPTH == 32
    objects = "".join('{"a": ' for _ in range(32)) + "1" + "}" * 32
    assert parse_json(objects, "t", max_bytes=10**6) is not None
    with pytest.raises(FileFormatError, match="nested more than 32 levels") as info:
        parse_json('{"a": ' + objects + "}", "t", max_bytes=10**6)
    assert info.value.where == ".".join(["a"] * 32)  # the path to the 33rd container
    mixed = '{"a": ' + "[" * 31 + "]" * 31 + "}"  # 1 object + 31 lists = 32
    assert parse_json(mixed, "t", max_bytes=10**6) is not None
    with pytest.raises(FileFormatError, match="nested more than"):
        parse_json('{"a": ' + "[" * 32 + "]" * 32 + "}", "t", max_bytes=10**6)


def test_size_is_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2001)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    with pytest.raises(FileFormatError, match="2,001 bytes, more than the 2,000 any test file"):
        read_json(path, max_bytes=2000, kind="test file")


def test_not_utf8_a_folder_a_missing_file_and_a_fifo(tmp_path):
    with pytest.raises(FileFormatError, match="not UTF-8"):
        _read(tmp_path, b'{"a": "\xff"}')
    with pytest.raises(FileFormatError, match="is a folder"):
        read_json(tmp_path, max_bytes=100)
    with pytest.raises(FileFormatError, match="no such file"):
        read_json(tmp_path / "nope.json", max_bytes=100)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(FileFormatError, match="not a regular file"):  # (never blocks)
            read_json(fifo, max_bytes=100)


def test_parse_json_bounds_a_string_too():
    with pytest.raises(FileFormatError, match="more than the 10 any"):
        parse_json(json.dumps("x" * 20), "chunk", max_bytes=10)
    assert parse_json('{"a": 1}', "chunk", max_bytes=10) == {"a": 1}


def test_format_path_cuts_long_keys_and_paths():
    assert format_path(("config", "scalings", 2)) == "config.scalings[2]"
    assert format_path((0, "a")) == "[0].a"
    assert len(format_path(("k" * 1000,))) < 50
    assert len(format_path(tuple(range(500)))) <= 121
