"""The mean weight on key 0 and its 95 % interval cover the truth at their stated rate.

The truth comes from outside the engine: 1/n by symmetry at correlation 0 (every key is
exchangeable), and a brute-force NumPy softmax over many rows where key 0 is a target key.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.config import SimulationConfig
from engine.simulate import run_simulation
from engine.stats import Estimate, RunningMoments, effective_trials

Z95 = 1.959964


def binomial_bounds(runs: int, p: float, tail: float = 1e-3) -> tuple[int, int]:
    """The smallest and largest count of covering runs that a rate p leaves more than ``tail``
    of probability beyond (exact binomial)."""
    pmf = [math.comb(runs, k) * p**k * (1 - p) ** (runs - k) for k in range(runs + 1)]
    cdf = np.cumsum(pmf)
    lo = int(np.searchsorted(cdf, tail))
    hi = int(np.searchsorted(cdf, 1 - tail))
    return lo, hi


def brute_force_p0(d_k: int, n: int, rho: float, scale: float, rows: int, seed: int) -> float:
    """Mean softmax weight on key 0, whose entries are rho * q + sqrt(1 - rho^2) * noise."""
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(rows // 20_000):
        q = rng.standard_normal((20_000, 1, d_k))
        k = rng.standard_normal((20_000, n, d_k))
        k[:, 0] = rho * q[:, 0] + math.sqrt(1 - rho * rho) * k[:, 0]
        z = (q * k).sum(-1) * scale
        w = np.exp(z - z.max(axis=1, keepdims=True))
        total += float((w[:, 0] / w.sum(axis=1)).sum())
    return total / (rows // 20_000 * 20_000)


def test_key_0_at_correlation_0_is_1_over_n_where_the_sample_mean_misses_it():
    """The issue's case: sharp logits (none at d_k 64), many keys, few trials. The sample mean
    of p_0 is orders of magnitude below 1/n; the figure shown is 1/n (with no spread)."""
    n = 4096
    snap = run_simulation(SimulationConfig(d_k=64, n_keys=n, trials=24, scalings=("none", "sqrt")))
    for rule in ("none", "sqrt"):
        w = snap.rules[rule].target_weight
        assert w.estimable
        assert w.mean == pytest.approx(1.0 / n, rel=1e-9)
        assert w.se < 1e-12 / n


def test_sample_mean_of_a_rarely_winning_key_is_not_estimable():
    """A mean carried by one trial in 200 is marked, not drawn (Kish's n_eff = 1)."""
    rm = RunningMoments(1)
    rm.update(np.r_[1.0, np.full(199, 1e-60)][:, None])
    assert effective_trials(rm.n, float(rm.mean[0]), float(rm.m2[0])) == pytest.approx(1.0)
    assert not rm.checked_estimate(0).estimable
    rm2 = RunningMoments(1)
    rm2.update(np.random.default_rng(0).uniform(0.0, 1.0, (200, 1)))
    assert rm2.checked_estimate(0).estimable  # n_eff = 150: fine
    few = RunningMoments(1)
    few.update(np.random.default_rng(0).uniform(0.0, 1.0, (50, 1)))
    assert not few.checked_estimate(0).estimable  # too few trials for a skewed mean


def test_not_estimable_in_a_run_and_its_summary_row():
    """A weak target among many keys under sharp logits: key 0 almost never wins."""
    snap = run_simulation(SimulationConfig(d_k=64, n_keys=1024, trials=128, correlation=0.05,
                                           scalings=("none",)))
    w = snap.rules["none"].target_weight
    assert not w.estimable
    row = snap.summary_rows()[0]
    assert row["target_weight_mean"] == "" and row["target_weight_se"] == ""


@pytest.mark.slow
@pytest.mark.parametrize("rule,scale", [("none", 1.0), ("sqrt", 0.5)])
def test_95_percent_intervals_cover_about_95_percent(rule: str, scale: float):
    """300 independent runs of 128 trials at d_k 4, n 8, rho 0.5: the count whose ±1.96 SE
    interval holds the brute-force truth lies within exact binomial bounds of 95 % (both
    sides: an interval too wide fails as surely as one too narrow)."""
    d_k, n, rho, runs = 4, 8, 0.5, 300
    truth = brute_force_p0(d_k, n, rho, scale, rows=400_000, seed=12345)
    covered = shown = 0
    for seed in range(runs):
        cfg = SimulationConfig(d_k=d_k, n_keys=n, trials=128, seed=seed, correlation=rho,
                               scalings=(rule,))
        w: Estimate = run_simulation(cfg).rules[rule].target_weight
        if w.estimable:
            shown += 1
            covered += abs(w.mean - truth) <= Z95 * w.se
    assert shown == runs  # a well-behaved mean: always estimable at 128 trials
    lo, hi = binomial_bounds(runs, 0.95)
    assert lo <= covered <= hi, (covered, runs, (lo, hi), truth)

