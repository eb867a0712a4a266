"""How long a grid will take, before it runs: a few steps of its costliest job are timed in a
worker process and scaled to every job's steps and logs. One implementation for the CLI
(``runner.estimate_seconds``) and the Experiments page (which runs ``estimate_job`` off its GUI
thread: the GUI process never imports torch or trains for an estimate, so it cannot change the
thread count of a run in progress there).

The timing process is started with "spawn": its start returns at once (a fork server blocks the
caller until it has preloaded torch), so a cancel ends it within ``POLL_S`` at any moment.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: steps timed (after one warm-up step and the step-0 log)
TIMED_STEPS = 4
#: seconds a worker process needs to start (fork server with torch preloaded), per run
START_S = 2.0


@dataclass(frozen=True)
class Estimate:
    """The timing of one job's steps, to scale to any job of the same grid."""

    config: dict[str, Any]  #: the timed job's config (a changed grid times again)
    step_s: float  #: one training step of all the job's rules
    log_s: float  #: one observed (logged) step
    setup_s: float  #: building the models and the step-0 log

    def job_seconds(self, cfg: Any) -> float:
        logs = cfg.steps // cfg.log_every + 2
        return self.setup_s + cfg.steps * self.step_s + logs * max(self.log_s - self.step_s, 0.0)

    def grid_seconds(self, spec: Any, workers: int) -> float:
        """Jobs spread over ``workers`` processes (each job single-threaded); without the
        workers' start (``START_S``)."""
        jobs = spec.jobs()
        seconds = [self.job_seconds(j.config) for j in jobs]
        return max(sum(seconds) / max(workers, 1), max(seconds, default=0.0))


def timed_job(spec: Any) -> Any:
    """The job whose steps cost most (parameters × rules trained side by side): an estimate
    errs long rather than short."""
    return max(spec.jobs(), key=lambda j: (j.config.n_params * len(j.config.scalings), -j.index))


def time_steps(config: dict[str, Any], steps: int = TIMED_STEPS) -> dict[str, Any]:
    """Train a few steps of ``config`` (plain data, in a worker process) and return the
    Estimate's fields. The process's one-time costs (imports, torch.optim's first use) are
    paid by a warm-up run first: a job's worker has them preloaded."""
    from engine.training.config import TrainingConfig
    from engine.training.trainer import Trainer

    base = TrainingConfig.from_dict(config)
    cfg = base.replace(steps=max(base.steps, steps + 2), device="cpu")
    warm = Trainer(cfg.replace(steps=1))
    warm.advance(force_log=True)
    warm.advance(force_log=True)
    start = time.perf_counter()
    trainer = Trainer(cfg)
    trainer.advance(force_log=True)  # step 0: observed, as in every job
    setup = time.perf_counter() - start
    trainer.advance(force_log=False)  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.advance(force_log=False)
    step = (time.perf_counter() - t0) / steps
    t1 = time.perf_counter()
    trainer.advance(force_log=True)
    log = time.perf_counter() - t1
    return {"config": config, "step_s": step, "log_s": log, "setup_s": setup}


def estimate_job(config: Any, cancelled: Callable[[], bool] | None = None,
                 steps: int = TIMED_STEPS) -> Iterator[Estimate]:
    """Time ``config`` (a TrainingConfig) in a one-worker process pool and yield its Estimate
    once; ``cancelled()`` is checked every ``POLL_S``: the process is killed and nothing is
    yielded. The pool never outlives the call (killed in ``finally``, also when the generator
    is closed)."""
    from engine.experiments.runner import POLL_S, process_pool, stop_executor

    pool = process_pool(1, start_method="spawn")
    fut = None
    try:
        fut = pool.submit(time_steps, config.to_dict(), steps)
        while not fut.done():
            if cancelled is not None and cancelled():
                return
            cf.wait([fut], timeout=POLL_S)
        timing = fut.result()
    finally:
        stop_executor(pool, True, [fut] if fut is not None else [])
    yield Estimate(**timing)


def estimate(spec: Any, workers: int, cancelled: Callable[[], bool] | None = None,
             steps: int = TIMED_STEPS) -> tuple[float, float] | None:
    """(seconds of the longest job, seconds of the whole grid on ``workers``), or None when
    cancelled. Not a promise: machine load changes it."""
    for est in estimate_job(timed_job(spec).config, cancelled, steps):
        longest = max(est.job_seconds(j.config) for j in spec.jobs())
        return longest, est.grid_seconds(spec, workers)
    return None


def format_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"



