"""Small validators shared by every config dataclass (errors name the field and range)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from engine.errors import ConfigError


def check_int(field: str, value: Any, lo: int, hi: int) -> int:
    """An integer in [lo, hi]; bools and floats with a fraction are refused."""
    if isinstance(value, bool) or (not isinstance(value, (int,)) and not (
        isinstance(value, float) and value.is_integer()
    )):
        try:
            import numpy as np

            if isinstance(value, np.integer):
                value = int(value)
            else:
                raise TypeError
        except TypeError:
            raise ConfigError(field, f"must be an integer from {lo:,} to {hi:,}, got {value!r}") from None
    value = int(value)
    if not lo <= value <= hi:
        raise ConfigError(field, f"must be from {lo:,} to {hi:,}, got {value:,}")
    return value


def check_float(
    field: str,
    value: Any,
    lo: float,
    hi: float,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """A finite float in the interval; the message shows open/closed ends."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, f"must be a number, got {value!r}") from None
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    allowed = f"{left}{lo:g}, {hi:g}{right}"
    if not math.isfinite(value):
        raise ConfigError(field, f"must be a finite number in {allowed}, got {value}")
    if value < lo or value > hi or (lo_open and value == lo) or (hi_open and value == hi):
        raise ConfigError(field, f"must be in {allowed}, got {value:g}")
    return value


def check_choice(field: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(field, f"must be one of {', '.join(choices)}; got {value!r}")
    return value


def check_choices(field: str, values: Any, choices: Iterable[str], *, min_len: int = 1) -> tuple[str, ...]:
    """A non-empty tuple of distinct names from ``choices`` (order kept)."""
    choices = tuple(choices)
    if isinstance(values, str):
        values = (values,)
    values = tuple(values)
    if len(values) < min_len:
        raise ConfigError(field, f"needs at least {min_len} of {', '.join(choices)}")
    for v in values:
        check_choice(field, v, choices)
    if len(set(values)) != len(values):
        raise ConfigError(field, f"lists a name twice: {', '.join(values)}")
    return values


def config_from_dict(cls: type, data: Any) -> Any:
    """Build the frozen config dataclass ``cls`` from a plain dict (a preset, a saved session, an
    exported config.json). Unknown keys are refused (a typo must not fall back to a default), and
    JSON lists become tuples for the tuple-typed fields; ``cls`` validates the values."""
    import dataclasses

    if not isinstance(data, dict):
        raise ConfigError("config", f"must be a mapping of parameter names to values, got "
                                    f"{type(data).__name__}")
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(unknown[0], f"unknown parameter (known: {', '.join(sorted(names))})")
    tuples = {f.name for f in fields if str(f.type).startswith(("tuple", "Tuple"))}
    return cls(**{k: tuple(v) if k in tuples and isinstance(v, list) else v
                  for k, v in data.items()})


class ConfigMethods:
    """``replace`` / ``to_dict`` / ``from_dict`` shared by the frozen config dataclasses."""

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed (validated again)."""
        import dataclasses

        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (tuples become lists); ``from_dict`` reverses it."""
        import dataclasses

        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        """Build from a dict (a preset, a saved session, an exported config.json); unknown keys
        are refused so a typo cannot silently fall back to a default."""
        return config_from_dict(cls, data)
