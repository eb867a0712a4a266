"""The mutation score of tests/mutation.py: which exit codes of a mutant's test run are kills."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "mutation_wrapper", Path(__file__).resolve().parent / "mutation.py")
assert _SPEC is not None and _SPEC.loader is not None
mutation = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(mutation)


def test_an_abort_counts_as_killed_like_a_timeout() -> None:
    # SIGABRT: -6 from waitstatus_to_exitcode of the forked run, 134 (128 + 6) from a shell
    codes = {"m.x_f__mutmut_1": 1, "m.x_f__mutmut_2": 0, "m.x_f__mutmut_3": -6,
             "m.x_f__mutmut_4": 134, "m.x_f__mutmut_5": -24, "m.x_f__mutmut_6": 33}
    assert mutation.score(codes, {}) == (4, 6, ["m.x_f__mutmut_2", "m.x_f__mutmut_6"])


def test_other_signals_and_equivalents() -> None:
    # 6 itself (no such pytest exit code) and a segfault (-11) are not kills; an equivalent
    # mutant is left out whatever its code
    codes = {"m.x_f__mutmut_1": 6, "m.x_f__mutmut_2": -11, "m.x_f__mutmut_3": -6,
             "m.x_f__mutmut_4": 0}
    killed, counted, survivors = mutation.score(codes, {"m.x_f__mutmut_4": "why"})
    assert (killed, counted, survivors) == (1, 3, ["m.x_f__mutmut_1", "m.x_f__mutmut_2"])
    assert mutation.by_function(codes, {"m.x_f__mutmut_4": "why"}) == {"x_f": (1, 3, 0)}
