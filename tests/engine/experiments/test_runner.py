"""Running grids: reproducible across worker counts and after a resume, streamed job files,
cancel, failures recorded while the others finish, the Dask path."""

from __future__ import annotations

import concurrent.futures as cf
import json

import pytest

pytest.importorskip("torch")

from engine.errors import ConfigError
from engine.experiments import job as job_module
from engine.experiments.job import run_job
from engine.experiments.runner import load_experiment, run_experiment, scan_results
from engine.experiments.spec import Axis, ExperimentSpec
from engine.io import read_csv
from engine.training.config import TrainingConfig

BASE = TrainingConfig(d_model=16, heads=2, items_max=5, classes=4, key_dim=4,
                      scalings=("none", "sqrt"), steps=8, log_every=4, batch=8, probe_size=4,
                      hist_bins=20, device="cpu")
SPEC = ExperimentSpec("tiny", BASE, (Axis("lr", (1e-3, 3e-2)), Axis("seed", (0, 1))))


def _run(spec, out, **kw):
    return list(run_experiment(spec, out, **kw))


def _rows_by_job(results):
    return {r["key"]: r["rows"] for r in results}


def _assert_pinned_kernels(results):
    """Every job, wherever it ran, used this process's CPU kernels (AVX2 on x86) and says so."""
    import platform

    from engine.cpu_kernels import X86, kernels_in_use
    from engine.experiments.runner import expected_fingerprint

    here = kernels_in_use()
    if platform.machine().lower() in X86:
        assert "aten=AVX2 mkl=AVX2" in here
    jobs = {j.key: j for j in SPEC.jobs()}
    for res in results:
        assert res["kernels"] == here
        assert res["fingerprint"] == expected_fingerprint(jobs[res["key"]])


def test_a_job_alone_and_in_a_two_worker_pool_gives_identical_metrics(tmp_path):
    progress = _run(SPEC, tmp_path / "pool", workers=2)
    last = progress[-1]
    assert last.finished and last.done == last.total == 4 and last.failed == 0
    assert last.executor == "process" and last.eta_s == 0.0
    _assert_pinned_kernels(last.results)
    pooled = _rows_by_job(last.results)
    for job in SPEC.jobs()[:2]:
        alone = run_job(job.config.to_dict(), SPEC.target)
        assert alone["rows"] == pooled[job.key]
        assert {r: {k: v for k, v in d.items() if k != "seconds"}
                for r, d in alone["rules"].items()} == {
            r: {k: v for k, v in d.items() if k != "seconds"}
            for r, d in next(x for x in last.results if x["key"] == job.key)["rules"].items()}
    # the files: one per job, the summary and every logged row
    out = tmp_path / "pool"
    assert len(list((out / "jobs").glob("job-*.json"))) == 4
    summary = read_csv(out / "summary.csv")
    assert len(summary) == 4 * 2 and list(summary[0])[:4] == ["job", "lr", "seed", "scaling"]
    metrics = read_csv(out / "metrics.csv")
    assert len(metrics) == 4 * 2 * 3 and {"job", "lr", "seed", "logit_max_abs"} <= set(metrics[0])
    points = read_csv(out / "points.csv")  # one row per (rule, lr): its statistics over seeds
    assert len(points) == 2 * 2 and list(points[0])[:4] == ["lr", "scaling", "n", "successes"]
    assert {p["n"] for p in points} == {"2"}
    assert load_experiment(out) == SPEC


def test_killed_then_resumed_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "exp"
    state = {"done": 0}
    first = []
    for p in run_experiment(SPEC, out, workers=1, cancelled=lambda: state["done"] >= 1):
        state["done"] = p.done
        first.append(p)
    assert first[-1].cancelled and not first[-1].finished and 1 <= first[-1].done < 4
    kept = first[-1].done
    assert len(read_csv(out / "summary.csv")) == kept * 2
    with pytest.raises(ConfigError) as exc:  # the folder is taken: resume it or pick another
        _run(SPEC, out, workers=1)
    assert exc.value.field == "out"
    last = _run(SPEC, out, workers=2, resume=True)[-1]
    assert last.finished and last.done == 4 and last.resumed == kept
    summary = read_csv(out / "summary.csv")
    assert sorted((r["job"], r["scaling"]) for r in summary) == sorted(
        (str(j.index), rule) for j in SPEC.jobs() for rule in BASE.scalings)
    metrics = read_csv(out / "metrics.csv")
    keys = [(r["job"], r["scaling"], r["step"]) for r in metrics]
    assert len(keys) == len(set(keys)) == 4 * 2 * 3
    # the same numbers as an uninterrupted run
    fresh = _run(SPEC, tmp_path / "fresh", workers=2)[-1]
    assert (tmp_path / "fresh" / "metrics.csv").read_text() == (out / "metrics.csv").read_text()
    assert _rows_by_job(fresh.results) == _rows_by_job(last.results)


class SpyExecutor(cf.ThreadPoolExecutor):
    """Runs jobs in this process and records the config of every job submitted."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted: list[dict] = []

    def submit(self, fn, /, *args, **kwargs):
        self.submitted.append(args[0])
        return super().submit(fn, *args, **kwargs)


def test_resume_submits_only_the_missing_jobs_and_leaves_finished_files_untouched(tmp_path):
    """Reruns are bit-identical, so comparing numbers cannot tell a rerun from a kept job: count
    the jobs actually submitted and check the finished job files are the same bytes, not
    rewritten."""
    import os

    out = tmp_path / "exp"
    with SpyExecutor() as spy:
        _run(SPEC, out, executor=spy)
    assert len(spy.submitted) == 4
    jobs = sorted((out / "jobs").glob("job-*.json"))
    for path in jobs[1:3]:  # as if the run had been killed with jobs 1 and 2 unfinished
        path.unlink()
    kept = {p: (p.read_bytes(), os.stat(p).st_mtime_ns) for p in (jobs[0], jobs[3])}
    with SpyExecutor() as spy:
        progress = _run(SPEC, out, executor=spy, resume=True)
    assert [(c["lr"], c["seed"]) for c in spy.submitted] == [
        (j.config.lr, j.config.seed) for j in SPEC.jobs()[1:3]]
    assert progress[0].resumed == 2 and progress[-1].done == 4 and progress[-1].finished
    for path, (data, mtime) in kept.items():
        assert path.read_bytes() == data and os.stat(path).st_mtime_ns == mtime
    assert len(list((out / "jobs").glob("job-*.json"))) == 4
    with SpyExecutor() as spy:  # all finished: nothing is submitted at all
        _run(SPEC, out, executor=spy, resume=True)
    assert spy.submitted == []


def test_resume_refuses_a_folder_of_another_experiment(tmp_path):
    out = tmp_path / "exp"
    other = ExperimentSpec("other", BASE, (Axis("seed", (0,)),))
    _run(other, out, workers=1)
    with pytest.raises(ConfigError) as exc:
        next(run_experiment(SPEC, out, workers=1, resume=True))
    assert exc.value.field == "resume"
    assert not (out / "jobs" / "job-00001.json").exists()


@pytest.mark.parametrize("workers", [0, -1, 2000, 1.5])
def test_bad_worker_counts_are_refused(tmp_path, workers):
    with pytest.raises(ConfigError) as exc:
        next(run_experiment(SPEC, tmp_path / "x", workers=workers))
    assert exc.value.field == "workers" and not (tmp_path / "x").exists()


def test_a_diverging_job_and_a_raising_job_are_recorded_while_the_others_finish(
        tmp_path, monkeypatch):
    spec = ExperimentSpec("div", BASE.replace(optimizer="sgd"),
                          (Axis("lr", (1e-3, 100.0, 0.5)),))
    real = job_module.rule_results

    def flaky(snap, target, seconds):
        if snap.config.lr == 0.5:
            raise RuntimeError("boom in job 2")
        return real(snap, target, seconds)

    monkeypatch.setattr(job_module, "rule_results", flaky)
    with cf.ThreadPoolExecutor(max_workers=1) as ex:  # in this process: the patch applies
        last = _run(spec, tmp_path / "div", executor=ex)[-1]
    assert last.finished and last.done == 3 and last.failed == 1 and last.executor == "given"
    by_lr = {r["values"]["lr"]: r for r in last.results}
    assert by_lr[0.5]["error"].startswith("RuntimeError: boom")
    assert by_lr[100.0]["error"] is None
    assert all(v["diverged_step"] is not None for v in by_lr[100.0]["rules"].values())
    assert all(v["final_loss"] is None for v in by_lr[100.0]["rules"].values())
    assert all(v["diverged_step"] is None for v in by_lr[1e-3]["rules"].values())
    saved = json.loads((tmp_path / "div" / "jobs" / "job-00002.json").read_text())
    assert saved["error"].startswith("RuntimeError")
    rows = read_csv(tmp_path / "div" / "summary.csv")
    assert len(rows) == 6 and rows[4]["final_loss"] == ""


def test_cancel_stops_the_pool_and_keeps_what_finished(tmp_path):
    spec = ExperimentSpec("long", BASE.replace(steps=100_000, log_every=1000),
                          (Axis("seed", (0, 1, 2)),))
    seen = []
    for p in run_experiment(spec, tmp_path / "c", workers=2, cancelled=lambda: bool(seen)):
        seen.append(p)
    last = seen[-1]
    assert last.cancelled and last.done == 0 and not last.finished
    assert json.loads((tmp_path / "c" / "experiment.json").read_text())["status"] == "cancelled"
    assert read_csv(tmp_path / "c" / "summary.csv") == []


@pytest.mark.slow
def test_the_dask_path_gives_the_same_numbers(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        last = _run(SPEC, tmp_path / "dask", scheduler=cluster.scheduler_address)[-1]
    assert last.finished and last.executor == "dask" and last.failed == 0 and last.done == 4
    _assert_pinned_kernels(last.results)
    job = SPEC.jobs()[3]
    assert run_job(job.config.to_dict())["rows"] == _rows_by_job(last.results)[job.key]


def test_train_and_a_job_give_the_same_numbers(tmp_path):
    """One thread policy everywhere: the `train` command (in this process, whatever torch's
    thread count) writes the same metrics as the job of the same config."""
    from engine.io import csv_text
    from engine.training.observe import CSV_COLUMNS
    from main import main

    cfg = BASE.replace(lr=3e-2, seed=1)
    args = ["train", "--task", "retrieval", "--d-model", "16", "--heads", "2", "--items-max", "5",
            "--classes", "4", "--key-dim", "4", "--scaling", "none", "sqrt", "--steps", "8",
            "--log-every", "4", "--batch", "8", "--probe-size", "4", "--hist-bins", "20",
            "--device", "cpu", "--lr", "3e-2", "--seed", "1", "--quiet", "--out", str(tmp_path)]
    assert main(args) == 0
    job = run_job(cfg.to_dict())
    assert (tmp_path / "metrics.csv").read_text() == csv_text(job["rows"], CSV_COLUMNS)


@pytest.mark.slow
def test_estimate_scales_a_short_timing_to_the_grid():
    from engine.experiments.runner import estimate_seconds

    per_job, total = estimate_seconds(SPEC, workers=2, probe_steps=2)
    assert per_job > 0 and total == pytest.approx(per_job * 2)  # 4 jobs on 2 workers: 2 waves


@pytest.mark.slow
def test_a_running_job_reports_its_step_progress(tmp_path):
    from engine.experiments.runner import progress_file

    spec = ExperimentSpec("slow", BASE.replace(steps=400, log_every=5), (Axis("seed", (0,)),))
    seen = []
    for p in run_experiment(spec, tmp_path, workers=1):
        if not p.finished:
            seen.append(dict(p.job_progress))
        else:
            last = p
    fractions = [f for snap in seen for f in snap.values()]
    assert fractions and all(0.0 <= f <= 1.0 for f in fractions)
    assert all(set(snap) <= {0} for snap in seen)
    assert last.job_progress == {} and last.done == 1
    assert not progress_file(tmp_path, 0).exists()


def test_run_job_writes_then_removes_its_progress_file(tmp_path):
    from engine.experiments.job import read_progress

    path = tmp_path / "job-00000.progress"
    seen = []
    real = job_module.write_progress

    def spy(p, step, steps):
        real(p, step, steps)
        seen.append(read_progress(p))

    job_module.write_progress = spy
    try:
        res = run_job(BASE.to_dict(), progress_path=str(path))
    finally:
        job_module.write_progress = real
    assert res["error"] is None
    assert seen and seen == sorted(seen) and seen[-1] == 1.0 and 0.0 < seen[0] < 1.0
    assert not path.exists() and read_progress(path) is None


def _drop_new_fields(config: dict) -> dict:
    """A config as an earlier version wrote it: before these fields existed (their defaults keep
    the old behaviour)."""
    return {k: v for k, v in config.items() if k not in ("warmup", "eval_lengths", "grad_clip")}


def test_a_folder_written_before_new_fields_existed_still_resumes(tmp_path):
    out = tmp_path / "exp"
    _run(SPEC, out, workers=1)
    for path in (out / "jobs").glob("job-*.json"):
        res = json.loads(path.read_text())
        res["config"] = _drop_new_fields(res["config"])
        path.write_text(json.dumps(res))
    saved = json.loads((out / "experiment.json").read_text())
    saved["experiment"]["base"] = _drop_new_fields(saved["experiment"]["base"])
    (out / "experiment.json").write_text(json.dumps(saved))
    assert load_experiment(out) == SPEC
    found, ignored = scan_results(SPEC, out)
    assert len(found) == 4 and ignored == []
    progress = _run(SPEC, out, workers=1, resume=True)
    assert progress[0].resumed == 4 and progress[-1].finished and not progress[-1].ignored


def test_job_files_that_do_not_belong_are_reported_and_rerun(tmp_path):
    out = tmp_path / "exp"
    _run(SPEC, out, workers=1)
    path = out / "jobs" / "job-00001.json"
    res = json.loads(path.read_text())
    res["config"]["lr"] = 0.5  # written for another grid (or changed by hand)
    path.write_text(json.dumps(res))
    (out / "jobs" / "job-00099.json").write_text("{not json")
    found, ignored = scan_results(SPEC, out)
    assert len(found) == 3 and len(ignored) == 2
    assert any("job-00001.json" in r and "differs" in r for r in ignored)
    assert any("job-00099.json" in r and "not a job file" in r for r in ignored)
    progress = _run(SPEC, out, workers=1, resume=True)
    assert progress[0].resumed == 3 and len(progress[0].ignored) == 2
    assert progress[-1].finished and progress[-1].done == 4
    assert json.loads(path.read_text())["config"]["lr"] == SPEC.jobs()[1].config.lr


def test_the_device_queue_runs_one_job_at_a_time_in_process_with_the_same_numbers(
        tmp_path, monkeypatch):
    """The CUDA path's queue (one job at a time, in this process, cancellable between steps),
    exercised with CPU jobs: no GPU needed for its mechanics (the CUDA tests in
    tests/engine/test_device.py and training/test_trainer.py run the device where one exists)."""
    from engine.experiments import runner

    pooled = _run(SPEC, tmp_path / "p", workers=2)[-1]
    assert pooled.executor == "process"
    monkeypatch.setattr(runner, "runs_on_cuda", lambda spec: True)
    progress = _run(SPEC, tmp_path / "q", workers=2)
    last = progress[-1]
    assert last.finished and last.executor == "in-process" and last.workers == 1
    assert max(p.running for p in progress) <= 1
    assert _rows_by_job(last.results) == _rows_by_job(pooled.results)
    # a Stop ends the running job between its steps
    spec = ExperimentSpec("long", BASE.replace(steps=100_000, log_every=1000),
                          (Axis("seed", (0, 1)),))
    seen = []
    for p in run_experiment(spec, tmp_path / "c", workers=1, cancelled=lambda: bool(seen)):
        seen.append(p)
    assert seen[-1].cancelled and seen[-1].done == 0


def test_a_folder_of_another_experiment_is_refused_naming_it(tmp_path):
    from engine.errors import ConfigError
    from engine.experiments.runner import check_out_dir, saved_experiment_name

    for _ in run_experiment(SPEC, tmp_path, workers=1):
        pass
    assert saved_experiment_name(tmp_path) == SPEC.name
    other = ExperimentSpec("another", SPEC.base, SPEC.axes)
    with pytest.raises(ConfigError) as exc:
        check_out_dir(other, tmp_path, resume=False)
    assert f"already holds experiment {SPEC.name!r}: choose another folder" in exc.value.message
    with pytest.raises(ConfigError) as exc:
        check_out_dir(SPEC, tmp_path, resume=False)
    assert f"already holds experiment {SPEC.name!r}: resume it" in exc.value.message
    assert saved_experiment_name(tmp_path / "nothing") is None
