"""Summaries with their uncertainty, grouped over the seed axis per (other axes, rule), each
group's statistics from ``engine.experiments.point`` (the one place they are computed); and the
rows of summary.csv (per job and rule), points.csv (per point and rule) and metrics.csv.

A job result is the plain dict of ``engine.experiments.job.run_job`` plus ``index``, ``key`` and
``values`` (the job's axis values), as the runner stores it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.experiments.job import RESULT_FIELDS
from engine.experiments.point import PointStats, mean_se, ok_results, point_stats, rule_values
from engine.experiments.spec import ExperimentSpec

#: the axis summaries are taken over
SEED_AXIS = "seed"
#: per-rule results whose mean ± SE over seeds points.csv gives (steps: the median instead;
#: diverged and collapsed: counts)
MEAN_FIELDS = tuple(f for f in RESULT_FIELDS
                    if f not in ("steps_to_target", "diverged_step", "collapsed"))


@dataclass(frozen=True)
class Group:
    """The runs of one rule at one point of the non-seed axes (one per seed)."""

    rule: str
    values: dict[str, Any]  #: the other axes' values
    stats: PointStats  #: n, successes with the Wilson interval, median steps to target
    diverged: int
    collapsed: int
    means: dict[str, tuple[float, float]]  #: result field -> (mean, standard error) over runs

    def label(self) -> str:
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in self.values.items())


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
            means = {name: mean_se(rule_values(runs, rule, name))
                     for name in (*MEAN_FIELDS, *length_fields(spec))}
            groups.append(Group(
                rule=rule, values=dict(zip(others, key)), stats=point_stats(runs, rule),
                diverged=sum(1 for m in runs if m["rules"][rule]["diverged_step"] is not None),
                collapsed=sum(1 for m in runs if m["rules"][rule]["collapsed"]),
                means=means))
    return groups


POINT_STATS = ("n", "successes", "rate", "rate_lo", "rate_hi", "median_steps",
               "median_steps_se")


def points_columns(spec: ExperimentSpec) -> list[str]:
    """points.csv: the axes other than seed, scaling, the success statistics, diverged and
    collapsed counts, then mean and SE over seeds of every per-rule result."""
    others = [a for a in spec.axis_names if a != SEED_AXIS]
    tail = [f"{name}_{part}" for name in (*MEAN_FIELDS, *length_fields(spec))
            for part in ("mean", "se")]
    return [*others, "scaling", *POINT_STATS, "diverged", "collapsed", *tail]


def points_rows(spec: ExperimentSpec, results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (rule, point of the other axes): what the table of ``experiment`` prints."""
    def cell(v: float | None) -> Any:
        return "" if v is None or not math.isfinite(v) else v

    rows = []
    for g in group_results(spec, results):
        row: dict[str, Any] = {**g.values, "scaling": g.rule}
        row.update({name: cell(getattr(g.stats, name)) for name in POINT_STATS})
        row.update(diverged=g.diverged, collapsed=g.collapsed)
        for name, (m, se) in g.means.items():
            row[f"{name}_mean"], row[f"{name}_se"] = cell(m), cell(se)
        rows.append(row)
    return rows


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
