"""The score inspector's engine: repeated scores and the SSMax paper's Figure 1 example."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.inspect import JACOBIAN_FULL_MAX, MAX_SCORES, inspect_scores, parse_score_list

#: Nakanishi (2025), Figure 1: one score of +3 among n - 1 scores of -2, top softmax weight
FIGURE_1 = {10: (0.9428, 0.9401), 100: (0.5999, 0.9951), 1000: (0.1293, 0.9996),
            10_000: (0.0146, 1.0000)}


def _top_weight(n: int, factor: float) -> float:
    """Independent closed form: e^{3c} / (e^{3c} + (n - 1) e^{-2c}) = 1 / (1 + (n-1) e^{-5c})."""
    return 1.0 / (1.0 + (n - 1) * math.exp(-5.0 * factor))


def test_repeated_scores_parse():
    assert parse_score_list("3, -2*4") == [3.0, -2.0, -2.0, -2.0, -2.0]
    assert parse_score_list("[1 ; 0 * 2]") == [1.0, 0.0, 0.0]
    assert parse_score_list("1e3 -0.5×2") == [1000.0, -0.5, -0.5]
    assert len(parse_score_list("3, -2*9999")) == 10_000
    for bad in ("3, -2*0", "3, -2*x", "a, 1", "", f"1*{MAX_SCORES + 1}"):
        with pytest.raises(ConfigError) as exc:
            parse_score_list(bad)
        assert exc.value.field == "scores"


@pytest.mark.parametrize("n", sorted(FIGURE_1))
def test_ssmax_figure_1(n):
    softmax_top, ssmax_top = FIGURE_1[n]
    scores = parse_score_list(f"3, -2*{n - 1}")
    plain = inspect_scores(scores)
    ss = inspect_scores(scores, ssmax_s=0.43)
    assert plain.weights[0] == pytest.approx(_top_weight(n, 1.0), rel=1e-12)
    assert ss.weights[0] == pytest.approx(_top_weight(n, 0.43 * math.log(n)), rel=1e-12)
    assert round(float(plain.weights[0]), 4) == softmax_top
    assert round(float(ss.weights[0]), 4) == ssmax_top
    assert plain.has_full_jacobian == (n <= JACOBIAN_FULL_MAX)
    # the diagonal is p_i (1 - p_i) with or without the full matrix
    np.testing.assert_allclose(plain.p_one_minus_p, plain.weights * (1 - plain.weights), rtol=1e-9)


def test_ssmax_needs_a_positive_s():
    with pytest.raises(ConfigError) as exc:
        inspect_scores([1.0, 0.0], ssmax_s=0.0)
    assert exc.value.field == "ssmax_s"
