"""The built-in experiments are data: each file's stem is its name, the listed ones come first
in their order and the others follow alphabetically, a broken file is one FileFormatError naming
it and the field. Hand-written folders (no training), about 0.3 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import engine.experiments.builtin as builtin_module
from engine.errors import ConfigError, FileFormatError
from engine.experiments.builtin import builtin, load_builtins, read_builtin

SPEC = {"title": "T", "description": "what it shows", "preset": "demo", "base": {"steps": 3},
        "axes": {"seed": [0, 1]}, "figures": [{"kind": "by_rule", "y": "success", "title": "F"}],
        "verdict": {"kind": "by_rule", "metric": "success"}}


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """EXPERIMENT_DIR moved to an empty folder (the cache cleared before and after)."""
    monkeypatch.setattr(builtin_module, "EXPERIMENT_DIR", tmp_path)
    load_builtins.cache_clear()
    yield tmp_path
    load_builtins.cache_clear()


def _write(folder: Path, name: str, data) -> Path:
    path = folder / f"{name}.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_listed_experiments_first_in_their_order_then_the_rest_alphabetically(folder):
    for name in ("zeta", "heads", "alpha", "seeds", "learning_rate"):
        _write(folder, name, SPEC)
    specs = load_builtins()
    assert list(specs) == ["seeds", "learning_rate", "heads", "alpha", "zeta"]
    assert {n: s.name for n, s in specs.items()} == {n: n for n in specs}
    assert builtin("alpha") is specs["alpha"] and builtin("alpha").base.steps == 3


def test_the_shipped_order_begins_with_the_listed_ones():
    load_builtins.cache_clear()
    names = list(load_builtins())
    assert names[:5] == ["seeds", "head_width", "learning_rate", "logit_control", "heads"]
    assert names[5:] == sorted(names[5:])
    stems = {p.stem for p in builtin_module.EXPERIMENT_DIR.glob("*.json")}
    assert set(names) == stems


def test_a_file_is_read_with_its_stem_as_name(folder):
    spec = read_builtin(_write(folder, "mine", SPEC))
    assert spec.name == "mine" and spec.title == "T"


@pytest.mark.parametrize("key", ["title", "figures", "verdict"])
def test_what_the_page_shows_is_required(folder, key):
    path = _write(folder, "x", {k: v for k, v in SPEC.items() if k != key})
    with pytest.raises(FileFormatError) as info:
        read_builtin(path)
    assert (info.value.file, info.value.where, info.value.problem) == \
        (str(path), key, "required, but missing")


def test_a_file_that_is_not_an_object_or_too_large(folder):
    path = _write(folder, "x", "[1, 2]")
    with pytest.raises(FileFormatError) as info:
        read_builtin(path)
    assert (info.value.file, info.value.where, info.value.problem) == \
        (str(path), "", "must be a JSON object, got list")
    head = json.dumps(SPEC)
    ok = _write(folder, "edge", head + " " * (1_000_000 - len(head)))
    assert ok.stat().st_size == 1_000_000 and read_builtin(ok).name == "edge"
    big = _write(folder, "big", head + " " * (1_000_001 - len(head)))
    with pytest.raises(FileFormatError) as info:
        read_builtin(big)
    assert info.value.problem == ("1,000,001 bytes, more than the 1,000,000 any built-in "
                                  "experiment needs (refused unread)")


def test_a_bad_field_is_named_with_its_file(folder):
    path = _write(folder, "x", {**SPEC, "axes": {"seed": [[0]]}})
    with pytest.raises(FileFormatError) as info:
        read_builtin(path)
    assert info.value.file == str(path) and info.value.where == "axes.seed[0]"


@pytest.mark.parametrize("name", ["nope", 3])
def test_an_unknown_experiment_lists_the_names(folder, name):
    _write(folder, "b", SPEC)
    _write(folder, "a", SPEC)
    with pytest.raises(ConfigError) as info:
        builtin(name)
    assert info.value.field == "experiment"
    assert info.value.message == f"must be one of a, b; got {name!r}"
