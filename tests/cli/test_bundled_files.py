"""A broken bundled file (training presets, a built-in experiment) is one line on the CLI naming
the file, the field and what is wrong (exit 2), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import main


def _exit_code(argv: list[str]) -> int:
    try:
        return main.main(argv)
    except SystemExit as exc:
        return int(exc.code)


@pytest.fixture
def broken_builtin(tmp_path: Path, monkeypatch) -> Path:
    import engine.experiments.builtin as builtin

    src = builtin.EXPERIMENT_DIR
    folder = tmp_path / "experiments"
    folder.mkdir()
    for path in src.glob("*.json"):
        (folder / path.name).write_text(path.read_text())
    bad = folder / "seeds.json"
    data = json.loads(bad.read_text())
    data["axes"] = {"seed": [[0], [1]]}
    bad.write_text(json.dumps(data))
    monkeypatch.setattr(builtin, "EXPERIMENT_DIR", folder)
    builtin.load_builtins.cache_clear()
    yield bad
    builtin.load_builtins.cache_clear()


def test_experiment_list_names_a_broken_builtin(broken_builtin: Path, capsys) -> None:
    assert _exit_code(["experiment", "--list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{broken_builtin}: axes.seed[0]: must be" in err[0], err


@pytest.fixture
def broken_presets(tmp_path: Path, monkeypatch) -> Path:
    import engine.training.presets as presets

    bad = tmp_path / "training.json"
    data = json.loads(presets.PRESET_FILE.read_text())
    data["demo"]["config"]["scalings"] = 5
    bad.write_text(json.dumps(data))
    monkeypatch.setattr(presets, "PRESET_FILE", bad)
    presets._bundled_presets.cache_clear()
    yield bad
    presets._bundled_presets.cache_clear()


def test_train_names_a_broken_presets_file(broken_presets: Path, capsys) -> None:
    assert _exit_code(["train", "--steps", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{broken_presets}: demo.config.scalings: must be a list" in err[0]


@pytest.mark.parametrize(("text", "says"), [
    ("[1]", "must be an object"),
    ('{"demo": {"title": "t", "description": "d"}}', "demo.config: required, but missing"),
    ('{"demo": {"title": 5, "description": "d", "config": {}}}', "demo.title: must be a string"),
    ("{}", "holds no preset"),
    ('{"demo": {"title": "t", "description": "d", "config": {"steps": "x"}}}',
     "demo.config.steps: must be an integer"),
])
def test_training_presets_file_problems_are_named(tmp_path: Path, text: str, says: str) -> None:
    from engine.errors import FileFormatError
    from engine.training.presets import load_presets

    path = tmp_path / "training.json"
    path.write_text(text)
    with pytest.raises(FileFormatError) as info:
        load_presets(path)
    assert str(info.value) == f"{path}: {says}" or str(info.value).startswith(f"{path}: {says}")


@pytest.fixture
def broken_probe_texts(tmp_path: Path, monkeypatch) -> Path:
    import engine.probe.texts as texts

    bad = tmp_path / "probe_texts.json"
    data = json.loads(texts.PRESETS_FILE.read_text(encoding="utf-8"))
    data["presets"][0]["text"] = 5
    bad.write_text(json.dumps(data))
    monkeypatch.setattr(texts, "PRESETS_FILE", bad)
    return bad


def test_audit_model_without_a_text_names_a_broken_probe_texts_file(broken_probe_texts: Path,
                                                                    tmp_path: Path,
                                                                    capsys) -> None:
    """No silent fallback to a sentence of the program's own: exit 2, one line, no --out."""
    out = tmp_path / "audit"
    assert _exit_code(["audit-model", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{broken_probe_texts}: presets[0].text: must be a string" in err[0], err
    assert not out.exists()
