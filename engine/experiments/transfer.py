"""Learning-rate transfer across widths (Yang et al. 2022, microsoft/mup's "loss vs log2 lr per
width" figure): where a loss curve over the learning rate has its minimum, how far that minimum
moves as the model widens, and whether a wider model is better at a fixed learning rate.

The best learning rate of one curve is the vertex of the parabola, in log10(lr) and log(loss),
through the grid point with the lowest mean loss over seeds and its two neighbours (parabolic
interpolation; log loss because a loss curve spans decades, from a solved task near 0 to the
loss of a guess, and is closer to a parabola there); at an end of the grid it is that end, said
as such. A run
that diverged, or ended above the loss of a uniform guess ln(classes), counts as that loss (it
learned nothing; Wortsman et al. 2023 cap at the loss at init alike). The uncertainty is a
bootstrap over seeds: the seeds are resampled with replacement (the same resample for every
learning rate and width, since one seed draws the same data at all of them), B times with a fixed
generator, so every figure is reproducible bit for bit. With 2 seeds the bootstrap has only three
distinct resamples: a rough interval, said as such.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.experiments.point import mean_se, ok_results, run_value
from engine.experiments.summary import SEED_AXIS

#: bootstrap resamples, and the generator's seed (fixed: the figures are reproducible)
BOOTSTRAP = 2000
BOOTSTRAP_SEED = 0
INTERVAL = (2.5, 97.5)
#: losses are floored here before the log (a batch solved exactly has loss 0)
LOSS_FLOOR = 1e-12


def vertices(x: Sequence[float], y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``y`` (curves over the grid ``x``): the vertex of the parabola through
    the row's lowest point and its two neighbours, and whether that point is inside the grid
    (else the vertex is that end of the grid). Rows that are not all finite give nan."""
    xs = np.asarray(x, dtype=float)
    ys = np.atleast_2d(np.asarray(y, dtype=float))
    finite = np.isfinite(ys).all(axis=1)
    i = np.argmin(np.where(np.isfinite(ys), ys, np.inf), axis=1)
    inside = (i > 0) & (i < len(xs) - 1)
    if len(xs) < 3:
        return np.where(finite, xs[i], np.nan), inside
    j = np.clip(i, 1, len(xs) - 2)
    x0, x1, x2 = xs[j - 1], xs[j], xs[j + 1]
    rows = np.arange(len(ys))
    y0, y1, y2 = ys[rows, j - 1], ys[rows, j], ys[rows, j + 1]
    den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)
    num = (x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = x1 - 0.5 * num / den
    ok = inside & (den != 0) & np.isfinite(v)
    # between the outer two points, whichever way the grid runs (an axis keeps its given order)
    v = np.where(ok, np.clip(v, np.minimum(x0, x2), np.maximum(x0, x2)), xs[i])
    return np.where(finite, v, np.nan), inside


def parabola_minimum(x: Sequence[float], y: Sequence[float]) -> tuple[float, bool]:
    """(x of the minimum, whether it is inside the grid) of one curve (``vertices``)."""
    v, inside = vertices(x, np.asarray(y, dtype=float)[None, :])
    return float(v[0]), bool(inside[0])


@dataclass(frozen=True)
class Curve:
    """Loss against the learning rate for one point of the other axes (one width, one param),
    one rule: ``losses[i, j]`` = capped loss at lr i for seed j (nan: no finished run)."""

    lrs: tuple[float, ...]
    seeds: tuple[Any, ...]
    losses: np.ndarray

    @property
    def log_lrs(self) -> np.ndarray:
        return np.log10(np.asarray(self.lrs, dtype=float))

    def means(self, draws: np.ndarray | None = None) -> np.ndarray:
        """Mean over seeds at each lr: (n_lr,), or (B, n_lr) over the resampled seed columns
        ``draws`` (B, seeds); nan where no seed has a value."""
        cols = self.losses[:, None, :] if draws is None else self.losses[:, draws]
        ok = np.isfinite(cols)
        n = ok.sum(axis=-1)
        with np.errstate(invalid="ignore"):
            m = np.where(ok, cols, 0.0).sum(axis=-1) / n
        m = np.where(n > 0, m, np.nan).T  # (B or 1, n_lr)
        return m[0] if draws is None else m

    def best(self, draws: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """log10 of the best lr (and whether inside the grid) of the seed means, or of each
        resample in ``draws``: the parabola vertex in log lr and log loss."""
        means = self.means(draws)
        return vertices(self.log_lrs, np.log(np.maximum(np.atleast_2d(means), LOSS_FLOOR)))

    def best_log_lr(self) -> float:
        return float(self.best()[0][0])


def capped_loss(res: dict[str, Any], rule: str, metric: str, cap: float) -> float:
    """A run's ``metric`` capped at ``cap`` (a diverged run, whose final figures are empty,
    counts as ``cap``); nan where the job has no result for ``rule``."""
    if rule not in res.get("rules", {}):
        return math.nan
    v = run_value(res, rule, metric)
    return cap if v is None or not math.isfinite(v) else min(v, cap)


def chance_loss(spec: Any) -> float:
    """ln(classes): the cross-entropy of a uniform guess (the zero-init readout's loss)."""
    return math.log(spec.base.classes)


def curve(spec: Any, results: Sequence[dict[str, Any]], rule: str, over: str,
          where: dict[str, Any], metric: str = "final_loss") -> Curve | None:
    """The curve of ``metric`` along the axis ``over`` at the axis values ``where`` (seeds
    kept apart); None where no run finished."""
    lrs = next(a.values for a in spec.axes if a.field == over)
    seed_axis = next((a.values for a in spec.axes if a.field == SEED_AXIS), (None,))
    cap = chance_loss(spec)
    losses = np.full((len(lrs), len(seed_axis)), np.nan)
    for res in ok_results(results):
        vals = res["values"]
        if any(vals.get(k) != v for k, v in where.items()) or vals.get(over) not in lrs:
            continue
        j = seed_axis.index(vals.get(SEED_AXIS)) if SEED_AXIS in vals else 0
        losses[lrs.index(vals[over]), j] = capped_loss(res, rule, metric, cap)
    if np.isnan(losses).all():
        return None
    return Curve(tuple(float(v) for v in lrs), tuple(seed_axis), losses)


def _resamples(n_seeds: int) -> np.ndarray:
    """(BOOTSTRAP, n_seeds) seed indices drawn with replacement from a fixed generator."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    return rng.integers(0, n_seeds, size=(BOOTSTRAP, n_seeds))


@dataclass(frozen=True)
class Optimum:
    """The best learning rate of one curve with its bootstrap uncertainty (in log10 lr)."""

    log_lr: float
    se: float  #: bootstrap standard deviation of log10(best lr)
    lo: float  #: 95 % bootstrap interval of log10(best lr)
    hi: float
    inside: bool  #: the grid's best point is not at an end of the grid
    seeds: int

    @property
    def lr(self) -> float:
        return 10.0 ** self.log_lr


def _boot(values: np.ndarray) -> tuple[float, float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return math.nan, math.nan, math.nan
    lo, hi = np.percentile(finite, INTERVAL)
    return float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0, float(lo), float(hi)


def _boot_minima(c: Curve, draws: np.ndarray) -> np.ndarray:
    """log10 of the best lr of each resample (nan where a resample misses an lr)."""
    return c.best(draws)[0]


def optimum(c: Curve) -> Optimum:
    """The best learning rate of ``c`` (parabola minimum of the seed means) and its bootstrap."""
    best, inside = c.best()
    log_lr, inside = float(best[0]), bool(inside[0])
    se, lo, hi = _boot(_boot_minima(c, _resamples(c.losses.shape[1])))
    seeds = int(np.isfinite(c.losses).any(axis=0).sum())
    return Optimum(log_lr, se, lo, hi, inside, seeds)


@dataclass(frozen=True)
class Shift:
    """How far the best learning rate moves from one curve (narrowest) to another (widest)."""

    log_shift: float  #: log10(best lr wide / best lr narrow)
    se: float  #: bootstrap standard deviation (the same seed resample for both curves)
    lo: float
    hi: float
    #: log10 of the grid's mean ratio between neighbouring learning rates (> 0 in either order)
    grid_step: float

    @property
    def steps(self) -> float:
        return self.log_shift / self.grid_step

    @property
    def factor(self) -> float:
        return 10.0 ** self.log_shift


def shift(narrow: Curve, wide: Curve) -> Shift:
    draws = _resamples(narrow.losses.shape[1])
    boot = _boot_minima(wide, draws) - _boot_minima(narrow, draws)
    se, lo, hi = _boot(boot)
    x = narrow.log_lrs
    step = float(abs(x[-1] - x[0]) / (len(x) - 1)) if len(x) > 1 else 1.0
    return Shift(wide.best_log_lr() - narrow.best_log_lr(), se, lo, hi, step)


def fixed_lr_comparison(narrow: Curve, wide: Curve) -> tuple[float, float, float]:
    """Whether the wide model is better at a fixed learning rate: (the narrow model's best grid
    lr, the difference wide - narrow of the loss there, mean ± its standard error over the
    seeds, paired)."""
    i = int(np.nanargmin(narrow.means()))
    diffs = [w - n for w, n in zip(wide.losses[i], narrow.losses[i])
             if math.isfinite(w) and math.isfinite(n)]
    d, se = mean_se(diffs) if diffs else (math.nan, math.nan)
    return narrow.lrs[i], d, se


# -- published figures (resources/claims.json, kind "optimum") --------------------------------------
#: best_lr: the parabola minimum (as a learning rate), best_lr_lo / _hi: its 95 % bootstrap
#: interval; best_log10_lr and its bootstrap se;
#: shift_steps (widest vs narrowest, in grid steps) and its se; shift_factor (best lr ratio)
OPTIMUM_STATS = ("best_lr", "best_lr_lo", "best_lr_hi", "best_log10_lr", "best_log10_lr_se",
                 "shift_steps", "shift_steps_se", "shift_factor")


@dataclass(frozen=True)
class OptimumSelector:
    """One figure of a ``transfer`` experiment: ``stat`` of ``rule`` at the axis values ``at``
    (every axis but seed, the verdict's ``over`` and, for the shift, its ``width``)."""

    stat: str
    rule: str
    at: dict[str, Any]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OptimumSelector:
        from engine.errors import ConfigError

        unknown = sorted(set(data) - {"stat", "rule", "at"})
        if unknown or not isinstance(data.get("at", {}), dict) or "stat" not in data \
                or "rule" not in data:
            raise ConfigError("measure", "needs stat, rule and at (a mapping of axis values)"
                                         + (f"; unknown key(s) {', '.join(unknown)}" if unknown
                                            else ""))
        return cls(str(data["stat"]), str(data["rule"]), dict(data.get("at", {})))

    def _needs(self, spec: Any) -> set[str]:
        v = spec.verdict
        skip = {SEED_AXIS, v.over} | ({v.width} if self.stat.startswith("shift") else set())
        return {a.field for a in spec.axes if a.field not in skip}

    def check(self, spec: Any) -> None:
        from engine.errors import ConfigError

        if spec.verdict.kind != "transfer":
            raise ConfigError("measure", f"{spec.name!r} has no transfer verdict (over, width)")
        if self.stat not in OPTIMUM_STATS:
            raise ConfigError("measure", f"stat must be one of {', '.join(OPTIMUM_STATS)}")
        if self.rule not in spec.rules:
            raise ConfigError("measure", f"rule {self.rule!r} is not trained in {spec.name!r}")
        if set(self.at) != self._needs(spec):
            raise ConfigError("measure", f"at must fix exactly {', '.join(sorted(self._needs(spec)))}")
        axes = {a.field: a.values for a in spec.axes}
        for k, val in self.at.items():
            if val not in axes[k]:
                raise ConfigError("measure", f"{k}={val!r} is not a value of that axis")

    def measure(self, spec: Any, results: Sequence[dict[str, Any]]) -> tuple[float, float]:
        """(the figure, its standard error over the seeds in the figure's units): every figure
        here is computed from seeds, so each is judged with their uncertainty (``figure_se``)."""
        from engine.errors import ConfigError

        v = spec.verdict
        if self.stat.startswith("shift"):
            widths = next(a.values for a in spec.axes if a.field == v.width)
            curves = [curve(spec, results, self.rule, v.over, {**self.at, v.width: w}, v.metric)
                      for w in (min(widths), max(widths))]
        else:
            curves = [curve(spec, results, self.rule, v.over, self.at, v.metric)]
        if any(c is None for c in curves):
            raise ConfigError("measure", f"no finished run of {self.rule!r} at {self.at}")
        seeds = int(min(np.isfinite(c.losses).any(axis=0).sum() for c in curves))
        if self.stat.startswith("shift"):
            sh = shift(curves[0], curves[1])
            return figure_se(self.stat, sh.log_shift, sh.se, sh.lo, sh.hi, seeds, sh.grid_step)
        o = optimum(curves[0])
        return figure_se(self.stat, o.log_lr, o.se, o.lo, o.hi, seeds)


def se_of_end(se: float, seeds: int) -> float:
    """The standard error of a 95 % bootstrap interval's end (in log10 lr). The end is about
    the estimate -+ z SE: it moves with the estimate (SE) and with the spread the seeds show
    (SE / sqrt(2 (n - 1)), times z), so its SE is SE sqrt(1 + z^2 / (2 (n - 1))) (1.40 SE
    for 3 seeds)."""
    from engine.experiments.point import Z95

    return se * math.sqrt(1 + Z95 ** 2 / (2 * (seeds - 1))) if seeds > 1 else math.nan


def figure_se(stat: str, log_value: float, se: float, lo: float, hi: float, seeds: int,
              grid_step: float = 1.0) -> tuple[float, float]:
    """(figure, standard error) of an OPTIMUM_STATS figure from its log10 value (a best lr, or
    a shift), its bootstrap SE and 95 % interval (log10) over ``seeds`` seeds. A learning rate
    or a factor 10^x has the SE ln(10) 10^x SE_x (delta method); an interval end that of
    ``se_of_end``; a printed SE the standard error of a standard error, SE / sqrt(2 (n - 1))."""
    ln10 = math.log(10)
    se_se = se / math.sqrt(2 * (seeds - 1)) if seeds > 1 else math.nan
    table = {
        "best_lr": (10.0 ** log_value, ln10 * 10.0 ** log_value * se),
        "best_lr_lo": (10.0 ** lo, ln10 * 10.0 ** lo * se_of_end(se, seeds)),
        "best_lr_hi": (10.0 ** hi, ln10 * 10.0 ** hi * se_of_end(se, seeds)),
        "best_log10_lr": (log_value, se),
        "best_log10_lr_se": (se, se_se),
        "shift_steps": (log_value / grid_step, se / grid_step),
        "shift_steps_se": (se / grid_step, se_se / grid_step),
        "shift_factor": (10.0 ** log_value, ln10 * 10.0 ** log_value * se),
    }
    return table[stat]
