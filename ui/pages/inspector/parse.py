"""Text fields -> numbers. Only tokenizing here: the engine (``engine.inspect``) checks the values.

Errors are ``ConfigError(field, message)`` with field ``scores`` or ``scale``, like the engine's.
"""

from __future__ import annotations

import math
import re

from engine.errors import ConfigError, quote
from engine.inspect import parse_score_list

_SQRT = re.compile(r"^(?:sqrt|√)\s*\(?\s*([^()\s]+)\s*\)?$", re.IGNORECASE)


def parse_scores(text: str) -> list[float]:
    """``"8, 0, -8"`` -> [8.0, 0.0, -8.0]; ``"3, -2*9999"`` repeats -2 9999 times (the engine's
    tokenizer, shared with the ``inspect`` command)."""
    return parse_score_list(text)


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
                raise ConfigError("scale", f"sqrt needs a positive number, got {quote(m.group(1))}")
            return math.sqrt(inner)
        return float(body)
    except ValueError:
        raise ConfigError("scale", f"{quote(body)} is not a number (try 8 or sqrt(64))") from None
