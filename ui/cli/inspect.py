"""``inspect``: softmax, Jacobian, its size and the entropy of a few scores divided by a scale."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

#: argparse treats "-1e6" as an unknown option (it only knows "-8" and "-0.5" as negative numbers)
#: ... nor "-2*99" (a repeated score)
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?,?([*×]\d+)?,?$")
#: rows longer than this print their first and last EDGE values and a count (unless --full):
#: ``inspect 3 -2*999`` would otherwise print hundreds of lines of arrays
ELIDE_OVER = 12
EDGE = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p._negative_number_matcher = _NEGATIVE_NUMBER  # so "inspect 1e6 0 -1e6" parses
    p.add_argument("scores", nargs="+", metavar="SCORE", help="scores, e.g. 16 8 0 -8; V*K repeats V K times (3 -2*9999)")
    p.add_argument("--scale", default="1", metavar="C", help="divide the scores by C > 0 (default: 1)")
    p.add_argument("--ssmax", type=float, default=None, metavar="S",
                   help="Scalable-Softmax: multiply the scaled scores by S*ln(n) (e.g. 0.43)")
    p.add_argument("--yarn", type=int, default=None, metavar="N_REF",
                   help="yarn_dynamic (YaRN's law per row, not as shipped): multiply the scaled scores by "
                        "(0.1 ln(n/N_REF) + 1)^2 when n > N_REF")
    p.add_argument("--softcap", type=float, default=None, metavar="C",
                   help="soft-cap the logits to C tanh(z/C) (Gemma 2: 50)")
    p.add_argument("--sink", type=float, default=None, metavar="S",
                   help="an attention sink: logit S joins the softmax, its weight is dropped "
                        "(0 = softmax plus one)")
    p.add_argument("--sigmoid", action="store_true",
                   help="sigmoid attention: weights sigmoid(z - ln n), no normalization")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--full", action="store_true",
                   help=f"print every value of long rows (default: more than {ELIDE_OVER} scores "
                        f"print the first and last {EDGE} and a count)")


def run(args: argparse.Namespace) -> int:
    from engine.errors import ConfigError
    from engine.inspect import inspect_scores, parse_score_list
    from ui.cli.common import fail

    prog = "attention-lab inspect"
    try:
        scores = parse_score_list(" ".join(args.scores))
    except ConfigError as exc:
        fail(prog, f"SCORE: {exc.message}")
    try:
        scale = float(args.scale)
    except ValueError:
        fail(prog, f"must be a positive number, got {args.scale!r}", "scale")
    try:
        r = inspect_scores(scores, scale, args.ssmax, sink=args.sink, softcap=args.softcap,
                           sigmoid=args.sigmoid, yarn_n_ref=args.yarn)
    except ConfigError as exc:
        if exc.field == "scores":
            fail(prog, f"SCORE: {exc.message}")
        option = {"ssmax_s": "ssmax", "yarn_n_ref": "yarn"}.get(exc.field)
        if option is not None:
            fail(prog, exc.message, option)
        fail(prog, exc)

    if args.json:
        d = r.to_dict()
        keys = ("scores", "scaled", "weights", "jacobian", "jacobian_fro", "jacobian_max_abs",
                "entropy", "entropy_norm", "scale", "log10_jacobian_fro", "key_mass",
                "sink_weight")
        print(json.dumps({k: d[k] for k in keys}))
        return 0
    _print_text(r, args.full)
    return 0


def _print_text(r: Any, full: bool) -> None:
    """The result in words; rows longer than ELIDE_OVER show their ends and a count unless
    ``full``."""
    import numpy as np

    n = r.scores.size
    elide = not full and n > ELIDE_OVER
    # numpy elides an array longer than ``threshold`` to its first and last ``edgeitems``
    shown = dict(threshold=ELIDE_OVER, edgeitems=EDGE) if elide else dict(threshold=n * n + 1)
    count = f" ({n} values, first and last {EDGE} shown; --full prints all)" if elide else ""
    with np.printoptions(precision=8, suppress=False, linewidth=120, **shown):
        what = f"scores / {r.scale:g}" + (f" * {r.ssmax_s:g} ln({n})" if r.ssmax_s else "")
        what += f" * (0.1 ln({n}/{r.yarn_n_ref}) + 1)^2" if r.yarn_n_ref and n > r.yarn_n_ref else ""
        what = f"{r.softcap:g} tanh(({what}) / {r.softcap:g})" if r.softcap else what
        print(f"{what}{count}: {r.scaled}")
        print(f"{r.weights_name}{count}:  {r.weights}")
        print(f"top weight: {r.weights.max():.10g}")
        if r.sink is not None:
            print(f"sink weight: {r.sink_weight:.10g}  (sink logit {r.sink:g}); the scores "
                  f"keep {r.key_mass:.10g}")
        elif r.sigmoid:
            print(f"sum of the weights (key mass): {r.key_mass:.10g}  (b = -ln {n})")
        if r.has_full_jacobian:
            print("Jacobian d p / d z" + (" (z before the cap)" if r.softcap else "")
                  + (": diag(p (1 - p))" if r.sigmoid else ": diag(p) - p p^T")
                  + (f" ({n} x {n}, corners shown)" if elide else "") + ":")
            print(r.jacobian)
    print(f"Jacobian size (Frobenius): {r.jacobian_fro:.10g}  (log10 {r.log10_jacobian_fro:.6g})")
    print(f"largest |entry|: {r.jacobian_max_abs:.10g}  (the maximum possible is 0.25)")
    norm = " (of the weights normalized to sum 1)" if r.key_mass != 1.0 else ""
    print(f"entropy: {r.entropy:.10g} nats = {r.entropy_norm:.6g} of log(n){norm}")
