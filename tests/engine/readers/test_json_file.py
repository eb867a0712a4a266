"""The bounded JSON reader: size before reading, depth and non-finite numbers after parsing,
each refusal one FileFormatError naming the file and the field path."""

from __future__ import annotations

import json
import os

import pytest

from engine.errors import FileFormatError
from engine.readers.json_file import (
    MAX_DEPTH,
    check_file,
    format_path,
    join_path,
    parse_json,
    read_bytes,
    read_json,
)


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


def _refusal(call) -> tuple[str, str, str, str]:
    with pytest.raises(FileFormatError) as info:
        call()
    e = info.value
    return e.file, e.where, e.problem, e.option


def test_every_refusal_names_the_file_the_place_the_problem_and_the_option(tmp_path, monkeypatch):
    """Through read_json, each way a file is refused, all four parts of the error exact: the
    file, the field path (empty: the file as a whole), the problem (with the kind of file and its
    numbers), and the command-line option that named it."""
    import engine.readers.json_file as jf

    def read(path, max_bytes=2000):
        return lambda: read_json(path, max_bytes=max_bytes, kind="test file", option="--x")

    f = tmp_path / "f.json"
    assert _refusal(read(tmp_path)) == (str(tmp_path), "", "is a folder, not a file", "--x")
    assert _refusal(read(tmp_path / "no.json")) == (str(tmp_path / "no.json"), "", "no such file",
                                                    "--x")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        assert _refusal(read(tmp_path / "fifo"))[1:] == ("", "is a FIFO (a pipe), not a regular file",
                                                          "--x")
    f.write_bytes(b" " * 2001)
    assert _refusal(read(f)) == (str(f), "", "2,001 bytes, more than the 2,000 any test file "
                                             "needs (refused unread)", "--x")
    f.write_bytes(b"[1]" + b" " * 1997)  # exactly 2,000 bytes: read
    assert read(f)() == [1]
    f.write_bytes(b'{"a": "\xff"}')
    assert _refusal(read(f)) == (str(f), "", "not UTF-8 text (byte 7)", "--x")
    f.write_bytes(b"[1,")
    assert _refusal(read(f)) == (str(f), "", "not valid JSON (Expecting value at line 1, "
                                             "column 4)", "--x")
    f.write_bytes(b"[" * 5000 + b"]" * 5000)
    assert _refusal(read(f, 10**6)) == (str(f), "", "nested more than 32 levels deep", "--x")
    f.write_bytes(b"NaN")  # a number alone, not inside a list or an object
    assert _refusal(read(f)) == (str(f), "", "nan is not a number this file may hold (only "
                                             "finite numbers: no NaN, Infinity or -Infinity)",
                                 "--x")
    f.write_bytes(b'{"a": [2, 3]}')
    assert read(f)() == {"a": [2, 3]}
    # a file that grows between the size check and the read: at most max_bytes + 1 are read
    f.write_bytes(b" " * 5000)
    monkeypatch.setattr(jf, "check_file", lambda *a, **k: 0)
    assert _refusal(read(f)) == (str(f), "", "2,001 bytes, more than the 2,000 any test file "
                                             "needs (refused unread)", "--x")
    f.write_bytes(b" " * 2000)
    assert _refusal(read(f)) == (str(f), "", "empty (no JSON in it)", "--x")
    monkeypatch.undo()

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("builtins.open", denied)
    assert _refusal(read(f)) == (str(f), "", "cannot read: Permission denied", "--x")


def test_parse_json_refuses_naming_its_source():
    """The size bound applies to the text itself (a string up to max_bytes is parsed)."""
    def parse(raw, max_bytes=10):
        return lambda: parse_json(raw, "chunk", max_bytes=max_bytes, kind="chunk", option="--y")

    assert parse_json('"12345678"', "chunk", max_bytes=10) == "12345678"  # exactly 10
    assert _refusal(parse('"123456789"')) == ("chunk", "", "11 bytes, more than the 10 any chunk "
                                                           "needs (refused unread)", "--y")
    assert _refusal(parse(b"[1, \xfe]")) == ("chunk", "", "not UTF-8 text (byte 4)",
                                                         "--y")
    assert _refusal(parse("-Infinity", 100)) == ("chunk", "", "-inf is not a number this file "
                                                 "may hold (only finite numbers: no NaN, Infinity"
                                                 " or -Infinity)", "--y")
    assert _refusal(parse('{"a": [1, {"b": NaN}]}', 100))[1] == "a[1].b"


def test_the_defaults_say_file_and_name_no_option(tmp_path):
    f = tmp_path / "f.json"
    f.write_bytes(b" " * 11)
    for call in (lambda: read_json(f, max_bytes=10), lambda: check_file(f, max_bytes=10),
                 lambda: read_bytes(f, max_bytes=10),
                 lambda: parse_json(b" " * 11, str(f), max_bytes=10)):
        assert _refusal(call) == (str(f), "", "11 bytes, more than the 10 any file needs "
                                              "(refused unread)", "")


def test_a_path_the_system_cannot_stat_is_refused_not_raised(tmp_path):
    long = tmp_path / ("x" * 300)  # longer than a file name may be (ENAMETOOLONG)
    assert _refusal(lambda: read_json(long, max_bytes=10, option="--x")) == (
        str(long), "", "cannot read: File name too long", "--x")


def test_an_integer_too_long_to_convert_is_refused_with_a_short_message():
    try:
        int("1" * 5000)
    except ValueError as exc:
        python_says = str(exc)
    problem = _refusal(lambda: parse_json("1" * 5000, "t", max_bytes=10**4, option="--y"))
    assert problem == ("t", "", f"not valid JSON ({python_says[:80]})", "--y")
    assert len(python_says) > 80  # (so the cut is tested)


def test_parse_json_takes_its_own_depth_limit():
    assert parse_json("[[[1]]]", "t", max_bytes=100, max_depth=3) == [[[1]]]
    assert _refusal(lambda: parse_json("[[[[1]]]]", "t", max_bytes=100, max_depth=3)) == (
        "t", "[0][0][0]", "nested more than 3 levels deep", "")


@pytest.mark.parametrize("path, text", [
    (("config", "scalings", 2), "config.scalings[2]"),
    (("a", "b.c", "d"), "a['b.c'].d"),  # a key that is not plain is quoted
    (("a\nb",), "['a\\nb']"),
    (("k" * 40,), "k" * 40),  # 40 characters: kept
    (("k" * 41,), "k" * 40 + "…"),  # 41: cut to 40
    (("a",) * 60, ".".join("a" * 60)),  # 119 characters: kept
    (("ab",) + ("a",) * 59, "ab" + ".a" * 59),  # 120: kept
    (("a",) * 61, "…" + ".".join("a" * 61)[-120:]),  # 121: the last 120
])
def test_format_path_by_hand(path, text):
    assert format_path(path) == text


@pytest.mark.parametrize("where, path, joined", [
    ("base", "lr", "base.lr"), ("rows", "[2]", "rows[2]"), ("", "lr", "lr"), ("base", "", "base"),
    ("", "", ""), ("a.b", "[0].c", "a.b[0].c"),
])
def test_join_path_by_hand(where, path, joined):
    assert join_path(where, path) == joined
