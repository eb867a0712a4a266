"""``simulate``: the Monte-Carlo experiment over d_k values and scaling rules, headless."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ui.cli.common import (
    add_figure_style,
    add_force,
    fail,
    format_table,
    path_arg,
    progress_bar,
    write_all_or_none,
)

#: the value of an option neither given nor set by ``--preset``
DEFAULTS = dict(d_k=[4, 64, 512], keys=[8], trials=4000, scaling=["none", "sqrt", "dk"],
                dist="gaussian", q_mean=0.0, q_std=1.0, k_mean=0.0, k_std=1.0, correlation=0.0,
                temperature=1.0, saturation_threshold=0.99)
#: a simulation preset's config field -> the option it sets (a list option takes [value])
PRESET_OPTIONS = {"d_k": "d_k", "n_keys": "keys", "trials": "trials", "scalings": "scaling",
                  "dist": "dist", "q_mean": "q_mean", "q_std": "q_std", "k_mean": "k_mean",
                  "k_std": "k_std", "correlation": "correlation", "temperature": "temperature",
                  "saturation_threshold": "saturation_threshold"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from engine.config import BACKENDS, DEVICES, DISTRIBUTIONS, DTYPES, METHODS, RULES

    p.add_argument("--d-k", type=int, nargs="+", default=None, metavar="D",
                   help="head width(s) d_k, 1..65536 (default: 4 64 512)")
    p.add_argument("--keys", type=int, nargs="+", default=None, metavar="N",
                   help="keys per query n, 2..65536; several values sweep the length "
                        "(e.g. 8 64 512 4096 65536; default: 8)")
    p.add_argument("--trials", type=int, default=None, metavar="T",
                   help="independent queries per d_k, 1..10,000,000 (default: 4000)")
    p.add_argument("--scaling", nargs="+", default=None, metavar="RULE",
                   help=f"rules to compare on the same draws: {', '.join(RULES)} (default: none sqrt dk)")
    p.add_argument("--preset", metavar="NAME",
                   help="start from a simulation preset (default, variance, saturation, "
                        "correlated, cosine, many_keys: the window's Presets menu); options given "
                        "too override its values")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--dist", default=None, help=f"entry distribution: {', '.join(DISTRIBUTIONS)}")
    p.add_argument("--q-mean", type=float, default=None, help="mean of query entries")
    p.add_argument("--q-std", type=float, default=None, help="std of query entries (> 0)")
    p.add_argument("--k-mean", type=float, default=None, help="mean of key entries")
    p.add_argument("--k-std", type=float, default=None, help="std of key entries (> 0)")
    p.add_argument("--correlation", type=float, default=None,
                   help="correlation rho in [-1, 1] between the query and key 0 (the target key)")
    p.add_argument("--temperature", type=float, default=None,
                   help="T for the temperature and cosine rules (default: 1)")
    _add_rule_parameters(p)
    p.add_argument("--saturation-threshold", type=float, default=None,
                   help="a row is saturated when its top weight exceeds this (default: 0.99)")
    p.add_argument("--backend", default="auto", help=f"{', '.join(BACKENDS)} (auto: torch on CUDA if present, else numpy)")
    p.add_argument("--device", default="auto", help=f"{', '.join(DEVICES)}")
    p.add_argument("--dtype", default="float64", help=f"{', '.join(DTYPES)}")
    p.add_argument("--method", default="auto",
                   help=f"{', '.join(METHODS)} (exact: sample scores directly, Gaussian only)")
    p.add_argument("--out", metavar="DIR", type=path_arg, help="write summary.csv, histograms.npz, config.json here")
    p.add_argument("--figures", action="store_true", help="also write PNG and SVG of every plot into --out: one set per point "
                   "(d64_scores.png, ...; with several --keys d64_n8_scores.png, ...) and the "
                   "sweep (sweep.png)")
    add_figure_style(p)
    add_force(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_rule_parameters(p: argparse.ArgumentParser) -> None:
    """The options of the rules that take a parameter (n_ref, yarn's s, ssmax's s, the cap, the
    sink's logit)."""
    from engine.rules import (
        N_REF_DEFAULT,
        SINK_DEFAULT,
        SOFTCAP_DEFAULT,
        SSMAX_S_DEFAULT,
        YARN_S_DEFAULT,
    )

    p.add_argument("--n-ref", type=int, default=N_REF_DEFAULT, metavar="N",
                   help="reference length of the logn and yarn_dynamic rules (both equal sqrt up "
                        f"to it; default: {N_REF_DEFAULT})")
    p.add_argument("--yarn-s", type=float, default=YARN_S_DEFAULT, metavar="S",
                   help="context-extension factor s of the yarn rule: every logit times "
                        f"(0.1 ln s + 1)^2 (default: {YARN_S_DEFAULT:g})")
    p.add_argument("--ssmax-s", type=float, default=SSMAX_S_DEFAULT, metavar="S",
                   help=f"s of the ssmax rule: logits = s ln(n) q.k/sqrt(d_k) (default: {SSMAX_S_DEFAULT})")
    p.add_argument("--softcap", type=float, default=SOFTCAP_DEFAULT, metavar="C",
                   help="c of the softcap rule: logits = c tanh(q.k/sqrt(d_k)/c) (default: "
                        f"{SOFTCAP_DEFAULT:g}, Gemma 2's)")
    p.add_argument("--sink", type=float, default=SINK_DEFAULT, metavar="S",
                   help="logit of the sink rule's extra softmax entry, its weight dropped "
                        f"(default: {SINK_DEFAULT:g} = softmax plus one)")


def resolve_options(args: argparse.Namespace) -> None:
    """Fill each option left unset: from ``--preset`` where it sets that field, else from
    DEFAULTS (an unknown preset is a ConfigError on ``preset``)."""
    from engine.errors import ConfigError

    chosen: dict = {}
    if getattr(args, "preset", None):
        from engine.simulation_presets import preset_config

        for field, value in preset_config(args.preset).items():
            option = PRESET_OPTIONS.get(field)
            if option is None:  # a field the window has but no option of this command sets
                raise ConfigError("preset", f"{args.preset}: sets {field}, which simulate "
                                  "cannot take")
            chosen[option] = [value] if isinstance(DEFAULTS[option], list) and not isinstance(
                value, list) else value
    for option, default in DEFAULTS.items():
        if getattr(args, option, None) is None:
            setattr(args, option, chosen.get(option, default))


def build_configs(args: argparse.Namespace):  # -> list[SweepConfig]
    """Turn arguments into the engine's validated sweeps (ConfigError names the field): one
    sweep along n when one d_k and several --keys are given, else one d_k sweep per key count."""
    from engine.config import SimulationConfig, SweepConfig

    resolve_options(args)

    base = SimulationConfig(
        d_k=args.d_k[0], n_keys=args.keys[0], trials=args.trials, seed=args.seed, dist=args.dist,
        q_mean=args.q_mean, q_std=args.q_std, k_mean=args.k_mean, k_std=args.k_std,
        correlation=args.correlation, scalings=tuple(args.scaling), temperature=args.temperature,
        saturation_threshold=args.saturation_threshold, backend=args.backend, device=args.device,
        dtype=args.dtype, method=args.method, n_ref=args.n_ref, ssmax_s=args.ssmax_s, yarn_s=args.yarn_s,
        softcap=args.softcap, sink=args.sink,
    )
    if len(args.d_k) == 1 and len(args.keys) > 1:
        return [SweepConfig(base=base, d_ks=tuple(args.d_k), axis="n_keys",
                            n_keys_values=tuple(args.keys))]
    SweepConfig(base=base, n_keys_values=tuple(args.keys))  # validates the list of n
    return [SweepConfig(base=base.replace(n_keys=n), d_ks=tuple(args.d_k)) for n in args.keys]


TABLE = [("d_k", "d_k"), ("n_keys", "n"), ("scaling", "rule"), ("raw_score_var", "Var(q.k)"),
         ("logit_var", "Var(logit)"), ("top_weight_mean", "top weight"), ("top_weight_se", "±se"),
         ("saturated_frac", "saturated"), ("entropy_norm_mean", "H/log n"),
         ("jacobian_fro_mean", "|J|_F"), ("jacobian_fro_se", "±se"),
         ("jacobian_max_abs_mean", "max|J_ij|"), ("sink_weight_mean", "sink w"),
         ("key_mass_mean", "sum p")]


def run(args: argparse.Namespace) -> int:
    from engine.errors import ConfigError
    from engine.export import SIMULATION_FILES
    from engine.io import check_output_dir
    from engine.sampling import resolve_backend

    prog = "attention-lab simulate"
    if args.figures and not args.out:
        fail(prog, "needs --out DIR to write the figures into", "figures")
    try:
        sweeps = build_configs(args)
        for sweep_cfg in sweeps:
            for value in sweep_cfg.values:  # validates every point (e.g. the exact method's conditions)
                resolve_backend(sweep_cfg.point(value))
        out = check_output_dir(args.out, SIMULATION_FILES, _patterns(args),
                               args.force) if args.out is not None else None
    except ConfigError as exc:
        fail(prog, exc)
    return _run_sweeps(args, prog, sweeps, out)


def _run_sweeps(args: argparse.Namespace, prog: str, sweeps: list, out: Any) -> int:
    """Run the validated sweeps with a progress bar, print the table, write the outputs."""
    from engine.errors import Cancelled, ConfigError
    from engine.simulate import sweep

    total = sum(s.base.trials * len(s.values) for s in sweeps)
    bar = progress_bar(total, "simulate", args.quiet)
    done = {"n": 0}

    def on_snapshot(snap) -> None:
        bar.update(snap.trials_done - done["n"])
        done["n"] = 0 if snap.done else snap.trials_done

    start = time.perf_counter()
    snapshots = []
    points = []
    try:
        for sweep_cfg in sweeps:
            for point in sweep(sweep_cfg, on_snapshot=on_snapshot):
                snapshots.append(point.snapshot)
                points.append(point)
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
    table = TABLE + ([("target_weight_mean", "target w"), ("target_weight_se", "±se")]
                     if args.correlation != 0.0 else [])
    print(format_table(rows, table))
    if args.correlation != 0.0 and any(r.get("target_weight_mean") == "" for r in rows):
        print("(a blank target weight: not estimable from these trials, under 100 or fewer than "
              "10 carrying the mean; run more trials)")
    first = snapshots[0]
    keys = ", ".join(str(n) for n in args.keys)
    print(f"\n{first.config.trials:,} trials per point, n = {keys} keys; method "
          f"{first.method}, backend {first.backend} ({first.device}, {first.config.dtype}); "
          f"{elapsed:.2f} s")
    if out is not None:
        _write_outputs(args, prog, out, snapshots, points)
    return 0


def _patterns(args: argparse.Namespace) -> tuple[str, ...]:
    from engine.io import FIGURE_PATTERNS

    return FIGURE_PATTERNS if args.figures else ()


def _write_outputs(args: argparse.Namespace, prog: str, out: Any, snapshots: list, points: list
                   ) -> None:
    """summary.csv, histograms.npz, config.json and (``--figures``) the figures into ``out``,
    all or none (an earlier run's files there stay until the new set is complete)."""
    from engine.export import SIMULATION_FILES, write_simulation_outputs

    def write(folder: Any) -> list:
        paths = write_simulation_outputs(folder, snapshots, {"command": "simulate"})
        if args.figures:
            from ui.export.figure_writers import write_sweep_figure_sets

            # one figure set per point; the sweep figure shows one curve per rule along one
            # axis: the last sweep (with several d_k and several n, the d_k sweep at the last n)
            last = [p for p in points if p.snapshot.config.n_keys == points[-1].snapshot.config.n_keys
                    ] if points[-1].axis == "d_k" else points
            paths += write_sweep_figure_sets(points, folder, sweep_points=last,
                                             style=args.figure_style)
        return paths

    paths = write_all_or_none(prog, out, SIMULATION_FILES, _patterns(args), write)
    print(f"wrote {', '.join(p.name for p in paths)} to {out}")
