"""Run an experiment's jobs through a ``concurrent.futures.Executor`` and stream the results.

Executors: a local process pool (default: one worker per core; each job single-threaded), one job
at a time in this process when the jobs train on CUDA, or a Dask cluster
(``distributed.Client(address).get_executor()``); or any Executor passed in. No home-made
scheduler: the runner only submits, waits and writes.

Files in ``out_dir``: ``experiment.json`` (the spec, rebuilt by ``load_experiment``; written
first so a resume can check it), ``jobs/job-NNNNN.json`` (one per finished job, written atomically
when it finishes: a killed experiment loses only the jobs that were running), and at the end (or
on cancel) ``summary.csv`` and ``metrics.csv``. ``resume`` skips the jobs whose file is there.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, quote
from engine.experiments.folder import (
    EXPERIMENT_FILE,
    EXPERIMENT_FILE_MAX,
    JOBS_DIR,
    read_experiment,
    scan_job_files,
)
from engine.experiments.job import read_progress, run_job
from engine.experiments.pool import POLL_S, default_workers, process_pool, stop_executor
from engine.experiments.spec import ExperimentSpec, Job
from engine.experiments.summary import (
    metrics_columns,
    metrics_rows,
    points_columns,
    points_rows,
    summary_columns,
    summary_rows,
)
from engine.io import (
    check_output_dir,
    ensure_writable_dir,
    package_versions,
    write_csv,
    write_json,
)
from engine.readers.json_file import read_json

RESULT_FILES = ("experiment.json", "summary.csv", "points.csv", "metrics.csv", "jobs/")
WORKERS_MAX = 1024


@dataclass(frozen=True)
class ExperimentProgress:
    """A snapshot of a running experiment (plain data for a progress bar, a grid view, a log)."""

    spec: ExperimentSpec
    out_dir: Path | None
    total: int  #: jobs in the grid
    done: int  #: finished jobs (this run and resumed ones), failed ones included
    failed: int  #: finished jobs that raised (their result has ``error``)
    running: int  #: jobs a worker is on now
    resumed: int  #: jobs finished by an earlier run of the same experiment (skipped)
    latest: dict[str, Any] | None  #: the latest finished job's result
    results: tuple[dict[str, Any], ...]  #: every finished job's result so far
    elapsed_s: float  #: since this run started
    eta_s: float | None  #: estimated seconds left (None until a job of this run finished)
    finished: bool  #: all jobs done, files written
    cancelled: bool  #: stopped by ``cancelled()``; finished jobs kept, files written
    executor: str  #: "process", "in-process", "dask" or "given"
    workers: int
    #: running jobs' step progress (job index -> fraction in [0, 1]) from their progress files
    job_progress: dict[int, float] = field(default_factory=dict)
    #: with resume: one reason per job file in the folder that was not taken (rerun instead)
    ignored: tuple[str, ...] = ()

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


def job_file(out_dir: Path, index: int) -> Path:
    return out_dir / JOBS_DIR / f"job-{index:05d}.json"


def progress_file(out_dir: Path, index: int) -> Path:
    """Rewritten by a running job at each log step (``job.write_progress``), removed when it ends."""
    return out_dir / JOBS_DIR / f"job-{index:05d}.progress"


def load_experiment(path: str | os.PathLike[str]) -> ExperimentSpec:
    """The spec saved in an experiment folder (or an experiment.json file); FileFormatError
    (``FILE: field path: what is wrong``) when it cannot be taken."""
    return read_experiment(path)[0]


def scan_results(spec: ExperimentSpec, out_dir: Path, fingerprints: bool = False
                 ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Finished jobs in ``out_dir/jobs`` that belong to this spec's grid, by job key, and one
    reason per job file not taken (``engine.experiments.folder``: each is checked completely;
    with ``fingerprints``, a job made under another fingerprint: other code, torch or CPU
    kernels, ``engine.experiments.fingerprint``)."""
    found, ignored = scan_job_files(spec, out_dir)
    if not fingerprints:
        return found, ignored
    jobs = {j.key: j for j in spec.jobs()}
    taken = {}
    for key, res in found.items():
        if res.get("fingerprint") == expected_fingerprint(jobs[key]):
            taken[key] = res
        else:
            ignored.append(f"job-{res['index']:05d}.json: made under another fingerprint "
                           f"(training code, torch or CPU kernels: "
                           f"{res.get('kernels') or 'not recorded'})")
    return taken, ignored


def expected_fingerprint(job: Job) -> str:
    """The fingerprint this job gets when it runs here (on the CPU)."""
    from engine.experiments.fingerprint import job_fingerprint

    return job_fingerprint(job.config.to_dict(), "cpu")


def runs_on_cuda(spec: ExperimentSpec) -> bool:
    """Whether the jobs go to the CUDA device (then one at a time, in this process)."""
    from engine.sampling import cuda_available

    return spec.base.device != "cpu" and cuda_available()


def saved_experiment_name(folder: str | os.PathLike[str]) -> str | None:
    """The name of the experiment saved in ``folder`` (its experiment.json), None when there is
    none or it cannot be read (read as bounded JSON, like every experiment file)."""
    try:
        data = read_json(Path(folder) / EXPERIMENT_FILE, max_bytes=EXPERIMENT_FILE_MAX,
                         kind="experiment.json")
    except (OSError, ValueError):  # FileFormatError is a ValueError
        return None
    other = data.get("experiment", data) if isinstance(data, dict) else None
    name = other.get("name") if isinstance(other, dict) else None
    return name if isinstance(name, str) else None


def check_out_dir(spec: ExperimentSpec, out_dir: str | os.PathLike[str], resume: bool,
                  force: bool = False) -> Path:
    """Refuse, before anything runs, a folder that holds another experiment (with ``resume``;
    the message names the one it holds), any experiment (without: nothing is overwritten), or no
    experiment but files an experiment writes (a user's summary.csv, metrics.csv or jobs/:
    WouldOverwrite, unless ``force``; a file named jobs: always). Creates nothing: a new folder
    is made when the first job starts (:func:`_start_folder`)."""
    saved = Path(out_dir) / EXPERIMENT_FILE
    jobs = Path(out_dir) / JOBS_DIR
    if saved.exists():
        out = ensure_writable_dir(out_dir)
        if not resume:
            held = saved_experiment_name(out)
            what = f"experiment {quote(held)}" if held else "an experiment"
            hint = ("resume it or choose another folder" if held == spec.name
                    else "choose another folder (or open it to resume it)")
            raise ConfigError("out", f"{str(out)!r} already holds {what}: {hint}")
        other = read_experiment(saved, option="resume")[0]
        if other.to_dict() != spec.to_dict():
            raise ConfigError("resume", f"{str(out)!r} holds a different experiment "
                                        f"({quote(other.name)}); use another folder")
        return out
    if resume and jobs.is_dir() and any(jobs.iterdir()):
        raise ConfigError("resume", f"{str(out_dir)!r} has job files but no {EXPERIMENT_FILE}")
    return check_output_dir(out_dir, RESULT_FILES, force=force)


def _dask_executor(address: str) -> tuple[Any, Any]:
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("scheduler", "needs the optional 'cluster' extra: "
                                       "pip install 'attention-scaling-lab[cluster]'") from None
    try:
        client = Client(address, timeout="10s")
    except Exception as exc:
        raise ConfigError("scheduler", f"cannot reach {address!r}: {exc}") from None
    return client, client.get_executor()


@dataclass
class _Run:
    """The bookkeeping of one run_experiment call (its progress snapshots read it)."""

    spec: ExperimentSpec
    out: Path | None
    total: int
    results: dict[str, dict[str, Any]]
    kind: str
    workers: int
    resumed: int = 0
    ignored: tuple[str, ...] = ()  #: job files in the folder not taken (rerun instead)
    futures: dict[cf.Future, Job] = field(default_factory=dict)
    latest: dict[str, Any] | None = None
    done_now: int = 0
    was_cancelled: bool = False
    stop: bool = False  #: asks in-process jobs to stop
    start: float = field(default_factory=time.perf_counter)

    def job_cancelled(self) -> bool:
        return self.stop

    def running_progress(self) -> dict[int, float]:
        if self.out is None:
            return {}
        got = {job.index: read_progress(progress_file(self.out, job.index))
               for job in self.futures.values()}
        return {i: f for i, f in got.items() if f is not None}

    def snapshot(self, finished: bool = False) -> ExperimentProgress:
        elapsed = time.perf_counter() - self.start
        remaining = self.total - len(self.results)
        eta = elapsed / self.done_now * remaining if self.done_now else None
        results = self.results
        return ExperimentProgress(
            spec=self.spec, out_dir=self.out, total=self.total, done=len(results),
            failed=sum(1 for r in results.values() if r.get("error")),
            running=sum(1 for f in self.futures if f.running()), resumed=self.resumed,
            latest=self.latest, results=tuple(results.values()), elapsed_s=elapsed,
            eta_s=0.0 if finished and not self.was_cancelled else eta,
            finished=finished and not self.was_cancelled, cancelled=self.was_cancelled,
            executor=self.kind, workers=self.workers, job_progress=self.running_progress(),
            ignored=self.ignored)


def run_experiment(spec: ExperimentSpec, out_dir: str | os.PathLike[str] | None,
                   workers: int | None = None, executor: cf.Executor | None = None,
                   resume: bool = False, cancelled: Callable[[], bool] | None = None,
                   scheduler: str | None = None, fingerprints: bool = False,
                   force: bool = False) -> Iterator[ExperimentProgress]:
    """Run every job of ``spec`` (those not already in ``out_dir`` with ``resume``), yielding a
    progress snapshot when a job finishes (and about once a second meanwhile), and a last one
    with ``finished`` or ``cancelled`` set after the files are written. With ``fingerprints``
    a resume takes only the job files made under this machine's fingerprint (the claims' cache).
    ConfigError (before anything runs): bad ``workers``, a folder of another experiment, an
    unreachable scheduler; WouldOverwrite: a folder holding files an experiment writes but no
    experiment (``force`` replaces them)."""
    if workers is None:
        workers = default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= WORKERS_MAX:
        raise ConfigError("workers", f"must be from 1 to {WORKERS_MAX:,}, got {workers!r}")
    jobs = spec.jobs()
    out = check_out_dir(spec, out_dir, resume, force) if out_dir is not None else None
    results, ignored = scan_results(spec, out, fingerprints) if (out and resume) else ({}, [])
    pending_jobs = [j for j in jobs if j.key not in results]
    on_cuda = runs_on_cuda(spec)

    owned = executor is None
    client, kind, in_process = None, "given", False
    if executor is None and pending_jobs:
        executor, client, kind, workers, in_process = _make_executor(
            scheduler, on_cuda, workers, len(pending_jobs))
    if out is not None:
        _start_folder(out, spec, len(jobs), results, workers, kind)
    run = _Run(spec, out, len(jobs), results, kind, workers, resumed=len(results),
               ignored=tuple(ignored))
    try:
        yield from _drive(run, executor, pending_jobs, in_process, cancelled)
    finally:
        if run.futures or run.was_cancelled:
            run.stop = True
            if executor is not None:
                stop_executor(executor, owned, list(run.futures))
            if out is not None:  # the killed jobs' progress files
                for job in run.futures.values():
                    progress_file(out, job.index).unlink(missing_ok=True)
        elif owned and executor is not None:
            executor.shutdown(wait=True)
        if client is not None:
            client.close()
    run.futures.clear()
    if out is not None:
        write_outputs(out, spec, list(results.values()),
                      "cancelled" if run.was_cancelled else "finished", workers, kind)
    yield run.snapshot(finished=True)


def _drive(run: _Run, executor: cf.Executor, pending_jobs: list[Job], in_process: bool,
           cancelled: Callable[[], bool] | None) -> Iterator[ExperimentProgress]:
    """Submit the pending jobs, then collect them as they finish, yielding progress (at least
    about once a second) until all are done or ``cancelled()``."""
    out = run.out
    for job in pending_jobs:
        args: tuple[Any, ...] = (job.config.to_dict(), run.spec.target)
        args += (run.job_cancelled if in_process else None,)
        path = str(progress_file(out, job.index)) if out is not None else None
        run.futures[executor.submit(run_job, *args, progress_path=path)] = job
    last_yield = time.perf_counter()
    while run.futures:
        if cancelled is not None and cancelled():
            run.was_cancelled = run.stop = True
            return
        finished_now, _ = cf.wait(list(run.futures), timeout=POLL_S,
                                  return_when=cf.FIRST_COMPLETED)
        for fut in finished_now:
            res = _record_job(fut, run.futures.pop(fut), out)
            if res is not None:
                run.results[res["key"]] = run.latest = res
                run.done_now += 1
        now = time.perf_counter()
        if finished_now or now - last_yield >= 1.0:
            last_yield = now
            yield run.snapshot()


def _make_executor(scheduler: str | None, on_cuda: bool, workers: int, pending: int
                   ) -> tuple[cf.Executor, Any, str, int, bool]:
    """(executor, dask client or None, its kind, workers, whether jobs run in this process)."""
    if scheduler:
        client, executor = _dask_executor(scheduler)
        return executor, client, "dask", workers, False
    if on_cuda:  # one job at a time on the device, in this process
        executor = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="experiment-job")
        return executor, None, "in-process", 1, True
    return process_pool(min(workers, pending)), None, "process", workers, False


def _record_job(fut: cf.Future, job: Job, out: Path | None) -> dict[str, Any] | None:
    """A finished job's result, its file written (None: the job was cancelled)."""
    res = _result_of(fut, job)
    if res.get("cancelled"):
        return None
    res.update(index=job.index, key=job.key, values=job.values)
    if out is not None and not res.get("worker_failed"):  # (a resume reruns those)
        write_json(job_file(out, job.index), res)
    if out is not None:  # (a killed worker leaves its file)
        progress_file(out, job.index).unlink(missing_ok=True)
    return res


def _result_of(fut: cf.Future, job: Job) -> dict[str, Any]:
    """The job's result, or an error record when the worker itself failed."""
    try:
        return fut.result()
    except cf.CancelledError:
        return {"cancelled": True}
    except Exception as exc:  # e.g. a worker process killed from outside
        return {"config": job.config.to_dict(), "rules": {}, "rows": [], "seconds": 0.0,
                "device": "", "error": f"{type(exc).__name__}: {exc}", "cancelled": False,
                "worker_failed": True}


def _write_experiment(out: Path, spec: ExperimentSpec, status: str, total: int,
                      results: dict[str, dict[str, Any]] | list[dict[str, Any]], workers: int,
                      executor: str) -> Path:
    values = results.values() if isinstance(results, dict) else results
    values = list(values)
    return write_json(out / EXPERIMENT_FILE, {
        "experiment": spec.to_dict(),
        "status": status, "jobs": total, "done": len(values),
        "failed": sum(1 for r in values if r.get("error")),
        "workers": workers, "executor": executor, "versions": package_versions()})


def _start_folder(out: Path, spec: ExperimentSpec, total: int,
                  results: dict[str, dict[str, Any]], workers: int, executor: str) -> None:
    """The folder, its jobs/ and its experiment.json ("running"), all or none: what this made
    is removed again if any of it cannot be written (a refused run leaves no trace)."""
    made = [p for p in (*reversed(out.parents), out, out / JOBS_DIR) if not os.path.lexists(p)]
    try:
        (out / JOBS_DIR).mkdir(parents=True, exist_ok=True)
        _write_experiment(out, spec, "running", total, results, workers, executor)
    except BaseException:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def write_outputs(out: Path, spec: ExperimentSpec, results: list[dict[str, Any]], status: str,
                  workers: int = 1, executor: str = "") -> list[Path]:
    """summary.csv, points.csv, metrics.csv and experiment.json of the finished jobs (atomic)."""
    return [write_csv(out / "summary.csv", summary_rows(spec, results), summary_columns(spec)),
            write_csv(out / "points.csv", points_rows(spec, results), points_columns(spec)),
            write_csv(out / "metrics.csv", metrics_rows(results), metrics_columns(spec)),
            _write_experiment(out, spec, status, len(spec.jobs()), results, workers, executor)]


def estimate_seconds(spec: ExperimentSpec, workers: int | None = None,
                     probe_steps: int = 10) -> tuple[float, float]:
    """(seconds of the longest job, seconds for the whole grid on ``workers``) from timing
    ``probe_steps`` steps of the grid's costliest job in a worker process
    (``engine.experiments.estimate``, the one the Experiments page uses)."""
    from engine.experiments.estimate import estimate

    got = estimate(spec, workers or default_workers(), steps=max(1, probe_steps))
    assert got is not None  # (nothing cancels it)
    return got
