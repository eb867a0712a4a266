"""The time a grid will take, before it runs: a few steps of its first job timed off the GUI
thread (a generator for ``ui.worker.Worker``), scaled to the grid; once jobs finish, their own
seconds take over (the runner's estimate)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: steps timed (after one warm-up step and the step-0 log)
TIMED_STEPS = 4
#: seconds a worker process needs to start (fork server with torch preloaded), per worker
START_S = 2.0


@dataclass(frozen=True)
class Estimate:
    config: dict[str, Any]  #: the timed job's config (a changed first job times again)
    step_s: float  #: one training step of all the job's rules
    log_s: float  #: one observed (logged) step
    setup_s: float  #: building the models and the step-0 log

    def job_seconds(self, cfg: Any) -> float:
        logs = cfg.steps // cfg.log_every + 2
        return self.setup_s + cfg.steps * self.step_s + logs * max(self.log_s - self.step_s, 0.0)

    def grid_seconds(self, spec: Any, workers: int) -> float:
        """Jobs spread over ``workers`` processes (each job single-threaded)."""
        jobs = spec.jobs()
        total = sum(self.job_seconds(j.config) for j in jobs)
        waves = math.ceil(len(jobs) / max(workers, 1))
        longest = max((self.job_seconds(j.config) for j in jobs), default=0.0)
        return START_S + max(total / max(workers, 1), longest if waves else 0.0)


def time_job(config: Any, cancelled: Callable[[], bool]) -> Iterator[Estimate]:
    """Train a few steps of ``config`` and yield the timing (imports torch here, once)."""
    from engine.training.trainer import Trainer

    cfg = config.replace(steps=max(config.steps, TIMED_STEPS + 2), device="cpu")
    # one-time costs of this process (torch.optim's first use imports torch._dynamo: seconds)
    # are not a job's: a worker process has them preloaded
    warm = Trainer(cfg.replace(steps=1))
    warm.advance(force_log=True)
    warm.advance(force_log=True)
    if cancelled():
        return
    start = time.perf_counter()
    trainer = Trainer(cfg)
    trainer.advance(force_log=True)  # step 0: observed, as in every job
    setup = time.perf_counter() - start
    if cancelled():
        return
    trainer.advance(force_log=False)  # warm-up
    t0 = time.perf_counter()
    for _ in range(TIMED_STEPS):
        if cancelled():
            return
        trainer.advance(force_log=False)
    step = (time.perf_counter() - t0) / TIMED_STEPS
    t1 = time.perf_counter()
    trainer.advance(force_log=True)
    log = time.perf_counter() - t1
    yield Estimate(config.to_dict(), step, log, setup)


def format_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
