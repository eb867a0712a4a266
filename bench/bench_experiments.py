"""Experiment throughput and the cost of a saturated softmax, each as one ratio.

1. Grid throughput: the same grid of jobs with 2 worker processes vs 1 (goal >= 1.7x on 2 free
   cores; each job is single-threaded, so the speed-up is the parallelism). The pool's fork server
   is warmed first, so the times are the jobs', not torch's import.
2. Time per training step of ``none`` / ``sqrt`` on the demo preset (d_k = 256), with subnormal
   floats flushed to zero (the training numerics policy) and, for comparison, without
   (goal < 1.2 with flushing). Interleaved rounds, ratio of medians.

    .venv/bin/python bench/bench_experiments.py [--jobs 8] [--steps 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def grid_seconds(spec, workers: int) -> float:
    from engine.experiments.runner import run_experiment

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        for p in run_experiment(spec, Path(tmp) / "exp", workers=workers):
            last = p
        assert last.finished and last.failed == 0
        return time.perf_counter() - start


def step_seconds(cfg, flush: bool) -> float:
    from engine.training.trainer import Trainer

    trainer = Trainer(cfg, flush_denormal=flush)
    start = time.perf_counter()
    for _ in trainer.iterate():
        pass
    return (time.perf_counter() - start) / cfg.steps


def main() -> int:
    from engine.experiments.spec import Axis, ExperimentSpec
    from engine.training.presets import preset

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=8, help="jobs in the grid (seeds)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    demo = preset("demo").config.replace(device="cpu")
    job_cfg = demo.replace(d_model=64, steps=args.steps)
    spec = ExperimentSpec("bench", job_cfg, (Axis("seed", tuple(range(args.jobs))),))
    grid_seconds(ExperimentSpec("warm", job_cfg.replace(steps=2), (Axis("seed", (0, 1)),)), 2)
    one, two = [], []
    for _ in range(args.rounds):
        one.append(grid_seconds(spec, 1))
        two.append(grid_seconds(spec, 2))
    t1, t2 = statistics.median(one), statistics.median(two)
    print(f"grid: {args.jobs} jobs of the demo task (d_model 64, {len(job_cfg.scalings)} rules, "
          f"{args.steps} steps)")
    print(f"  1 worker : {t1:6.2f} s   2 workers: {t2:6.2f} s   speed-up {t1 / t2:.2f}x "
          f"(goal >= 1.7x on 2 free cores)")

    ratios = {}
    for flush in (True, False):
        none_cfg = demo.replace(scalings=("none",), steps=args.steps)
        sqrt_cfg = demo.replace(scalings=("sqrt",), steps=args.steps)
        step_seconds(none_cfg.replace(steps=3), flush)  # warm-up
        t_none, t_sqrt = [], []
        for _ in range(args.rounds):
            t_none.append(step_seconds(none_cfg, flush))
            t_sqrt.append(step_seconds(sqrt_cfg, flush))
        a, b = statistics.median(t_none), statistics.median(t_sqrt)
        ratios[flush] = a / b
        print(f"demo preset (d_k {demo.head_dim}), subnormals {'flushed' if flush else 'kept'}: "
              f"none {a * 1e3:6.1f} ms/step, sqrt {b * 1e3:6.1f} ms/step, ratio {a / b:.2f}")
    print(f"none/sqrt time per step: {ratios[True]:.2f} with flushing (goal < 1.2), "
          f"{ratios[False]:.2f} without")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
