"""Closed-form predictions: score moments (docs/SCIENCE.md, "The core argument") and normal overlays.

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
    """The overlay for a rule's logits: exact moments for the divisor rules (sink and sigmoid
    too: their logits are sqrt's, only the weights differ); softcap's capped moments of that
    overlay; a large-d_k approximation for cosine (norms ~ their means) and for qknorm's target
    key (entries ~ standardized; its independent keys are exact, see ``qknorm_independent_var``)."""
    from engine.rules import RULE_REGISTRY, RuleParams

    spec = RULE_REGISTRY[rule]
    if spec.linear_in_dot:
        factor = spec.scale(1.0, RuleParams(cfg.d_k, cfg.temperature, **cfg.rule_params()))
        return raw_score_theory(cfg).scaled(factor)
    if spec.cap:  # softcap: the capped moments of each normal component of the sqrt logits
        factor = spec.scale(1.0, RuleParams(cfg.d_k, cfg.temperature, **cfg.rule_params()))
        return capped_mixture(raw_score_theory(cfg).scaled(factor), cfg.softcap)
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


def capped_mixture(mix: NormalMixture, c: float, order: int = 20) -> NormalMixture:
    """The normal overlay of c tanh(Z / c) for Z drawn from ``mix``: each component keeps its
    weight and gets the mean and std of its capped values, so the moments are those of the
    capped mixture; the shape is a normal approximation (exact as c grows, a bounded
    distribution when the spread reaches c). The integrals over the standard normal use
    Gauss-Legendre panels of ``order`` nodes, narrow where tanh turns (within a few c / sd of
    Z = 0): a fixed Gauss-Hermite rule misses that turn once sd exceeds c (96 nodes gave a std
    2 % high at sd = 10 c)."""
    t, g = np.polynomial.legendre.leggauss(order)
    means, stds = [], []
    for m, sd in zip(mix.means, mix.stds):
        if sd <= 0:  # a point mass stays one
            means.append(float(c * math.tanh(m / c)))
            stds.append(0.0)
            continue
        turn = -m / sd + (c / sd) * np.array([-30, -10, -4, -2, -1, -0.5, 0, 0.5, 1, 2, 4, 10, 30])
        edges = np.unique(np.concatenate([np.arange(-12.0, 12.25, 0.5), turn[np.abs(turn) < 12]]))
        lo, hi = edges[:-1, None], edges[1:, None]
        x = ((lo + hi) / 2 + (hi - lo) / 2 * t).ravel()
        w = ((hi - lo) / 2 * g).ravel() * np.exp(-0.5 * x * x)
        w = w / w.sum()
        y = c * np.tanh((m + sd * x) / c)
        mu = float((w * y).sum())
        means.append(mu)
        stds.append(math.sqrt(max(float((w * (y - mu) ** 2).sum()), 0.0)))
    return NormalMixture(mix.weights, tuple(means), tuple(stds), False)


def row_var_theory(cfg: SimulationConfig, rule: str) -> float | None:
    """Expected within-row variance of a rule's logits (docs/SCIENCE.md, "Shift invariance"), or
    None where no exact formula applies (a target key, cosine).

    Given q, keys independent of q and of each other have Var(q.k | q) = sk^2 |q|^2 whatever
    their distribution, and E|q|^2 = d (sq^2 + mq^2); the shift mk * sum(q) is the same for
    every key of the row and drops out. So the row spread is ``d sk^2 (sq^2 + mq^2)`` (over
    c^2 for a divisor rule): a query mean widens it, a key mean does not. The pooled variance adds
    the spread of that shared shift across rows, ``d sq^2 mk^2``. QK-norm's normalized vectors
    have mean 0 given q, so its row variance is its pooled one.
    """
    from engine.rules import RULE_REGISTRY, RuleParams

    if cfg.correlation != 0.0:
        return None
    spec = RULE_REGISTRY[rule]
    if spec.linear_in_dot:
        factor = spec.scale(1.0, RuleParams(cfg.d_k, cfg.temperature, **cfg.rule_params()))
        return float(cfg.d_k * cfg.k_std**2 * (cfg.q_std**2 + cfg.q_mean**2) * factor**2)
    if rule == "qknorm":
        return qknorm_independent_var(cfg.d_k, cfg.dist)
    return None


# -- the length axis (docs/guide/simulation.md) ----------------------------------------------------
# For n i.i.d. Gaussian logits z_j ~ N(m, sigma^2): E[sum_j exp(z_j - m)] = n exp(sigma^2 / 2)
# exactly. For large n the sum concentrates there (relative spread sqrt((e^{sigma^2} - 1) / n)),
# which gives the asymptotic needle weight and entropy below.


def partition_mean(n: int | np.ndarray, sigma2: float) -> float | np.ndarray:
    """E[sum_j exp(z_j)] for n i.i.d. N(0, sigma^2) logits: n exp(sigma^2 / 2) (exact)."""
    return n * np.exp(sigma2 / 2.0)


def needle_weight(n: int | np.ndarray, sigma2: float, delta: float) -> float | np.ndarray:
    """Weight of one key whose logit exceeds the others' mean by ``delta``, among n - 1 i.i.d.
    N(., sigma^2) logits: 1 / (1 + (n - 1) exp(sigma^2/2 - delta)) (asymptotic in n)."""
    return 1.0 / (1.0 + (np.asarray(n, dtype=np.float64) - 1.0) * np.exp(sigma2 / 2.0 - delta))


def needle_weight_mean(n: int | np.ndarray, sigma2: float, delta_mean: float, delta_var: float,
                       nodes: int = 64) -> float | np.ndarray:
    """:func:`needle_weight` averaged over a Gaussian margin N(delta_mean, delta_var)
    (Gauss-Hermite quadrature; asymptotic in n like the formula it averages)."""
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    deltas = delta_mean + math.sqrt(max(delta_var, 0.0)) * x
    n_arr = np.asarray(n, dtype=np.float64)[..., None]
    vals = needle_weight(n_arr, sigma2, deltas)
    return (vals * w).sum(-1) / w.sum()


def entropy_asymptotic(n: int | np.ndarray, sigma2: float) -> float | np.ndarray:
    """Softmax entropy of n i.i.d. N(., sigma^2) logits for large n: ln n - sigma^2 / 2."""
    return np.log(n) - sigma2 / 2.0


@dataclass(frozen=True)
class LengthTheory:
    """The asymptotic length predictions for one rule at one config (logits i.i.d. Gaussian
    given the query: Gaussian entries, key mean 0, a rule linear in q.k; tight for large d_k)."""

    sigma2: float  #: variance of a non-target logit
    delta_mean: float  #: target logit minus a non-target logit's mean
    delta_var: float  #: variance of the target logit
    n: int

    @property
    def reliable(self) -> bool:
        """The sum of the n exponentials has concentrated (relative spread under 10 %): the
        asymptotic formulas apply. Fails when sigma^2 grows faster than ln n (e.g. ``logn``)."""
        return math.expm1(min(self.sigma2, 700.0)) / self.n < 0.01

    @property
    def entropy(self) -> float:
        return float(entropy_asymptotic(self.n, self.sigma2))

    @property
    def entropy_norm(self) -> float:
        return self.entropy / math.log(self.n)

    @property
    def target_weight(self) -> float:
        return float(needle_weight_mean(self.n, self.sigma2, self.delta_mean, self.delta_var))


def length_theory(cfg: SimulationConfig, rule: str) -> LengthTheory | None:
    """The length predictions for ``rule`` at ``cfg``, or None where their assumptions fail."""
    from engine.rules import RULE_REGISTRY

    spec = RULE_REGISTRY[rule]
    if cfg.dist != "gaussian" or cfg.k_mean != 0.0 or not spec.linear_in_dot \
            or not spec.softmax_weights:
        return None
    mix = logit_theory(cfg, rule)
    sigma2 = mix.stds[0] ** 2
    if len(mix.means) == 1:
        return LengthTheory(sigma2, 0.0, sigma2, cfg.n_keys)
    return LengthTheory(sigma2, mix.means[1] - mix.means[0], mix.stds[1] ** 2, cfg.n_keys)
