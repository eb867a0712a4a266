"""A presets file is read whole and checked: every preset in file order (the first is the
default), each limit (bytes, presets, title and description lengths) taken at its value and
refused one past it, a bad config named under its preset. Small hand-written files, about 0.3 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import ConfigError, FileFormatError
from engine.training.config import TrainingConfig
from engine.training.presets import DEFAULT_PRESET, PRESET_FILE, load_presets, preset


def _write(tmp_path: Path, data, name: str = "training.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _entry(title: str = "T", description: str = "D", **config) -> dict:
    return {"title": title, "description": description, "config": config}


def _problem(path: Path) -> FileFormatError:
    with pytest.raises(FileFormatError) as info:
        load_presets(path)
    assert info.value.file == str(path)
    return info.value


def test_presets_keep_file_order_title_description_and_config(tmp_path):
    path = _write(tmp_path, {"zeta": _entry("Zeta", "the first", steps=7),
                             "alpha": _entry("Alpha", "the second", d_model=64, heads=2)})
    presets = load_presets(path)
    assert list(presets) == ["zeta", "alpha"]  # (file order, not sorted)
    z = presets["zeta"]
    assert (z.name, z.title, z.description) == ("zeta", "Zeta", "the first")
    assert z.config == TrainingConfig(steps=7)
    assert presets["alpha"].config == TrainingConfig(d_model=64, heads=2)


def test_a_bad_config_is_named_under_its_preset(tmp_path):
    path = _write(tmp_path, {"ok": _entry(), "bad": _entry(heads=3)})
    err = _problem(path)
    assert err.where == "bad.config.heads"
    assert err.problem.startswith("must divide d_model (256)")


@pytest.mark.parametrize(("data", "where", "problem"), [
    ({}, "", "holds no preset"),
    ({"demo": {"title": "t", "config": {}}}, "demo.description", "required, but missing"),
    ({"demo": {"description": "d", "config": {}}}, "demo.title", "required, but missing"),
    ({"demo": {**_entry(), "extra": 1}}, "demo.extra",
     "unknown key (known: config, description, title)"),
])
def test_what_a_preset_needs(tmp_path, data, where, problem):
    err = _problem(_write(tmp_path, data))
    assert (err.where, err.problem) == (where, problem)


def test_titles_up_to_500_characters_descriptions_up_to_20000(tmp_path):
    ok = load_presets(_write(tmp_path, {"p": _entry("t" * 500, "d" * 20_000)}))
    assert len(ok["p"].title) == 500 and len(ok["p"].description) == 20_000
    err = _problem(_write(tmp_path, {"p": _entry("t" * 501)}, "title.json"))
    assert err.where == "p.title" and "501 characters, more than 500" in err.problem
    err = _problem(_write(tmp_path, {"p": _entry("t", "d" * 20_001)}, "desc.json"))
    assert err.where == "p.description" and "20,001 characters, more than 20,000" in err.problem


def test_up_to_100_presets(tmp_path):
    data = {f"p{i}": _entry() for i in range(100)}
    assert len(load_presets(_write(tmp_path, data))) == 100
    err = _problem(_write(tmp_path, {**data, "p100": _entry()}, "more.json"))
    assert "101 keys, more than 100" in err.problem


def test_a_file_of_up_to_a_million_bytes(tmp_path):
    head = json.dumps({"p": _entry()})
    pad = 1_000_000 - len(head)
    path = _write(tmp_path, head + " " * pad)
    assert path.stat().st_size == 1_000_000 and list(load_presets(path)) == ["p"]
    err = _problem(_write(tmp_path, head + " " * (pad + 1), "big.json"))
    assert err.problem == ("1,000,001 bytes, more than the 1,000,000 any presets file needs "
                           "(refused unread)")


def test_the_bundled_file_is_read_once_and_demo_comes_first():
    presets = load_presets()
    assert load_presets() is presets  # (cached)
    assert next(iter(presets)) == DEFAULT_PRESET == "demo"
    assert list(presets) == list(json.loads(PRESET_FILE.read_text(encoding="utf-8")))
    assert preset("recall") is presets["recall"]


@pytest.mark.parametrize("name", ["nope", 5, None])
def test_an_unknown_preset_lists_the_names(name):
    with pytest.raises(ConfigError) as info:
        preset(name)
    names = ", ".join(json.loads(PRESET_FILE.read_text(encoding="utf-8")))
    assert info.value.field == "preset"
    assert info.value.message == f"must be one of {names}; got {name!r}"
