"""``inspect``: softmax, Jacobian, its size and the entropy of a few scores divided by a scale."""

from __future__ import annotations

import argparse
import json
import re

#: argparse treats "-1e6" as an unknown option (it only knows "-8" and "-0.5" as negative numbers)
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p._negative_number_matcher = _NEGATIVE_NUMBER  # so "inspect 1e6 0 -1e6" parses
    p.add_argument("scores", nargs="+", metavar="SCORE", help="scores, e.g. 16 8 0 -8")
    p.add_argument("--scale", default="1", metavar="C", help="divide the scores by C > 0 (default: 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _parse_scores(raw: list[str]) -> list[float]:
    out = []
    for token in raw:
        for part in token.replace(",", " ").split():
            out.append(float(part))
    return out


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from engine.errors import ConfigError
    from engine.inspect import inspect_scores
    from ui.cli.common import fail

    prog = "attention-lab inspect"
    try:
        scores = _parse_scores(args.scores)
    except ValueError as exc:
        fail(prog, f"SCORE: not a number ({exc})")
    try:
        scale = float(args.scale)
    except ValueError:
        fail(prog, f"must be a positive number, got {args.scale!r}", "scale")
    try:
        r = inspect_scores(scores, scale)
    except ConfigError as exc:
        if exc.field == "scores":
            fail(prog, f"SCORE: {exc.message}")
        fail(prog, exc)

    if args.json:
        d = r.to_dict()
        keys = ("scores", "scaled", "weights", "jacobian", "jacobian_fro", "jacobian_max_abs",
                "entropy", "entropy_norm", "scale", "log10_jacobian_fro")
        print(json.dumps({k: d[k] for k in keys}))
        return 0
    with np.printoptions(precision=8, suppress=False, linewidth=120):
        print(f"scores / {r.scale:g}: {r.scaled}")
        print(f"softmax weights:  {r.weights}")
        print("Jacobian diag(p) - p p^T:")
        print(r.jacobian)
    print(f"Jacobian size (Frobenius): {r.jacobian_fro:.10g}  (log10 {r.log10_jacobian_fro:.6g})")
    print(f"largest |entry|: {r.jacobian_max_abs:.10g}  (the maximum possible is 0.25)")
    print(f"entropy: {r.entropy:.10g} nats = {r.entropy_norm:.6g} of log(n)")
    return 0
