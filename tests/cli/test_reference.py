"""docs/cli.md is generated from the parsers: it cannot drift from what the commands accept."""

from __future__ import annotations

import argparse

from main import build_parser
from ui.cli import COMMANDS
from ui.cli.reference import TARGET, main, render


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
    monkeypatch.setattr("ui.cli.reference.TARGET", stale)
    monkeypatch.setattr("ui.cli.reference.ROOT", tmp_path)
    assert main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["--write"]) == 0
    assert main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == render()
