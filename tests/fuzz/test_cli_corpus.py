"""The hostile command lines of ``cli_corpus.py``, run in a process of their own
(``cli_runner.py``): each exits 2 with one line naming its option, leaves its folder as it was
(a refused command leaves no trace), never blocks, and stays under the corpus's bounds (20 s,
256 MB above where the process was). Plus the real thing for invalid UTF-8: bytes in argv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.cli_corpus import CLI_CASES, INVALID_UTF8, LONG
from tests.fuzz.test_corpus import LINE_MAX, MEMORY_BOUND, TIME_BOUND_S, tree

ROOT = Path(__file__).resolve().parents[2]
#: the whole batch (the runner's imports, then every case in well under a second each)
BATCH_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[dict[str, Any], Path, list]]:
    """id -> (the runner's result, the case's folder, the folder's tree before the run)."""
    root = tmp_path_factory.mktemp("cli")
    cases, before = [], {}
    for case_id, case in CLI_CASES.items():
        folder = root / case_id
        folder.mkdir()
        cases.append({"id": case_id, "argv": case.argv(folder)})
        before[case_id] = (folder, tree(folder))
    (root / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.cli_runner", str(root / "cases.json"),
                           str(root / "results.jsonl")], cwd=ROOT, capture_output=True,
                          text=True, timeout=BATCH_TIMEOUT_S)
    results = {}
    if (root / "results.jsonl").exists():
        for line in (root / "results.jsonl").read_text(encoding="utf-8").splitlines():
            got = json.loads(line)
            results[got["id"]] = got
    assert proc.returncode == 0, f"the runner died after {len(results)} cases: {proc.stderr[-3000:]}"
    return {k: (results[k], *before[k]) for k in results}


@pytest.mark.slow  # one process runs the whole corpus: its imports, then ~0.1 s a case
@pytest.mark.parametrize("case_id", CLI_CASES)
def test_a_hostile_command_line_is_one_line_and_leaves_no_trace(outcomes, case_id: str) -> None:
    got, folder, before = outcomes[case_id]
    assert got["crash"] is None, got["crash"]
    assert got["code"] != "hang", f"blocked for more than a minute: {got['stderr'][-500:]}"
    assert got["seconds"] < TIME_BOUND_S, f"{got['seconds']:.1f} s"
    assert got["peak"] < MEMORY_BOUND, f"{got['peak'] / 2**20:.0f} MB"
    lines = got["stderr"].strip().splitlines()
    assert got["code"] == 2 and len(lines) == 1, got["stderr"][-2000:]
    line, case = lines[0], CLI_CASES[case_id]
    assert len(line) <= LINE_MAX, line
    assert f"error: {case.option}: " in line, line
    for words in case.words:
        assert words in line, line
    assert tree(folder) == before, f"{case_id} left files behind"


def test_every_path_option_is_checked_and_in_the_corpus() -> None:
    """Each option that names a file or folder goes through the one path check, and the corpus
    gives it a 300-character name."""
    import argparse

    import main
    from ui.cli.common import path_arg

    parser = main.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parsers = {"": parser, **sub.choices}
    long_cases = {tuple(CLI_CASES[c].argv(Path("/x"))[:1]) + (CLI_CASES[c].option,)
                  for c in CLI_CASES if c.startswith("long_name_")}
    seen = 0
    for command, p in parsers.items():
        for action in p._actions:
            if action.metavar not in ("DIR", "FILE", "PATH"):
                continue
            seen += 1
            option = action.option_strings[0]
            assert action.type is path_arg, f"{command} {option}"
            # a case's command line starts with the command (or, at the top, the option)
            assert (command or option, option) in long_cases, f"{command} {option}: no case"
    assert seen >= 14


def test_invalid_utf8_bytes_in_argv_are_one_line(tmp_path: Path) -> None:
    """The shell's $'hello \\xff\\xfe world' as real bytes on a real command line (no model is
    loaded: the text is checked first)."""
    proc = subprocess.run([sys.executable, "main.py", "probe-model", "--text",
                           b"hello \xff\xfe world"], cwd=ROOT, capture_output=True, timeout=300)
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, err
    assert "--text: must be valid Unicode text; character 6 is the byte 0xff" in err[0]
    assert INVALID_UTF8.encode("utf-8", "surrogateescape") == b"hello \xff\xfe world"
    assert len(LONG) == 300
