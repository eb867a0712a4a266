"""The Simulation page makes the sweep's items ahead only in a tick with time to spare: a
panel's first draw of seven rules plus one sweep curve made ahead was the longest tick of a run
(40 ms of the GUI thread). A stand-in page and clock: no window, no timing of this machine."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import ui.pages.simulation.page as page_module
from ui.pages.simulation.page import AHEAD_IF_UNDER_S, SimulationPage


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def thread_time(self) -> float:
        return self.now


@pytest.mark.parametrize(("panel_s", "ahead"), [
    (0.0, True), (AHEAD_IF_UNDER_S * 0.9, True), (AHEAD_IF_UNDER_S * 1.1, False), (0.040, False)])
def test_the_sweep_items_are_made_ahead_only_after_a_short_panel_draw(monkeypatch, panel_s, ahead):
    clock = _Clock()
    monkeypatch.setattr(page_module, "time", clock)
    made = []
    snap = SimpleNamespace(rules={"none": 0, "sqrt": 1})

    def redraw_panels(_budget):
        clock.now += panel_s
        return ["scores"]

    stub = SimpleNamespace(
        state=SimpleNamespace(sweep=None, snapshot=snap),
        redraw_panels=redraw_panels,
        panels={"sweep": SimpleNamespace(make_items_ahead=lambda rules: made.append(rules))},
        results=SimpleNamespace(isVisible=lambda: False),
        _strip_rules=("none", "sqrt"))
    assert SimulationPage.redraw(stub) == ["scores"]
    assert made == ([("none", "sqrt")] if ahead else [])


def test_a_sweep_under_way_makes_nothing_ahead(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(page_module, "time", clock)
    made = []
    stub = SimpleNamespace(
        state=SimpleNamespace(sweep=object(), snapshot=SimpleNamespace(rules={"none": 0})),
        redraw_panels=lambda _budget: [],
        panels={"sweep": SimpleNamespace(make_items_ahead=lambda rules: made.append(rules))},
        results=SimpleNamespace(isVisible=lambda: False), _strip_rules=("none",))
    SimulationPage.redraw(stub)
    assert made == []
