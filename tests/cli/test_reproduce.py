"""``main.py reproduce``: the table, the exit status, --out and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.io import read_csv

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "reproduce", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_inspector_claims_pass_and_the_table_is_written(tmp_path: Path) -> None:
    r = run("--fast", "--only", "inspector.", "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok       inspector.8_0_-8.max_entry: published 3.35e-4" in r.stdout
    rows = read_csv(tmp_path / "claims.csv")
    assert {row["id"] for row in rows} == {"inspector.8_0_-8.max_entry", "inspector.8_0_-8.share"}
    assert all(row["status"] == "ok" for row in rows)


def test_a_drifted_claim_exits_1_and_names_it(tmp_path: Path) -> None:
    claims = json.loads((ROOT / "resources" / "claims.json").read_text(encoding="utf-8"))
    claim = next(c for c in claims["claims"] if c["id"] == "inspector.8_0_-8.max_entry")
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": [{**claim, "published": "3.36e-4"}]}), encoding="utf-8")
    r = run("--claims", str(path), "--quiet")
    assert r.returncode == 1
    assert "FAIL" in r.stdout and "inspector.8_0_-8.max_entry" in r.stderr
    assert "0 ok, 1 failed" in r.stdout


@pytest.mark.slow
def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    r = run("--claims", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--claims" in r.stderr
    r = run("--only", "no-such-claim")
    assert r.returncode == 2 and "--only" in r.stderr
