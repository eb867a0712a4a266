"""engine/theory.py's overlays and length formulas against hand-computed values and independent
integrals (mpmath quadrature), placed where a slip in the formula would show: unequal weights and
widths, a point mass first, an array of n, a margin variance below 1 (mutation testing,
docs/testing.md)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from engine.config import SimulationConfig
from engine.theory import (
    NormalMixture,
    capped_mixture,
    length_theory,
    needle_weight,
    needle_weight_mean,
)


def _normal(x: float, m: float, s: float) -> float:
    return math.exp(-((x - m) ** 2) / (2 * s * s)) / (s * math.sqrt(2 * math.pi))


def test_mixture_density_by_hand_with_a_point_mass_first() -> None:
    """The point mass (s = 0, qknorm at d_k = 1) draws nothing and the components after it still
    count; a narrow (s < 1) and a wide one, unequal weights."""
    mix = NormalMixture((0.2, 0.3, 0.5), (5.0, -1.0, 2.0), (0.0, 0.5, 2.0), False)
    x = [-1.0, 0.0, 2.5]
    want = [0.3 * _normal(v, -1.0, 0.5) + 0.5 * _normal(v, 2.0, 2.0) for v in x]
    np.testing.assert_allclose(mix.pdf(np.array(x)), want, rtol=1e-14)
    np.testing.assert_allclose(mix.pdf([-1, 0]), want[:2], rtol=1e-14)  # integer points
    one = NormalMixture((1.0,), (0.5,), (1.5,), True)
    assert float(one.pdf(np.array([2.0]))[0]) == pytest.approx(_normal(2.0, 0.5, 1.5), rel=1e-14)
    grid = np.linspace(-12.0, 16.0, 20001)  # the normal parts integrate to 0.8
    assert np.trapezoid(mix.pdf(grid), grid) == pytest.approx(0.8, rel=1e-9)


def _capped_moments(m: float, s: float, c: float) -> tuple[float, float]:
    """Mean and std of c tanh(Z / c), Z ~ N(m, s^2), by mpmath's adaptive quadrature (split at
    the mean and at the turn of tanh)."""
    with mpmath.workdps(20):
        pts = sorted({-mpmath.inf, mpmath.mpf(m), mpmath.mpf(0), mpmath.inf})
        mean = mpmath.quad(lambda z: c * mpmath.tanh(z / c) * mpmath.npdf(z, m, s), pts)
        var = mpmath.quad(lambda z: (c * mpmath.tanh(z / c) - mean) ** 2 * mpmath.npdf(z, m, s),
                          pts)
    return float(mean), float(mpmath.sqrt(var))


@pytest.mark.parametrize(("m", "s", "c"), [(1.5, 2.0, 3.0), (-4.0, 0.5, 3.0), (0.0, 10.0, 1.0),
                                           (3.0, 300.0, 0.01)])
def test_capped_moments_match_a_quadrature_of_c_tanh(m, s, c) -> None:
    """Spreads well past the cap included (s = 10 c: a 96-node Gauss-Hermite rule gave a std
    2 % high there); a second component far inside the cap; a point mass stays one."""
    mix = NormalMixture((0.25, 0.05, 0.7), (m, 2.0 * c, 0.1 * c), (s, 0.0, 0.2 * c), True)
    capped = capped_mixture(mix, c)
    assert capped.weights == (0.25, 0.05, 0.7) and capped.exact_moments is False
    for k, (mean, std) in [(0, _capped_moments(m, s, c)), (2, _capped_moments(0.1 * c, 0.2 * c, c))]:
        assert capped.means[k] == pytest.approx(mean, rel=1e-10, abs=1e-15)
        assert capped.stds[k] == pytest.approx(std, rel=1e-10)
    assert capped.means[1] == pytest.approx(c * math.tanh(2.0), rel=1e-14) and capped.stds[1] == 0.0


def test_needle_weight_by_hand() -> None:
    # 1 / (1 + (n - 1) e^(sigma^2/2 - delta)) at n = 5, sigma^2 = 0.5, delta = 1.2
    assert float(needle_weight(5, 0.5, 1.2)) == pytest.approx(1 / (1 + 4 * math.exp(-0.95)),
                                                             rel=1e-14)
    np.testing.assert_allclose(needle_weight(np.array([2, 100]), 2.0, 0.0),
                               [1 / (1 + math.e), 1 / (1 + 99 * math.e)], rtol=1e-14)


@pytest.mark.parametrize(("delta_mean", "delta_var"), [(1.0, 0.25), (3.0, 4.0)])
def test_needle_weight_mean_is_the_gaussian_average_of_the_formula(delta_mean, delta_var) -> None:
    ns = np.array([4, 64, 1000])
    got = needle_weight_mean(ns, 1.0, delta_mean, delta_var)
    assert got.shape == (3,)
    for n, g in zip(ns, got):
        want = mpmath.quad(lambda t, n=n: mpmath.npdf(t, delta_mean, math.sqrt(delta_var))
                           / (1 + (n - 1) * mpmath.exp(0.5 - t)), [-mpmath.inf, mpmath.inf])
        assert g == pytest.approx(float(want), rel=1e-9)
    # no spread: the formula at the mean margin
    assert float(needle_weight_mean(8, 1.0, 2.0, 0.0)) == pytest.approx(
        1 / (1 + 7 * math.exp(-1.5)), rel=1e-13)


def test_length_theory_by_hand_and_where_it_does_not_apply() -> None:
    """sqrt rule, Gaussian entries, key mean 0, d = 16: a non-target logit has variance
    sk^2 (sq^2 + mq^2); the target's margin mean is rho sq sk sqrt(d) and its variance
    sk^2 (mq^2 + sq^2 (1 + rho^2)) (E[z^4] = 3 for Gaussian entries)."""
    base = dict(d_k=16, n_keys=32, q_mean=0.3, q_std=1.5, k_std=0.8, scalings=("sqrt",))
    th = length_theory(SimulationConfig(correlation=0.5, **base), "sqrt")
    assert th.sigma2 == pytest.approx(0.64 * (2.25 + 0.09), rel=1e-13)
    assert th.delta_mean == pytest.approx(0.5 * 1.5 * 0.8 * 4.0, rel=1e-13)
    assert th.delta_var == pytest.approx(0.64 * (0.09 + 2.25 * 1.25), rel=1e-13)
    plain = length_theory(SimulationConfig(**base), "sqrt")
    assert (plain.delta_mean, plain.delta_var, plain.n) == (0.0, plain.sigma2, 32)
    assert plain.sigma2 == pytest.approx(0.64 * 2.34, rel=1e-13)
    # a uniform law, a key mean, a rule not linear in q.k, weights not a softmax: no theory
    assert length_theory(SimulationConfig(dist="uniform", **base), "sqrt") is None
    assert length_theory(SimulationConfig(k_mean=0.5, **base), "sqrt") is None
    assert length_theory(SimulationConfig(**base), "qknorm") is None
    assert length_theory(SimulationConfig(**base), "sigmoid") is None
    assert length_theory(SimulationConfig(**base), "sink") is None


def test_score_moments_by_hand_at_full_correlation_and_by_default() -> None:
    """rho = 1: k = mk + sk z_q, so per coordinate q_i k_i = mq mk + (mq sk + sq mk) z + sq sk z^2:
    mean mq mk + sq sk, variance (mq sk + sq mk)^2 + sq^2 sk^2 (E z^4 - 1) (E z^3 = 0). Without
    ``target`` the key is an independent one: d ((sq^2 + mq^2)(sk^2 + mk^2) - mq^2 mk^2)."""
    from engine.theory import raw_score_moments

    cfg = SimulationConfig(d_k=4, n_keys=8, q_mean=0.5, q_std=1.0, k_mean=-1.0, k_std=2.0,
                           correlation=1.0, scalings=("none",))
    mean, var = raw_score_moments(cfg, target=True)
    assert mean == pytest.approx(4 * (0.5 * -1.0 + 1.0 * 2.0)) and var == pytest.approx(4 * (0.0 + 4.0 * 2))
    assert raw_score_moments(cfg) == pytest.approx((4 * -0.5, 4 * (1.25 * 5.0 - 0.25)))


def test_raw_score_overlay_by_hand() -> None:
    """d = 4, sq = sk = 0.5, means 0, n = 8: an independent key's score has variance
    4 (0.25 * 0.25) = 0.25; the target's (rho = 0.5, Gaussian) mean 4 * 0.5 * 0.25 = 0.5 and
    variance 4 * 0.0625 (rho^2 (3 - 1) + 1 - rho^2) = 0.3125; weights 7/8 and 1/8."""
    from engine.theory import raw_score_theory

    base = dict(d_k=4, n_keys=8, q_std=0.5, k_std=0.5, scalings=("none",))
    mix = raw_score_theory(SimulationConfig(correlation=0.5, **base))
    assert mix.weights == pytest.approx((7 / 8, 1 / 8)) and mix.exact_moments is True
    assert mix.means == pytest.approx((0.0, 0.5))
    assert mix.stds == pytest.approx((0.5, math.sqrt(0.3125)))
    alone = raw_score_theory(SimulationConfig(**base))
    assert (alone.weights, alone.means, alone.exact_moments) == ((1.0,), (0.0,), True)
    assert alone.stds == pytest.approx((0.5,))


def test_logit_overlays_of_the_nonlinear_rules_by_hand() -> None:
    """softcap: the capped N(0, 1) of the sqrt logits (d = 16, unit entries); qknorm (rho = 0.5,
    Gaussian): N(0, d / (d - 1)) and the target N(rho sqrt(d), rho^2 (3 - 1) + 1 - rho^2);
    cosine (T = 2, |x|^2 ~ d (s^2 + m^2), norm = 16 sqrt(1.25 * 4)): N(0, 80 / (norm T)^2) and
    the target N(16 / (norm T), 96 / (norm T)^2). Only the raw moments are exact."""
    from engine.theory import logit_theory

    cap = logit_theory(SimulationConfig(d_k=16, n_keys=8, softcap=2.0, scalings=("softcap",)),
                       "softcap")
    mean, std = _capped_moments(0.0, 1.0, 2.0)
    assert cap.weights == (1.0,) and cap.exact_moments is False
    assert cap.means[0] == pytest.approx(mean, abs=1e-12) and cap.stds[0] == pytest.approx(std, rel=1e-10)
    qk = logit_theory(SimulationConfig(d_k=16, n_keys=8, correlation=0.5, scalings=("qknorm",),
                                       method="explicit"), "qknorm")
    assert qk.weights == pytest.approx((7 / 8, 1 / 8)) and qk.exact_moments is False
    assert qk.means == pytest.approx((0.0, 2.0))
    assert qk.stds == pytest.approx((math.sqrt(16 / 15), math.sqrt(1.25)))
    one = logit_theory(SimulationConfig(d_k=1, n_keys=8, correlation=0.5, scalings=("qknorm",),
                                        method="explicit"), "qknorm")
    assert (one.means, one.stds) == ((0.0, 0.0), (0.0, 0.0))
    cos = logit_theory(SimulationConfig(d_k=16, n_keys=8, correlation=0.5, q_mean=0.5, k_std=2.0,
                                        temperature=2.0, scalings=("cosine",), method="explicit"),
                       "cosine")
    norm_t = 16 * math.sqrt(5.0) * 2.0
    assert cos.exact_moments is False and cos.weights == pytest.approx((7 / 8, 1 / 8))
    assert cos.means == pytest.approx((0.0, 16 / norm_t))
    assert cos.stds == pytest.approx((math.sqrt(80) / norm_t, math.sqrt(96) / norm_t))


def test_rule_parameters_reach_the_linear_overlays_and_the_row_variance() -> None:
    """d = 16, sq = sk = 1, mq = 0.5, n = 8: raw variance 16 * 1.25 = 20, row variance the same
    (key mean 0); temperature T = 2 divides the logits by 2, SSMax (s = 0.5) multiplies them by
    s ln n / sqrt(d). QK-norm of Rademacher entries (d = 4) loses the constant vectors:
    (1 - 2^-3)^2 * 4/3 = 49/48."""
    from engine.theory import logit_theory, row_var_theory

    base = dict(d_k=16, n_keys=8, q_mean=0.5, scalings=("temperature",))
    cfg = SimulationConfig(temperature=2.0, ssmax_s=0.5, **base)
    ssmax = (0.5 * math.log(8) / 4) ** 2
    assert logit_theory(cfg, "temperature").var == pytest.approx(20 / 4)
    assert row_var_theory(cfg, "temperature") == pytest.approx(20 / 4)
    assert logit_theory(cfg, "ssmax").var == pytest.approx(20 * ssmax)
    assert row_var_theory(cfg, "ssmax") == pytest.approx(20 * ssmax)
    rad = SimulationConfig(d_k=4, n_keys=8, dist="rademacher", scalings=("qknorm",), method="explicit")
    assert row_var_theory(rad, "qknorm") == pytest.approx(49 / 48)
    # cosine's norm uses both widths squared: sq = 0.8, sk = 1.5, means 0, T = 1, no target
    cos = logit_theory(SimulationConfig(d_k=16, n_keys=8, q_std=0.8, k_std=1.5,
                                        scalings=("cosine",), method="explicit"), "cosine")
    assert cos.stds == pytest.approx((math.sqrt(16 * 0.64 * 2.25) / (16 * 0.8 * 1.5),))
