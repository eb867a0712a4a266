"""Are the figures a refactor writes the same as before? Runs ``simulate --figures``, ``train
--figures`` and ``experiment --figures`` (small sizes that still reach every figure writer) in two
checkouts and compares every figure file: byte-identical, else pixel-identical (PNG, decoded with
Qt) or equal once timestamps are removed (SVG, CSV).

    python bench/compare_figures.py BASE_CHECKOUT [HEAD_CHECKOUT] [--out DIR]

Prints one line per differing file and a count; exit status 1 when any file differs in content.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: (name, arguments): small, but every kind of figure (points, length sweep, sweep, training
#: panels, experiment figures by rule / vs step / vs axis / vs length) is written
RUNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("simulate", ("simulate", "--d-k", "4", "64", "--trials", "300", "--scaling", "none", "sqrt",
                  "dk", "temperature", "qknorm")),
    ("simulate_keys", ("simulate", "--d-k", "16", "--keys", "8", "64", "--trials", "200")),
    ("simulate_screen", ("simulate", "--d-k", "8", "--trials", "200", "--figure-style", "screen")),
    ("simulate_paper", ("simulate", "--d-k", "8", "--trials", "200", "--figure-style", "paper")),
    ("train", ("train", "--steps", "30", "--log-every", "10", "--scaling", "none", "sqrt",
               "qknorm", "--eval-lengths", "32")),
    ("train_screen", ("train", "--steps", "20", "--log-every", "10", "--figure-style", "screen")),
    ("experiment_seeds", ("experiment", "seeds", "--steps", "10", "--workers", "1")),
    ("experiment_lr", ("experiment", "learning_rate", "--steps", "10", "--workers", "1")),
    ("experiment_length", ("experiment", "length", "--steps", "10", "--workers", "1")),
)
FIGURE_SUFFIXES = {".png", ".svg", ".csv"}
#: an ISO date-time, or a folder name time stamp, anywhere in a text file
TIMESTAMP = re.compile(rb"\d{4}-\d{2}-\d{2}[T _]\d{2}[:\-]?\d{2}[:\-]?\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")


def run_all(checkout: Path, out: Path) -> None:
    """Every run of RUNS in ``checkout``, into ``out/<run>``. Each writes into the same folder
    first (``out/../_run``): a figure names the folder it was written to in its metadata."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(checkout)}
    out.mkdir(parents=True)
    for name, args in RUNS:
        target = out.parent / "_run" / name
        cmd = [sys.executable, "main.py", *args, "--out", str(target), "--figures", "--quiet"]
        done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{checkout}: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
        target.rename(out / name)


def figure_files(root: Path) -> dict[str, Path]:
    """Every figure a run wrote: PNG, SVG and the CSV of the points a figure draws (not the
    runs' tables, whose ``seconds`` are wall-clock times, nor jobs/)."""
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*"))
            if p.is_file() and p.suffix in FIGURE_SUFFIXES and "jobs" not in p.parts
            and (p.suffix != ".csv" or p.with_suffix(".png").exists())}


def same_pixels(a: Path, b: Path) -> bool:
    from PySide6.QtGui import QImage

    ia, ib = QImage(str(a)), QImage(str(b))
    if ia.isNull() or ib.isNull() or ia.size() != ib.size():
        return False
    ia = ia.convertToFormat(QImage.Format.Format_ARGB32)
    ib = ib.convertToFormat(QImage.Format.Format_ARGB32)
    return bytes(ia.constBits()) == bytes(ib.constBits())


def compare(base: Path, head: Path) -> tuple[dict[str, int], list[str]]:
    fa, fb = figure_files(base), figure_files(head)
    counts = {"bytes": 0, "pixels": 0, "without timestamps": 0, "different": 0}
    lines = [f"only in base: {n}" for n in sorted(fa.keys() - fb.keys())]
    lines += [f"only in head: {n}" for n in sorted(fb.keys() - fa.keys())]
    counts["different"] += len(lines)
    for name in sorted(fa.keys() & fb.keys()):
        a, b = fa[name].read_bytes(), fb[name].read_bytes()
        if a == b:
            counts["bytes"] += 1
        elif name.endswith(".png") and same_pixels(fa[name], fb[name]):
            counts["pixels"] += 1
            lines.append(f"pixel-identical, bytes differ: {name}")
        elif not name.endswith(".png") and TIMESTAMP.sub(b"", a) == TIMESTAMP.sub(b"", b):
            counts["without timestamps"] += 1
            lines.append(f"identical without timestamps: {name}")
        else:
            counts["different"] += 1
            lines.append(f"DIFFERENT: {name}")
    return counts, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the checkout before the change")
    parser.add_argument("head", type=Path, nargs="?", default=Path(__file__).resolve().parents[1],
                        help="the checkout after it (default: this one)")
    parser.add_argument("--out", type=Path, help="keep the figures here (default: a temp folder); a base/ already there is reused")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        for side, checkout in (("base", args.base), ("head", args.head)):
            if side == "base" and (out / side).is_dir():
                continue  # (--out of an earlier comparison: the base's figures are kept)
            run_all(checkout.resolve(), out / side)
        counts, lines = compare(out / "base", out / "head")
    print("\n".join(lines))
    total = sum(counts.values())
    print(f"{total} figure files: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if counts["different"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
