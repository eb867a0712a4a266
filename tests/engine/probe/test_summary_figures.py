"""engine.probe.summary on a head table written by hand (no model): every figure of the summary
probe-model prints and the claims read, against values worked out here, on heads whose median,
mean and extremes differ, and at the edges of its counts (a ratio of exactly 1, a ratio exactly
two standard errors above 1)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

from engine.probe.summary import summarize

# 2 layers x 3 heads; per layer the median is never the mean
RATIO = [[0.9, 1.0, 1.5], [2.5, 0.7, 1.25]]
SE = [[0.05, 0.3, 0.25], [0.5, 0.1, 0.0625]]


def _table(se=SE) -> dict[str, np.ndarray]:
    t = {
        "std_ratio": np.array(RATIO),
        "std_ratio_se": np.array(se, dtype=float),
        "raw_std": np.array([[1.0, 2.0, 9.0], [4.0, 3.0, 30.0]]),
        "attn_max_abs_diff": np.array([[1e-7, 3e-6, 2e-7], [5e-7, 4e-8, 9e-7]]),
        "layer": np.zeros((2, 3)),  # columns that are not figures of the summary
        "entropy_model": np.full((2, 3), 99.0),
    }
    for rule, base in (("model", 0.5), ("none", 0.1), ("dk", 0.8), ("cap", 0.3)):
        t[f"entropy_norm_{rule}"] = base + np.array([[0.0, 0.01, 0.09], [0.02, 0.03, 0.15]])
        t[f"saturated_frac_{rule}"] = 1 - base + np.array([[0.0, 0.06, 0.09], [0.0, 0.05, 0.02]])
    return t


def test_the_summary_by_hand() -> None:
    s = summarize(NS(n_layers=2), _table())
    assert s.heads == 6
    assert (s.ratio_min, s.ratio_max) == (0.7, 2.5)
    assert s.ratio_median == pytest.approx((1.0 + 1.25) / 2, rel=1e-15)  # the mean is 1.308
    # sorted SEs 0.05 0.0625 0.1 0.25 0.3 0.5
    assert s.ratio_se_median == pytest.approx((0.1 + 0.25) / 2, rel=1e-15)
    assert s.heads_above_1 == 3  # 1.5, 2.5, 1.25; a ratio of exactly 1 is not above
    # ratio - 2 SE: 0.8, 0.4, 1.0 (exactly: not above), 1.5, 0.5, 1.125
    assert s.heads_above_1_by_2se == 2
    assert set(s.entropy_norm) == set(s.saturated_frac) == {"model", "none", "dk", "cap"}
    for rule, base in (("model", 0.5), ("none", 0.1), ("dk", 0.8), ("cap", 0.3)):
        assert s.entropy_norm[rule] == pytest.approx(base + 0.3 / 6, rel=1e-12)
        assert s.saturated_frac[rule] == pytest.approx(1 - base + 0.22 / 6, rel=1e-12)
    assert s.attn_max_abs_diff == 3e-6
    first, second = s.layers
    assert (first.layer, second.layer) == (0, 1)
    assert (first.ratio_min, first.ratio_max, second.ratio_min, second.ratio_max) == (
        0.9, 1.5, 0.7, 2.5)
    assert (first.raw_std, second.raw_std) == (2.0, 4.0)
    assert (first.entropy_norm_model, second.entropy_norm_model) == pytest.approx((0.51, 0.53))
    assert (first.entropy_norm_none, second.entropy_norm_none) == pytest.approx((0.11, 0.13))
    assert (first.entropy_norm_dk, second.entropy_norm_dk) == pytest.approx((0.81, 0.83))
    assert (first.saturated_frac_none, second.saturated_frac_none) == pytest.approx((0.96, 0.92))
    assert (first.attn_max_abs_diff, second.attn_max_abs_diff) == (3e-6, 9e-7)


def test_one_layer_of_one_head() -> None:
    t = {k: v[:1, :1] for k, v in _table().items()}
    s = summarize(NS(n_layers=1), t)
    assert s.heads == 1 and len(s.layers) == 1
    assert s.ratio_min == s.ratio_max == s.ratio_median == 0.9
    assert s.ratio_se_median == 0.05 and s.heads_above_1 == 0 and s.heads_above_1_by_2se == 0


def test_standard_errors_below_1_are_still_standard_errors() -> None:
    """Every SE is small (the largest 0.01): a median and a count, not 'no bootstrap'."""
    s = summarize(NS(n_layers=2), _table(se=np.full((2, 3), 0.01)))
    assert s.ratio_se_median == 0.01
    assert s.heads_above_1_by_2se == 3  # 1.5, 2.5 and 1.25 minus 0.02; 1.0 is not
    s = summarize(NS(n_layers=2), _table(se=np.zeros((2, 3))))
    assert s.ratio_se_median is None and s.heads_above_1_by_2se == 0
    assert s.heads_above_1 == 3
