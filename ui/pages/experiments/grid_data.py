"""What the grid view draws: one cell per (rule, value of the chosen axis) holding a metric over
the finished jobs there (a success rate with its Wilson interval, else mean ± 1 standard error),
the runs behind it and the job a click opens. Plain data, no Qt; empty cells are None (the view
draws them blank: nothing non-finite reaches a plot).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.experiments.figures import label, point
from engine.experiments.job import RESULT_FIELDS
from engine.experiments.point import ok_results

#: the x choice that gives every job its own column (offered up to this many jobs)
EVERY_JOB = "job"
EVERY_JOB_MAX = 400
#: metrics the grid offers (per-rule results; ``success`` is reached-the-target 1/0)
GRID_METRICS = ("final_loss", "success", "steps_to_target",
                *(m for m in RESULT_FIELDS if m not in ("final_loss", "steps_to_target",
                                                        "collapsed", "diverged_step")))


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Cell:
    value: float  #: the mean (or rate)
    lo: float  #: error bar ends (Wilson 95 % interval or ± 1 SE)
    hi: float
    n: int  #: runs with a value


@dataclass(frozen=True)
class GridData:
    metric: str
    x: str  #: an axis name or EVERY_JOB
    x_labels: tuple[str, ...]  #: one per column
    rules: tuple[str, ...]  #: one per row
    cells: tuple[tuple[Cell | None, ...], ...]  #: [row = rule][column]; None: no value
    jobs: tuple[tuple[int, ...], ...]  #: [column]: the finished jobs there (grid order)
    error: str  #: what lo/hi mean

    @property
    def filled(self) -> int:
        return sum(c is not None for row in self.cells for c in row)

    def describe(self, row: int, col: int) -> str:
        """The hover read-out of one cell."""
        cell = self.cells[row][col]
        head = f"{self.rules[row]}, {self.x_labels[col]}"
        jobs = self.jobs[col]
        if not jobs:
            return f"{head}: no finished job yet"
        listed = ", ".join(str(j) for j in jobs[:6]) + (" …" if len(jobs) > 6 else "")
        if cell is None:
            return f"{head}: no value in jobs {listed} (e.g. never reached the target); " \
                   f"click opens job {jobs[0]}"
        if self.metric == "success":
            k = round(cell.value * cell.n)
            text = f"{label(self.metric)} {k}/{cell.n} = {cell.value:.2f} (95 % CI {cell.lo:.2f}-{cell.hi:.2f})"
        else:
            se = cell.hi - cell.value
            text = f"{label(self.metric)} {cell.value:.4g} ± {se:.2g} (n={cell.n})"
        return f"{head}: {text}; jobs {listed}; click opens job {jobs[0]}"


def grid_choices(spec: Any) -> tuple[str, ...]:
    """The x choices: every job (small grids), then the axes."""
    every = (EVERY_JOB,) if len(spec.jobs()) <= EVERY_JOB_MAX else ()
    return (*every, *spec.axis_names)


def default_x(spec: Any) -> str:
    """The first axis that is not the seed; else every job (or the first axis of a big grid)."""
    for name in spec.axis_names:
        if name != "seed":
            return name
    return grid_choices(spec)[0] if grid_choices(spec) else EVERY_JOB


def grid_data(spec: Any, results: Any, metric: str, x: str) -> GridData:
    """Cells of ``metric`` over ``x`` (columns) and the rules (rows) from the finished jobs."""
    done = ok_results(results)
    jobs = spec.jobs()
    if x == EVERY_JOB or x not in spec.axis_names:
        x = EVERY_JOB
        columns = [(f"job {j.index}" + (f" ({j.key})" if j.values else ""), {"index": j.index})
                   for j in jobs]
    else:
        values = next(a.values for a in spec.axes if a.field == x)
        columns = [(f"{x}={_fmt(v)}", {x: v}) for v in values]
    selected = []
    for _text, where in columns:
        if "index" in where:
            selected.append([r for r in done if r["index"] == where["index"]])
        else:
            selected.append([r for r in done if r["values"].get(x) == where[x]])
    cells = []
    for rule in spec.rules:
        row: list[Cell | None] = []
        for sel in selected:
            p = point(sel, rule, metric) if sel else None
            row.append(None if p is None else Cell(*p))
        cells.append(tuple(row))
    return GridData(metric, x, tuple(t for t, _ in columns), tuple(spec.rules), tuple(cells),
                    tuple(tuple(sorted(r["index"] for r in sel)) for sel in selected),
                    "Wilson 95 % interval" if metric == "success" else "± 1 standard error")
