"""The statistics of one point of an experiment: the runs of one rule at one value of the other
axes, one run per seed. The one place that computes them: the experiment's table and
``points.csv``, the figures, the grid view and the published claims all call ``point_stats``.

- success: runs whose training accuracy reached the target, with a Wilson 95 % interval;
- steps to target: the median over the runs that reached it, with the standard error of a median
  from order statistics (distribution-free: no normal assumption for a handful of seeds);
- any per-run value (a per-rule result or a metrics.csv column at a step): mean ± one standard
  error over the runs, and the median with its standard error.

A job result is the plain dict of ``engine.experiments.job.run_job`` plus ``index``, ``key`` and
``values`` (its axis values), as the runner stores it. Torch-free.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: z of a two-sided 95 % interval
Z95 = 1.959963984540054
#: a metrics.csv column at a logged step: ``loss@0`` (first log), ``loss@end`` (last), ``loss@300``
AT_STEP = re.compile(r"^(?P<column>[a-z_0-9]+)@(?P<at>0|end|[1-9][0-9]*)$")


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


def _binom_cdf(n: int, p: float) -> list[float]:
    """[P(B <= k) for k = 0..n], B ~ Binomial(n, p), 0 < p < 1 (log-space terms: no overflow)."""
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
            + i * math.log(p) + (n - i) * math.log1p(-p) for i in range(n + 1)]
    out, total = [], 0.0
    for v in logs:
        total += math.exp(v)
        out.append(min(total, 1.0))
    return out


def quantile_se(values: Sequence[float], q: float = 0.5) -> float:
    """Standard error of the ``q`` quantile of ``values`` from order statistics: the
    distribution-free interval [x_(l), x_(u)] with at most 2.5 % of binomial probability in each
    tail (as near as n allows) covers the quantile with probability c; the SE is its width over
    2 z_c. For the median this is the McKean-Schrader estimate. nan below two values."""
    x = sorted(values)
    n = len(x)
    if n < 2:
        return math.nan
    # ranks are 1-based: P(x_(l) <= Q < x_(u)) = P(l <= B < u), B ~ Binomial(n, q)
    cdf = _binom_cdf(n, q)
    lo = max([r for r in range(1, n) if r == 1 or cdf[r - 1] <= 0.025])  # P(B < l) <= 2.5 %
    hi = min([r for r in range(lo + 1, n + 1) if r == n or 1 - cdf[r - 1] <= 0.025])
    cover = cdf[hi - 1] - cdf[lo - 1]  # P(l <= B <= u - 1)
    z = statistics.NormalDist().inv_cdf(0.5 + cover / 2)
    return (x[hi - 1] - x[lo - 1]) / (2 * z)


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (linear interpolation between order statistics, NumPy's default; the
    median for q = 0.5, the mean of the two middle values for an even count). Empty: nan."""
    x = sorted(values)
    if not x:
        return math.nan
    pos = q * (len(x) - 1)
    i = math.floor(pos)
    if i + 1 >= len(x):
        return float(x[-1])
    return float(x[i] + (pos - i) * (x[i + 1] - x[i]))


def ok_results(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finished jobs that did not raise."""
    return [r for r in results if not r.get("error") and r.get("rules")]


def _finite(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def run_value(res: dict[str, Any], rule: str, name: str) -> float | None:
    """One value of one rule in one job (None where absent, not finite, or diverged):
    a per-rule result (``final_loss``, ``steps_to_target``, ``accuracy_len64``, ...);
    ``success`` (1/0: reached the target); or ``column@0`` / ``column@end`` / ``column@STEP``, a
    metrics.csv column at the first log, the last (None after a divergence) or that step."""
    r = res.get("rules", {}).get(rule)
    if r is None:
        return None
    if name == "success":
        return 1.0 if r.get("steps_to_target") is not None else 0.0
    m = AT_STEP.match(name)
    if m is None:
        return _finite(r.get(name))
    rows = [row for row in res.get("rows", ()) if row.get("scaling") == rule]
    if not rows:
        return None
    if m["at"] == "0":
        return _finite(rows[0].get(m["column"]))
    if m["at"] == "end":
        return None if r.get("diverged_step") is not None else _finite(rows[-1].get(m["column"]))
    step = int(m["at"])
    row = next((row for row in rows if int(row.get("step", -1)) == step), None)
    return None if row is None else _finite(row.get(m["column"]))


def rule_values(results: Iterable[dict[str, Any]], rule: str, name: str) -> list[float]:
    """``run_value`` of one rule over jobs, skipping the runs without one."""
    return [v for res in results if (v := run_value(res, rule, name)) is not None]


@dataclass(frozen=True)
class PointStats:
    """Everything published about one point, over its runs (one per seed)."""

    n: int  #: runs of the rule (finished jobs without error)
    successes: int  #: runs that reached the target
    rate: float  #: successes / n (nan without runs)
    rate_lo: float  #: Wilson 95 % interval of the rate
    rate_hi: float
    median_steps: float | None  #: median steps to target of the runs that reached it
    median_steps_se: float  #: its standard error (order statistics; nan below two runs)
    value: str = ""  #: the per-run value summarized below ("" for none)
    values: int = 0  #: runs with a finite value
    mean: float = math.nan
    se: float = math.nan  #: standard error of the mean (0 for one run)
    median: float = math.nan
    median_se: float = math.nan


def point_stats(runs: Iterable[dict[str, Any]], rule: str, value: str = "") -> PointStats:
    """The statistics of ``rule`` over ``runs`` (the jobs of one point; those that raised are
    left out), and of ``value`` when given (see ``run_value``)."""
    runs = [r for r in ok_results(runs) if rule in r["rules"]]
    n = len(runs)
    steps = rule_values(runs, rule, "steps_to_target")
    k = len(steps)
    lo, hi = wilson_interval(k, n)
    vals = rule_values(runs, rule, value) if value else []
    mean, se = mean_se(vals)
    return PointStats(
        n=n, successes=k, rate=k / n if n else math.nan, rate_lo=lo, rate_hi=hi,
        median_steps=quantile(steps, 0.5) if steps else None,
        median_steps_se=quantile_se(steps, 0.5), value=value, values=len(vals), mean=mean,
        se=se, median=quantile(vals, 0.5), median_se=quantile_se(vals, 0.5))
