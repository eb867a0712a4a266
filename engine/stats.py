"""Streaming statistics: mergeable moments with standard errors, fixed-edge histograms.

Trials are the independent unit. Scores within one trial share a query, so the standard error of
a pooled score statistic is computed from per-trial summaries (batch means), never from the raw
scores as if they were independent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A Monte-Carlo figure with its standard error.

    ``estimable`` is False where the trials cannot give a mean whose ±1.96 SE interval covers at
    about 95 % (:func:`normal_interval_ok`); such a figure is shown as "not estimable from N
    trials", never as a number with a band."""

    mean: float
    se: float
    estimable: bool = True


#: a skewed mean's ±1.96 SE interval needs this many trials (measured coverage of the mean
#: weight on a target key, tests/engine/test_target_weight_coverage.py: 0.88-0.91 at 32 trials,
#: 0.92-0.94 at 128, 0.94-0.95 at 512) ...
MIN_TRIALS_SKEWED = 100
#: ... and this many trials carrying it (Kish's effective sample size (sum x)^2 / sum x^2: a
#: mean carried by a handful of rare rows has an SE as wrong as itself; the analogue of the
#: binomial rule "at least ten successes")
MIN_EFFECTIVE_TRIALS = 10.0


def effective_trials(n: int, mean: float, m2: float) -> float:
    """Kish's effective sample size (sum x)^2 / sum x^2 of n non-negative values with this mean
    and sum of squared deviations ``m2``: n when they are equal, 1 when one value holds all."""
    sum_sq = m2 + n * mean * mean
    return (n * mean) ** 2 / sum_sq if sum_sq > 0 else 0.0


def normal_interval_ok(trials: int, effective: float) -> bool:
    """Whether the mean of ``trials`` non-negative, skewed values (``effective`` of them carrying
    it) has a ±1.96 SE interval that covers at about its stated rate. A mean carried by rare rows
    fails it: its sample mean and SE both miss the rows that hold its mass."""
    return trials >= MIN_TRIALS_SKEWED and effective >= MIN_EFFECTIVE_TRIALS


class RunningMoments:
    """Mean and variance of k per-trial quantities, merged chunk by chunk (Chan et al.).

    ``update(x)`` takes an (m, k) array: m new trials. Numerically stable for any chunk count.
    """

    def __init__(self, k: int) -> None:
        self.n = 0
        self.mean = np.zeros(k)
        self.m2 = np.zeros(k)

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64)
        m = x.shape[0]
        if m == 0:
            return
        mean_b = x.mean(axis=0)
        m2_b = ((x - mean_b) ** 2).sum(axis=0)
        n = self.n + m
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (m / n)
        self.m2 = self.m2 + m2_b + delta**2 * (self.n * m / n)
        self.n = n

    def var(self) -> np.ndarray:
        """Sample variance of the per-trial values (ddof=1; 0 with one trial)."""
        if self.n < 2:
            return np.zeros_like(self.m2)
        return self.m2 / (self.n - 1)

    def se(self) -> np.ndarray:
        if self.n < 2:
            return np.zeros_like(self.m2)
        return np.sqrt(self.var() / self.n)

    def estimate(self, i: int) -> Estimate:
        return Estimate(float(self.mean[i]), float(self.se()[i]))

    def checked_estimate(self, i: int) -> Estimate:
        """``estimate(i)`` of a non-negative, skewed quantity, marked not estimable where its
        interval would not cover (:func:`normal_interval_ok`)."""
        e = self.estimate(i)
        ess = effective_trials(self.n, float(self.mean[i]), float(self.m2[i]))
        return Estimate(e.mean, e.se, normal_interval_ok(self.n, ess))


class PooledScoreMoments:
    """Mean and variance of all scores pooled over trials, with standard errors.

    Per trial we keep a = row mean of x and b = row mean of (x - c)^2 (c: a shift fixed at the
    first chunk, for accuracy). Pooled mean = E[a]; pooled variance = E[b] - (E[a] - c)^2. Their
    standard errors come from the covariance of (a, b) across trials (delta method), because the
    n scores of one trial are not independent.
    """

    def __init__(self) -> None:
        self.shift: float | None = None
        self.n = 0
        self.mean = np.zeros(2)
        self.comoment = np.zeros((2, 2))

    def update(self, x: np.ndarray) -> None:
        """``x``: (m, n_keys) scores of m new trials."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[0] == 0:
            return
        if self.shift is None:
            self.shift = float(x.mean())
        a = x.mean(axis=1)
        b = ((x - self.shift) ** 2).mean(axis=1)
        ab = np.stack([a, b], axis=1)
        m = ab.shape[0]
        mean_b = ab.mean(axis=0)
        d = ab - mean_b
        com_b = d.T @ d
        n = self.n + m
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (m / n)
        self.comoment = self.comoment + com_b + np.outer(delta, delta) * (self.n * m / n)
        self.n = n

    def _cov(self) -> np.ndarray:
        if self.n < 2:
            return np.zeros((2, 2))
        return self.comoment / (self.n - 1)

    def mean_estimate(self) -> Estimate:
        cov = self._cov()
        return Estimate(float(self.mean[0]), math.sqrt(max(cov[0, 0], 0.0) / max(self.n, 1)))

    def var_estimate(self) -> Estimate:
        if self.n == 0:
            return Estimate(0.0, 0.0)
        centred = self.mean[0] - (self.shift or 0.0)
        var = max(float(self.mean[1] - centred**2), 0.0)
        grad = np.array([-2.0 * centred, 1.0])
        se2 = float(grad @ self._cov() @ grad) / max(self.n, 1)
        return Estimate(var, math.sqrt(max(se2, 0.0)))


@dataclass(frozen=True)
class Histogram:
    """Counts on fixed edges; values outside go to ``underflow`` / ``overflow``."""

    edges: np.ndarray
    counts: np.ndarray
    underflow: int = 0
    overflow: int = 0

    @property
    def total(self) -> int:
        return int(self.counts.sum()) + self.underflow + self.overflow

    @property
    def widths(self) -> np.ndarray:
        return np.diff(self.edges)

    def density(self) -> np.ndarray:
        """Counts as a probability density (integrates to the in-range fraction)."""
        total = self.total
        if total == 0:
            return np.zeros(self.counts.shape, dtype=np.float64)
        return self.counts / (total * self.widths)

    def fraction(self) -> np.ndarray:
        total = self.total
        return self.counts / total if total else np.zeros(self.counts.shape, dtype=np.float64)


class StreamingHistogram:
    """A histogram whose edges never move once chosen, so progressive snapshots are comparable.

    Edges are given, or chosen from the first chunk (its range widened by a margin).
    """

    def __init__(self, bins: int, edges: np.ndarray | None = None, margin: float = 0.25) -> None:
        self.bins = bins
        self.margin = margin
        self.edges = None if edges is None else np.asarray(edges, dtype=np.float64)
        self.counts = np.zeros(bins, dtype=np.int64)
        self.underflow = 0
        self.overflow = 0

    def _choose_edges(self, x: np.ndarray) -> None:
        lo, hi = float(x.min()), float(x.max())
        span = hi - lo
        if not math.isfinite(span) or span <= 1e-12 * max(abs(lo), abs(hi), 1e-300):
            pad = max(abs(lo) * 1e-3, 1e-6)
            lo, hi = lo - pad, hi + pad
        else:
            lo, hi = lo - self.margin * span, hi + self.margin * span
        self.edges = np.linspace(lo, hi, self.bins + 1)

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64).ravel()
        if x.size == 0:
            return
        if self.edges is None:
            self._choose_edges(x)
        edges = self.edges
        lo, hi = edges[0], edges[-1]
        below = x < lo
        above = x > hi
        self.underflow += int(below.sum())
        self.overflow += int(above.sum())
        inside = x[~(below | above)]
        # uniform edges: direct index arithmetic is O(n) and much faster than searchsorted
        idx = np.floor((inside - lo) * (self.bins / (hi - lo))).astype(np.int64)
        np.clip(idx, 0, self.bins - 1, out=idx)
        self.counts += np.bincount(idx, minlength=self.bins)

    def snapshot(self) -> Histogram:
        edges = self.edges if self.edges is not None else np.linspace(0.0, 1.0, self.bins + 1)
        return Histogram(edges.copy(), self.counts.copy(), self.underflow, self.overflow)
