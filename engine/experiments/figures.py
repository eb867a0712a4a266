"""The figures and the verdict of an experiment, computed from its results as plain data, so the
CLI's PNG/SVG writer and the GUI draw the same thing. Every point carries its uncertainty: a
Wilson 95 % interval for a success rate, one standard error of the mean over seeds otherwise.

Nothing non-finite leaves this module (empty groups are left out; log axes drop values <= 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from engine.experiments.point import mean_se, ok_results, point_stats
from engine.experiments.sensitivity import Sensitivity, lr_sensitivity
from engine.experiments.spec import ExperimentSpec, FigureSpec
from engine.experiments.summary import SEED_AXIS

#: readable names of the per-rule results and metrics.csv columns (axis labels, verdicts)
LABELS = {
    "success": "reached the target (rate)",
    "steps_to_target": "steps to target",
    "final_loss": "final training loss",
    "final_accuracy": "final training accuracy",
    "probe_accuracy": "probe accuracy",
    "max_logit_abs": "largest |logit| over the run",
    "max_logit_std": "largest logit std over the run",
    "min_entropy_norm": "smallest entropy / log n",
    "seconds": "seconds per job",
    "logit_max_abs": "largest |logit|",
    "logit_std": "logit std (mean over heads)",
    "entropy_norm_mean": "entropy / log n (mean over heads)",
    "loss": "training loss",
    "accuracy": "training accuracy",
    "lr": "learning rate",
    "d_k": "head width d_k",
    "d_model": "model width d_model",
    "param": "parametrization",
    "heads": "heads",
    "seed": "seed",
    "accuracy_len": "accuracy at evaluation (no gradient)",
    "clip_events": "heads clipped over the run (qkclip)",
    "lr_sensitivity": "learning-rate sensitivity (Wortsman et al.)",
    "entropy_norm_len": "entropy / log n of the query's row at evaluation",
    "saturated_frac": "saturated rows (fraction, mean over heads)",
    "grad_norm_q": "‖∂L/∂W_Q‖",
    "grad_norm_attn": "‖∂L/∂p‖ (upstream, at the weights)",
    "grad_norm_logits": "‖∂L/∂z‖ (after the softmax Jacobian)",
    "grad_norm_scores": "‖∂L/∂(q·k)‖ (after the divisor)",
    "grad_norm_query": "‖∂L/∂q‖",
    "softmax_gain": "softmax gain ‖∂L/∂z‖ / ‖∂L/∂p‖",
}
RATE_ERROR = "Wilson 95 % interval"
MEAN_ERROR = "mean ± 1 standard error over seeds"


def label(name: str) -> str:
    """``logit_std@0`` -> "logit std (mean over heads) at step 0"."""
    base, _, at = name.partition("@")
    text = LABELS.get(base, base.replace("_", " "))
    if at == "0":
        return f"{text} at init (step 0)"
    if at == "end":
        return f"{text} after training"
    return text


@dataclass(frozen=True)
class Series:
    """One curve or set of points: y with its error bar [lo, hi] and the runs behind each."""

    name: str  #: legend entry
    rule: str  #: the scaling rule (its colour)
    x: tuple[float, ...]
    y: tuple[float, ...]
    lo: tuple[float, ...]  #: lower end of the error bar / band
    hi: tuple[float, ...]  #: upper end
    n: tuple[int, ...]  #: runs behind each point
    colour: str = ""  #: its own colour ("" = the rule's), e.g. graded by width


@dataclass(frozen=True)
class FigureData:
    """One figure: what the GUI and the CLI's writer draw."""

    id: str  #: file stem (``<experiment>_<n>_<y>``)
    kind: str  #: by_rule (categorical x: the rules), vs_axis, vs_step
    title: str
    x_label: str
    y_label: str
    x_log: bool
    y_log: bool
    series: tuple[Series, ...]
    error: str  #: what the error bars mean
    x_ticks: tuple[tuple[float, str], ...] = ()  #: categorical ticks (by_rule)

    @property
    def empty(self) -> bool:
        return not any(s.x for s in self.series)


def _matches(res: dict[str, Any], where: dict[str, Any]) -> bool:
    return all(res["values"].get(k) == v for k, v in where.items())


def point(results: Sequence[dict[str, Any]], rule: str, metric: str
          ) -> tuple[float, float, float, int] | None:
    """(y, lo, hi, n) of ``metric`` for ``rule`` over ``results``: a rate with its Wilson
    interval for ``success``, else the mean ± 1 standard error (None when no run has a value);
    from ``point_stats``, like every published figure."""
    if metric == "success":
        st = point_stats(results, rule)
        return (st.rate, st.rate_lo, st.rate_hi, st.n) if st.n else None
    st = point_stats(results, rule, metric)
    if not st.values:
        return None
    return (st.mean, st.mean - st.se, st.mean + st.se, st.values)


def _series(name: str, rule: str, pts: Iterable[tuple[float, tuple[float, float, float, int]]],
            y_log: bool, colour: str = "") -> Series:
    xs, ys, los, his, ns = [], [], [], [], []
    for x, (y, lo, hi, n) in pts:
        if not all(math.isfinite(v) for v in (x, y, lo, hi)):
            continue
        if y_log:
            if y <= 0:
                continue
            lo = lo if lo > 0 else y  # a band reaching 0 cannot be drawn on a log axis
        xs.append(float(x))
        ys.append(y)
        los.append(lo)
        his.append(hi)
        ns.append(n)
    return Series(name, rule, tuple(xs), tuple(ys), tuple(los), tuple(his), tuple(ns), colour)


#: a sequential palette (viridis, without its palest yellow): curves ordered by a value (width)
GRADED = ("#440154", "#414487", "#2A788E", "#22A884", "#7AD151", "#B5DE2B")


def graded_colours(n: int) -> list[str]:
    """``n`` colours spread over GRADED, darkest first."""
    if n <= 1:
        return [GRADED[0]] * n
    return [GRADED[round(i * (len(GRADED) - 1) / (n - 1))] for i in range(n)]


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _other_points(spec: ExperimentSpec, results: list[dict[str, Any]], exclude: Iterable[str]
                  ) -> list[dict[str, Any]]:
    """The combinations of the axes other than seed and ``exclude`` that occur in the results."""
    names = [a for a in spec.axis_names if a != SEED_AXIS and a not in set(exclude)]
    seen: list[dict[str, Any]] = []
    for res in sorted(results, key=lambda r: r["index"]):
        combo = {a: res["values"][a] for a in names}
        if combo not in seen:
            seen.append(combo)
    return seen or [{}]


def figure_data(spec: ExperimentSpec, results: Iterable[dict[str, Any]]) -> list[FigureData]:
    """Every figure of ``spec`` from the finished jobs (those that raised are left out); a
    figure with a ``panel`` axis gives one figure per value of it and rule."""
    results = ok_results(results)
    out: list[FigureData] = []
    for i, fig in enumerate(spec.figures):
        if fig.panel:
            out += _panels(spec, fig, i, results)
        elif fig.kind == "optimum":
            out.append(_optimum_figure(spec, fig, i, results))
        else:
            out.append(_figure(spec, fig, i, results))
    return out


def _panels(spec: ExperimentSpec, fig: FigureSpec, i: int, results: list[dict[str, Any]]
            ) -> list[FigureData]:
    """``fig.y`` along ``fig.x``, one figure per (value of ``fig.panel``, rule), one curve per
    value of the other non-seed axes, coloured in their order (e.g. narrow to wide)."""
    values = next(a.values for a in spec.axes if a.field == fig.x)
    panel_values = next(a.values for a in spec.axes if a.field == fig.panel)
    combos = _grid_points(spec, (fig.x, fig.panel))  # (fixed colours as results come in)
    colours = graded_colours(len(combos))
    out = []
    for pv in panel_values:
        for rule in spec.rules:
            series = []
            for where, colour in zip(combos, colours):
                pts = _along(results, rule, fig, {**where, fig.panel: pv}, values)
                name = ", ".join(f"{k}={_fmt(v)}" for k, v in where.items()) or rule
                series.append(_series(name, rule, pts, fig.y_log, colour))
            fid = f"{spec.name}_{i + 1}_{fig.y.replace('@', '_at_')}_{_fmt(pv)}_{rule}"
            out.append(FigureData(fid, fig.kind, f"{fig.title}: {fig.panel} {_fmt(pv)}, {rule}",
                                  label(fig.x), fig.y_label or label(fig.y), fig.x_log,
                                  fig.y_log, tuple(series),
                                  RATE_ERROR if fig.y == "success" else MEAN_ERROR))
    return out


def _grid_points(spec: ExperimentSpec, exclude: Iterable[str]) -> list[dict[str, Any]]:
    """Every combination of the axes other than seed and ``exclude`` (before any result)."""
    import itertools

    axes = [a for a in spec.axes if a.field != SEED_AXIS and a.field not in set(exclude)]
    return [dict(zip((a.field for a in axes), combo))
            for combo in itertools.product(*(a.values for a in axes))] or [{}]


OPTIMUM_ERROR = "parabola vertex in log lr; 95 % bootstrap interval over seeds"


def _optimum_figure(spec: ExperimentSpec, fig: FigureSpec, i: int,
                    results: list[dict[str, Any]]) -> FigureData:
    """The best value of ``fig.over`` (parabola minimum of ``fig.y`` in log) against ``fig.x``,
    one series per rule and value of the other non-seed axes; bars: the bootstrap interval."""
    from engine.experiments.transfer import curve, optimum

    xs = next(a.values for a in spec.axes if a.field == fig.x)
    combos = _grid_points(spec, (fig.x, fig.over))
    series = []
    for where in combos:
        for rule in spec.rules:
            pts = []
            for x in xs:
                c = curve(spec, results, rule, fig.over, {**where, fig.x: x}, fig.y)
                if c is None:
                    continue
                o = optimum(c)
                if all(math.isfinite(v) for v in (o.log_lr, o.lo, o.hi)):
                    pts.append((float(x), (o.lr, 10 ** o.lo, 10 ** o.hi, o.seeds)))
            name = ", ".join([*(f"{k}={_fmt(v)}" for k, v in where.items()), rule])
            series.append(_series(name, rule, pts, True))
    return FigureData(f"{spec.name}_{i + 1}_best_{fig.over}", "vs_axis", fig.title, label(fig.x),
                      fig.y_label or f"best {label(fig.over)}", fig.x_log, True, tuple(series),
                      OPTIMUM_ERROR)


def _figure(spec: ExperimentSpec, fig: FigureSpec, i: int, results: list[dict[str, Any]]
            ) -> FigureData:
    fid = f"{spec.name}_{i + 1}_{fig.y.replace('@', '_at_')}"
    y_label = fig.y_label or label(fig.y)
    rules = spec.rules
    series: list[Series] = []
    if fig.kind == "by_rule":
        for j, rule in enumerate(rules):
            p = point(results, rule, fig.y)
            series.append(_series(rule, rule, [(j, p)] if p else [], fig.y_log))
        return FigureData(fid, fig.kind, fig.title, "scaling rule", y_label, False, fig.y_log,
                          tuple(series), RATE_ERROR if fig.y == "success" else MEAN_ERROR,
                          tuple((float(j), r) for j, r in enumerate(rules)))
    if fig.kind == "vs_length":
        return _vs_length(spec, fig, fid, results)
    if fig.kind == "lr_sensitivity":
        return _sensitivity_figure(spec, fig, fid, results)
    if fig.kind == "vs_axis":
        return _vs_axis(spec, fig, fid, y_label, results)
    return _vs_step(spec, fig, fid, y_label, results)


def _along(results: list[dict[str, Any]], rule: str, fig: FigureSpec, where: dict[str, Any],
           values: Iterable[Any]) -> list[tuple[float, tuple[float, float, float, int]]]:
    """(x, point) of ``fig.y`` for ``rule`` at each value of the axis ``fig.x``, the other axes
    at ``where`` (a log x axis drops values <= 0)."""
    pts = []
    for v in values:
        p = point([r for r in results if _matches(r, {**where, fig.x: v})], rule, fig.y)
        if p is not None and not (fig.x_log and float(v) <= 0):
            pts.append((float(v), p))
    return pts


def _vs_axis(spec: ExperimentSpec, fig: FigureSpec, fid: str, y_label: str,
             results: list[dict[str, Any]]) -> FigureData:
    """The measure along one axis, a series per rule and per value of the other axes."""
    values = next(a.values for a in spec.axes if a.field == fig.x)
    series: list[Series] = []
    for rule in spec.rules:
        for where in _other_points(spec, results, (fig.x,)):
            pts = _along(results, rule, fig, where, values)
            name = rule + "".join(f", {k}={_fmt(v)}" for k, v in where.items())
            series.append(_series(name, rule, pts, fig.y_log))
    return FigureData(fid, fig.kind, fig.title, label(fig.x), y_label, fig.x_log, fig.y_log,
                      tuple(series), RATE_ERROR if fig.y == "success" else MEAN_ERROR)


def _per_step(results: list[dict[str, Any]], where: dict[str, Any], rule: str, y: str
              ) -> dict[int, list[float]]:
    """Every seed's finite value of ``y`` at each logged step, for ``rule`` in the jobs matching
    ``where``."""
    per_step: dict[int, list[float]] = {}
    for res in results:
        if not _matches(res, where):
            continue
        for row in res["rows"]:
            v = row.get(y)
            if row["scaling"] == rule and isinstance(v, (int, float)) and math.isfinite(v):
                per_step.setdefault(int(row["step"]), []).append(float(v))
    return per_step


def _vs_step(spec: ExperimentSpec, fig: FigureSpec, fid: str, y_label: str,
             results: list[dict[str, Any]]) -> FigureData:
    """The mean curve over seeds (band: ± 1 standard error), per rule and value of x."""
    splits = [{fig.x: v} for v in next(a.values for a in spec.axes if a.field == fig.x)] \
        if fig.x else [{}]
    series: list[Series] = []
    for rule in spec.rules:
        for where in splits:
            per_step = _per_step(results, where, rule, fig.y)
            pts = []
            for step in sorted(per_step):
                m, se = mean_se(per_step[step])
                pts.append((float(step), (m, m - se, m + se, len(per_step[step]))))
            name = rule + "".join(f", {k}={_fmt(v)}" for k, v in where.items())
            series.append(_series(name, rule, pts, fig.y_log))
    return FigureData(fid, fig.kind, fig.title, "step", y_label, False, fig.y_log, tuple(series),
                      MEAN_ERROR)


def trained_length(base: Any) -> str:
    """What the runs were trained on: "4-16 items" (retrieval) or "4 pairs" (recall)."""
    if base.task == "recall":
        return f"{base.pairs} pairs"
    return f"{base.items_min}-{base.items_max} items"


def length_x_label(spec: ExperimentSpec) -> str:
    """"items in the set at evaluation N (trained on 4-16)"; recall: key-value pairs."""
    b = spec.base
    if b.task == "recall":
        return f"key-value pairs at evaluation N (trained on {b.pairs})"
    return f"items in the set at evaluation N (trained on {b.items_min}-{b.items_max})"


def _vs_length(spec: ExperimentSpec, fig: FigureSpec, fid: str, results: list[dict[str, Any]]
               ) -> FigureData:
    """``fig.y`` after training against the evaluation length, one series per rule (and value of
    the axes other than seed), mean ± 1 standard error over seeds. The training length is on the
    x axis where the spec evaluates at ``items_max`` too (its reference point)."""
    lengths = sorted(spec.base.eval_lengths)
    series = []
    for rule in spec.rules:
        for where in _other_points(spec, results, ()):
            sel = [r for r in results if _matches(r, where)]
            pts = []
            for n in lengths:
                p = point(sel, rule, f"{fig.y}_len{n}")
                if p is not None:
                    pts.append((float(n), p))
            name = rule + "".join(f", {k}={_fmt(v)}" for k, v in where.items())
            series.append(_series(name, rule, pts, fig.y_log))
    return FigureData(fid, fig.kind, fig.title, length_x_label(spec),
                      fig.y_label or label(f"{fig.y}_len"), fig.x_log, fig.y_log, tuple(series),
                      MEAN_ERROR)


def _longest_length(spec: ExperimentSpec, results: list[dict[str, Any]]) -> str:
    """Per rule: the metric at the shortest and the longest evaluation length (mean ± 1 SE over
    seeds), then each other rule's difference from the first rule at the longest length ± the
    combined standard error."""
    metric = spec.verdict.metric
    lengths = sorted(spec.base.eval_lengths)
    short, long = lengths[0], lengths[-1]
    b = spec.base
    parts, at_long = [], {}
    for rule in spec.rules:
        p_long = point(results, rule, f"{metric}_len{long}")
        text = f"{rule} "
        if short != long:
            text += f"{_describe(metric, point(results, rule, f'{metric}_len{short}'))} -> "
        parts.append(text + _describe(metric, p_long))
        if p_long is not None:
            at_long[rule] = (p_long[0], p_long[0] - p_long[1])
    line = (f"{label(metric + '_len')} after training (trained on {trained_length(b)}; "
            "mean ± 1 SE over seeds), N = "
            + (f"{short} -> {long}" if short != long else f"{long}") + ": " + "; ".join(parts))
    ref = spec.rules[0]
    diffs = [f"{rule} {y - at_long[ref][0]:+.3g} ± {math.hypot(se, at_long[ref][1]):.2g}"
             for rule, (y, se) in at_long.items() if rule != ref and ref in at_long]
    if diffs:
        line += f". At N = {long}, minus {ref} (± combined SE): " + ", ".join(diffs)
    return line


def _describe(metric: str, p: tuple[float, float, float, int] | None) -> str:
    if p is None:
        return "no runs"
    y, lo, hi, n = p
    if metric == "success":
        k = round(y * n)
        return f"{k}/{n} = {y:.2f} (95 % CI {lo:.2f}-{hi:.2f})"
    return f"{y:.3g} ± {y - lo:.2g} (n={n})"


def _median_steps(metric: str, results: list[dict[str, Any]], rule: str) -> str:
    """", median N steps" after a success rate (the runs that reached the target)."""
    if metric != "success":
        return ""
    steps = point_stats(results, rule).median_steps
    return f", median {steps:g} steps" if steps is not None else ""


def _sensitivity_figure(spec: ExperimentSpec, fig: FigureSpec, fid: str,
                        results: list[dict[str, Any]]) -> FigureData:
    """One bar per rule: its learning-rate sensitivity along ``fig.x`` ± 1 SE over seeds."""
    series = []
    for j, rule in enumerate(spec.rules):
        s = lr_sensitivity(results, rule, fig.x, fig.y)
        pts = [(j, (s.mean, s.mean - s.se, s.mean + s.se, s.n))] if s is not None else []
        series.append(_series(rule, rule, pts, fig.y_log))
    y_label = fig.y_label or f"{label('lr_sensitivity')} of the {label(fig.y)}"
    return FigureData(fid, "by_rule", fig.title, "scaling rule", y_label, False, fig.y_log,
                      tuple(series), MEAN_ERROR, tuple((float(j), r) for j, r in enumerate(spec.rules)))


def _basin_judgment(rule: str, s: Sensitivity, s_ref: Sensitivity,
                    top: tuple[float, float] | None, top_ref: tuple[float, float] | None,
                    at: str) -> str:
    """One rule against the reference: a difference counts beyond 2 combined standard errors."""
    d, e = s.mean - s_ref.mean, math.hypot(s.se, s_ref.se)
    basin = ("widens the basin" if d < -2 * e else "narrows the basin" if d > 2 * e
             else "does not change the basin measurably")
    text = f"{rule} {basin} ({d:+.3g} ± {e:.2g})"
    if top is None or top_ref is None:
        return text
    dl, el = top[0] - top_ref[0], math.hypot(top[1], top_ref[1])
    logits = f"largest |logit| at {at} {top[0]:.3g} ± {top[1]:.2g} vs {top_ref[0]:.3g} ± {top_ref[1]:.2g}"
    bounds = dl < -2 * el
    if basin == "widens the basin":
        return f"{text} and bounds the logit ({logits})" if bounds \
            else f"{text} without bounding the logit ({logits})"
    return f"{text}: it only bounds the logit ({logits})" if bounds \
        else f"{text} and does not bound the logit ({logits})"


def _sensitivity_verdict(spec: ExperimentSpec, results: list[dict[str, Any]]) -> str:
    """Each rule's sensitivity ± SE and best rate, then each against the first rule: does it
    widen the basin, and does it bound the largest |logit| at the largest rate."""
    v = spec.verdict
    values = next(a.values for a in spec.axes if a.field == v.over)
    sens = {rule: lr_sensitivity(results, rule, v.over, v.metric) for rule in spec.rules}
    parts = [f"{rule} {s.mean:.3g} ± {s.se:.2g} (best {v.over} {_fmt(s.best)}: "
             f"{s.best_loss:.3g} ± {s.best_loss_se:.2g})"
             for rule, s in sens.items() if s is not None]
    n = max((s.n for s in sens.values() if s is not None), default=0)
    line = (f"{label('lr_sensitivity')} of the {label(v.metric)} over {v.over} "
            f"{_fmt(values[0])}-{_fmt(values[-1])} (mean ± SE over {n} seeds; lower = a wider "
            "basin of good rates): " + "; ".join(parts))
    ref = spec.rules[0]
    if sens.get(ref) is None:
        return line
    at_top = [r for r in results if _matches(r, {v.over: values[-1]})]

    def top(rule: str) -> tuple[float, float] | None:
        p = point(at_top, rule, "max_logit_abs")
        return (p[0], p[0] - p[1]) if p is not None else None

    judged = [_basin_judgment(rule, s, sens[ref], top(rule), top(ref),
                              f"{v.over} {_fmt(values[-1])}")
              for rule, s in sens.items() if rule != ref and s is not None]
    if judged:
        line += f". Against {ref} (a difference counts beyond 2 combined SE): " + "; ".join(judged)
    return line


def verdict(spec: ExperimentSpec, results: Iterable[dict[str, Any]]) -> str:
    """One line computed from the results, with the uncertainty of every number."""
    v = spec.verdict
    results = [r for r in ok_results(results) if _matches(r, dict(v.at))]
    if not results:
        return "no finished jobs yet"
    metric = v.metric
    what = (f"reached {spec.target:.0%} training accuracy" if metric == "success"
            else label(metric))
    what += "".join(f" at {k}={_fmt(x)}" for k, x in v.at)
    parts = []
    if v.kind == "longest_length":
        return _longest_length(spec, results)
    if v.kind == "transfer":
        return transfer_verdict(spec, results)
    if v.kind == "lr_sensitivity":
        return _sensitivity_verdict(spec, results)
    if v.kind == "by_rule":
        for rule in spec.rules:
            parts.append(f"{rule} {_describe(metric, point(results, rule, metric))}"
                         + _median_steps(metric, results, rule))
        return f"{what}: " + "; ".join(parts)
    values = next(a.values for a in spec.axes if a.field == v.over)
    first, last = values[0], values[-1]
    for rule in spec.rules:
        parts.append(f"{rule} {_along_axis(metric, results, rule, v.over, values)}")
    return f"{what}, {v.over} {_fmt(first)} -> {_fmt(last)}: " + "; ".join(parts)


#: a metric that changes direction along an axis lists every point when there are this few
FEW_POINTS = 4
#: metrics whose higher values are better (best / worst); lower is better for LOWER_IS_BETTER;
#: any other metric's extremes are named highest / lowest
HIGHER_IS_BETTER = frozenset({"success", "final_accuracy", "probe_accuracy", "accuracy"})
LOWER_IS_BETTER = frozenset({"final_loss", "loss", "steps_to_target"})


def _along_axis(metric: str, results: list[dict[str, Any]], rule: str, over: str,
                values: Sequence[Any]) -> str:
    """One rule's part of an ``ends_of_axis`` verdict: the two ends ("A -> B") where the metric
    is monotone along the axis; where it is not, every point (a few) or the best and worst ones
    with their intervals besides the ends, and whether the ends represent the rest."""
    pts = []
    for value in values:
        sel = [r for r in results if _matches(r, {over: value})]
        p = point(sel, rule, metric)
        if p is not None:
            pts.append((value, p, _median_steps(metric, sel, rule)))

    def at(value: Any, p: Any, steps: str) -> str:
        return f"{_describe(metric, p)}{steps} at {over} {_fmt(value)}"

    ends = []
    for value in (values[0], values[-1]):
        sel = [r for r in results if _matches(r, {over: value})]
        ends.append(f"{_describe(metric, point(sel, rule, metric))}{_median_steps(metric, sel, rule)}")
    ys = [p[0] for _v, p, _s in pts]
    if len(pts) < 3 or _monotone(ys):
        return " -> ".join(ends)
    note = ("not monotone: the ends are not representative" if not _ends_represent(pts)
            else "not monotone, within the uncertainty")
    if len(pts) <= FEW_POINTS:
        return ", ".join(at(*pt) for pt in pts) + f" ({note})"
    high = max(pts, key=lambda pt: pt[1][0])
    low = min(pts, key=lambda pt: pt[1][0])
    best, worst = ("highest", "lowest")
    if metric.partition("@")[0] in HIGHER_IS_BETTER:
        best, worst = ("best", "worst")
    elif metric.partition("@")[0] in LOWER_IS_BETTER:
        best, worst, high, low = ("best", "worst", low, high)
    return (f"{best} {at(*high)}, {worst} {at(*low)}; ends {' -> '.join(ends)} ({note})")


def _monotone(ys: Sequence[float]) -> bool:
    steps = [b - a for a, b in pairwise(ys)]
    return all(d >= 0 for d in steps) or all(d <= 0 for d in steps)


def _ends_represent(pts: Sequence[tuple[Any, tuple[float, float, float, int], str]]) -> bool:
    """False when an inner point's interval lies wholly outside the span of the two ends'
    intervals: the ends then hide a peak or a dip that the uncertainty does not explain."""
    (_a, first, _s1), (_b, last, _s2) = pts[0], pts[-1]
    lo, hi = min(first[1], last[1]), max(first[2], last[2])
    return all(p[2] >= lo and p[1] <= hi for _v, p, _s in pts[1:-1])


def transfer_verdict(spec: ExperimentSpec, results: list[dict[str, Any]]) -> str:
    """Per rule and value of the other axes (e.g. param): the best ``over`` (lr) at the
    narrowest and at the widest ``width``, how far it moves (grid steps ± bootstrap SE, and as
    a factor), and whether the widest model is better at a fixed value: at the narrowest one's
    best grid value of ``over``, the metric of the widest minus the narrowest (mean ± SE over
    paired seeds)."""
    from engine.experiments.transfer import curve, fixed_lr_comparison, optimum, shift

    v = spec.verdict
    widths = next(a.values for a in spec.axes if a.field == v.width)
    narrow_w, wide_w = min(widths), max(widths)
    parts = []
    for where in _grid_points(spec, (v.over, v.width)):
        for rule in spec.rules:
            name = " ".join([*(f"{_fmt(x)}" for x in where.values()), rule])
            narrow = curve(spec, results, rule, v.over, {**where, v.width: narrow_w}, v.metric)
            wide = curve(spec, results, rule, v.over, {**where, v.width: wide_w}, v.metric)
            if narrow is None or wide is None:
                parts.append(f"{name}: not enough runs yet")
                continue
            a, b, sh = optimum(narrow), optimum(wide), shift(narrow, wide)
            at, diff, diff_se = fixed_lr_comparison(narrow, wide)
            edge = "" if a.inside and b.inside else " (at the grid's end: may move further)"
            parts.append(f"{name} {a.lr:.3g} -> {b.lr:.3g}, {sh.steps:+.1f} ± "
                         f"{sh.se / sh.grid_step:.1f} grid steps (x{sh.factor:.2g}){edge}, widest "
                         f"at {at:.2g} {diff:+.2g} ± {diff_se:.2g}")
    return (f"best {v.over}, {v.width} {_fmt(narrow_w)} -> {_fmt(wide_w)} (parabola vertex in "
            f"log {v.over} of the {label(v.metric)}; ± bootstrap SE over seeds; widest at the "
            f"narrowest's best {v.over}: its {label(v.metric)} minus the narrowest's, ± SE): "
            + "; ".join(parts))
