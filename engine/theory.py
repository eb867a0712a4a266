"""Closed-form predictions: score moments (SCIENCE.md, "The core argument") and normal overlays.

Key 0 of every row is the *target* key (correlation rho with the query); the other n-1 keys are
independent of the query. With rho = 0 all n keys are alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.config import SimulationConfig

#: E[z^4] of the standardized entry distributions (used by the target-key variance)
KURTOSIS = {"gaussian": 3.0, "uniform": 9.0 / 5.0, "rademacher": 1.0}


@dataclass(frozen=True)
class NormalMixture:
    """A mixture of normals used as the theoretical overlay of a score histogram.

    ``exact`` says whether the moments are exact (they always are for the raw score) and the
    normal shape is exact (only for Gaussian entries via the exact shortcut) or an approximation.
    """

    weights: tuple[float, ...]
    means: tuple[float, ...]
    stds: tuple[float, ...]
    exact_moments: bool

    @property
    def mean(self) -> float:
        return float(sum(w * m for w, m in zip(self.weights, self.means)))

    @property
    def var(self) -> float:
        mu = self.mean
        return float(sum(w * (s * s + (m - mu) ** 2) for w, m, s in zip(self.weights, self.means, self.stds)))

    def pdf(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        out = np.zeros_like(x)
        for w, m, s in zip(self.weights, self.means, self.stds):
            if w == 0 or s <= 0:  # a point mass (qknorm at d_k = 1) has no density to draw
                continue
            out += w * np.exp(-0.5 * ((x - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
        return out

    def scaled(self, factor: float) -> NormalMixture:
        return NormalMixture(self.weights, tuple(m * factor for m in self.means),
                             tuple(s * abs(factor) for s in self.stds), self.exact_moments)


def raw_score_moments(cfg: SimulationConfig, target: bool = False) -> tuple[float, float]:
    """Exact mean and variance of one raw score q.k (for the target key if ``target``)."""
    d = cfg.d_k
    mq, sq, mk, sk = cfg.q_mean, cfg.q_std, cfg.k_mean, cfg.k_std
    if not target or cfg.correlation == 0.0:
        mean = d * mq * mk
        var = d * ((sq**2 + mq**2) * (sk**2 + mk**2) - mq**2 * mk**2)
        return mean, var
    rho = cfg.correlation
    kappa = KURTOSIS[cfg.dist]
    mean = d * (mq * mk + rho * sq * sk)
    var_coord = ((rho * mq * sk + sq * mk) ** 2 + (1 - rho**2) * mq**2 * sk**2
                 + rho**2 * sq**2 * sk**2 * (kappa - 1) + (1 - rho**2) * sq**2 * sk**2)
    return mean, d * var_coord


def qknorm_independent_var(d: int, dist: str) -> float:
    """Exact variance of LN(q).LN(k)/sqrt(d) for a key independent of q (up to LayerNorm's eps).

    LN(x) of i.i.d. entries is exchangeable with sum 0 and sum of squares d, unless x is constant
    (probability pi; then LN(x) = 0), so E[a_i a_j] = (1 - pi)(delta_ij - (1 - delta_ij)/(d-1))
    and Var = (1 - pi)^2 d/(d-1): 4/3 at d = 4, not 1. pi = 2^(1-d) for Rademacher entries,
    0 for continuous ones, 1 at d = 1. Means and standard deviations drop out.
    """
    if d == 1:
        return 0.0
    pi = 2.0 ** (1 - d) if dist == "rademacher" else 0.0
    return (1.0 - pi) ** 2 * d / (d - 1)


def _mixture(cfg: SimulationConfig, comps: list[tuple[float, float]], exact: bool) -> NormalMixture:
    n = cfg.n_keys
    if cfg.correlation == 0.0:
        (m, v), = comps[:1]
        return NormalMixture((1.0,), (m,), (math.sqrt(max(v, 0.0)),), exact)
    (m0, v0), (m1, v1) = comps
    return NormalMixture(((n - 1) / n, 1 / n), (m0, m1),
                         (math.sqrt(max(v0, 0.0)), math.sqrt(max(v1, 0.0))), exact)


def raw_score_theory(cfg: SimulationConfig) -> NormalMixture:
    """Pooled raw scores: (n-1)/n of N(non-target) + 1/n of N(target). Moments are exact."""
    return _mixture(cfg, [raw_score_moments(cfg, False), raw_score_moments(cfg, True)], True)


def logit_theory(cfg: SimulationConfig, rule: str) -> NormalMixture:
    """The overlay for a rule's logits: exact moments for the divisor rules; a large-d_k
    approximation for cosine (norms ~ their means) and for qknorm's target key (entries ~
    standardized; its independent keys are exact, see ``qknorm_independent_var``)."""
    from engine.rules import RULE_REGISTRY, RuleParams

    spec = RULE_REGISTRY[rule]
    if spec.linear_in_dot:
        factor = spec.scale(1.0, RuleParams(cfg.d_k, cfg.temperature, **cfg.rule_params()))
        return raw_score_theory(cfg).scaled(factor)
    d, rho = cfg.d_k, cfg.correlation
    kappa = KURTOSIS[cfg.dist]
    if rule == "qknorm":
        comps = [(0.0, qknorm_independent_var(d, cfg.dist)),
                 (rho * math.sqrt(d), rho**2 * (kappa - 1) + 1 - rho**2)]
        if d == 1:  # LN of a single entry is 0: every logit is exactly 0
            comps = [(0.0, 0.0), (0.0, 0.0)]
        return _mixture(cfg, comps, False)
    # cosine: q.k / (|q| |k|) / T with |x|^2 ~ d (s^2 + m^2)
    norm = d * math.sqrt((cfg.q_std**2 + cfg.q_mean**2) * (cfg.k_std**2 + cfg.k_mean**2))
    comps = []
    for target in (False, True):
        m, v = raw_score_moments(cfg, target)
        comps.append((m / norm / cfg.temperature, v / (norm * cfg.temperature) ** 2))
    return _mixture(cfg, comps, False)
