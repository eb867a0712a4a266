"""Small validators shared by every config dataclass (errors name the field and range)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from engine.errors import QUOTE_CHARS, ConfigError, quote


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
            raise ConfigError(field, f"must be an integer from {lo:,} to {hi:,}, got "
                                     f"{quote(value)}") from None
    value = int(value)
    if not lo <= value <= hi:
        shown = f"{value:,}" if abs(value) < 10**QUOTE_CHARS else quote(value)
        raise ConfigError(field, f"must be from {lo:,} to {hi:,}, got {shown}")
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
    if isinstance(value, (str, bytes, bool)):  # float("1e3") and float(True) are not numbers here
        raise ConfigError(field, f"must be a number, got {quote(value)}")
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(field, f"must be a number, got {quote(value)}") from None
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
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(field, f"must be one of {', '.join(choices)}; got {quote(value)}")
    return value


def check_choices(field: str, values: Any, choices: Iterable[str], *, min_len: int = 1) -> tuple[str, ...]:
    """A non-empty tuple of distinct names from ``choices`` (order kept)."""
    choices = tuple(choices)
    if isinstance(values, str):
        values = (values,)
    if not isinstance(values, (list, tuple)):
        raise ConfigError(field, f"must be a list of names from {', '.join(choices)}; got "
                                 f"{quote(values)}")
    values = tuple(values)
    if len(values) < min_len:
        raise ConfigError(field, f"needs at least {min_len} of {', '.join(choices)}")
    if len(values) > len(choices):  # (a name twice, at least: refused before a long check)
        raise ConfigError(field, f"lists {len(values):,} names; there are {len(choices)}")
    for v in values:
        check_choice(field, v, choices)
    if len(set(values)) != len(values):
        raise ConfigError(field, f"lists a name twice: {', '.join(values)}")
    return values


def config_from_dict(cls: type, data: Any) -> Any:
    """Build the frozen config dataclass ``cls`` from a plain dict (a preset, a saved session, an
    exported config.json). The types are checked first against the fields' annotations
    (``engine.readers.schema``: a ConfigError names the field, a wrong type never reaches the
    checks), unknown keys are refused (a typo must not fall back to a default), and JSON lists
    become tuples for the tuple-typed fields; ``cls`` validates the values."""
    import dataclasses

    from engine.readers.schema import dataclass_schema

    if not isinstance(data, dict):
        raise ConfigError("config", f"must be a mapping of parameter names to values, got "
                                    f"{type(data).__name__}")
    data = dataclass_schema(cls).check(data)
    tuples = {f.name for f in dataclasses.fields(cls) if str(f.type).startswith(("tuple", "Tuple"))}
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
