"""Tick labels of log10 axes: decades, 1-2-5 values in a short span, round values in a narrow one."""

from __future__ import annotations

import math

import pytest

from ui.plots.log_ticks import log_ticks


def _values(ticks: list[tuple[float, str]]) -> list[float]:
    return [round(10.0**v, 9) for v, _label in ticks]


def test_decades_are_labelled_and_the_rest_are_minor_ticks() -> None:
    major, minor = log_ticks(-1.0, 3.0)
    assert _values(major) == [0.1, 1.0, 10.0, 100.0, 1000.0]
    assert [label for _v, label in major] == ["0.1", "1", "10", "100", "1000"]
    assert all(label == "" for _v, label in minor) and len(minor) == 4 * 8


def test_under_two_decades_2_and_5_are_labelled_too() -> None:
    major, _minor = log_ticks(0.0, 1.5)
    assert _values(major) == [1.0, 2.0, 5.0, 10.0, 20.0]


def test_a_span_within_one_decade_still_gets_round_labels() -> None:
    major, _minor = log_ticks(math.log10(3.0), math.log10(4.0))
    assert len(major) >= 2
    assert all(3.0 - 1e-9 <= 10.0**v <= 4.0 + 1e-9 for v, _label in major)


def test_far_apart_decades_are_thinned_and_written_as_powers() -> None:
    major, minor = log_ticks(-20.0, 20.0)
    assert 2 <= len(major) <= 10 and minor == []
    assert any("e" in label for _v, label in major)


@pytest.mark.parametrize("lo, hi", [(1.0, 1.0), (2.0, 1.0), (float("nan"), 1.0), (0.0, float("inf"))])
def test_an_empty_or_non_finite_span_has_no_ticks(lo: float, hi: float) -> None:
    assert log_ticks(lo, hi) == [[], []]
