"""The Experiments page's plan line: the estimate with the spread of its timed steps, and a
note when the machine is busy."""

from __future__ import annotations

from engine.experiments.builtin import builtin
from tests.engine.experiments.test_estimate import _estimate_for


def test_the_plan_says_the_spread_and_a_busy_machine():
    from ui.pages.experiments.estimate import busy_note, plan_estimate

    spec = builtin("heads")
    est = _estimate_for(spec, {1: 0.02, 2: 0.02, 4: 0.03, 8: 0.05, 16: 0.06})
    line, why = plan_estimate(est, spec, 2, "jobs 0, 3, 6, 9, 12 (one of each shape)")
    assert line.startswith("about ") and " to " in line  # the spread of the timed steps
    assert "fastest and the slowest step" in why and "jobs 0, 3, 6, 9, 12" in why
    assert busy_note(13.0, 2) == ("; the machine is busy (load 13 on 2 cores): it may take "
                                  "several times longer")
    assert busy_note(1.5, 2) == ""
