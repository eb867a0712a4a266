"""``train``: train the tiny attention model under several scaling rules side by side, headless.

No torch import at module top: ``main.py --help`` must stay instant.
"""

from __future__ import annotations

import argparse
import dataclasses
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

PROG = "attention-lab train"

#: config field -> (type, metavar); the option is --field-name, the help is FIELD_HELP
_OPTIONS: dict[str, tuple[Any, str | None]] = {
    "task": (str, None),
    "items_min": (int, "N"),
    "items_max": (int, "N"),
    "key_dim": (int, "D"),
    "noise": (float, "S"),
    "classes": (int, "C"),
    "pairs": (int, "P"),
    "positions": (str, None),
    "d_model": (int, "D"),
    "heads": (int, "H"),
    "d_k": (int, "D"),
    "layers": (int, "L"),
    "qk_init": (float, "G"),
    "param": (str, None),
    "width_axis": (str, None),
    "base_width": (int, "N"),
    "attn_mult": (float, "A"),
    "temperature": (float, "T"),
    "cosine_temperature": (float, "T"),
    "softcap": (float, "C"),
    "qk_clip_tau": (float, "TAU"),
    "optimizer": (str, None),
    "lr": (float, "LR"),
    "batch": (int, "B"),
    "steps": (int, "N"),
    "seed": (int, "S"),
    "device": (str, None),
    "warmup": (int, "N"),
    "decay": (str, None),
    "lr_floor": (float, "F"),
    "weight_decay": (float, "W"),
    "grad_clip": (float, "C"),
    "log_every": (int, "K"),
    "probe_size": (int, "N"),
    "hist_bins": (int, "N"),
    "hist_range": (float, "R"),
    "saturation_threshold": (float, "P"),
    "collapse_threshold": (float, "E"),
    "collapse_logs": (int, "N"),
    "eval_size": (int, "N"),
    "eval_every": (int, "K"),
}

TABLE = [("scaling", "rule"), ("accuracy", "accuracy"), ("probe_accuracy", "probe acc"),
         ("loss", "loss"), ("entropy_norm_mean", "H/log n"), ("logit_std", "logit std"),
         ("saturated_frac", "saturated"), ("jacobian_fro_mean", "|J|_F"),
         ("grad_norm_q", "|dW_Q|"), ("grad_norm_k", "|dW_K|"), ("status", "status")]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_training_options(p)
    p.add_argument("--out", metavar="DIR", type=path_arg,
                   help="write metrics.csv, metrics_heads.csv, histograms.npz, config.json, weights.pt")
    p.add_argument("--figures", action="store_true", help="also write PNG and SVG of every plot into --out")
    add_figure_style(p)
    add_force(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_training_options(p: argparse.ArgumentParser) -> None:
    """--preset, --scaling and one option per training field (shared with ``experiment``)."""
    from engine.training.config import FIELD_HELP, TRAINING_RULES

    p.add_argument("--preset", metavar="NAME",
                   help="start from a preset (demo, small_dk, qknorm_cosine, bugs, recall); "
                        "options given here override it (default: demo)")
    p.add_argument("--scaling", nargs="+", metavar="RULE", dest="scalings",
                   help=f"rules trained side by side: {', '.join(TRAINING_RULES)}")
    for name, (typ, metavar) in _OPTIONS.items():
        p.add_argument("--" + name.replace("_", "-"), type=typ, metavar=metavar, dest=name,
                       help=FIELD_HELP[name])
    p.add_argument("--eval-lengths", type=int, nargs="+", metavar="N", dest="eval_lengths",
                   help=FIELD_HELP["eval_lengths"])
    p.add_argument("--mlp", action=argparse.BooleanOptionalAction, default=None,
                   help="MLP after each attention layer")
    p.add_argument("--layernorm", action=argparse.BooleanOptionalAction, default=None,
                   help="pre-LayerNorm before attention (and MLP) and before the classifier")


def build_config(args: argparse.Namespace):  # -> TrainingConfig
    """Preset first, then every option given on the command line (ConfigError names the field)."""
    from engine.training.presets import DEFAULT_PRESET, preset

    base = preset(args.preset or DEFAULT_PRESET).config
    return base.replace(**config_changes(args))


def config_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The training fields given on the command line."""
    from engine.training.config import TrainingConfig

    names = {f.name for f in dataclasses.fields(TrainingConfig)}
    changes = {k: v for k, v in vars(args).items() if k in names and v is not None}
    for key in ("scalings", "eval_lengths"):
        if key in changes:
            changes[key] = tuple(changes[key])
    return changes


def run(args: argparse.Namespace) -> int:
    from engine.errors import ConfigError
    from engine.io import FIGURE_PATTERNS, check_output_dir
    from engine.training.export import RESULT_FILES

    if args.figures and not args.out:
        fail(PROG, "needs --out DIR to write the figures into", "figures")
    try:
        cfg = build_config(args)
        patterns = FIGURE_PATTERNS if args.figures else ()
        out = check_output_dir(args.out, RESULT_FILES, patterns,
                               args.force) if args.out is not None else None
        from engine.training.trainer import Trainer  # imports torch

        trainer = Trainer(cfg)
    except ConfigError as exc:
        fail(PROG, exc)

    bar = progress_bar(cfg.steps, "train", args.quiet, unit="step")
    start = time.perf_counter()
    snap = None
    try:
        for snap in trainer.iterate():
            bar.update(snap.step - bar.n)
    except KeyboardInterrupt:
        bar.close()
        sys.stderr.write("interrupted: nothing written\n")
        return 130
    bar.close()
    elapsed = time.perf_counter() - start
    assert snap is not None
    table = TABLE[:-1] + [(f"accuracy_len{n}", f"acc@{n}") for n in cfg.eval_lengths] + TABLE[-1:]
    print(format_table(_final_rows(snap, table), table))
    print(f"\n{len(snap.rules)} runs x {snap.step} of {cfg.steps} steps on {snap.device} "
          f"(d_model {cfg.d_model}, {cfg.heads} head(s) of d_k {cfg.head_dim}, "
          f"{cfg.layers} layer(s)); {elapsed:.1f} s, {snap.step / elapsed:.1f} steps/s")
    if out is not None:
        _write(args, out, patterns, trainer, snap, elapsed)
    return 0


def _write(args: argparse.Namespace, out: Any, patterns: tuple[str, ...], trainer: Any,
           snap: Any, elapsed: float) -> None:
    """The result files and (``--figures``) the figures into ``out``, all or none."""
    from engine.training.export import RESULT_FILES, write_training_outputs

    def write(folder: Any) -> list:
        paths = write_training_outputs(folder, trainer, snap, {"wall_s": elapsed})
        if args.figures:
            from ui.export.figure_writers import write_training_figures

            paths += write_training_figures(snap, folder, style=args.figure_style)
        return paths

    paths = write_all_or_none(PROG, out, RESULT_FILES, patterns, write)
    print(f"wrote {', '.join(p.name for p in paths)} to {out}")


def _final_rows(snap, table: list[tuple[str, str]] = TABLE) -> list[dict[str, Any]]:
    rows = []
    by_rule = {}
    for row in snap.metrics_rows():
        by_rule[row["scaling"]] = row
    for r, rule in enumerate(snap.rules):
        row = dict(by_rule.get(rule, {"scaling": rule}))
        for key, _ in table:
            row.setdefault(key, "-")
        div = int(snap.diverged_step[r])
        row["status"] = f"diverged at step {div}" if div >= 0 else "ok"
        rows.append(row)
    return rows

