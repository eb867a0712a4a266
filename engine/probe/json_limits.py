"""Read a JSON file a user handed us without trusting it: bounded size, bounded nesting, no NaN.

``json.loads`` of a document nested 100,000 deep raises RecursionError, it accepts ``NaN`` and
``Infinity``, and a 2 GB file is read whole. :func:`load_json` checks the size on disk first, the
nesting depth before parsing (strings stripped, brackets counted with NumPy) and refuses the
non-standard constants; every refusal is one :class:`ConfigError` line, "FILE: what is wrong".
(A small helper of the model loader; other readers of untrusted JSON may share it.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ConfigError

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text (brackets inside strings do not count)."""
    bare = _STRING.sub('""', text)
    b = np.frombuffer(bare.encode("utf-8", "replace"), dtype=np.uint8)
    step = (np.isin(b, (ord("["), ord("{"))).astype(np.int64)
            - np.isin(b, (ord("]"), ord("}"))).astype(np.int64))
    return int(np.cumsum(step).max()) if step.size else 0


def parse_json(text: str, label: str, field: str, max_depth: int) -> Any:
    """Parse ``text`` (named ``label`` in messages); ConfigError(field, "LABEL: ...") if bad."""
    depth = nesting_depth(text)
    if depth > max_depth:
        raise ConfigError(field, f"{label}: nested {depth} levels deep; at most {max_depth} "
                          "are read")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(field, f"{label}: not valid JSON ({str(exc).splitlines()[0][:120]})"
                          ) from None


def load_json(path: Path, field: str, max_bytes: int, max_depth: int = 32,
              label: str | None = None) -> Any:
    """The parsed content of the JSON file ``path``, refused when larger than ``max_bytes``,
    nested deeper than ``max_depth``, not UTF-8 or not JSON."""
    label = label or str(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ConfigError(field, f"{label}: {size / 1e6:.1f} MB; files over "
                              f"{max_bytes / 1e6:.3g} MB are refused")
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(field, f"{label}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(field, f"{label}: not UTF-8 text") from None
    return parse_json(text, label, field, max_depth)


def short(value: Any, limit: int = 40) -> str:
    """A bad value as a message quotes it: its repr, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
