"""How long a grid will take, before it runs: a few steps of each job *shape* are timed in a
worker process and scaled to every job's steps and logs. One implementation for the CLI
(``runner.estimate_seconds``) and the Experiments page (which runs ``estimate_job`` off its GUI
thread: the GUI process never imports torch or trains for an estimate, so it cannot change the
thread count of a run in progress there).

A shape is a job's config without the fields that do not change what a step costs (seed,
learning rate, warmup, ...): the ``heads`` grid has five (1 to 16 heads), and a 16-head step
costs about three times a 1-head one at the same parameter count, so timing one job (the old way)
said 9 s for a grid that took 29 s. Each shape is timed (up to ``MAX_SHAPES``); the estimate
carries the range its timed steps spread over, and says so.

The timing process is started with "spawn": its start returns at once (a fork server blocks the
caller until it has preloaded torch), so a cancel ends it within ``POLL_S`` at any moment.
"""

from __future__ import annotations

import concurrent.futures as cf
import heapq
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: steps timed per shape (after one warm-up step and the step-0 log)
TIMED_STEPS = 4
#: seconds a worker process needs to start (fork server with torch preloaded), per run
START_S = 2.0
#: the most job shapes timed for one estimate (evenly spread over the grid's costs)
MAX_SHAPES = 5
#: config fields that do not change the cost of a step: jobs differing only in them share a shape
COST_FREE = frozenset({
    "seed", "lr", "warmup", "decay", "lr_floor", "weight_decay", "grad_clip", "qk_init", "noise",
    "temperature", "cosine_temperature", "saturation_threshold", "collapse_threshold",
    "collapse_logs", "steps", "log_every",
})


def shape_of(config: Any) -> tuple:
    """What a step of ``config`` (a TrainingConfig or its dict) costs depends on only this."""
    data = config if isinstance(config, dict) else config.to_dict()
    return tuple(sorted((k, repr(v)) for k, v in data.items() if k not in COST_FREE))


@dataclass(frozen=True)
class Timing:
    """One shape's timing: seconds per training step (all the job's rules), per observed step,
    and to build the models and log step 0; ``step_lo``/``step_hi``: the fastest and slowest
    timed step."""

    step_s: float
    log_s: float
    setup_s: float
    step_lo: float
    step_hi: float

    def seconds(self, cfg: Any, step_s: float | None = None) -> float:
        step = self.step_s if step_s is None else step_s
        logs = cfg.steps // cfg.log_every + 2
        return self.setup_s + cfg.steps * step + logs * max(self.log_s - self.step_s, 0.0)


@dataclass(frozen=True)
class Estimate:
    """The timings of a grid's job shapes, to scale to any job of the same grid."""

    configs: tuple[dict[str, Any], ...]  #: the timed jobs' configs (a changed grid times again)
    timings: tuple[Timing, ...]  #: one per config

    def timing(self, cfg: Any) -> Timing:
        """The timing of ``cfg``'s shape; an untimed shape takes the slowest timed one (an
        estimate errs long rather than short)."""
        shape = shape_of(cfg)
        for config, t in zip(self.configs, self.timings, strict=True):
            if shape_of(config) == shape:
                return t
        return max(self.timings, key=lambda t: t.seconds(cfg))

    def job_seconds(self, cfg: Any, bound: str = "") -> float:
        """Seconds of one job; ``bound`` "lo" / "hi": at its fastest / slowest timed step."""
        t = self.timing(cfg)
        return t.seconds(cfg, {"lo": t.step_lo, "hi": t.step_hi}.get(bound))

    def grid_seconds(self, spec: Any, workers: int, bound: str = "") -> float:
        """Jobs spread over ``workers`` processes (each job single-threaded; the longest first,
        each to the worker free soonest); without the workers' start (``START_S``)."""
        seconds = sorted((self.job_seconds(j.config, bound) for j in spec.jobs()), reverse=True)
        free = [0.0] * max(1, min(workers, len(seconds)))
        for s in seconds:
            heapq.heappush(free, heapq.heappop(free) + s)
        return max(free, default=0.0)

    def grid_range(self, spec: Any, workers: int) -> tuple[float, float]:
        """The grid's seconds at the fastest and at the slowest step timed (the spread a loaded
        machine showed while timing; a busier machine later is slower still)."""
        return self.grid_seconds(spec, workers, "lo"), self.grid_seconds(spec, workers, "hi")

    @property
    def step_s(self) -> float:
        """The slowest shape's seconds per step."""
        return max(t.step_s for t in self.timings)


def _cost(job: Any) -> float:
    c = job.config
    return c.n_params * len(c.scalings) * max(1, c.heads) * c.layers


def timed_jobs(spec: Any) -> list[Any]:
    """One job per shape of the grid (the first of each); more than ``MAX_SHAPES`` shapes: the
    cheapest, the costliest and evenly spread ones between (by a rough cost)."""
    first: dict[tuple, Any] = {}
    for job in spec.jobs():
        first.setdefault(shape_of(job.config), job)
    jobs = sorted(first.values(), key=_cost)
    if len(jobs) > MAX_SHAPES:
        picks = {round(i * (len(jobs) - 1) / (MAX_SHAPES - 1)) for i in range(MAX_SHAPES)}
        jobs = [jobs[i] for i in sorted(picks)]
    return sorted(jobs, key=lambda j: j.index)


def time_steps(config: dict[str, Any], steps: int = TIMED_STEPS) -> dict[str, Any]:
    """Train a few steps of ``config`` (plain data, in a worker process) and return a Timing's
    fields."""
    from engine.training.config import TrainingConfig
    from engine.training.trainer import Trainer

    base = TrainingConfig.from_dict(config)
    cfg = base.replace(steps=max(base.steps, steps + 2), device="cpu")
    start = time.perf_counter()
    trainer = Trainer(cfg)
    trainer.advance(force_log=True)  # step 0: observed, as in every job
    setup = time.perf_counter() - start
    trainer.advance(force_log=False)  # warm-up
    each = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer.advance(force_log=False)
        each.append(time.perf_counter() - t0)
    t1 = time.perf_counter()
    trainer.advance(force_log=True)
    log = time.perf_counter() - t1
    return {"step_s": sum(each) / len(each), "log_s": log, "setup_s": setup,
            "step_lo": min(each), "step_hi": max(each)}


def time_shapes(configs: Sequence[dict[str, Any]], steps: int = TIMED_STEPS) -> list[dict[str, Any]]:
    """Time each config in turn (in one worker process). The process's one-time costs
    (imports, torch.optim's first use) are paid by a warm-up run first: a job's worker has them
    preloaded."""
    from engine.training.config import TrainingConfig
    from engine.training.trainer import Trainer

    warm = Trainer(TrainingConfig.from_dict(configs[0]).replace(steps=1, device="cpu"))
    warm.advance(force_log=True)
    warm.advance(force_log=True)
    return [time_steps(c, steps) for c in configs]


def estimate_job(configs: Any, cancelled: Callable[[], bool] | None = None,
                 steps: int = TIMED_STEPS) -> Iterator[Estimate]:
    """Time ``configs`` (TrainingConfigs, or one) in a one-worker process pool and yield their
    Estimate once; ``cancelled()`` is checked every ``POLL_S``: the process is killed and nothing
    is yielded. The pool never outlives the call (killed in ``finally``, also when the generator
    is closed)."""
    from engine.experiments.pool import POLL_S, process_pool, stop_executor

    configs = [configs] if hasattr(configs, "to_dict") else list(configs)
    data = [c.to_dict() for c in configs]
    pool = process_pool(1, start_method="spawn")
    fut = None
    try:
        fut = pool.submit(time_shapes, data, steps)
        while not fut.done():
            if cancelled is not None and cancelled():
                return
            cf.wait([fut], timeout=POLL_S)
        timings = fut.result()
    finally:
        stop_executor(pool, True, [fut] if fut is not None else [])
    yield Estimate(tuple(data), tuple(Timing(**t) for t in timings))


def estimate(spec: Any, workers: int, cancelled: Callable[[], bool] | None = None,
             steps: int = TIMED_STEPS) -> tuple[float, float] | None:
    """(seconds of the longest job, seconds of the whole grid on ``workers``), or None when
    cancelled. Not a promise: machine load changes it."""
    for est in estimate_job([j.config for j in timed_jobs(spec)], cancelled, steps):
        longest = max(est.job_seconds(j.config) for j in spec.jobs())
        return longest, est.grid_seconds(spec, workers)
    return None


def format_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
