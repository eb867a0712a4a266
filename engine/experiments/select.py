"""One published figure of an experiment's results: which runs (rule, axis values), which
statistic over the seeds (success count, Wilson bounds, median steps, mean ± SE, median), and,
where the selection spans several points, the smallest or largest of their statistics.

Every statistic comes from ``engine.experiments.point.point_stats``, the function behind the
experiment's table, points.csv and figures, so a figure checked here is the figure ``experiment``
printed; with it comes what judging it needs: its standard error over the seeds and the runs
behind it. No smallest or largest run: the extremes over seeds are the most chaotic numbers of
all (a quantile, the median, is offered instead). Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ConfigError, quote
from engine.experiments.job import RESULT_FIELDS
from engine.experiments.point import AT_STEP, ok_results, point_stats
from engine.experiments.spec import ExperimentSpec
from engine.experiments.summary import SEED_AXIS

#: over the seeds of one point: runs, runs that reached the target, its rate and Wilson 95 %
#: bounds, the median steps to target of those that reached it (need no ``value``); the mean of
#: ``value``, its standard error, its median (need one)
STATS = ("n", "successes", "rate", "rate_lo", "rate_hi", "median_steps", "mean", "se", "median",
         "lr_sensitivity", "lr_sensitivity_se", "best")
VALUE_STATS = ("mean", "se", "median")
#: statistics of the success count (judged as counts: see ``engine.claims``)
COUNT_STATS = ("successes", "rate", "rate_lo", "rate_hi")
#: along the axis ``over`` (needs it): the learning-rate sensitivity of ``value`` (default
#: final_loss; engine.experiments.sensitivity), its standard error over seeds, and the axis
#: value whose mean loss is lowest
OVER_STATS = ("lr_sensitivity", "lr_sensitivity_se", "best")
#: how the statistics of several points (rules or axis values) become one figure
ACROSS = ("min", "max")


@dataclass(frozen=True)
class Figure:
    """A measured statistic and what judging it needs."""

    value: float
    se: float = 0.0  #: its standard error over the seeds (0: none, e.g. a count)
    n: int = 0  #: the runs behind it (those with a value, for a value's statistics)
    successes: int | None = None  #: for the count statistics: the count itself
    resolution: float = 0.0  #: the grid it is measured on (steps: the log interval)
    #: for ``best``: every axis value whose mean is within ``TIE_SE`` combined standard errors
    #: of the best one's (the seeds cannot tell them apart)
    accepted: tuple[float, ...] = ()


#: combined standard errors within which two axis values' mean losses count as tied (``best``)
TIE_SE = 3.0


@dataclass(frozen=True)
class Selector:
    """``stat`` of the runs of ``rules`` (all the experiment's when empty) at the axis values
    ``at`` (a list: each of those values). ``value``: a per-rule result (``final_accuracy``,
    ``steps_to_target``, ...) or a metrics.csv column at a logged step: ``column@0`` (the first
    log), ``column@end`` (the last), ``column@300`` (step 300). Points that ``at`` leaves open
    (rules, other axes' values) need ``across`` (``min`` or ``max`` of their statistics). The
    OVER_STATS run along the axis ``over`` (e.g. ``lr``), which is then not a point either."""

    stat: str
    rules: tuple[str, ...] = ()
    at: dict[str, Any] = field(default_factory=dict)
    value: str = ""
    across: str = ""
    over: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Selector:
        known = {"stat", "rule", "at", "value", "across", "over"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError("measure", f"unknown key(s) {', '.join(unknown)} (known: "
                                         f"{', '.join(sorted(known))})")
        if "stat" not in data:
            raise ConfigError("measure", "needs stat (one of " + ", ".join(STATS) + ")")
        rule = data.get("rule", ())
        if not isinstance(rule, (str, list, tuple)):
            raise ConfigError("measure", "rule must be a rule's name or a list of them")
        rules = (rule,) if isinstance(rule, str) else tuple(rule)
        at = data.get("at", {})
        if not isinstance(at, dict):
            raise ConfigError("measure", "at must map an axis to its value")
        return cls(str(data["stat"]), rules, dict(at), str(data.get("value", "")),
                   str(data.get("across", "")), str(data.get("over", "")))

    def check(self, spec: ExperimentSpec) -> None:
        """Refuse, before anything runs, a selection the experiment cannot answer."""
        if self.stat not in STATS:
            raise ConfigError("measure", f"stat must be one of {', '.join(STATS)}, got {quote(self.stat)}")
        if self.stat in VALUE_STATS and not self.value:
            raise ConfigError("measure", f"stat {quote(self.stat)} needs a value")
        if self.value:
            _check_value(spec, self.value)
        if (self.stat in OVER_STATS) != bool(self.over):
            raise ConfigError("measure", f"over (an axis) goes with the stats {', '.join(OVER_STATS)} "
                                         "and only with them")
        if self.over and (self.over not in spec.axis_names or self.over in self.at):
            raise ConfigError("measure", f"over={self.over!r} must be an axis that at leaves open")
        if self.across and self.across not in ACROSS:
            raise ConfigError("measure", f"across must be one of {', '.join(ACROSS)}")
        for rule in self.rules:
            if rule not in spec.rules:
                raise ConfigError("measure", f"rule {quote(rule)} is not trained in {quote(spec.name)} "
                                             f"({', '.join(spec.rules)})")
        axes = {a.field: a.values for a in spec.axes}
        for name, given in self.at.items():
            if name not in axes:
                raise ConfigError("measure", f"{quote(name)} is not an axis of {quote(spec.name)}")
            for v in given if isinstance(given, list) else [given]:
                if v not in axes[name]:
                    raise ConfigError("measure", f"{name}={quote(v)} is not a value of that axis")
        if not self.across and len(self._points(spec)) > 1:
            raise ConfigError("measure", f"selects {len(self._points(spec))} points of "
                                         f"{quote(spec.name)}: fix them with rule and at, or give across")

    def _points(self, spec: ExperimentSpec) -> list[tuple[str, dict[str, Any]]]:
        """(rule, values of the non-seed axes) of every point the selection spans; the seed axis
        is what each point's statistic runs over (unless ``at`` fixes a seed)."""
        import itertools

        choices = []
        for axis in spec.axes:
            given = self.at.get(axis.field)
            if given is None:
                open_axis = axis.field in (SEED_AXIS, self.over)
                choices.append((axis.field, [None] if open_axis else axis.values))
            else:
                choices.append((axis.field, given if isinstance(given, list) else [given]))
        names = [name for name, _ in choices]
        combos = itertools.product(*(values for _, values in choices))
        points = [{k: v for k, v in zip(names, combo) if v is not None} for combo in combos]
        return [(rule, point) for rule in (self.rules or spec.rules) for point in points]

    def measure(self, spec: ExperimentSpec, results: list[dict[str, Any]]) -> Figure:
        """The figure (of the point with the smallest or largest figure under ``across``)."""
        runs = ok_results(results)
        figures = []
        for rule, point in self._points(spec):
            members = [r for r in runs if rule in r["rules"]
                       and all(r["values"].get(k) == v for k, v in point.items())]
            if not members:
                raise ConfigError("measure", f"no finished run of {quote(rule)} at {point}")
            figures.append(self._stat(members, rule))
        if len(figures) == 1:
            return figures[0]
        pick = min if self.across == "min" else max
        return pick(figures, key=lambda f: f.value)

    def _stat(self, runs: list[dict[str, Any]], rule: str) -> Figure:
        if self.stat in OVER_STATS:
            return self._over_stat(runs, rule)
        st = point_stats(runs, rule, self.value)
        if self.stat == "n":
            return Figure(float(st.n), n=st.n)
        if self.stat in COUNT_STATS:
            value = {"successes": float(st.successes), "rate": st.rate, "rate_lo": st.rate_lo,
                     "rate_hi": st.rate_hi}[self.stat]
            return Figure(value, n=st.n, successes=st.successes)
        log_every = max(int((r.get("config") or {}).get("log_every", 0)) for r in runs)
        if self.stat == "median_steps":  # inf where no run reached the target: never a figure
            if st.median_steps is None:
                return Figure(math.inf, n=0)
            return Figure(st.median_steps, st.median_steps_se, st.successes,
                          resolution=float(log_every))
        steps = self.value == "steps_to_target"
        if self.stat == "median":
            return Figure(st.median, st.median_se, st.values,
                          resolution=float(log_every) if steps else 0.0)
        if self.stat == "se":
            return Figure(st.se, _se_of_se(st.se, st.values), st.values)
        return Figure(st.mean, st.se, st.values, resolution=float(log_every) if steps else 0.0)

    def _over_stat(self, runs: list[dict[str, Any]], rule: str) -> Figure:
        """The learning-rate sensitivity along ``over`` (mean and SE over seeds), its SE, or
        the best value of the axis."""
        from engine.experiments.sensitivity import lr_sensitivity

        s = lr_sensitivity(runs, rule, self.over, self.value or "final_loss")
        if s is None:
            return Figure(math.nan, n=0)
        if self.stat == "best":
            return Figure(float(s.best), n=s.n, accepted=tuple(float(x) for x in s.tied(TIE_SE)))
        if self.stat == "lr_sensitivity":
            return Figure(s.mean, s.se, s.n)
        return Figure(s.se, _se_of_se(s.se, s.n), s.n)


def _se_of_se(se: float, n: int) -> float:
    """The standard error of a standard error of n values: se / sqrt(2 (n - 1))."""
    return se / math.sqrt(2 * (n - 1)) if n > 1 else math.nan


def _check_value(spec: ExperimentSpec, name: str) -> None:
    """A per-rule result (``success`` too) or ``column@0|end|STEP`` of a metrics.csv column."""
    from engine.experiments.job import metrics_csv_columns
    from engine.experiments.summary import length_fields

    if name == "success" or name in RESULT_FIELDS or name in length_fields(spec):
        return
    m = AT_STEP.match(name)
    columns = metrics_csv_columns(spec.base.eval_lengths)
    if m is None or m["column"] not in columns or m["column"] in ("scaling", "step"):
        raise ConfigError("measure", f"value {quote(name)} is neither a per-rule result "
                                     f"({', '.join(RESULT_FIELDS)}) nor COLUMN@0|end|STEP of a "
                                     "metrics.csv column")
    if m["at"] not in ("0", "end"):
        step = int(m["at"])
        for job in spec.jobs():
            cfg = job.config
            if step > cfg.steps or (step % cfg.log_every and step != cfg.steps):
                raise ConfigError("measure", f"value {quote(name)}: step {step} is not logged in "
                                             f"{job.key} ({cfg.steps} steps, every {cfg.log_every})")
