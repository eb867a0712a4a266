"""Speed and memory of the simulation engine, as ratios measured in one run (the machine is
shared and noisy: compare within a run, not across runs). Run: python bench/bench_simulation.py"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import SimulationConfig  # noqa: E402
from engine.sampling import ScoreSampler  # noqa: E402
from engine.simulate import run_simulation  # noqa: E402
from engine.softmax import jacobian, row_metrics, softmax  # noqa: E402


def best_of(fn, repeats: int = 5) -> float:
    """Minimum wall time of ``repeats`` calls (the least disturbed measurement)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def exact_cost_vs_d_k(backend: str) -> dict[str, float]:
    base = dict(n_keys=64, trials=200_000, scalings=("none", "sqrt"), method="exact", backend=backend)
    t4 = best_of(lambda: run_simulation(SimulationConfig(d_k=4, **base)), 3)
    t4096 = best_of(lambda: run_simulation(SimulationConfig(d_k=4096, **base)), 3)
    return {"exact_t_d4_s": t4, "exact_t_d4096_s": t4096, "exact_ratio_d4096_over_d4": t4096 / t4}


def explicit_vs_drawing(backend: str) -> dict[str, float]:
    """Whole explicit sampling (draw + dot products) against merely drawing the same numbers."""
    cfg = SimulationConfig(d_k=512, n_keys=64, trials=2000, scalings=("sqrt",), method="explicit",
                           backend=backend, device="cpu" if backend == "torch" else "auto")
    per_trial = cfg.d_k * (cfg.n_keys + 1)
    values = cfg.trials * per_trial

    def sample_all() -> None:
        s = ScoreSampler(cfg, backend, "cpu", "explicit")
        for size in s.plan.sizes(cfg.trials):
            s.draw(size)

    def draw_only() -> None:
        s = ScoreSampler(cfg, backend, "cpu", "explicit")
        for size in s.plan.sizes(cfg.trials):
            s.ops.standardized("gaussian", (size * per_trial,))

    t_sample = best_of(sample_all, 3)
    t_draw = best_of(draw_only, 3)
    full = best_of(lambda: run_simulation(cfg), 3)
    return {"explicit_values": values, "explicit_sampling_s": t_sample, "drawing_only_s": t_draw,
            "explicit_throughput_over_drawing": t_draw / t_sample,
            "explicit_full_run_s": full, "explicit_full_throughput_over_drawing": t_draw / full}


def jacobian_size_speed() -> dict[str, float]:
    rng = np.random.default_rng(0)
    s = rng.normal(scale=4, size=(64, 1024))
    t_fast = best_of(lambda: row_metrics(s).jacobian_fro, 5)
    t_matrix = best_of(lambda: np.linalg.norm(jacobian(softmax(s)), axis=(-2, -1)), 3)
    np.testing.assert_allclose(row_metrics(s).jacobian_fro,
                               np.linalg.norm(jacobian(softmax(s)), axis=(-2, -1)), rtol=1e-9)
    return {"jac_n1024_on_s": t_fast, "jac_n1024_matrix_s": t_matrix,
            "jac_speedup_vs_matrix": t_matrix / t_fast}


def default_interactive_case() -> dict[str, float]:
    out = {}
    for d in (4, 64, 512):
        cfg = SimulationConfig(d_k=d, n_keys=8, trials=4000, scalings=("none", "sqrt"))
        out[f"default_d{d}_ms"] = 1000 * best_of(lambda cfg=cfg: run_simulation(cfg), 5)
    return out


PEAK_CODE = """
import sys
sys.path.insert(0, {root!r})
from engine.config import SimulationConfig
from engine.simulate import run_simulation

def hwm_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

with open("/proc/self/clear_refs", "w") as fh:  # reset the peak (a forked child inherits it)
    fh.write("5")
base = hwm_mib()
run_simulation(SimulationConfig(d_k={d_k}, n_keys={n}, trials={t}, method="explicit",
                                scalings=("none", "sqrt", "cosine", "qknorm")))
print(hwm_mib(), base)
"""


def peak_memory() -> dict[str, float]:
    out = {}
    for d_k, n, t in ((2048, 2048, 64), (65_536, 64, 4), (8, 65_536, 64)):
        code = PEAK_CODE.format(root=str(ROOT), d_k=d_k, n=n, t=t)
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        peak, base = map(float, res.stdout.split())
        out[f"peak_MiB_explicit_d{d_k}_n{n}_t{t}"] = peak
        out["import_baseline_MiB"] = base
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="numpy", choices=("numpy", "torch"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, float] = {}
    for part in (lambda: exact_cost_vs_d_k(args.backend), lambda: explicit_vs_drawing(args.backend),
                 jacobian_size_speed, default_interactive_case, peak_memory):
        results.update(part())
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"backend {args.backend}")
    print(f"exact method, time at d_k=4096 / time at d_k=4:      {results['exact_ratio_d4096_over_d4']:.2f}x  (target <= 3)")
    print(f"explicit sampling throughput / drawing alone:         {results['explicit_throughput_over_drawing']:.2f}   (target >= 0.5)")
    print(f"  whole run incl. statistics / drawing alone:         {results['explicit_full_throughput_over_drawing']:.2f}")
    print(f"Jacobian size n=1024: O(n) vs n x n matrix speed-up:   {results['jac_speedup_vs_matrix']:.0f}x (target >= 20)")
    for k, v in results.items():
        if k.startswith("peak_MiB"):
            print(f"{k}: {v:.0f} MiB (target < 1024)")
    for d in (4, 64, 512):
        print(f"default case (4000 trials, 8 keys, 2 rules) d_k={d}: {results[f'default_d{d}_ms']:.1f} ms (target << 100)")


if __name__ == "__main__":
    main()
