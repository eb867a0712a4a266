"""The score inspector's engine: repeated scores and the SSMax paper's Figure 1 example; the full Jacobian matrix of ``inspect`` and the inspector, against a 60-digit mpmath oracle,
where it matters most: a saturated row whose winning weight rounds to 1 in float64 (the oracle
works at 1000 digits so that even 1 - p_max ~ 1e-302 keeps all its digits)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from engine.errors import ConfigError
from engine.inspect import JACOBIAN_FULL_MAX, MAX_SCORES, inspect_scores, parse_score_list


def _oracle_jacobian(scores: list[float], scale: float) -> list[list[mpmath.mpf]]:
    """diag(p) - p p^T at 1000 digits, with 1 - p_i formed in high precision (no shortcut)."""
    with mpmath.workdps(1000):
        return _jacobian_mp(scores, scale)


def _jacobian_mp(scores: list[float], scale: float) -> list[list[mpmath.mpf]]:
    z = [mpmath.mpf(s) / mpmath.mpf(scale) for s in scores]
    e = [mpmath.exp(x) for x in z]
    total = mpmath.fsum(e)
    p = [x / total for x in e]
    n = len(p)
    return [[p[i] * ((1 if i == j else 0) - p[j]) for j in range(n)] for i in range(n)]


@pytest.mark.parametrize(("scores", "scale"), [
    ([40, 0, -3], 1.0),  # 1 - p_max = 4.46e-18: exactly 0 if formed as 1 - p_max in float64
    ([8, 0, -8], 1.0),
    ([700, 0, 5, -700], 1.0),  # 1 - p_max ~ e^-695: far below the float64 spacing, still normal
    ([16, 8, 0, -8], 8.0),
])
def test_every_jacobian_entry_matches_the_oracle_to_relative_precision(scores, scale) -> None:
    got = inspect_scores(scores, scale).jacobian
    want = _oracle_jacobian(scores, scale)
    for i, row in enumerate(want):
        for j, w in enumerate(row):
            if abs(w) < 1e-300:  # below float64's normal range: at most a subnormal's error
                assert abs(float(got[i, j]) - float(w)) <= 1e-320, (i, j)
                continue
            rel = abs((mpmath.mpf(float(got[i, j])) - w) / w)
            assert rel < 1e-13, (i, j, float(got[i, j]), float(w))


def test_the_saturated_diagonal_of_40_0_minus3() -> None:
    """The documented figure: the first diagonal entry is 4.46e-18, not 0 (docs/SCIENCE.md)."""
    r = inspect_scores([40, 0, -3])
    want = _oracle_jacobian([40, 0, -3], 1.0)[0][0]
    assert float(want) == pytest.approx(4.4601e-18, rel=1e-4)
    assert r.jacobian[0, 0] == pytest.approx(float(want), rel=1e-14)
    assert r.p_one_minus_p[0] == r.jacobian[0, 0]  # the diagonal shown as p_i (1 - p_i)
    assert 1.0 - r.weights[0] == 0.0  # why the naive form fails: p_max rounds to 1
    np.testing.assert_allclose(r.jacobian.sum(axis=1), 0.0, atol=1e-30)

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
