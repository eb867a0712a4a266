"""engine/theory.py against computations that do not use the engine's sampler: plain NumPy
Monte-Carlo of the definitions, and exact moments of the entry laws."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from engine.config import SimulationConfig
from engine.theory import KURTOSIS, logit_theory, qknorm_independent_var, raw_score_moments

Z = 4.5  # |estimate - theory| < Z * SE: fails by chance with probability ~7e-6 per check
N = 200_000


def _draw(rng: np.random.Generator, dist: str, shape: tuple[int, ...]) -> np.ndarray:
    """Standardized entries (mean 0, variance 1), drawn here, not by engine.sampling."""
    if dist == "gaussian":
        return rng.standard_normal(shape)
    if dist == "uniform":
        return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), shape)
    return rng.choice([-1.0, 1.0], size=shape)


def _layer_norm(x: np.ndarray) -> np.ndarray:
    xc = x - x.mean(-1, keepdims=True)
    return xc / np.sqrt(x.var(-1, keepdims=True) + 1e-5)


def _close(samples: np.ndarray, mean: float, var: float) -> None:
    se_mean = samples.std(ddof=1) / math.sqrt(samples.size)
    se_var = ((samples - samples.mean()) ** 2).std(ddof=1) / math.sqrt(samples.size)
    assert abs(samples.mean() - mean) < Z * se_mean + 1e-12, (samples.mean(), mean)
    assert abs(samples.var(ddof=1) - var) < Z * se_var + 1e-12, (samples.var(ddof=1), var)


def test_kurtosis_of_the_standardized_entry_laws() -> None:
    a = mpmath.sqrt(3)
    uniform = mpmath.quad(lambda x: x**4 / (2 * a), [-a, a])
    assert KURTOSIS["uniform"] == pytest.approx(float(uniform), rel=1e-14)
    assert KURTOSIS["uniform"] == pytest.approx(9 / 5)
    gaussian = mpmath.quad(lambda x: x**4 * mpmath.npdf(x), [-mpmath.inf, mpmath.inf])
    assert KURTOSIS["gaussian"] == pytest.approx(float(gaussian), rel=1e-14)
    assert KURTOSIS["rademacher"] == 1.0  # (+-1)^4


@pytest.mark.parametrize("dist", ["gaussian", "uniform", "rademacher"])
@pytest.mark.parametrize(("mq", "sq", "mk", "sk", "rho"),
                         [(0.5, 1.3, -0.7, 0.8, 0.6), (0.0, 1.0, 0.0, 1.0, -0.9), (1.0, 0.5, 2.0, 1.5, 0.3)])
def test_score_moments_with_means_and_a_target_key(dist, mq, sq, mk, sk, rho) -> None:
    """k_target = mk + sk (rho z_q + sqrt(1-rho^2) e); other keys independent of q."""
    d = 8
    rng = np.random.default_rng(11)
    cfg = SimulationConfig(d_k=d, n_keys=4, dist=dist, q_mean=mq, q_std=sq, k_mean=mk, k_std=sk,
                           correlation=rho, scalings=("none",))
    zq = _draw(rng, dist, (N, d))
    q = mq + sq * zq
    k_target = mk + sk * (rho * zq + math.sqrt(1 - rho * rho) * _draw(rng, dist, (N, d)))
    k_other = mk + sk * _draw(rng, dist, (N, d))
    _close((q * k_target).sum(-1), *raw_score_moments(cfg, target=True))
    _close((q * k_other).sum(-1), *raw_score_moments(cfg, target=False))


@pytest.mark.parametrize("dist", ["gaussian", "uniform", "rademacher"])
@pytest.mark.parametrize("d", [4, 16, 64])  # at d = 2 LayerNorm's eps is visible
def test_qknorm_logits_of_independent_keys_have_variance_d_over_d_minus_1(dist, d) -> None:
    """Exact for any entry law (Rademacher loses the constant vectors); 1 only as d grows."""
    rng = np.random.default_rng(d)
    q = 0.4 + 2.0 * _draw(rng, dist, (N, d))
    k = -1.0 + 0.5 * _draw(rng, dist, (N, d))
    logits = (_layer_norm(q) * _layer_norm(k)).sum(-1) / math.sqrt(d)
    var = qknorm_independent_var(d, dist)
    _close(logits, 0.0, var)
    cfg = SimulationConfig(d_k=d, n_keys=8, dist=dist, q_mean=0.4, q_std=2.0, k_mean=-1.0,
                           k_std=0.5, scalings=("qknorm",), method="explicit")
    assert logit_theory(cfg, "qknorm").var == pytest.approx(var)
    assert not logit_theory(cfg, "qknorm").exact_moments  # the target key stays approximate


def test_qknorm_variance_limits() -> None:
    assert qknorm_independent_var(1, "gaussian") == 0.0  # LN of one entry is 0
    assert qknorm_independent_var(4, "gaussian") == pytest.approx(4 / 3)
    assert qknorm_independent_var(4096, "uniform") == pytest.approx(1.0, rel=1e-3)
    # at d_k = 1 every qknorm logit is exactly 0, the target key's too: no density to overlay
    cfg = SimulationConfig(d_k=1, n_keys=8, correlation=0.5, scalings=("qknorm",), method="explicit")
    theory = logit_theory(cfg, "qknorm")
    assert theory.var == 0.0
    assert np.all(theory.pdf(np.linspace(-1, 1, 101)) == 0.0)
    assert np.all(_layer_norm(np.random.default_rng(0).standard_normal((100, 1))) == 0.0)


def test_divisor_rules_rescale_the_exact_raw_moments() -> None:
    cfg = SimulationConfig(d_k=64, n_keys=8, q_mean=0.2, k_mean=-0.3, correlation=0.5,
                           scalings=("none", "sqrt", "dk"))
    raw = logit_theory(cfg, "none")
    assert raw.exact_moments
    assert logit_theory(cfg, "sqrt").var == pytest.approx(raw.var / 64)
    assert logit_theory(cfg, "dk").var == pytest.approx(raw.var / 64**2)
