"""Cost of observing a training run: steps/s with and without the observers, in one run.

The instrumented loop (probe forward with capture, per-head softmax diagnostics, histograms,
percentiles, gradient norms every ``log_every`` steps, snapshots) must cost at most 25% more per
step than the same loop with observation off. Both loops run the same config, interleaved in
rounds so that machine load hits both alike; the ratio of medians is reported.

    .venv/bin/python bench/bench_training.py [--preset demo small_dk recall] [--steps 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def time_loop(cfg, observe: bool) -> float:
    """Seconds per step of a full run (all rules) of ``cfg``."""
    from engine.training.trainer import Trainer

    trainer = Trainer(cfg, observe=observe)
    start = time.perf_counter()
    for _ in trainer.iterate():
        pass
    return (time.perf_counter() - start) / cfg.steps


def main() -> int:

    from engine.training.presets import preset

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", nargs="+", default=["demo", "small_dk", "recall"])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    worst = 0.0
    for name in args.preset:
        cfg = preset(name).config.replace(steps=args.steps, device="cpu")
        time_loop(cfg.replace(steps=5), True)  # warm-up
        on, off = [], []
        for _ in range(args.rounds):
            off.append(time_loop(cfg, False))
            on.append(time_loop(cfg, True))
        t_on, t_off = statistics.median(on), statistics.median(off)
        ratio = t_on / t_off
        worst = max(worst, ratio)
        print(f"preset {name}: {len(cfg.scalings)} rules ({', '.join(cfg.scalings)}), "
              f"d_model {cfg.d_model}, {cfg.heads} head(s) of d_k {cfg.head_dim}, "
              f"{cfg.layers} layer(s), batch {cfg.batch}, log_every {cfg.log_every}, "
              f"probe {cfg.probe_size}, 1 thread (the training numerics policy)")
        print(f"  without observation: {1 / t_off:7.2f} steps/s (all rules per step)")
        print(f"  with observation:    {1 / t_on:7.2f} steps/s")
        print(f"  observation overhead: x{ratio:.3f} per step (budget x1.25): "
              f"{'OK' if ratio <= 1.25 else 'OVER BUDGET'}")
    return 0 if worst <= 1.25 else 1

if __name__ == "__main__":
    sys.exit(main())
