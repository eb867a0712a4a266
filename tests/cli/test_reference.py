"""docs/cli.md is generated from the parsers: it cannot drift from what the commands accept."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from main import build_parser
from ui.cli import COMMANDS, builtins_table
from ui.cli.reference import TARGET, main, render

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "docs" / "guide" / "experiments.md"


def _parsers() -> list[argparse.ArgumentParser]:
    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return [root, *(sub.choices[name] for name in COMMANDS)]


def test_the_committed_reference_is_the_generated_one() -> None:
    assert TARGET.read_text(encoding="utf-8") == render(), (
        "docs/cli.md is out of date: run python -m ui.cli.reference --write")


def test_every_command_and_option_is_documented() -> None:
    text = render()
    for name in COMMANDS:
        assert f"\n## {name}\n" in text, name
    for parser in _parsers():
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text or f", {option}" in text, (parser.prog, option)
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            if action.help and action.option_strings:
                assert " ".join(action.help.split()[:4]) in text, (parser.prog, action.dest)


def test_check_mode_fails_on_a_stale_file(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / "cli.md"
    stale.write_text(render().replace("--d-k", "--dk"), encoding="utf-8")
    guide = tmp_path / "docs" / "guide" / "experiments.md"
    guide.parent.mkdir(parents=True)
    guide.write_text(EXPERIMENTS.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr("ui.cli.reference.TARGET", stale)
    monkeypatch.setattr("ui.cli.reference.ROOT", tmp_path)
    assert main(["--check"]) == 1
    assert "cli.md is out of date" in capsys.readouterr().err
    assert main(["--write"]) == 0
    assert main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == render()
    guide.write_text(guide.read_text(encoding="utf-8").replace("| `heads` |", "| `head` |"),
                     encoding="utf-8")
    assert main(["--check"]) == 1
    assert "experiments.md is out of date" in capsys.readouterr().err


def _documented_builtins() -> list[str]:
    text = EXPERIMENTS.read_text(encoding="utf-8")
    table = text[text.index(builtins_table.BEGIN):text.index(builtins_table.END)]
    return re.findall(r"^\| `(\w+)` \|", table, flags=re.M)


def test_the_built_in_experiments_table_is_the_generated_one() -> None:
    """One row per file in resources/experiments (it once missed width_transfer), as
    ``experiment --list`` orders them."""
    text = EXPERIMENTS.read_text(encoding="utf-8")
    assert text == builtins_table.render(text), (
        "docs/guide/experiments.md is out of date: run python -m ui.cli.reference --write")
    files = sorted(p.stem for p in (ROOT / "resources" / "experiments").glob("*.json"))
    assert sorted(_documented_builtins()) == files and len(files) >= 10
    from engine.experiments.builtin import ORDER

    assert _documented_builtins()[:len(ORDER)] == list(ORDER)
