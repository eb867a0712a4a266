"""Draining a snapshot generator: the CLI, tests and benchmarks want only its final result."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def last_result(snapshots: Iterable[Any], what: str) -> Any:
    """The ``result`` of the last snapshot that carries one; a generator that ends without one
    is a bug in it, said with ``what`` (e.g. "the audit")."""
    result = None
    for snap in snapshots:
        if snap.result is not None:
            result = snap.result
    if result is None:
        raise RuntimeError(f"{what} ended without a result")
    return result
