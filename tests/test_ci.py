"""CI (.ci/run) runs the README's test command and every published claim from scratch."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"pip install -e \"\.\[test\]\" && python -m pytest -n auto", readme)
    assert m is not None
    assert m.group(0) in _commands()


def test_ci_reruns_every_claim_from_scratch() -> None:
    """No --fast (the slow claims too), no --only, no --cache (nothing reused)."""
    runs = [shlex.split(c) for c in _commands() if " reproduce" in c]
    assert len(runs) == 1
    args = runs[0]
    assert args[:3] == ["python", "main.py", "reproduce"]
    assert not {"--fast", "--only", "--cache", "--claims"} & set(args)


def test_ci_runs_the_audit_tests_under_a_second_cpu_kernel() -> None:
    """The probe tests again with torch's plain kernels: the audit's bands must hold on every
    CPU (a band at rounding level failed on AVX2 only)."""
    assert "ATEN_CPU_CAPABILITY=default python -m pytest -n auto tests/engine/probe" in \
        _commands()
