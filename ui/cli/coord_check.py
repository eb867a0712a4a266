"""``coord-check``: mean |activation| of every layer kind over the first training steps at several
widths, under the standard parametrization and under muP (engine.training.coord_check).

No torch import at module top: ``main.py --help`` must stay instant.
"""

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
    require_out,
    write_all_or_none,
)

PROG = "attention-lab coord-check"
#: the files coord-check writes into --out (with --figures also PNG and SVG files)
FILES = ("coord.csv", "slopes.csv", "config.json")
TABLE = [("param", "param"), ("scaling", "rule"), ("kind", "kind"), ("step", "step"),
         ("slope", "slope ± SE"), ("seeds", "seeds")]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--param", nargs="+", metavar="P", dest="params", default=["sp", "mup"],
                   help="parametrizations: sp, mup (default: both)")
    p.add_argument("--widths", nargs="+", type=int, metavar="N",
                   default=[64, 128, 256, 512, 1024],
                   help="widths (d_model, or d_k with --width-axis d_k); default 64 ... 1024")
    p.add_argument("--width-axis", choices=("d_model", "d_k"), default="d_model",
                   help="the width is d_model with 2 heads (d_k grows with it) or d_k with "
                        "d_model 64 (default d_model)")
    p.add_argument("--steps", type=int, default=3, metavar="N",
                   help="Adam updates; activations are measured before the first and after "
                        "each (default 3)")
    p.add_argument("--seeds", type=int, default=3, metavar="N",
                   help="seeds 0 .. N-1 per point; slopes are mean ± SE over them (default 3)")
    p.add_argument("--lr", type=float, default=0.01, metavar="LR",
                   help="Adam's learning rate, constant (default 0.01)")
    p.add_argument("--scaling", metavar="RULE", default="",
                   help="one attention rule for every param (default: each its own, sp: sqrt, "
                        "mup: dk)")
    p.add_argument("--base-width", type=int, default=0, metavar="N",
                   help="muP's base width (default: the narrowest of --widths)")
    p.add_argument("--out", metavar="DIR", type=path_arg,
                   help="write coord.csv, slopes.csv and config.json here (required)")
    p.add_argument("--figures", action="store_true",
                   help="also write one PNG and SVG per param: mean |activation| vs width, "
                        "log-log, a line per kind and step")
    add_figure_style(p)
    add_force(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_config(args: argparse.Namespace):  # -> CoordCheckConfig
    from engine.training.coord_check import CoordCheckConfig

    return CoordCheckConfig(params=tuple(args.params), widths=tuple(args.widths),
                            width_axis=args.width_axis, steps=args.steps, seeds=args.seeds,
                            lr=args.lr, scaling=args.scaling, base_width=args.base_width)


def run(args: argparse.Namespace) -> int:
    from engine.errors import ConfigError
    from engine.io import FIGURE_PATTERNS, check_output_dir

    require_out(PROG, args)
    try:
        cfg = build_config(args)
        figures = [f"coord_{p}.csv" for p in cfg.params] if args.figures else []
        names = [*FILES, *figures]
        patterns = FIGURE_PATTERNS if args.figures else ()
        out = check_output_dir(args.out, names, patterns, args.force)
    except ConfigError as exc:
        fail(PROG, _option(exc))
    from engine.training.coord_check import run_coord_check

    bar = progress_bar(len(cfg.points()), "coord-check", args.quiet, unit="point",
                       unit_scale=False)
    start = time.perf_counter()
    last = None
    try:
        for last in run_coord_check(cfg):
            bar.update(last.done - bar.n)
    except KeyboardInterrupt:
        bar.close()
        sys.stderr.write("interrupted: nothing written\n")
        return 130
    bar.close()
    rows = list(last.rows) if last is not None else []
    seconds = time.perf_counter() - start

    def write(folder: Any) -> list:
        paths = _write(cfg, rows, folder, seconds)
        if args.figures:
            from engine.training.coord_check import figure_data
            from ui.export.experiment_figures import write_experiment_figures

            paths += write_experiment_figures(figure_data(cfg, rows), folder,
                                              style=args.figure_style)
        return paths

    paths = write_all_or_none(PROG, out, names, patterns, write)
    print(f"wrote {', '.join(p.name for p in paths[:3])} to {out}")
    if args.figures:
        print(f"wrote {len(paths) - 3} figure files to {out}")
    return 0


def _option(exc: Any) -> Any:
    """The config's field names -> this command's options (params -> --param)."""
    from engine.errors import ConfigError

    names = {"params": "param", "param": "param", "widths": "widths"}
    return ConfigError(names.get(exc.field, exc.field), exc.message)


def _write(cfg: Any, rows: list[dict[str, Any]], out: Any, seconds: float) -> list:
    """coord.csv, slopes.csv and config.json into ``out`` (the paths); the table printed."""
    from engine.io import package_versions, write_csv, write_json
    from engine.training.coord_check import COLUMNS, SLOPE_COLUMNS, slopes

    fitted = slopes(rows)
    paths = [write_csv(out / "coord.csv", rows, COLUMNS),
             write_csv(out / "slopes.csv", [s.row() for s in fitted], SLOPE_COLUMNS),
             write_json(out / "config.json", {"coord_check": cfg.to_dict(), "seconds": seconds,
                                              "versions": package_versions()})]
    table = [{"param": s.param, "scaling": s.scaling, "kind": s.kind, "step": s.step,
              "slope": "zero at init" if s.seeds == 0 else f"{s.slope:+.3f} ± {s.se:.3f}",
              "seeds": s.seeds}
             for s in fitted if s.step in (0, cfg.steps)]
    print(format_table(table, TABLE))
    print(f"\nslope = d log2(mean |activation|) / d log2(width), fitted per seed, mean ± SE over "
          f"{cfg.seeds} seed(s); {len(cfg.points())} points in {seconds:.1f} s")
    return paths
