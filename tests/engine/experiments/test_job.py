"""``run_job`` around a scripted trainer (no training): what the result records, the cancel
flag, the progress file, a failure as an error record; the progress file read back bounded."""

from __future__ import annotations

import json
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

from engine.experiments import job as job_mod
from engine.experiments.job import (
    PROGRESS_FILE_MAX,
    metrics_csv_columns,
    read_progress,
    run_job,
    write_progress,
)
from engine.training.config import TrainingConfig
from tests.engine.experiments.test_job_results import _snapshot

CONFIG = TrainingConfig(scalings=("sqrt", "none"), steps=30, log_every=10).to_dict()


class _Clock:
    now = 50.0

    def perf_counter(self) -> float:
        return self.now


def _fake(monkeypatch, fail: Exception | None = None):
    """A trainer on "cuda:7" that takes 2 s to build and 1 s per step (steps 10, 20, 30), whose
    snapshot is test_job_results' (sqrt reaches 0.9 at step 20, 0.95 at 30); the kernels, the
    fingerprint and the progress writes recorded."""
    clock, seen = _Clock(), {"progress": [], "fingerprint": [], "trainers": []}

    class Trainer:
        def __init__(self, cfg):
            if fail is not None:
                clock.now += 0.25
                raise fail
            self.cfg, self.device, self.step = cfg, "cuda:7", 0
            seen["trainers"].append(self)
            clock.now += 2.0

        def iterate(self, cancelled):
            for step in (10, 20, 30):
                if cancelled is not None and cancelled():
                    return
                self.step = step
                clock.now += 1.0
                yield

        def snapshot(self):
            snap = _snapshot([[0.1, 0.5, 0.9, 0.95, 0.85], [0.2, 0.3, 0.4, 0.6, 0.7]])
            snap.done = self.step == self.cfg.steps
            snap.metrics_rows = lambda: [{"step": self.step}]
            return snap

    import engine.cpu_kernels
    import engine.experiments.fingerprint

    module = types.ModuleType("engine.training.trainer")
    module.Trainer = Trainer
    monkeypatch.setitem(sys.modules, "engine.training.trainer", module)
    monkeypatch.setattr(job_mod, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    monkeypatch.setattr(engine.cpu_kernels, "kernels_in_use", lambda: "x86_64 aten=AVX2")
    monkeypatch.setattr(engine.experiments.fingerprint, "job_fingerprint",
                        lambda *a: seen["fingerprint"].append(a) or "f" * 32)

    def progress(path, step, steps):
        seen["progress"].append((step, steps))
        with open(path, "w") as f:
            f.write("{}")

    monkeypatch.setattr(job_mod, "write_progress", progress)
    return seen


def test_a_job_records_its_rules_rows_device_kernels_fingerprint_and_time(monkeypatch, tmp_path):
    seen = _fake(monkeypatch)
    res = run_job(CONFIG)
    assert set(res) == {"config", "target", "rules", "rows", "seconds", "device", "kernels",
                        "fingerprint", "error", "cancelled"}
    assert res["config"] is CONFIG and res["target"] == 0.9
    assert (res["device"], res["kernels"], res["fingerprint"]) == ("cuda:7", "x86_64 aten=AVX2",
                                                                   "f" * 32)
    assert seen["fingerprint"] == [(CONFIG, "cuda:7", "x86_64 aten=AVX2")]
    assert seen["trainers"][0].cfg == TrainingConfig.from_dict(CONFIG)
    assert res["error"] is None and res["cancelled"] is False
    assert res["seconds"] == 5.0  # build 2 s + 3 steps
    assert res["rules"]["sqrt"]["steps_to_target"] == 20  # at the default target 0.9
    assert res["rules"]["sqrt"]["seconds"] == 5.0 and res["rules"]["none"]["final_accuracy"] == 0.7
    assert res["rows"] == [{"step": 30}]
    assert seen["progress"] == []  # no progress file asked for
    assert run_job(CONFIG, target=0.95)["rules"]["sqrt"]["steps_to_target"] == 30


def test_progress_is_written_at_each_step_and_removed_at_the_end(monkeypatch, tmp_path):
    seen = _fake(monkeypatch)
    path = tmp_path / "job.progress"
    res = run_job(CONFIG, progress_path=str(path))
    assert seen["progress"] == [(10, 30), (20, 30), (30, 30)]
    assert res["error"] is None and not path.exists()


def test_a_cancelled_job_is_marked_and_keeps_what_it_trained(monkeypatch, tmp_path):
    seen = _fake(monkeypatch)
    calls = []
    res = run_job(CONFIG, cancelled=lambda: calls.append(1) or len(calls) > 2,
                  progress_path=str(tmp_path / "p"))
    assert res["cancelled"] is True and res["error"] is None
    assert seen["progress"] == [(10, 30), (20, 30)] and res["rows"] == [{"step": 20}]
    assert res["seconds"] == 4.0 and not (tmp_path / "p").exists()


def test_a_failure_comes_back_as_an_error_record_and_the_progress_file_goes(monkeypatch, tmp_path):
    _fake(monkeypatch, fail=RuntimeError("out of memory"))
    path = tmp_path / "p"
    path.write_text("{}")
    res = run_job(CONFIG, target=0.8, progress_path=str(path))
    assert res["error"] == "RuntimeError: out of memory"
    assert "RuntimeError: out of memory" in res["traceback"] and "Traceback" in res["traceback"]
    assert res["seconds"] == 0.25 and res["rules"] == {} and res["rows"] == []
    assert (res["target"], res["device"], res["kernels"], res["fingerprint"]) == (0.8, "", "", "")
    assert res["cancelled"] is False and not path.exists()
    bad = run_job({**CONFIG, "lr": -1})  # refused by the config: recorded, not raised
    assert bad["error"].startswith("ConfigError: lr: ")
    # failed before the first progress write: no file to remove, and still no exception
    assert run_job(CONFIG, progress_path=str(tmp_path / "never"))["error"].startswith("Runtime")


def test_the_traceback_of_a_failure_keeps_its_first_8_frames(monkeypatch):
    """A failure 20 calls deep: the record holds run_job's frame and the 7 below it, not all 21
    (a job file stays small)."""
    def deep(n):  # two functions in turn: Python folds a frame repeated in a row
        if n == 0:
            raise RuntimeError("deep")
        deeper(n - 1)

    def deeper(n):
        deep(n)

    class Trainer:
        def __init__(self, cfg):
            deep(20)

    module = types.ModuleType("engine.training.trainer")
    module.Trainer = Trainer
    monkeypatch.setitem(sys.modules, "engine.training.trainer", module)
    res = run_job(CONFIG)
    assert res["error"] == "RuntimeError: deep"
    assert res["traceback"].count('  File "') == 8


def test_write_progress_writes_two_integers_and_never_fails_the_job(tmp_path):
    path = tmp_path / "p.json"
    write_progress(str(path), np.int64(7), np.int64(30))  # numpy integers from the trainer
    assert json.loads(path.read_text()) == {"step": 7, "steps": 30}
    assert read_progress(path) == pytest.approx(7 / 30)
    write_progress(str(tmp_path / "no" / "such" / "folder" / "p.json"), 1, 2)  # OSError: ignored


@pytest.mark.parametrize(("text", "fraction"), [
    ('{"step": 5, "steps": 20}', 0.25), ('{"step": 0, "steps": 20}', 0.0),
    ('{"step": 30, "steps": 20}', 1.0), ('{"step": 3, "steps": 0}', 1.0),
    ('{"step": 0, "steps": 0}', 0.0), ('{"step": 1, "steps": 1}', 1.0), ('{"step": 4.0, "steps": 8}', 0.5),
    ('{"step": -1, "steps": 20}', None), ('{"step": 1, "steps": -2}', None),
    ('{"step": true, "steps": 20}', None), ('{"step": 1.5, "steps": 20}', None),
    ('{"step": 1}', None), ('{"steps": 1}', None), ('[1, 2]', None), ('not json', None),
    ('{"step": "1", "steps": 2}', None)])
def test_read_progress_reads_a_fraction_or_none(tmp_path, text, fraction):
    path = tmp_path / "p.json"
    path.write_text(text)
    got = read_progress(path)
    if fraction is None:
        assert got is None
    else:
        assert got == pytest.approx(fraction)


def test_read_progress_reads_at_most_4096_bytes(tmp_path):
    path = tmp_path / "p.json"
    body = '{"step": 1, "steps": 4}'
    path.write_text(body + " " * (PROGRESS_FILE_MAX - len(body)))
    assert PROGRESS_FILE_MAX == 4096 and read_progress(path) == 0.25
    path.write_text(body + " " * (PROGRESS_FILE_MAX + 1 - len(body)))
    assert read_progress(path) is None
    assert read_progress(tmp_path / "missing.json") is None


def test_metrics_csv_columns_end_with_the_lengths():
    from engine.training.observe import CSV_COLUMNS

    assert metrics_csv_columns() == CSV_COLUMNS
    assert metrics_csv_columns((8, 32)) == (*CSV_COLUMNS, "accuracy_len8", "entropy_norm_len8",
                                            "accuracy_len32", "entropy_norm_len32")
