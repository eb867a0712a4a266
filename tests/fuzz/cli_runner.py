"""Runs hostile command lines through ``main.main`` in a process of its own, one after the other,
and reports each one's exit status, stderr, seconds and the rise of the process's peak resident
memory (Linux: VmHWM after a reset, as the reader corpus measures it). A case that blocks is
stopped by an alarm after HANG_S seconds and reported as a hang; one that allocates gigabytes
can kill only this process, never the test session.

    python -m tests.fuzz.cli_runner CASES.json RESULTS.jsonl

CASES.json: a list of {"id", "argv"}; RESULTS.jsonl: one JSON object per case, as it finishes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

#: a case still running after this many seconds is a hang (the corpus's bound is 20 s)
HANG_S = 60
#: address space a case may add (bytes): a regression that reads /dev/zero whole or builds a
#: 6 GB model fails here with a MemoryError, reported, instead of waking the OOM killer
HEADROOM = 2 * 2**30


class _Hang(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Hang


def warm() -> None:
    """Everything a case may import, imported once before any case is measured: a first import
    is not the command's memory."""
    import main
    from engine.probe.memory import model_memory
    from tests.fuzz.model_folders import BERT, model_folder

    main.build_parser()
    import engine.experiments.runner
    import engine.probe.analyze
    import engine.probe.audit
    import engine.training.trainer  # noqa: F401

    with tempfile.TemporaryDirectory() as tmp:
        model_memory(model_folder(Path(tmp), BERT))
    for module in ("ui.cli.simulate", "ui.cli.train", "ui.cli.coord_check", "ui.cli.experiment",
                   "ui.cli.probe_model", "ui.cli.audit_model", "ui.cli.reproduce"):
        __import__(module)


def limit_address_space() -> None:
    """At most HEADROOM more address space than the warmed-up process has (Linux; elsewhere
    nothing: the memory bound is still measured)."""
    try:
        import resource

        with open("/proc/self/status", encoding="ascii") as fh:
            size = int(next(line for line in fh if line.startswith("VmSize:")).split()[1])
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = size * 1024 + HEADROOM
        if hard == resource.RLIM_INFINITY or want <= hard:
            resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (ImportError, OSError, ValueError, StopIteration):
        pass


def run_case(argv: list[str]) -> dict[str, Any]:
    """One command line: {"code", "stderr", "seconds", "peak", "crash"}."""
    import main
    from tests.fuzz.test_corpus import measured

    err, out = io.StringIO(), io.StringIO()

    def run() -> Any:
        signal.alarm(HANG_S)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                return main.main(argv)
        except SystemExit as exc:
            return exc.code
        except _Hang:
            return "hang"
        finally:
            signal.alarm(0)

    code, error, seconds, peak = measured(run)
    crash = "".join(traceback.format_exception(error))[-3000:] if error is not None else None
    return {"code": code, "stderr": err.getvalue()[-5000:], "seconds": seconds, "peak": peak,
            "crash": crash}


def main_(args: list[str]) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    signal.signal(signal.SIGALRM, _alarm)
    cases = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    warm()
    limit_address_space()
    with open(args[1], "w", encoding="utf-8") as fh:
        for case in cases:
            result = run_case(case["argv"])
            fh.write(json.dumps({"id": case["id"], **result}) + "\n")
            fh.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main_(sys.argv[1:]))
