"""engine.snapshots.last_result: the final result of a snapshot generator, or a clear error."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.snapshots import last_result


def test_the_last_snapshot_with_a_result_wins() -> None:
    snaps = [SimpleNamespace(result=None), SimpleNamespace(result=1), SimpleNamespace(result=2),
             SimpleNamespace(result=None)]
    assert last_result(iter(snaps), "x") == 2


def test_a_generator_without_a_result_is_an_error_naming_it() -> None:
    with pytest.raises(RuntimeError, match="the audit ended without a result"):
        last_result(iter([SimpleNamespace(result=None)]), "the audit")
