"""Text fields -> numbers. Only tokenizing here: the engine (``engine.inspect``) checks the values.

Errors are ``ConfigError(field, message)`` with field ``scores`` or ``scale``, like the engine's.
"""

from __future__ import annotations

import math
import re

from engine.errors import ConfigError

_SEPARATORS = re.compile(r"[\s,;]+")
_SQRT = re.compile(r"^(?:sqrt|√)\s*\(?\s*([^()\s]+)\s*\)?$", re.IGNORECASE)


def parse_scores(text: str) -> list[float]:
    """``"8, 0, -8"``, ``"8 0 -8"`` or ``"[8; 0; -8]"`` -> [8.0, 0.0, -8.0]."""
    body = text.strip().strip("[]()").strip()
    if not body:
        raise ConfigError("scores", "type at least 2 numbers, e.g. 8, 0, -8")
    values = []
    for token in _SEPARATORS.split(body):
        if not token:
            continue
        try:
            values.append(float(token))
        except ValueError:
            raise ConfigError("scores", f"{token!r} is not a number") from None
    return values


def parse_scale(text: str) -> float:
    """A positive divisor: ``"8"``, ``"0.5"``, or ``"sqrt(64)"`` / ``"√64"`` for sqrt(d_k)."""
    body = text.strip()
    if not body:
        raise ConfigError("scale", "type a positive number (the scores are divided by it)")
    m = _SQRT.match(body)
    try:
        if m:
            inner = float(m.group(1))
            if not inner > 0:
                raise ConfigError("scale", f"sqrt needs a positive number, got {m.group(1)!r}")
            return math.sqrt(inner)
        return float(body)
    except ValueError:
        raise ConfigError("scale", f"{body!r} is not a number (try 8 or sqrt(64))") from None
