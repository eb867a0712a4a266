"""The full Jacobian matrix of ``inspect`` and the inspector, against a 60-digit mpmath oracle,
where it matters most: a saturated row whose winning weight rounds to 1 in float64 (the oracle
works at 1000 digits so that even 1 - p_max ~ 1e-302 keeps all its digits)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from engine.inspect import inspect_scores


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
