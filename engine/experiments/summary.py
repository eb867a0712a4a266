"""Summaries with their uncertainty: success rates with a Wilson 95 % interval, means with a
standard error, medians of steps to target, grouped over the seed axis per (other axes, rule);
and the rows of summary.csv and metrics.csv.

A job result is the plain dict of ``engine.experiments.job.run_job`` plus ``index``, ``key`` and
``values`` (the job's axis values), as the runner stores it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.experiments.job import RESULT_FIELDS
from engine.experiments.spec import ExperimentSpec

#: z of a two-sided 95 % interval
Z95 = 1.959963984540054
#: the axis summaries are taken over
SEED_AXIS = "seed"


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (good at small n and at 0 or n)."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)  # exact ends (no 0.9999999999999999)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return (lo, hi)


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error (sample std / sqrt(n); 0 for one value). Empty: (nan, nan)."""
    n = len(values)
    if n == 0:
        return (math.nan, math.nan)
    mean = math.fsum(values) / n
    if n == 1:
        return (mean, 0.0)
    return (mean, statistics.stdev(values) / math.sqrt(n))


@dataclass(frozen=True)
class Group:
    """The runs of one rule at one point of the non-seed axes (one per seed)."""

    rule: str
    values: dict[str, Any]  #: the other axes' values
    n: int  #: runs (finished jobs without error)
    successes: int  #: runs that reached the target
    rate: float
    rate_lo: float  #: Wilson 95 % interval
    rate_hi: float
    median_steps: float | None  #: median steps to target among the runs that reached it
    diverged: int
    collapsed: int
    means: dict[str, tuple[float, float]]  #: result field -> (mean, standard error) over runs

    def label(self) -> str:
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in self.values.items())


def ok_results(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finished jobs that did not raise."""
    return [r for r in results if not r.get("error") and r.get("rules")]


def rule_values(results: Iterable[dict[str, Any]], rule: str, name: str) -> list[float]:
    """``name`` (a result field, or ``column@0`` / ``column@end`` of the metrics rows) of one
    rule over jobs, skipping empty values."""
    out = []
    for res in results:
        v = result_value(res, rule, name)
        if v is not None:
            out.append(float(v))
    return out


def result_value(res: dict[str, Any], rule: str, name: str) -> float | None:
    """One value of one rule in one job; ``success`` is 1/0; ``column@0`` is a metrics.csv column
    at the first log, ``column@end`` at the last (None where absent or diverged)."""
    r = res.get("rules", {}).get(rule)
    if r is None:
        return None
    if name == "success":
        return 1.0 if r.get("steps_to_target") is not None else 0.0
    if "@" in name:
        column, _, at = name.partition("@")
        rows = [row for row in res.get("rows", ()) if row.get("scaling") == rule]
        if not rows or (at == "end" and r.get("diverged_step") is not None):
            return None
        row = rows[0] if at == "0" else rows[-1]
        v = row.get(column)
        return float(v) if isinstance(v, (int, float)) else None
    v = r.get(name)
    if isinstance(v, bool):
        return float(v)
    return float(v) if isinstance(v, (int, float)) else None


def group_results(spec: ExperimentSpec, results: Iterable[dict[str, Any]],
                  over: str = SEED_AXIS) -> list[Group]:
    """One group per (rule, values of the axes other than ``over``), in grid order."""
    results = ok_results(results)
    others = [a for a in spec.axis_names if a != over]
    buckets: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for res in sorted(results, key=lambda r: r["index"]):
        key = tuple(res["values"][a] for a in others)
        buckets.setdefault(key, []).append(res)
    groups = []
    for rule in spec.rules:
        for key, members in buckets.items():
            runs = [m for m in members if rule in m["rules"]]
            steps = rule_values(runs, rule, "steps_to_target")
            k = len(steps)
            lo, hi = wilson_interval(k, len(runs))
            means = {name: mean_se(rule_values(runs, rule, name))
                     for name in RESULT_FIELDS if name not in ("collapsed",)}
            groups.append(Group(
                rule=rule, values=dict(zip(others, key)), n=len(runs), successes=k,
                rate=k / len(runs) if runs else math.nan, rate_lo=lo, rate_hi=hi,
                median_steps=statistics.median(steps) if steps else None,
                diverged=sum(1 for m in runs if m["rules"][rule]["diverged_step"] is not None),
                collapsed=sum(1 for m in runs if m["rules"][rule]["collapsed"]),
                means=means))
    return groups


SUMMARY_TAIL = ("scaling", *RESULT_FIELDS)


def length_fields(spec: ExperimentSpec) -> tuple[str, ...]:
    """The per-rule results at the evaluation lengths (``accuracy_len{N}``, ``entropy_norm_len{N}``
    at the end of training), from the base config (evaluation lengths are not an axis)."""
    from engine.training.observe import length_columns

    return length_columns(spec.base.eval_lengths)


def summary_columns(spec: ExperimentSpec) -> list[str]:
    """summary.csv: job, one column per axis, scaling, the per-rule results, then the results at
    the evaluation lengths."""
    return ["job", *spec.axis_names, *SUMMARY_TAIL, *length_fields(spec)]


def summary_rows(spec: ExperimentSpec, results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (finished job, rule); a job that raised gets empty figures."""
    rows = []
    for res in sorted(results, key=lambda r: r["index"]):
        for rule in spec.rules:
            row: dict[str, Any] = {"job": res["index"], **res["values"], "scaling": rule}
            r = res.get("rules", {}).get(rule, {})
            for name in (*RESULT_FIELDS, *length_fields(spec)):
                v = r.get(name)
                row[name] = "" if v is None else v
            rows.append(row)
    return rows


def metrics_columns(spec: ExperimentSpec) -> list[str]:
    """metrics.csv: job, one column per axis, then the training metrics.csv columns (with those of
    the evaluation lengths)."""
    from engine.experiments.job import metrics_csv_columns

    return ["job", *spec.axis_names, *metrics_csv_columns(spec.base.eval_lengths)]


def metrics_rows(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every logged row of every job, tagged with the job and its axis values."""
    rows = []
    for res in sorted(results, key=lambda r: r["index"]):
        for row in res.get("rows", ()):
            rows.append({"job": res["index"], **res["values"], **row})
    return rows
