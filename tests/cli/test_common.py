"""What every subcommand shares: "did you mean" for a mistyped option or choice, and no
progress bar where stderr is not a terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ui.cli.common import did_you_mean, progress_bar

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("args", "suggestion"), [
    (("simulate", "--dk", "4"), "did you mean --d-k?"),
    (("simulate", "--d-kk=4"), "did you mean --d-k?"),
    (("train", "--stpes", "3"), "did you mean --steps?"),
    (("inspect", "1", "2", "--jsn"), "did you mean --json?"),
    (("--presnt",), "did you mean --present?"),
    (("simulat",), "did you mean simulate?"),
])
def test_a_mistyped_option_gets_the_closest_name_in_one_line(args, suggestion) -> None:
    r = run(*args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert suggestion in r.stderr


def test_nothing_close_suggests_nothing() -> None:
    assert did_you_mean(["--zzzzzz"], ["--d-k", "--keys"]) == ""
    assert did_you_mean(["--kes=3"], ["--d-k", "--keys"]) == "; did you mean --keys?"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_progress_bar_when_stderr_is_not_a_terminal(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a pipe or a log file
    with progress_bar(10, "t", quiet=False) as bar:
        assert bar.disable
    monkeypatch.setattr(sys, "stderr", _Terminal())
    with progress_bar(10, "t", quiet=False) as bar:
        assert not bar.disable
    with progress_bar(10, "t", quiet=True) as bar:
        assert bar.disable
