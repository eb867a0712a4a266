"""Streaming statistics equal their one-shot NumPy counterparts, whatever the chunking."""

from __future__ import annotations

import numpy as np
import pytest

from engine.stats import PooledScoreMoments, RunningMoments, StreamingHistogram


def _chunks(x: np.ndarray, sizes: list[int]):
    i = 0
    for s in sizes:
        yield x[i:i + s]
        i += s


def test_running_moments_merge_exactly() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(1e6, 3.0, size=(1000, 3))  # large offset: naive sums would lose digits
    rm = RunningMoments(3)
    for c in _chunks(x, [1, 7, 300, 692]):
        rm.update(c)
    np.testing.assert_allclose(rm.mean, x.mean(0), rtol=1e-14)
    np.testing.assert_allclose(rm.var(), x.var(0, ddof=1), rtol=1e-9)
    np.testing.assert_allclose(rm.se(), x.std(0, ddof=1) / np.sqrt(1000), rtol=1e-9)


def test_pooled_moments_match_numpy_and_se_is_calibrated() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(5.0, 2.0, size=(2000, 8))
    pm = PooledScoreMoments()
    for c in _chunks(x, [100, 900, 1000]):
        pm.update(c)
    assert pm.mean_estimate().mean == pytest.approx(x.mean(), rel=1e-12)
    assert pm.var_estimate().mean == pytest.approx(x.var(), rel=1e-9)
    # independent entries: SE of the mean = sigma / sqrt(N), SE of the variance ~ sigma^2 sqrt(2/N)
    n = x.size
    assert pm.mean_estimate().se == pytest.approx(2.0 / np.sqrt(n), rel=0.1)
    assert pm.var_estimate().se == pytest.approx(4.0 * np.sqrt(2 / n), rel=0.1)


def test_pooled_se_accounts_for_shared_query() -> None:
    """Scores in a row that share a common term are correlated: the SE must be larger than iid."""
    rng = np.random.default_rng(2)
    common = rng.normal(size=(3000, 1))
    x = common + 0.1 * rng.normal(size=(3000, 16))
    pm = PooledScoreMoments()
    pm.update(x)
    iid_se = x.std() / np.sqrt(x.size)
    assert pm.mean_estimate().se > 3 * iid_se
    assert pm.mean_estimate().se == pytest.approx(x.mean(1).std(ddof=1) / np.sqrt(3000), rel=1e-9)


def test_histogram_edges_are_stable_and_counts_exact() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=10_000)
    h = StreamingHistogram(50)
    h.update(x[:100])
    edges = h.edges.copy()
    h.update(x[100:])
    snap = h.snapshot()
    np.testing.assert_array_equal(snap.edges, edges)
    inside = x[(x >= edges[0]) & (x <= edges[-1])]
    ref, _ = np.histogram(inside, bins=edges)
    np.testing.assert_array_equal(snap.counts, ref)
    assert snap.total == x.size
    assert snap.underflow == int((x < edges[0]).sum()) and snap.overflow == int((x > edges[-1]).sum())
    assert (snap.density() * snap.widths).sum() == pytest.approx(inside.size / x.size)


def test_histogram_of_constant_values_has_finite_edges() -> None:
    h = StreamingHistogram(10)
    h.update(np.zeros(5))
    snap = h.snapshot()
    assert np.all(np.isfinite(snap.edges)) and snap.counts.sum() == 5
