"""Config validation: every invalid value is refused with an error naming its field."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.config import RULES, SimulationConfig, SweepConfig
from engine.errors import ConfigError

BAD = [
    ("d_k", 0), ("d_k", 65_537), ("d_k", 2.5), ("d_k", True), ("d_k", "64"),
    ("n_keys", 1), ("n_keys", 65_537), ("trials", 0), ("trials", -5), ("trials", 10_000_001),
    ("seed", -1), ("dist", "cauchy"), ("q_std", 0.0), ("k_std", -1.0), ("q_mean", math.nan),
    ("k_mean", math.inf), ("correlation", 1.5), ("scalings", ()), ("scalings", ("sqrt", "bogus")),
    ("scalings", ("sqrt", "sqrt")), ("temperature", 0.0), ("saturation_threshold", 1.0),
    ("saturation_threshold", 0.0), ("backend", "jax"), ("device", "tpu"), ("dtype", "float16"),
    ("method", "fast"),
]


@pytest.mark.parametrize(("field", "value"), BAD)
def test_invalid_values_name_their_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        SimulationConfig(**{field: value})
    assert info.value.field == field
    assert field in str(info.value)


def test_range_is_in_the_message() -> None:
    with pytest.raises(ConfigError, match=r"from 1 to 65,536"):
        SimulationConfig(d_k=0)


def test_exact_method_needs_gaussian_and_dot_rules() -> None:
    with pytest.raises(ConfigError) as info:
        SimulationConfig(method="exact", dist="uniform")
    assert info.value.field == "method"
    with pytest.raises(ConfigError):
        SimulationConfig(method="exact", scalings=("sqrt", "cosine"))
    assert SimulationConfig(scalings=("qknorm",)).resolved_method == "explicit"
    assert SimulationConfig(correlation=0.7).resolved_method == "exact"


def test_numpy_backend_cannot_use_cuda() -> None:
    with pytest.raises(ConfigError) as info:
        SimulationConfig(backend="numpy", device="cuda")
    assert info.value.field == "device"


def test_round_trip_and_unknown_keys() -> None:
    cfg = SimulationConfig(d_k=512, scalings=("none", "qknorm"), correlation=0.3, seed=7)
    assert SimulationConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError) as info:
        SimulationConfig.from_dict({**cfg.to_dict(), "dk": 3})
    assert info.value.field == "dk"


def test_frozen() -> None:
    cfg = SimulationConfig()
    with pytest.raises(AttributeError):
        cfg.d_k = 3  # type: ignore[misc]


def test_sweep_validates_each_d_k() -> None:
    with pytest.raises(ConfigError) as info:
        SweepConfig(d_ks=(4, 0))
    assert info.value.field == "d_k"
    with pytest.raises(ConfigError):
        SweepConfig(d_ks=())


@given(d_k=st.integers(-10, 70_000), n=st.integers(-3, 70_000), rules=st.lists(st.sampled_from(RULES + ("bad",)), max_size=4))
def test_property_valid_or_named_error(d_k: int, n: int, rules: list[str]) -> None:
    try:
        cfg = SimulationConfig(d_k=d_k, n_keys=n, scalings=tuple(rules))
    except ConfigError as exc:
        assert exc.field in {"d_k", "n_keys", "scalings"}
        return
    assert 1 <= cfg.d_k <= 65_536 and 2 <= cfg.n_keys <= 65_536
    assert rules and set(rules) <= set(RULES) and len(set(rules)) == len(rules)
