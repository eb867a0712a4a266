"""``simulate``: the Monte-Carlo experiment over d_k values and scaling rules, headless."""

from __future__ import annotations

import argparse
import sys
import time

from ui.cli.common import fail, format_table, progress_bar

DEFAULTS = dict(d_k=[4, 64, 512], keys=8, trials=4000, scaling=["none", "sqrt", "dk"])


def add_arguments(p: argparse.ArgumentParser) -> None:
    from engine.config import BACKENDS, DEVICES, DISTRIBUTIONS, DTYPES, METHODS, RULES

    p.add_argument("--d-k", type=int, nargs="+", default=DEFAULTS["d_k"], metavar="D",
                   help="head width(s) d_k, 1..65536 (default: 4 64 512)")
    p.add_argument("--keys", type=int, default=DEFAULTS["keys"], metavar="N",
                   help="keys per query, 2..65536 (default: 8)")
    p.add_argument("--trials", type=int, default=DEFAULTS["trials"], metavar="T",
                   help="independent queries per d_k, 1..10,000,000 (default: 4000)")
    p.add_argument("--scaling", nargs="+", default=DEFAULTS["scaling"], metavar="RULE",
                   help=f"rules to compare on the same draws: {', '.join(RULES)} (default: none sqrt dk)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--dist", default="gaussian", help=f"entry distribution: {', '.join(DISTRIBUTIONS)}")
    p.add_argument("--q-mean", type=float, default=0.0, help="mean of query entries")
    p.add_argument("--q-std", type=float, default=1.0, help="std of query entries (> 0)")
    p.add_argument("--k-mean", type=float, default=0.0, help="mean of key entries")
    p.add_argument("--k-std", type=float, default=1.0, help="std of key entries (> 0)")
    p.add_argument("--correlation", type=float, default=0.0,
                   help="correlation rho in [-1, 1] between the query and key 0 (the target key)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="T for the temperature and cosine rules (default: 1)")
    p.add_argument("--saturation-threshold", type=float, default=0.99,
                   help="a row is saturated when its top weight exceeds this (default: 0.99)")
    p.add_argument("--backend", default="auto", help=f"{', '.join(BACKENDS)} (auto: torch on CUDA if present, else numpy)")
    p.add_argument("--device", default="auto", help=f"{', '.join(DEVICES)}")
    p.add_argument("--dtype", default="float64", help=f"{', '.join(DTYPES)}")
    p.add_argument("--method", default="auto",
                   help=f"{', '.join(METHODS)} (exact: sample scores directly, Gaussian only)")
    p.add_argument("--out", metavar="DIR", help="write summary.csv, histograms.npz, config.json here")
    p.add_argument("--figures", action="store_true", help="also write PNG and SVG of every plot into --out: one set per d_k "
                   "(d64_scores.png, ...) and the sweep (sweep.png)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_configs(args: argparse.Namespace):  # -> SweepConfig
    """Turn arguments into the engine's validated config (ConfigError names the field)."""
    from engine.config import SimulationConfig, SweepConfig

    base = SimulationConfig(
        d_k=args.d_k[0], n_keys=args.keys, trials=args.trials, seed=args.seed, dist=args.dist,
        q_mean=args.q_mean, q_std=args.q_std, k_mean=args.k_mean, k_std=args.k_std,
        correlation=args.correlation, scalings=tuple(args.scaling), temperature=args.temperature,
        saturation_threshold=args.saturation_threshold, backend=args.backend, device=args.device,
        dtype=args.dtype, method=args.method,
    )
    return SweepConfig(base=base, d_ks=tuple(args.d_k))


TABLE = [("d_k", "d_k"), ("scaling", "rule"), ("raw_score_var", "Var(q.k)"),
         ("logit_var", "Var(logit)"), ("top_weight_mean", "top weight"), ("top_weight_se", "±se"),
         ("saturated_frac", "saturated"), ("entropy_norm_mean", "H/log n"),
         ("jacobian_fro_mean", "|J|_F"), ("jacobian_fro_se", "±se"),
         ("jacobian_max_abs_mean", "max|J_ij|")]


def run(args: argparse.Namespace) -> int:
    from engine.errors import Cancelled, ConfigError
    from engine.export import write_simulation_outputs
    from engine.io import ensure_writable_dir
    from engine.sampling import resolve_backend
    from engine.simulate import sweep

    prog = "attention-lab simulate"
    if args.figures and not args.out:
        fail(prog, "needs --out DIR to write the figures into", "figures")
    try:
        sweep_cfg = build_configs(args)
        for d_k in sweep_cfg.d_ks:  # validates every point (e.g. the exact method's conditions)
            resolve_backend(sweep_cfg.point(d_k))
        out = ensure_writable_dir(args.out) if args.out else None
    except ConfigError as exc:
        fail(prog, exc)

    bar = progress_bar(sweep_cfg.base.trials * len(sweep_cfg.d_ks), "simulate", args.quiet)
    done = {"n": 0}

    def on_snapshot(snap) -> None:
        bar.update(snap.trials_done - done["n"])
        done["n"] = 0 if snap.done else snap.trials_done

    start = time.perf_counter()
    snapshots = []
    try:
        for point in sweep(sweep_cfg, on_snapshot=on_snapshot):
            snapshots.append(point.snapshot)
    except ConfigError as exc:
        bar.close()
        fail(prog, exc)
    except (KeyboardInterrupt, Cancelled):
        bar.close()
        sys.stderr.write("interrupted: nothing written\n")
        return 130
    bar.close()
    elapsed = time.perf_counter() - start

    from engine.export import summary_rows

    rows = summary_rows(snapshots)
    print(format_table(rows, TABLE))
    first = snapshots[0]
    print(f"\n{first.config.trials:,} trials x {first.config.n_keys} keys per d_k; method "
          f"{first.method}, backend {first.backend} ({first.device}, {first.config.dtype}); "
          f"{elapsed:.2f} s")
    if out is not None:
        try:
            paths = write_simulation_outputs(out, snapshots, {"command": "simulate"})
            if args.figures:
                from ui.figures import write_sweep_figure_sets

                paths += write_sweep_figure_sets(snapshots, out)
        except OSError as exc:
            fail(prog, f"cannot write to {str(out)!r}: {exc.strerror or exc}", "out")
        print(f"wrote {', '.join(p.name for p in paths)} to {out}")
    return 0
