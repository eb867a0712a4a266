"""Frozen, validated simulation parameters. An invalid value raises ``ConfigError(field, ...)``."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.validate import (
    ConfigMethods,
    check_choice,
    check_choices,
    check_float,
    check_int,
)

DISTRIBUTIONS = ("gaussian", "uniform", "rademacher")
#: Scaling rules, in display order. Names are the same in engine, CLI, CSV, widgets and legends.
RULES = ("none", "sqrt", "dk", "temperature", "cosine", "qknorm")
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
        if self.backend == "numpy" and self.device == "cuda":
            from engine.errors import ConfigError

            raise ConfigError("device", "cuda needs backend torch or auto, not numpy")
        if self.method == "exact" and not self.exact_is_valid:
            from engine.errors import ConfigError

            raise ConfigError("method", "exact needs dist gaussian and no cosine/qknorm rule "
                              f"(dist={self.dist}, scalings={', '.join(self.scalings)}); "
                              "use explicit or auto")

    # -- derived -------------------------------------------------------------------------------
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


@dataclass(frozen=True)
class SweepConfig:
    """A list of d_k values evaluated with one base config (every other parameter shared)."""

    base: SimulationConfig = field(default_factory=SimulationConfig)
    d_ks: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)

    def __post_init__(self) -> None:
        from engine.errors import ConfigError

        d_ks = tuple(self.d_ks)
        if not d_ks:
            raise ConfigError("d_k", "needs at least one value")
        d_ks = tuple(check_int("d_k", d, 1, D_K_MAX) for d in d_ks)
        if len(set(d_ks)) != len(d_ks):
            raise ConfigError("d_k", "lists a value twice")
        object.__setattr__(self, "d_ks", d_ks)

    def point(self, d_k: int) -> SimulationConfig:
        return self.base.replace(d_k=d_k)
