"""``experiment``: a grid of training runs (a built-in experiment, or a preset + --axis lists),
run in parallel, summarised with uncertainty, written to --out.

No torch import at module top: ``main.py --help`` must stay instant.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ui.cli.common import (
    add_figure_style,
    add_force,
    fail,
    format_table,
    path_arg,
    progress_bar,
    require_out,
)

PROG = "attention-lab experiment"

TABLE = [("rule", "rule"), ("point", "axes"), ("n", "runs"), ("success", "reached target"),
         ("median_steps", "median steps"), ("final_loss", "final loss"),
         ("max_logit_abs", "max |logit|"), ("diverged", "diverged")]


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ui.cli.train import add_training_options

    p.add_argument("name", nargs="?", metavar="NAME",
                   help="a built-in experiment (see --list); without it, the grid is --preset "
                        "and the training options with --axis lists")
    p.add_argument("--list", action="store_true", help="name the built-in experiments and stop")
    add_training_options(p)
    p.add_argument("--axis", action="append", default=[], metavar="FIELD=V1,V2,...",
                   help="a training field and its values (repeat for a grid: the product); "
                        "e.g. --axis lr=1e-3,1e-2 --axis seed=0,1,2")
    p.add_argument("--target", type=float, metavar="ACC",
                   help="training accuracy a run must reach to count as a success (default 0.9)")
    p.add_argument("--out", metavar="DIR", type=path_arg,
                   help="write experiment.json, jobs/, summary.csv, points.csv, metrics.csv here")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes, one job each (default: the number of cores)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the jobs on a Dask cluster (tcp://host:8786; needs the 'cluster' extra)")
    p.add_argument("--resume", action="store_true",
                   help="continue the experiment in --out: skip its finished jobs (alone: rerun "
                        "the experiment saved there)")
    p.add_argument("--figures", action="store_true", help="also write PNG and SVG of the figures")
    add_figure_style(p)
    add_force(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_spec(args: argparse.Namespace):  # -> ExperimentSpec
    """The experiment from the arguments (ConfigError names what is wrong)."""
    from engine.experiments.builtin import builtin
    from engine.experiments.runner import load_experiment
    from engine.experiments.spec import Axis, ExperimentSpec, FigureSpec, VerdictSpec
    from ui.cli.train import config_changes

    changes = config_changes(args)
    axes = [Axis.parse(text) for text in args.axis]
    if args.name:
        spec = builtin(args.name)
    elif args.resume and not changes and not axes and args.preset is None:
        spec = load_experiment(args.out)
    else:
        from engine.training.presets import DEFAULT_PRESET, preset

        base = preset(args.preset or DEFAULT_PRESET).config
        spec = ExperimentSpec("custom", base, title="Custom experiment")
    base = spec.base.replace(**changes) if changes else spec.base
    merged = [a for a in spec.axes if a.field not in {b.field for b in axes}] + axes
    figures, verdict = spec.figures, spec.verdict
    if not args.name and axes:
        figures, verdict = default_figures(merged, FigureSpec, VerdictSpec)
        if base.eval_lengths:  # evaluated at other lengths: show it
            figures += (FigureSpec("vs_length", "accuracy", "Accuracy vs set size after training",
                                   x_log=True),)
    return ExperimentSpec(spec.name, base, tuple(merged), spec.title, spec.description,
                          args.target if args.target is not None else spec.target, figures,
                          verdict)


def default_figures(axes, figure_cls, verdict_cls):
    """A custom grid: success per rule, then final loss and success vs each non-seed axis, and
    the accuracy curves; the verdict compares the ends of the first non-seed axis."""
    others = [a.field for a in axes if a.field != "seed"]
    figs = [figure_cls("by_rule", "success", "Runs that reach the target")]
    for name in others:
        log = name in ("lr", "d_k", "d_model", "heads", "weight_decay", "qk_init", "batch")
        figs.append(figure_cls("vs_axis", "final_loss", f"Final loss vs {name}", x=name, x_log=log))
        figs.append(figure_cls("vs_axis", "success", f"Runs that reach the target vs {name}",
                               x=name, x_log=log))
    figs.append(figure_cls("vs_step", "accuracy", "Training accuracy",
                           x=others[0] if others else ""))
    verdict = (verdict_cls("ends_of_axis", "success", others[0]) if others
               else verdict_cls("by_rule", "success"))
    return tuple(figs), verdict


def run(args: argparse.Namespace) -> int:
    from engine.errors import ConfigError

    if args.list:
        return _list_builtins()
    require_out(PROG, args)
    try:
        spec = build_spec(args)
        from engine.experiments.runner import run_experiment

        _refuse_figure_overwrite(args)
        progress = run_experiment(spec, args.out, workers=args.workers, resume=args.resume,
                                  scheduler=args.scheduler, force=args.force)
        first = next(progress)  # validates workers, --out and --resume before any job runs
    except ConfigError as exc:
        fail(PROG, exc)
    except OSError as exc:
        fail(PROG, f"cannot write to {args.out!r}: {exc.strerror or exc}", "out")

    if first.ignored:
        sys.stderr.write(f"{len(first.ignored)} job file(s) in {args.out}/jobs not taken, "
                         f"rerun instead ({first.ignored[0]}"
                         f"{', ...' if len(first.ignored) > 1 else ''})\n")
    bar = progress_bar(first.total, spec.name, args.quiet, unit="job", unit_scale=False)
    last = first
    try:
        bar.update(first.done - bar.n)
        for last in progress:
            bar.update(last.done - bar.n)
            running = (f"{len(last.job_progress)} running at "
                       f"{100 * sum(last.job_progress.values()) / len(last.job_progress):.0f} %"
                       if last.job_progress else f"{last.running} running")
            bar.set_postfix_str(f"{running}, {last.failed} failed", refresh=False)
    except KeyboardInterrupt:
        progress.close()
        bar.close()
        sys.stderr.write(f"interrupted: finished jobs are kept in {args.out}/jobs; run again "
                         "with --resume to continue\n")
        return 130
    bar.close()
    _report(spec, last)
    if args.figures:
        _write_figures(spec, last, args.figure_style)
    return 0


def _write_figures(spec: Any, last: Any, style: str) -> None:
    """PNG, SVG and CSV of every figure into the run's folder; the experiment and its folder go
    into each figure, so File -> Open in the app reopens the run."""
    from pathlib import Path

    from engine.experiments.figures import figure_data
    from ui.export.experiment_figures import write_experiment_figures

    source = {"experiment": spec.to_dict(), "folder": str(Path(last.out_dir).resolve())}
    paths = write_experiment_figures(figure_data(spec, last.results), last.out_dir, style=style,
                                     source=source)
    print(f"wrote {len(paths)} figure files to {last.out_dir}")


def _list_builtins() -> int:
    """``--list``: the built-in experiments (a broken bundled file: which, and what is wrong)."""
    from engine.errors import ConfigError
    from engine.experiments.builtin import load_builtins

    try:
        builtins = load_builtins()
    except ConfigError as exc:
        fail(PROG, exc)
    for name, spec in builtins.items():
        print(f"{name:14s} {len(spec.jobs()):3d} jobs  {spec.title}")
    return 0


def _refuse_figure_overwrite(args: argparse.Namespace) -> None:
    """--figures into a folder that is not an experiment's yet: its PNG, SVG and CSV files
    would be replaced (WouldOverwrite unless --force); an experiment's own are redrawn."""
    from pathlib import Path

    from engine.errors import WouldOverwrite
    from engine.experiments.runner import EXPERIMENT_FILE
    from engine.io import FIGURE_PATTERNS, files_in_the_way

    if not args.figures or args.force or (Path(args.out) / EXPERIMENT_FILE).exists():
        return
    hits = files_in_the_way(args.out, (), (*FIGURE_PATTERNS, "*.csv"))
    if hits:
        raise WouldOverwrite(args.out, hits)


def _report(spec: Any, last: Any) -> None:
    from engine.experiments.figures import verdict
    from engine.experiments.summary import group_results

    rows = []
    for g in group_results(spec, last.results):
        st = g.stats
        fl = g.means["final_loss"]
        ml = g.means["max_logit_abs"]
        rows.append({
            "rule": g.rule, "point": g.label() or "-", "n": st.n,
            "success": f"{st.successes}/{st.n} [{st.rate_lo:.2f}, {st.rate_hi:.2f}]",
            "median_steps": "-" if st.median_steps is None else f"{st.median_steps:g}",
            "final_loss": "-" if fl[0] != fl[0] else f"{fl[0]:.3g} ± {fl[1]:.2g}",
            "max_logit_abs": "-" if ml[0] != ml[0] else f"{ml[0]:.3g} ± {ml[1]:.2g}",
            "diverged": g.diverged})
    print(format_table(rows, TABLE))
    state = "cancelled" if last.cancelled else "done"
    print(f"\n{spec.name}: {last.done} of {last.total} jobs {state} ({last.failed} failed, "
          f"{last.resumed} from an earlier run) in {last.elapsed_s:.1f} s on {last.workers} "
          f"{last.executor} worker(s)")
    print(f"verdict: {verdict(spec, last.results)}")
    print(f"wrote experiment.json, summary.csv, points.csv, metrics.csv, jobs/ to {last.out_dir}")
