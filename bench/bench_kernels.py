"""The speed cost of pinning torch and MKL to AVX2 kernels (engine/cpu_kernels.py), in one run.

Each measurement is a fresh subprocess (the kernel set is chosen once per process): the training
steps of a preset with the pin (AVX2) against torch's and MKL's own choice
(``ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=``; AVX-512 where the CPU has it), in
interleaved rounds so that machine load hits both alike; the ratio of the medians is reported.
On a CPU without AVX-512 both choices are AVX2 and the ratio is 1 within noise.

    .venv/bin/python bench/bench_kernels.py [--preset demo recall] [--steps 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: torch's and MKL's own choice (what the pin replaces)
UNPINNED = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": ""}
CHILD = """
import json, sys, time
from engine.cpu_kernels import kernels_in_use
from engine.training.presets import preset
from engine.training.trainer import Trainer
cfg = preset(sys.argv[1]).config.replace(steps=int(sys.argv[2]), device="cpu")
for _ in Trainer(cfg.replace(steps=3)).iterate():  # warm-up (first dispatch, allocations)
    pass
trainer = Trainer(cfg)
start = time.perf_counter()
for _ in trainer.iterate():
    pass
print(json.dumps({"s_per_step": (time.perf_counter() - start) / cfg.steps,
                  "kernels": kernels_in_use()}))
"""


def time_steps(preset_name: str, steps: int, pinned: bool) -> dict:
    """Seconds per training step (all rules) of the preset in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in UNPINNED}
    if not pinned:
        env.update(UNPINNED)
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run([sys.executable, "-c", CHILD, preset_name, str(steps)], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", nargs="+", default=["demo", "recall"])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for name in args.preset:
        pinned, own = [], []
        kernels = {}
        for _ in range(args.rounds):
            for flag, out in ((True, pinned), (False, own)):
                got = time_steps(name, args.steps, flag)
                out.append(got["s_per_step"])
                kernels[flag] = got["kernels"]
        t_pin, t_own = statistics.median(pinned), statistics.median(own)
        print(f"preset {name}, {args.steps} steps x {args.rounds} rounds, 1 thread:")
        print(f"  pinned ({kernels[True]}): {1000 * t_pin:8.2f} ms/step")
        print(f"  own choice ({kernels[False]}): {1000 * t_own:8.2f} ms/step")
        print(f"  pinned / own choice: x{t_pin / t_own:.3f} per step "
              f"(rounds: {', '.join(f'{p / o:.3f}' for p, o in zip(pinned, own))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
