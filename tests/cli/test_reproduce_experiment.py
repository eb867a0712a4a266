"""``main.py reproduce`` on training claims: a tiny inline experiment run once, a failed claim
named with exit status 1, --list without running anything, bad --workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.io import read_csv

ROOT = Path(__file__).resolve().parents[2]
TINY = {"name": "tiny", "base": {"task": "retrieval", "d_model": 16, "heads": 1,
                                 "scalings": ["none", "sqrt"], "steps": 4, "log_every": 2,
                                 "batch": 8, "probe_size": 4},
        "axes": {"seed": [0, 1]}}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "reproduce", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)


def _claims_file(tmp_path: Path) -> Path:
    def claim(id: str, measure: dict, published: str) -> dict:
        return {"id": id, "where": "test", "text": "t", "kind": "experiment", "slow": True,
                "params": {"spec": TINY}, "measure": measure, "published": published}

    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": [
        claim("tiny.runs", {"stat": "n", "rule": "sqrt"}, "2"),
        claim("tiny.accuracy", {"stat": "mean", "rule": "sqrt", "value": "accuracy@2"}, "5"),
    ]}), encoding="utf-8")
    return path


@pytest.mark.slow
def test_an_experiment_claim_that_fails_exits_1_and_is_named(tmp_path: Path) -> None:
    path = _claims_file(tmp_path)
    r = run("--claims", str(path), "--workers", "1", "--cache", str(tmp_path / "cache"),
            "--out", str(tmp_path / "out"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ok       tiny.runs: published 2, measured 2" in r.stdout
    assert "FAIL     tiny.accuracy: published 5" in r.stdout
    assert "1 ok, 1 failed, 0 skipped (of 2 claims)" in r.stdout
    assert "tiny.accuracy" in r.stderr
    assert "experiment tiny: running 2 of 2 jobs on 1 worker(s)" in r.stderr
    rows = {row["id"]: row for row in read_csv(tmp_path / "out" / "claims.csv")}
    assert rows["tiny.runs"]["status"] == "ok" and rows["tiny.accuracy"]["status"] == "FAIL"
    assert 0.0 <= float(rows["tiny.accuracy"]["measured"]) <= 1.0
    assert len(list((tmp_path / "cache" / "tiny" / "jobs").glob("job-*.json"))) == 2
    fast = run("--claims", str(path), "--fast")  # slow: skipped, nothing fails
    assert fast.returncode == 0, fast.stdout + fast.stderr
    assert "0 ok, 0 failed, 2 skipped" in fast.stdout
    # one summary line for the skipped claims, not one line each
    assert "skipped  2 claims: slow: skipped under --fast" in fast.stdout
    assert "tiny.runs" not in fast.stdout and len(fast.stdout.strip().splitlines()) == 2


def test_list_names_the_training_claims_without_running() -> None:
    r = run("--list", "--only", "seeds.none.")
    assert r.returncode == 0, r.stderr
    assert "seeds.none.successes" in r.stdout and "experiment" in r.stdout
    assert "docs/results-training.md, Training lab" in r.stdout


def test_bad_workers_exits_2_with_one_line(tmp_path: Path) -> None:
    r = run("--claims", str(_claims_file(tmp_path)), "--workers", "0")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "workers" in r.stderr
