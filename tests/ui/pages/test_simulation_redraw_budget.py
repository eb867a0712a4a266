"""The Simulation page makes the sweep's items ahead only in a tick with time to spare: a
panel's first draw of seven rules plus one sweep curve made ahead was the longest tick of a run
(40 ms of the GUI thread); nor while a panel's paint waits for the loop's next turn, where
the curve's repaint of the sweep would join it. A stand-in page and clock: no window, no timing of this machine."""

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
        panels={"sweep": SimpleNamespace(make_items_ahead=lambda rules: made.append(rules),
                                         paint_due=False),
                "scores": SimpleNamespace(paint_due=False)},
        results=SimpleNamespace(isVisible=lambda: False),
        _strip_rules=("none", "sqrt"), _waits=0)
    assert SimulationPage.redraw(stub) == ["scores"]
    assert made == ([("none", "sqrt")] if ahead else [])


def test_a_sweep_under_way_makes_nothing_ahead(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(page_module, "time", clock)
    made = []
    stub = SimpleNamespace(
        state=SimpleNamespace(sweep=object(), snapshot=SimpleNamespace(rules={"none": 0})),
        redraw_panels=lambda _budget: [],
        panels={"sweep": SimpleNamespace(make_items_ahead=lambda rules: made.append(rules),
                                         paint_due=False)},
        results=SimpleNamespace(isVisible=lambda: False), _strip_rules=("none",), _waits=0)
    SimulationPage.redraw(stub)
    assert made == []


def _stub_page(made, drawn_leaves_paint, waited):
    """A page whose tick drew ``scores`` (its paint left to the next turn or not), or waited
    for a held paint (``waited``: PanelRedraw's count of such ticks in a row)."""
    panels = {"scores": SimpleNamespace(paint_due=False),
              "sweep": SimpleNamespace(make_items_ahead=lambda rules: made.append(rules),
                                       paint_due=False)}
    stub = SimpleNamespace(
        state=SimpleNamespace(sweep=None, snapshot=SimpleNamespace(rules={"none": 0, "sqrt": 1})),
        panels=panels, results=SimpleNamespace(isVisible=lambda: False),
        _strip_rules=("none", "sqrt"), _waits=0)

    def redraw_panels(_budget):
        if waited:
            stub._waits = 1
            return []
        stub._waits = 0
        panels["scores"].paint_due = drawn_leaves_paint
        return ["scores"]

    stub.redraw_panels = redraw_panels
    return stub


@pytest.mark.parametrize(("leaves_paint", "waited", "ahead"), [
    (False, False, True), (True, False, False), (False, True, False)])
def test_nothing_is_made_ahead_in_a_tick_that_leaves_or_waits_for_a_paint(
        monkeypatch, leaves_paint, waited, ahead):
    """A tick whose panel left its paint to the loop's next turn, or that waited for such a
    paint, makes nothing ahead (the sweep's repaint would join that paint)."""
    monkeypatch.setattr(page_module, "time", _Clock())
    made = []
    SimulationPage.redraw(_stub_page(made, leaves_paint, waited))
    assert made == ([("none", "sqrt")] if ahead else [])


def test_nothing_is_made_ahead_in_a_tick_that_drew_the_sweep(monkeypatch):
    """The sweep drawn in this tick (a new run's empty strip) paints in this turn: a curve
    made ahead there would join that paint."""
    monkeypatch.setattr(page_module, "time", _Clock())
    made = []
    stub = _stub_page(made, False, False)
    stub.redraw_panels = lambda _budget: ["sweep"]
    SimulationPage.redraw(stub)
    assert made == []
    stub.redraw_panels = lambda _budget: ["scores"]  # (the control: another panel drawn)
    SimulationPage.redraw(stub)
    assert made == [("none", "sqrt")]


def test_a_paint_that_never_comes_holds_nothing_up(monkeypatch):
    """A panel whose held paint never comes (PanelRedraw stops waiting for it after
    MAX_PAINT_WAITS ticks) does not stop the items being made ahead."""
    monkeypatch.setattr(page_module, "time", _Clock())
    made = []
    stub = _stub_page(made, False, False)
    stub.panels["weights"] = SimpleNamespace(paint_due=True)  # (not drawn this tick)
    SimulationPage.redraw(stub)
    assert made == [("none", "sqrt")]
