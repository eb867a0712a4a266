"""``reproduce``: measure every published number again (resources/claims.json) and compare.

Prints one line per claim (published, measured, tolerance, ok/FAIL; the skipped ones summed up
in one line per reason) and exits 1 when
any claim fails, so CI catches docs that drift from the code. ``--fast`` skips the slow claims
(training experiments over seeds, the real model). Each experiment behind the training claims
runs once, its jobs on ``--workers`` processes; ``--cache DIR`` keeps its finished jobs and
reuses them next time. ``--list`` names the claims without measuring anything.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ui.cli.common import add_force, path_arg

PROG = "attention-lab reproduce"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fast", action="store_true", help="skip the slow claims (training experiments, the real model)")
    p.add_argument("--out", metavar="DIR", type=path_arg, help="also write claims.csv (the table) into DIR")
    p.add_argument("--claims", metavar="FILE", type=path_arg,
                   help="the claims file (default: resources/claims.json)")
    p.add_argument("--only", metavar="TEXT", help="check only the claims whose id contains TEXT")
    p.add_argument("--quiet", action="store_true", help="print only the failures and the tally")
    p.add_argument("--list", action="store_true",
                   help="list the claims (id, kind, slow, published, where) and stop")
    p.add_argument("--workers", type=int, metavar="N",
                   help="processes for the experiments' jobs (default: one per core)")
    p.add_argument("--cache", metavar="DIR", type=path_arg,
                   help="keep each experiment's finished jobs in DIR/NAME and reuse them")
    add_force(p)


def run(args: argparse.Namespace) -> int:
    from engine.claims import ROW_COLUMNS, check_claims, load_claims
    from engine.errors import ConfigError
    from ui.cli.common import fail, format_table

    out = None
    try:
        claims = load_claims(args.claims)
        if args.only:
            claims = [c for c in claims if args.only in c.id]
            if not claims:
                raise ConfigError("only", f"no claim id contains {args.only!r}")
        if args.list:
            _list(claims)
            return 0
        if args.workers is not None and not 1 <= args.workers <= 1024:
            raise ConfigError("workers", f"must be from 1 to 1,024, got {args.workers}")
        cache = None
        if args.cache is not None:
            from engine.io import ensure_writable_dir

            cache = ensure_writable_dir(args.cache)
        if args.out is not None:
            from engine.io import check_output_dir

            out = check_output_dir(args.out, ("claims.csv",), force=args.force)
        checks = []
        note = None if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
        for check in check_claims(claims, fast=args.fast, workers=args.workers, cache_dir=cache,
                                  note=note):
            checks.append(check)
            # skipped claims are summed up below: one line per reason, not one per claim
            if check.status != "skipped" and (not args.quiet or check.status == "FAIL"):
                _print_line(check)
    except ConfigError as exc:
        fail(PROG, exc)
    if not args.quiet:
        for line in skipped_summary(checks):
            print(line)
    tally = {s: sum(c.status == s for c in checks) for s in ("ok", "FAIL", "skipped")}
    print(f"{tally['ok']} ok, {tally['FAIL']} failed, {tally['skipped']} skipped "
          f"(of {len(checks)} claims)")
    if tally["FAIL"]:
        rows = [c.row() for c in checks if c.status == "FAIL"]
        print(format_table(rows, [("id", "failed claim"), ("published", "published"),
                                  ("measured", "measured"), ("tolerance", "tolerance"),
                                  ("where", "published in")]), file=sys.stderr)
    if out is not None:
        from engine.io import write_csv
        from ui.cli.common import write_all_or_none

        rows = [c.row() for c in checks]
        write_all_or_none(PROG, out, ("claims.csv",), (), lambda folder: [
            write_csv(Path(folder) / "claims.csv", rows, ROW_COLUMNS)])
        print(f"wrote claims.csv to {out}")
    return 1 if tally["FAIL"] else 0


def _list(claims) -> None:
    from ui.cli.common import format_table

    rows = [{"id": c.id, "kind": c.kind, "slow": "slow" if c.slow else "",
             "published": c.printed or c.published, "where": c.where} for c in claims]
    print(format_table(rows, [("id", "claim"), ("kind", "kind"), ("slow", "slow"),
                              ("published", "published"), ("where", "published in")]))
    print(f"{len(claims)} claims ({sum(c.slow for c in claims)} slow)")


def skipped_summary(checks) -> list[str]:
    """One line per reason a claim was skipped, with the count ("skipped  245 claims: slow:
    skipped under --fast (--list names them)")."""
    reasons: dict[str, int] = {}
    for check in checks:
        if check.status == "skipped":
            reasons[check.note] = reasons.get(check.note, 0) + 1
    return [f"skipped  {n} claim{'s' if n != 1 else ''}: {note} (--list names them)"
            for note, n in reasons.items()]


def _print_line(check) -> None:
    c = check.claim
    if check.measured is None:  # the run behind it failed
        print(f"{check.status:7}  {c.id}: published {c.published}, not measured: {check.note}  "
              f"[{c.where}]")
        return
    tol = f"± {check.tolerance:.3g}" if check.tolerance == check.tolerance else "(a bound)"
    se = f", SE {check.se:.2g}" if check.se > 0 else ""
    print(f"{check.status:7}  {c.id}: published {c.published}, measured {check.measured:.10g}{se}, "
          f"tolerance {tol}  [{c.where}]")
