"""A reader that stops early (`attention-lab experiment --list | head -1`) ends the command
quietly: no traceback, the exit status a shell gives a pipe's writer (141)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_pipe_ends_the_listing_without_a_traceback() -> None:
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "experiment", "--list"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # nobody reads: every write the command makes meets a closed pipe
    err = proc.stderr.read().decode()
    proc.stderr.close()
    code = proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141
