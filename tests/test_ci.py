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
    runs = [c for c in _commands() if "main.py reproduce" in c]
    assert len(runs) == 1
    # (it runs in the background beside the tests, its output sent to a file)
    args = shlex.split(runs[0][runs[0].index("python main.py reproduce"):].split(">")[0])
    assert args[:3] == ["python", "main.py", "reproduce"]
    assert not {"--fast", "--only", "--cache", "--claims"} & set(args)


def test_ci_fails_when_a_claim_fails() -> None:
    """The claims' run is in the background: its exit status is waited for and is the script's,
    and a failed test stops it (the script ends at once under ``set -e``)."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in text
    assert 'echo $? >"$claims_out/rc"' in text and "wait $claims_pid" in text
    assert text.rstrip().splitlines()[-1].startswith('exit "$(cat "$claims_out/rc"')


def test_ci_installs_the_cpu_torch_wheel_from_the_readmes_index() -> None:
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme


def test_ci_reruns_the_numeric_band_tests_on_other_kernels() -> None:
    """Once more under torch's plain kernels (not the AVX2 pin): probe, claims, statistics."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8").replace("\\\n", " ")
    runs = [ln for ln in text.splitlines() if ln.startswith("ATEN_CPU_CAPABILITY=default")]
    assert len(runs) == 1
    for path in ("tests/engine/probe", "tests/engine/test_claims.py",
                 "tests/engine/test_claims_statistics.py", "tests/engine/test_stats.py",
                 "tests/engine/experiments/test_point.py"):
        assert path in runs[0] and (ROOT / path).exists()
def _readme_ci_paragraph() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = re.search(r"`\.ci/run`\s+installs", text).start()  # wherever the line wraps
    return text[start:text.index("\n\n", start)]


def test_the_readme_says_what_ci_installs() -> None:
    """Every extra and every package .ci/run installs is named in the README's paragraph on CI
    (it once left out the cluster extra)."""
    said = _readme_ci_paragraph()
    extras, packages = set(), set()
    for line in _commands():
        if " pip install" not in line:
            continue
        words = shlex.split(line)
        words = words[:words.index("||")] if "||" in words else words  # (a fallback repeats it)
        words = [w for i, w in enumerate(words) if i == 0 or words[i - 1] != "--index-url"]
        for word in words[words.index("install") + 1:]:
            if word.startswith("."):  # the lab itself: ".[models,cluster]"
                m = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", word)
                extras |= set(m.group(1).split(",")) if m and m.group(1) else set()
            elif not word.startswith("-"):
                packages.add(re.split(r"[=<>]", word)[0])
    assert {"models", "cluster"} <= extras and {"torch", "mup"} <= packages
    assert packages - {"pip"}, packages
    missing = [f"extra {e}" for e in sorted(extras - {"test"}) if f"`{e}`" not in said]
    missing += [p for p in sorted(packages - {"pip"}) if p not in said]
    assert not missing, missing

