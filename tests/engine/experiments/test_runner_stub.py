"""The runner around stub jobs (no training): what it submits, the snapshots it yields (counts,
ETA on a scripted clock, step progress), the files it writes, resume, cancel, failed workers,
the executor it makes and the folders it refuses. About 0.5 s."""

from __future__ import annotations

import concurrent.futures as cf
import functools
import json
from pathlib import Path

import pytest

import engine.experiments.runner as runner
from engine.errors import ConfigError
from engine.experiments.job import RESULT_FIELDS
from engine.experiments.spec import Axis, ExperimentSpec
from engine.training.config import TrainingConfig

BASE = TrainingConfig(d_model=16, heads=2, items_max=5, classes=4, key_dim=4,
                      scalings=("none", "sqrt"), steps=8, log_every=4, batch=8, device="cpu")
SPEC = ExperimentSpec("stub", BASE, (Axis("seed", (0, 1, 2)),), target=0.75)


def fake_job(config, target, cancelled=None, progress_path=None, *, loss=None):
    """What run_job returns, with the seed's final loss 1 + seed (or ``loss``)."""
    seed = config["seed"]
    value = 1.0 + seed if loss is None else loss
    rules = {r: {**dict.fromkeys(RESULT_FIELDS), "final_loss": value, "collapsed": False,
                 "seconds": 1.0} for r in config["scalings"]}
    return {"config": config, "target": target, "rules": rules, "rows": [], "seconds": 2.0,
            "device": "cpu", "kernels": "k", "fingerprint": f"fp{seed}", "error": None,
            "cancelled": False}


class Executor(cf.Executor):
    """Records what is submitted; a future ends only when the scripted wait says so."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.shut: tuple | None = None

    def submit(self, fn, *args, **kw):
        fut: cf.Future = cf.Future()
        self.calls.append((fn, args, kw, fut))
        return fut

    def shutdown(self, wait=True, *, cancel_futures=False):
        self.shut = (wait, cancel_futures)


class Script:
    """cf.wait and the runner's clock: each wait advances the clock by ``dt`` and finishes the
    jobs of its step (an index: the job runs; ``("raise", i)``: its worker failed; ``("run", i)``:
    it is now running; ``("cancel", i)``: it was cancelled)."""

    def __init__(self, executor: Executor, steps, dt: float = 0.5) -> None:
        self.executor, self.steps, self.dt, self.t = executor, list(steps), dt, 100.0

    def clock(self) -> float:
        return self.t

    def wait(self, fs, timeout=None, return_when=None):
        assert timeout == pytest.approx(0.1) and return_when == cf.FIRST_COMPLETED
        self.t += self.dt
        step = self.steps.pop(0) if self.steps else ()
        done = set()
        for what in step:
            if callable(what):  # (something a job does meanwhile)
                what()
                continue
            kind, index = what if isinstance(what, tuple) else ("ok", what)
            fn, args, kw, fut = next(c for c in self.executor.calls
                                     if c[1][0]["seed"] == index and not c[3].done())
            if kind != "cancel" and not fut.running():
                fut.set_running_or_notify_cancel()
            if kind == "ok":
                fut.set_result(fn(*args, **kw))
            elif kind == "raise":
                fut.set_exception(OSError("worker killed"))
            elif kind == "run":
                continue
            else:
                fut.cancel()
                fut.set_running_or_notify_cancel()
            done.add(fut)
        return done, set(fs) - done


@pytest.fixture
def stub(monkeypatch):
    """run_job is fake_job; the runner's clock and wait are scripted (``stub(ex, steps)``)."""
    monkeypatch.setattr(runner, "run_job", fake_job)

    def install(executor: Executor, steps, dt: float = 0.5) -> Script:
        script = Script(executor, steps, dt)
        monkeypatch.setattr(runner.time, "perf_counter", script.clock)
        monkeypatch.setattr(runner, "_Run", functools.partial(runner._Run, start=100.0))
        monkeypatch.setattr(runner.cf, "wait", script.wait)
        return script
    return install


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_snapshots_count_jobs_and_estimate_the_time_left(stub, tmp_path):
    ex = Executor()
    stub(ex, [[("run", 0)], [0], [("raise", 1)], [2]], dt=2.0)
    gen = runner.run_experiment(SPEC, tmp_path / "e", workers=5, executor=ex)
    snaps = [next(gen)]
    running = _json(tmp_path / "e" / "experiment.json")  # written before the first job ends
    assert {k: running[k] for k in ("status", "jobs", "done", "failed", "workers", "executor")} == {
        "status": "running", "jobs": 3, "done": 0, "failed": 0, "workers": 5,
        "executor": "given"}
    snaps += list(gen)
    assert {s.spec for s in snaps} == {SPEC} and {s.out_dir for s in snaps} == {tmp_path / "e"}
    # every job submitted at once, with the spec's target, no cancel flag (another process)
    assert [(a[0]["seed"], a[1], a[2]) for _, a, _, _ in ex.calls] == [(0, 0.75, None),
                                                                        (1, 0.75, None),
                                                                        (2, 0.75, None)]
    assert [kw["progress_path"] for *_, kw, _ in ex.calls] == [
        str(tmp_path / "e" / "jobs" / f"job-0000{i}.progress") for i in range(3)]
    # polls at t = 2 (job 0 running: no job finished, a yield every second), 4, 6, 8
    assert [(s.done, s.failed, s.running, s.elapsed_s) for s in snaps] == [
        (0, 0, 1, 2.0), (1, 0, 0, 4.0), (2, 1, 0, 6.0), (3, 1, 0, 8.0), (3, 1, 0, 8.0)]
    # ETA: elapsed / jobs done this run * jobs left: 4 / 1 * 2, 6 / 2 * 1
    assert [s.eta_s for s in snaps] == [None, 8.0, 3.0, 0.0, 0.0]
    assert [s.finished for s in snaps] == [False] * 4 + [True]
    assert not any(s.cancelled for s in snaps) and {s.total for s in snaps} == {3}
    assert [s.fraction for s in snaps] == [0.0, 1 / 3, 2 / 3, 1.0, 1.0]
    assert snaps[1].latest["key"] == "seed=0" and snaps[-1].latest["key"] == "seed=2"
    assert (snaps[-1].executor, snaps[-1].workers, snaps[-1].resumed) == ("given", 5, 0)
    assert ex.shut is None  # (a given executor is the caller's to end)
    failed = next(r for r in snaps[-1].results if r["index"] == 1)
    assert failed["error"] == "OSError: worker killed" and failed["worker_failed"] is True
    assert (failed["rules"], failed["rows"], failed["seconds"], failed["device"]) == ({}, [], 0.0, "")
    assert failed["config"] == SPEC.jobs()[1].config.to_dict() and failed["cancelled"] is False
    assert (failed["key"], failed["values"]) == ("seed=1", {"seed": 1})
    # the failed worker's job has no file (a resume reruns it); the others do, with their identity
    out = tmp_path / "e"
    assert sorted(p.name for p in (out / "jobs").iterdir()) == ["job-00000.json", "job-00002.json"]
    job2 = _json(out / "jobs" / "job-00002.json")
    assert (job2["index"], job2["key"], job2["values"]) == (2, "seed=2", {"seed": 2})
    saved = _json(out / "experiment.json")
    assert {k: saved[k] for k in ("status", "jobs", "done", "failed", "workers", "executor")} == {
        "status": "finished", "jobs": 3, "done": 3, "failed": 1, "workers": 5,
        "executor": "given"}
    assert saved["experiment"] == json.loads(json.dumps(SPEC.to_dict())) and "torch" in saved["versions"]
    for name in ("summary.csv", "points.csv", "metrics.csv"):
        assert (out / name).is_file()


def test_a_snapshot_comes_every_second_without_a_finished_job(stub, tmp_path):
    ex = Executor()
    stub(ex, [[], [], [], [], [0, 1, 2]], dt=0.4)  # t = 0.4, 0.8, 1.2, 1.6, 2.0
    snaps = list(runner.run_experiment(SPEC, None, workers=1, executor=ex))
    assert [s.elapsed_s for s in snaps] == pytest.approx([1.2, 2.0, 2.0])
    assert [s.done for s in snaps] == [0, 3, 3] and snaps[0].eta_s is None
    assert snaps[0].job_progress == {} and snaps[-1].out_dir is None
    assert [kw["progress_path"] for *_, kw, _ in ex.calls] == [None] * 3


def test_a_yield_exactly_one_second_after_the_last(stub):
    ex = Executor()
    stub(ex, [[], [], [0, 1, 2]], dt=0.5)  # t = 0.5, 1.0 (exactly a second), 1.5
    snaps = list(runner.run_experiment(SPEC, None, workers=1, executor=ex))
    assert [s.elapsed_s for s in snaps] == [1.0, 1.5, 1.5]


def test_running_jobs_report_their_step_progress_files(stub, tmp_path):
    ex = Executor()
    out = tmp_path / "e"
    def write():
        (out / "jobs" / "job-00000.progress").write_text('{"step": 2, "steps": 8}')
        (out / "jobs" / "job-00001.progress").write_text("not a progress file")
    stub(ex, [[write, ("run", 0), ("run", 1)], [0, 1, 2]], dt=1.0)
    gen = runner.run_experiment(SPEC, out, workers=2, executor=ex)
    first = next(gen)
    assert first.job_progress == {0: 0.25} and first.running == 2
    rest = list(gen)
    assert rest[-1].job_progress == {}
    assert not (out / "jobs" / "job-00000.progress").exists()  # removed when its job ended
    assert not (out / "jobs" / "job-00001.progress").exists()


def test_cancel_keeps_the_finished_jobs_and_ends_the_rest(stub, tmp_path, monkeypatch):
    ex = Executor()
    out = tmp_path / "e"
    stub(ex, [[0], [("run", 1), lambda: (out / "jobs" / "job-00001.progress").write_text(
        '{"step": 4, "steps": 8}')]], dt=1.0)
    stops = []
    monkeypatch.setattr(runner, "stop_executor", lambda e, owned, futs: stops.append(
        (e, owned, sorted(ex.calls.index(c) for c in ex.calls if c[3] in futs))))
    polls = iter([False, False, True])
    snaps = list(runner.run_experiment(SPEC, out, workers=2, executor=ex,
                                       cancelled=lambda: next(polls)))
    assert stops == [(ex, False, [1, 2])]  # not owned: the running and the waiting job
    assert not (out / "jobs" / "job-00001.progress").exists()
    last = snaps[-1]
    assert (last.cancelled, last.finished, last.done) == (True, False, 1)
    assert last.eta_s == pytest.approx(2.0 / 1 * 2)  # an ETA still: the jobs left were not run
    assert _json(out / "experiment.json")["status"] == "cancelled"
    assert sorted(p.name for p in (out / "jobs").iterdir()) == ["job-00000.json"]


def test_a_cancelled_future_is_not_a_result(stub, tmp_path):
    ex = Executor()
    stub(ex, [[0, ("cancel", 1)], [2]])
    snaps = list(runner.run_experiment(SPEC, tmp_path / "e", workers=1, executor=ex))
    assert [r["index"] for r in snaps[-1].results] == [0, 2]
    assert snaps[-1].done == 2 and snaps[-1].finished


def test_resume_runs_only_the_missing_jobs_and_counts_the_others(stub, tmp_path):
    out = tmp_path / "e"
    ex = Executor()
    stub(ex, [[0, ("raise", 1), ("raise", 2)]])
    list(runner.run_experiment(SPEC, out, workers=1, executor=ex))
    (out / "jobs" / "job-00009.json").write_text("{}")  # not a job of this grid
    ex = Executor()
    stub(ex, [[1], [2]], dt=3.0)
    snaps = list(runner.run_experiment(SPEC, out, workers=1, executor=ex, resume=True))
    assert [a[0]["seed"] for _, a, _, _ in ex.calls] == [1, 2]
    # the ETA counts this run's jobs only: 3 s for one, one left (not 3 / 2: job 0 was resumed)
    assert [(s.resumed, s.done, s.eta_s) for s in snaps] == [(1, 2, 3.0), (1, 3, 0.0),
                                                             (1, 3, 0.0)]
    assert snaps[0].ignored == ("job-00009.json: not a job of this grid",)
    assert sorted(r["index"] for r in snaps[-1].results) == [0, 1, 2]


def test_resume_with_fingerprints_reruns_a_job_made_elsewhere(stub, tmp_path, monkeypatch):
    out = tmp_path / "e"
    ex = Executor()
    stub(ex, [[0, 1, 2]])
    list(runner.run_experiment(SPEC, out, workers=1, executor=ex))
    monkeypatch.setattr(runner, "expected_fingerprint",
                        lambda job: "other" if job.index == 1 else f"fp{job.index}")
    found, ignored = runner.scan_results(SPEC, out, fingerprints=True)
    assert sorted(found) == ["seed=0", "seed=2"] and found["seed=2"]["index"] == 2
    assert ignored == ["job-00001.json: made under another fingerprint (training code, torch or "
                       "CPU kernels: k)"]
    assert sorted(runner.scan_results(SPEC, out)[0]) == ["seed=0", "seed=1", "seed=2"]
    path = out / "jobs" / "job-00001.json"
    path.write_text(json.dumps({**_json(path), "kernels": ""}))
    assert runner.scan_results(SPEC, out, fingerprints=True)[1][0].endswith("not recorded)")
    ex = Executor()
    stub(ex, [[1]])
    snaps = list(runner.run_experiment(SPEC, out, workers=1, executor=ex, resume=True,
                                       fingerprints=True))
    assert [a[0]["seed"] for _, a, _, _ in ex.calls] == [1] and snaps[0].resumed == 2


def test_expected_fingerprint_is_the_jobs_on_the_cpu(monkeypatch):
    import engine.experiments.fingerprint as fingerprint

    monkeypatch.setattr(fingerprint, "job_fingerprint", lambda config, device: (config, device))
    job = SPEC.jobs()[1]
    assert runner.expected_fingerprint(job) == (job.config.to_dict(), "cpu")


@pytest.mark.parametrize("workers", [0, 1025, True, 2.0, "2"])
def test_bad_worker_counts_are_refused_with_the_range(tmp_path, workers):
    with pytest.raises(ConfigError) as err:
        next(runner.run_experiment(SPEC, tmp_path / "e", workers=workers))
    assert err.value.field == "workers"
    assert err.value.message == f"must be from 1 to 1,024, got {workers!r}"
    assert not (tmp_path / "e").exists()


def test_an_owned_pool_has_no_more_workers_than_jobs_and_is_shut(stub, monkeypatch):
    pool, asked = Executor(), []
    monkeypatch.setattr(runner, "default_workers", lambda: 7)
    monkeypatch.setattr(runner, "process_pool", lambda n: asked.append(n) or pool)
    monkeypatch.setattr(runner, "runs_on_cuda", lambda spec: False)
    stub(pool, [[0, 1, 2]])
    snaps = list(runner.run_experiment(SPEC, None))
    assert asked == [3]  # 7 by default, but 3 jobs
    assert [a[2] for _, a, _, _ in pool.calls] == [None] * 3  # (other processes: no flag)
    assert (snaps[-1].executor, snaps[-1].workers) == ("process", 7)
    assert pool.shut == (True, False)
    for workers in (1, 1024):
        pool.calls.clear()
        stub(pool, [[0, 1, 2]])
        assert list(runner.run_experiment(SPEC, None, workers=workers))[-1].done == 3
    assert asked == [3, 1, 3]


def test_the_cuda_queue_runs_in_process_one_at_a_time_with_a_cancel_flag(monkeypatch):
    monkeypatch.setattr(runner, "runs_on_cuda", lambda spec: True)
    got = []

    def job(config, target, cancelled=None, progress_path=None):
        got.append((config["seed"], cancelled()))
        return fake_job(config, target)
    monkeypatch.setattr(runner, "run_job", job)
    snaps = list(runner.run_experiment(SPEC, None, workers=4))
    assert sorted(got) == [(0, False), (1, False), (2, False)]
    assert (snaps[-1].executor, snaps[-1].workers, snaps[-1].done) == ("in-process", 1, 3)


def test_every_job_already_done_makes_no_pool(stub, tmp_path, monkeypatch):
    out = tmp_path / "e"
    stub(Executor(), [[0, 1, 2]])
    ex = Executor()
    stub(ex, [[0, 1, 2]])
    list(runner.run_experiment(SPEC, out, workers=1, executor=ex))
    monkeypatch.setattr(runner, "process_pool", lambda n: pytest.fail("a pool"))
    snaps = list(runner.run_experiment(SPEC, out, workers=2, resume=True))
    assert snaps[0].eta_s == 0.0 and snaps[0].finished  # (no job ran: the ETA is 0, not None)
    assert len(snaps) == 1 and (snaps[0].executor, snaps[0].resumed, snaps[0].fraction) == (
        "given", 3, 1.0)
    assert _json(out / "experiment.json")["workers"] == 2


def test_a_scheduler_that_cannot_be_reached_is_one_error(monkeypatch):
    pytest.importorskip("distributed")
    import distributed

    def refuse(address, timeout):
        assert timeout == "10s"
        raise OSError("no route")
    monkeypatch.setattr(distributed, "Client", refuse)
    with pytest.raises(ConfigError) as err:
        next(runner.run_experiment(SPEC, None, workers=1, scheduler="tcp://x:1"))
    assert (err.value.field, err.value.message) == ("scheduler", "cannot reach 'tcp://x:1': no route")


def test_a_dask_executor_is_used_and_its_client_closed(stub, monkeypatch):
    distributed = pytest.importorskip("distributed")
    ex = Executor()
    closed = []

    class Client:
        def __init__(self, address, timeout):
            self.address = address

        def get_executor(self):
            return ex

        def close(self):
            closed.append(self.address)
    monkeypatch.setattr(distributed, "Client", Client)
    stub(ex, [[0, 1, 2]])
    snaps = list(runner.run_experiment(SPEC, None, workers=3, scheduler="tcp://a:1"))
    assert (snaps[-1].executor, snaps[-1].workers, snaps[-1].done) == ("dask", 3, 3)
    assert closed == ["tcp://a:1"] and ex.shut == (True, False)
    assert [a[2] for _, a, _, _ in ex.calls] == [None] * 3  # (jobs run elsewhere: no flag)


def test_no_distributed_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_dask(name, *args, **kw):
        if name == "distributed":
            raise ImportError(name)
        return real(name, *args, **kw)
    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(ConfigError) as err:
        runner._dask_executor("tcp://x:1")
    assert (err.value.field, err.value.message) == (
        "scheduler", "needs the optional 'cluster' extra: pip install 'attention-scaling-lab[cluster]'")


def test_a_folder_that_holds_an_experiment_is_refused_with_a_hint(stub, tmp_path):
    out = tmp_path / "e"
    ex = Executor()
    stub(ex, [[0, 1, 2]])
    list(runner.run_experiment(SPEC, out, workers=1, executor=ex))
    assert runner.saved_experiment_name(out) == "stub"
    with pytest.raises(ConfigError) as err:
        runner.check_out_dir(SPEC, out, resume=False)
    assert (err.value.field, err.value.message) == (
        "out", f"{str(out)!r} already holds experiment 'stub': resume it or choose another folder")
    other = ExperimentSpec("other", BASE, (Axis("seed", (0,)),))
    with pytest.raises(ConfigError) as err:
        runner.check_out_dir(other, out, resume=False)
    assert err.value.message == (f"{str(out)!r} already holds experiment 'stub': choose another "
                                 f"folder (or open it to resume it)")
    with pytest.raises(ConfigError) as err:
        runner.check_out_dir(other, out, resume=True)
    assert (err.value.field, err.value.message) == (
        "resume", f"{str(out)!r} holds a different experiment ('stub'); use another folder")
    assert runner.check_out_dir(SPEC, str(out), resume=True) == out
    (out / "experiment.json").write_text("[1]")
    assert runner.saved_experiment_name(out) is None
    with pytest.raises(ConfigError) as err:
        runner.check_out_dir(SPEC, out, resume=False)
    assert err.value.message == (f"{str(out)!r} already holds an experiment: choose another "
                                 f"folder (or open it to resume it)")


@pytest.mark.parametrize("text, name", [
    ('{"experiment": {"name": "a"}}', "a"), ('{"name": "b"}', "b"),
    ('{"experiment": {"name": 3}}', None), ('{"experiment": [1]}', None), ("{", None),
    ('{"experiment": {}}', None)])
def test_the_saved_name_is_read_from_either_layout(tmp_path, text, name):
    (tmp_path / "experiment.json").write_text(text)
    assert runner.saved_experiment_name(tmp_path) == name
    assert runner.saved_experiment_name(tmp_path / "missing") is None


def test_job_files_without_an_experiment_json_are_refused_on_resume(tmp_path):
    out = tmp_path / "e"
    (out / "jobs").mkdir(parents=True)
    assert runner.check_out_dir(SPEC, out, resume=True) == out  # (an empty jobs/ is no trace)
    (out / "jobs" / "job-00000.json").write_text("{}")
    with pytest.raises(ConfigError) as err:
        runner.check_out_dir(SPEC, out, resume=True)
    assert (err.value.field, err.value.message) == (
        "resume", f"{str(out)!r} has job files but no experiment.json")


def test_a_folder_that_cannot_be_made_leaves_no_trace(stub, tmp_path, monkeypatch):
    def fail(*args, **kw):
        raise OSError("disk full")
    monkeypatch.setattr(runner, "write_json", fail)
    ex = Executor()
    stub(ex, [[0, 1, 2]])
    with pytest.raises(OSError):
        next(runner.run_experiment(SPEC, tmp_path / "a" / "b" / "e", workers=1, executor=ex))
    assert list(tmp_path.iterdir()) == []
    keep = tmp_path / "kept"
    keep.mkdir()
    with pytest.raises(OSError):
        next(runner.run_experiment(SPEC, keep / "e", workers=1, executor=ex))
    assert list(tmp_path.iterdir()) == [keep] and list(keep.iterdir()) == []

    def stray(path, data):  # a file appears in the new folder: it stays, the error is the write's
        (keep / "e2" / "stray").write_text("x")
        raise OSError("disk full")
    monkeypatch.setattr(runner, "write_json", stray)
    with pytest.raises(OSError, match="disk full"):
        next(runner.run_experiment(SPEC, keep / "e2", workers=1, executor=ex))
    assert sorted(p.name for p in (keep / "e2").iterdir()) == ["stray"]


def test_the_paths_of_a_job():
    assert runner.job_file(Path("x"), 12) == Path("x/jobs/job-00012.json")
    assert runner.progress_file(Path("x"), 7) == Path("x/jobs/job-00007.progress")


def test_the_estimate_times_the_grid_on_the_workers_asked(monkeypatch):
    import engine.experiments.estimate as estimate

    calls = []
    monkeypatch.setattr(estimate, "estimate", lambda spec, workers, steps: calls.append(
        (spec, workers, steps)) or (2.0, 5.0))
    monkeypatch.setattr(runner, "default_workers", lambda: 6)
    assert runner.estimate_seconds(SPEC) == (2.0, 5.0)
    runner.estimate_seconds(SPEC, workers=2, probe_steps=0)
    runner.estimate_seconds(SPEC, workers=3, probe_steps=3)
    assert calls == [(SPEC, 6, 10), (SPEC, 2, 1), (SPEC, 3, 3)]


@pytest.mark.parametrize("device, cuda, want", [
    ("cpu", True, False), ("auto", True, True), ("auto", False, False), ("cuda", True, True)])
def test_jobs_go_to_cuda_when_asked_and_there_is_one(monkeypatch, device, cuda, want):
    import engine.sampling as sampling

    monkeypatch.setattr(sampling, "cuda_available", lambda: cuda)
    spec = ExperimentSpec("stub", BASE.replace(device=device), (Axis("seed", (0,)),))
    assert runner.runs_on_cuda(spec) is want


def test_an_experiment_folder_gives_back_its_spec(stub, tmp_path):
    ex = Executor()
    stub(ex, [[0, 1, 2]])
    list(runner.run_experiment(SPEC, tmp_path / "e", workers=1, executor=ex))
    assert runner.load_experiment(tmp_path / "e") == SPEC
    assert runner.load_experiment(tmp_path / "e" / "experiment.json") == SPEC


def test_a_cuda_queue_is_one_named_thread_and_a_stop_reaches_its_jobs(stub, monkeypatch):
    made, stops = [], []
    ex = Executor()
    monkeypatch.setattr(runner, "runs_on_cuda", lambda spec: True)
    monkeypatch.setattr(runner.cf, "ThreadPoolExecutor", lambda **kw: made.append(kw) or ex)
    monkeypatch.setattr(runner, "stop_executor", lambda e, owned, futs: stops.append(
        (e, owned, len(futs))))
    stub(ex, [[0]])
    gen = runner.run_experiment(SPEC, None, workers=4)
    first = next(gen)
    assert made == [{"max_workers": 1, "thread_name_prefix": "experiment-job"}]
    flags = [a[2] for _, a, _, _ in ex.calls]
    assert first.done == 1 and (first.executor, first.workers) == ("in-process", 1)
    assert [f() for f in flags] == [False] * 3
    gen.close()  # the consumer stops early: the jobs left are told to stop, the queue ended
    assert [f() for f in flags] == [True] * 3 and stops == [(ex, True, 2)]


def test_a_consumer_that_stops_early_ends_a_given_executors_jobs(stub, tmp_path, monkeypatch):
    ex, stops = Executor(), []
    out = tmp_path / "e"
    monkeypatch.setattr(runner, "stop_executor", lambda e, owned, futs: stops.append(
        (e, owned, len(futs))))
    stub(ex, [[0, ("run", 1), lambda: (out / "jobs" / "job-00001.progress").write_text(
        '{"step": 1, "steps": 8}')]])
    gen = runner.run_experiment(SPEC, out, workers=1, executor=ex)
    assert next(gen).job_progress == {1: 0.125}
    gen.close()
    assert stops == [(ex, False, 2)]
    assert not (out / "jobs" / "job-00001.progress").exists()


def test_without_resume_a_finished_folder_is_refused_and_a_users_files_need_force(stub, tmp_path):
    from engine.errors import WouldOverwrite

    out = tmp_path / "e"
    ex = Executor()
    stub(ex, [[0, 1, 2]])
    list(runner.run_experiment(SPEC, out, workers=1, executor=ex))
    with pytest.raises(ConfigError) as err:
        next(runner.run_experiment(SPEC, out, workers=1, executor=ex))
    assert err.value.field == "out"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.csv").write_text("my own")
    with pytest.raises(WouldOverwrite):
        runner.check_out_dir(SPEC, mine, resume=False)
    with pytest.raises(WouldOverwrite):
        next(runner.run_experiment(SPEC, mine, workers=1, executor=ex))
    assert runner.check_out_dir(SPEC, mine, resume=False, force=True) == mine
    ex = Executor()
    stub(ex, [[0, 1, 2]])
    assert list(runner.run_experiment(SPEC, mine, workers=1, executor=ex, force=True))[-1].finished
    assert (mine / "summary.csv").read_text() != "my own"


def test_resume_without_a_folder_runs_every_job(stub):
    ex = Executor()
    stub(ex, [[0, 1, 2]])
    snaps = list(runner.run_experiment(SPEC, None, workers=1, executor=ex, resume=True))
    assert len(ex.calls) == 3 and snaps[-1].resumed == 0


def test_a_broken_experiment_json_on_resume_names_the_option(tmp_path):
    from engine.errors import FileFormatError

    (tmp_path / "experiment.json").write_text("{")
    with pytest.raises(FileFormatError) as err:
        runner.check_out_dir(SPEC, tmp_path, resume=True)
    assert err.value.option == "resume"


def test_the_outputs_of_no_result_have_their_headers_and_the_defaults(tmp_path):
    from engine.experiments.summary import metrics_columns, points_columns, summary_columns

    paths = runner.write_outputs(tmp_path, SPEC, [], "cancelled")
    assert [p.name for p in paths] == ["summary.csv", "points.csv", "metrics.csv",
                                       "experiment.json"]
    for name, columns in (("summary.csv", summary_columns(SPEC)),
                          ("points.csv", points_columns(SPEC)),
                          ("metrics.csv", metrics_columns(SPEC))):
        header = (tmp_path / name).read_text(encoding="utf-8").splitlines()[0]
        assert header.split(",") == list(columns) and "scaling" in header
    saved = _json(tmp_path / "experiment.json")
    assert (saved["status"], saved["done"], saved["workers"], saved["executor"]) == (
        "cancelled", 0, 1, "")
