"""Frozen, validated simulation parameters. An invalid value raises ``ConfigError(field, ...)``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from engine.rules import (
    N_REF_DEFAULT,
    RULES,
    SINK_DEFAULT,
    SOFTCAP_DEFAULT,
    SSMAX_S_DEFAULT,
    YARN_S_DEFAULT,
)
from engine.validate import (
    ConfigMethods,
    check_choice,
    check_choices,
    check_float,
    check_int,
)

DISTRIBUTIONS = ("gaussian", "uniform", "rademacher")
BACKENDS = ("auto", "numpy", "torch")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float64", "float32")
METHODS = ("auto", "exact", "explicit")

D_K_MAX = 65_536
N_KEYS_MAX = 65_536
TRIALS_MAX = 10_000_000
SEED_MAX = 2**63 - 1
MEAN_ABS_MAX = 1e3
STD_MAX = 1e3
TEMPERATURE_RANGE = (1e-6, 1e6)
SSMAX_S_MAX = 1e3
#: largest context-extension factor s of ``yarn`` (DeepSeek-V3 ships 40)
YARN_S_MAX = 1e6
#: c of ``softcap``: (0, SOFTCAP_MAX]
SOFTCAP_MAX = 1e6
#: the sink logit: [-SINK_ABS_MAX, SINK_ABS_MAX]
SINK_ABS_MAX = 1e6

#: Rules whose logits need the explicit vectors (norms / layer-norm), so the exact shortcut cannot serve them.
RULES_NEEDING_VECTORS = frozenset({"cosine", "qknorm"})


@dataclass(frozen=True)
class SimulationConfig(ConfigMethods):
    """Everything that determines a simulation's numbers (with the seed, they are reproducible).

    ``correlation`` (rho) makes key 0 of every row a *target* key whose standardized entries are
    ``rho * z_q + sqrt(1 - rho^2) * noise`` (z_q = the query's standardized entries), so it keeps
    the keys' mean and std but its score with the query grows like d_k * rho * sq * sk.
    """

    d_k: int = 64
    n_keys: int = 8
    trials: int = 4000
    seed: int = 0
    dist: str = "gaussian"
    q_mean: float = 0.0
    q_std: float = 1.0
    k_mean: float = 0.0
    k_std: float = 1.0
    correlation: float = 0.0
    scalings: tuple[str, ...] = ("none", "sqrt")
    temperature: float = 1.0
    saturation_threshold: float = 0.99
    backend: str = "auto"
    device: str = "auto"
    dtype: str = "float64"
    method: str = "auto"
    #: reference length of the ``logn`` and ``yarn_dynamic`` rules (both equal ``sqrt`` up to n_ref)
    n_ref: int = N_REF_DEFAULT
    #: s of the ``ssmax`` rule (logits = s ln(n) q.k / sqrt(d_k))
    ssmax_s: float = SSMAX_S_DEFAULT
    #: c of the ``softcap`` rule (logits = c tanh(q.k / sqrt(d_k) / c))
    softcap: float = SOFTCAP_DEFAULT
    #: the ``sink`` rule's logit (0 = "softmax plus one")
    sink: float = SINK_DEFAULT
    #: s of the ``yarn`` rule, the context-extension factor (logits = (0.1 ln s + 1)^2 q.k/sqrt(d_k))
    yarn_s: float = YARN_S_DEFAULT

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "d_k", check_int("d_k", self.d_k, 1, D_K_MAX))
        s(self, "n_keys", check_int("n_keys", self.n_keys, 2, N_KEYS_MAX))
        s(self, "trials", check_int("trials", self.trials, 1, TRIALS_MAX))
        s(self, "seed", check_int("seed", self.seed, 0, SEED_MAX))
        check_choice("dist", self.dist, DISTRIBUTIONS)
        s(self, "q_mean", check_float("q_mean", self.q_mean, -MEAN_ABS_MAX, MEAN_ABS_MAX))
        s(self, "k_mean", check_float("k_mean", self.k_mean, -MEAN_ABS_MAX, MEAN_ABS_MAX))
        s(self, "q_std", check_float("q_std", self.q_std, 0.0, STD_MAX, lo_open=True))
        s(self, "k_std", check_float("k_std", self.k_std, 0.0, STD_MAX, lo_open=True))
        s(self, "correlation", check_float("correlation", self.correlation, -1.0, 1.0))
        s(self, "scalings", check_choices("scalings", self.scalings, RULES))
        s(self, "temperature", check_float("temperature", self.temperature, *TEMPERATURE_RANGE))
        s(self, "saturation_threshold",
          check_float("saturation_threshold", self.saturation_threshold, 0.0, 1.0,
                      lo_open=True, hi_open=True))
        check_choice("backend", self.backend, BACKENDS)
        check_choice("device", self.device, DEVICES)
        check_choice("dtype", self.dtype, DTYPES)
        check_choice("method", self.method, METHODS)
        s(self, "n_ref", check_int("n_ref", self.n_ref, 2, N_KEYS_MAX))
        s(self, "ssmax_s", check_float("ssmax_s", self.ssmax_s, 0.0, SSMAX_S_MAX, lo_open=True))
        s(self, "softcap", check_float("softcap", self.softcap, 0.0, SOFTCAP_MAX, lo_open=True))
        s(self, "sink", check_float("sink", self.sink, -SINK_ABS_MAX, SINK_ABS_MAX))
        s(self, "yarn_s", check_float("yarn_s", self.yarn_s, 1.0, YARN_S_MAX))
        if self.backend == "numpy" and self.device == "cuda":
            from engine.errors import ConfigError

            raise ConfigError("device", "cuda needs backend torch or auto, not numpy")
        if self.method == "exact" and not self.exact_is_valid:
            from engine.errors import ConfigError

            raise ConfigError("method", "exact needs dist gaussian and no cosine/qknorm rule "
                              f"(dist={self.dist}, scalings={', '.join(self.scalings)}); "
                              "use explicit or auto")

    # -- derived -------------------------------------------------------------------------------
    def rule_params(self) -> dict[str, float]:
        """The keyword parameters of ``Rule.logits`` beyond d_k and T (every row sees n_keys)."""
        return {"log_n": math.log(self.n_keys), "log_n_ref": math.log(self.n_ref),
                "ssmax_s": self.ssmax_s, "softcap": self.softcap, "sink": self.sink,
                "yarn_s": self.yarn_s}

    @property
    def exact_is_valid(self) -> bool:
        """The exact shortcut (scores drawn directly) holds for i.i.d. Gaussian entries and
        rules that need only q.k (docs/SCIENCE.md, "Exact shortcut"; the target key stays exact too)."""
        return self.dist == "gaussian" and not (set(self.scalings) & RULES_NEEDING_VECTORS)

    @property
    def resolved_method(self) -> str:
        if self.method == "auto":
            return "exact" if self.exact_is_valid else "explicit"
        return self.method


#: the parameters a sweep can run along: head width or sequence length (number of keys)
SWEEP_AXES = ("d_k", "n_keys")
#: the default length sweep: n = 2, 4, ..., 65,536 (a log grid)
N_KEYS_SWEEP = tuple(2**i for i in range(1, 17))
#: fewest trials a point keeps when ``cells_max`` cuts them
SWEEP_TRIALS_FLOOR = 32


@dataclass(frozen=True)
class SweepConfig:
    """A list of d_k values (or, with ``axis="n_keys"``, of key counts n) evaluated with one base
    config, every other parameter shared."""

    base: SimulationConfig = field(default_factory=SimulationConfig)
    d_ks: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    axis: str = "d_k"
    n_keys_values: tuple[int, ...] = N_KEYS_SWEEP
    #: 0, or the most (trial, key) cells per point: a point's trials are cut to
    #: max(SWEEP_TRIALS_FLOOR, cells_max // n_keys) so a sweep to n = 65,536 stays quick
    cells_max: int = 0

    def __post_init__(self) -> None:
        check_choice("axis", self.axis, SWEEP_AXES)
        object.__setattr__(self, "d_ks", _check_grid("d_k", self.d_ks, 1, D_K_MAX))
        object.__setattr__(self, "n_keys_values",
                           _check_grid("n_keys", self.n_keys_values, 2, N_KEYS_MAX))
        object.__setattr__(self, "cells_max", check_int("cells_max", self.cells_max, 0, 2**40))

    @property
    def values(self) -> tuple[int, ...]:
        """The values swept along ``axis``."""
        return self.d_ks if self.axis == "d_k" else self.n_keys_values

    def point(self, value: int) -> SimulationConfig:
        cfg = self.base.replace(**{self.axis: value})
        if self.cells_max and cfg.trials * cfg.n_keys > self.cells_max:
            cfg = cfg.replace(trials=max(min(SWEEP_TRIALS_FLOOR, cfg.trials),
                                         self.cells_max // cfg.n_keys))
        return cfg


def _check_grid(name: str, values: tuple[int, ...], lo: int, hi: int) -> tuple[int, ...]:
    from engine.errors import ConfigError

    values = tuple(values)
    if not values:
        raise ConfigError(name, "needs at least one value")
    values = tuple(check_int(name, v, lo, hi) for v in values)
    if len(set(values)) != len(values):
        raise ConfigError(name, "lists a value twice")
    return values
