"""A panel's long refresh leaves its paint to the event loop's next turn (PlotPanel._paint_after):
queued right behind the refresh, the paint made one block of both, and a timer or the user's
input that came meanwhile waited for the two (bench/bench_gui.py --profile: a 20-29 ms refresh
and a 9-17 ms paint at a run's first data). A first draw whose axes change size settles in the
next turn too, and the panel never paints half-settled."""

from __future__ import annotations

import copy
import time

import pytest
from PySide6.QtCore import QEvent, QObject, QTimer

from engine.config import SimulationConfig
from engine.simulate import run_simulation
from ui.plots import PANEL_CLASSES, base
from ui.plots.base import PAINT_LATER_AFTER_S, SETTLE_ROUNDS
from ui.plots.histograms import ScoresPanel
from ui.simulation_run import LabState

RULES = ("none", "sqrt", "dk", "logn", "ssmax", "softcap", "sigmoid")


def _state(seed: int, trials: int = 300, rules: tuple[str, ...] = ("none", "sqrt")) -> LabState:
    snap = run_simulation(SimulationConfig(seed=seed, trials=trials, d_k=1024, scalings=rules))
    return LabState(snap.config, snap, (), 0, "simulation")


def _burn(seconds: float) -> None:
    """Busy for ``seconds`` of this thread's CPU time (the refresh's clock)."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


class Order(QObject):
    """Appends "paint" to ``events`` at each paint of the watched viewport, and what it found:
    whether every visible axis of ``panel`` was drawn (settled) before the paint began."""

    def __init__(self, events: list[str], panel=None) -> None:
        super().__init__()
        self.events = events
        self.panel = panel
        self.settled: list[bool] = []

    def eventFilter(self, _obj, event) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.events.append("paint")
            if self.panel is not None:
                self.settled.append(all(
                    plot.getAxis(side).picture is not None or not plot.getAxis(side).isVisible()
                    for plot in self.panel.plot_items() for side in ("left", "bottom")))
        return False


def _shown_panel(qtbot, show_widget) -> ScoresPanel:
    panel = show_widget(ScoresPanel(), (420, 300))
    assert panel.refresh(_state(1), force=True)
    qtbot.wait(120)  # its first paints land
    return panel


def _refresh_beside_a_due_timer(qtbot, panel: ScoresPanel, work_s: float) -> list[str]:
    """Refresh ``panel`` with the data it shows (a new snapshot object: the same ranges and
    axes, nothing left to settle), its draw taking ``work_s`` of CPU, while a 1 ms timer (a
    stand-in for the user's input) falls due; the order the timer and the paints came in."""
    events: list[str] = []
    order = Order(events)
    panel.glw.viewport().installEventFilter(order)
    draw = panel.draw
    panel.draw = lambda state: (draw(state), _burn(work_s))
    timer = QTimer()
    timer.setSingleShot(True)
    timer.setInterval(1)
    timer.timeout.connect(lambda: events.append("timer"))
    shown = panel._state
    state = LabState(shown.config, copy.copy(shown.snapshot), (), 0, "simulation")
    timer.start()
    try:
        assert panel.refresh(state)
        qtbot.waitUntil(lambda: "paint" in events and "timer" in events, timeout=5000)
    finally:
        panel.draw = draw
        panel.glw.viewport().removeEventFilter(order)
    return events


def test_a_long_refresh_lets_what_fell_due_meanwhile_run_before_its_paint(qtbot, show_widget):
    panel = _shown_panel(qtbot, show_widget)
    events = _refresh_beside_a_due_timer(qtbot, panel, 2.5 * PAINT_LATER_AFTER_S)
    assert events[0] == "timer" and events.count("paint") >= 1, events
    assert panel.glw.updatesEnabled() and not panel.paint_due


def test_a_short_refresh_paints_in_its_own_turn(qtbot, show_widget, monkeypatch):
    panel = _shown_panel(qtbot, show_widget)
    # short: under the threshold whatever this machine's speed (the panel's own draw and
    # settling are 2-6 ms here, around the threshold itself)
    monkeypatch.setattr(base, "PAINT_LATER_AFTER_S", 1.0)
    events = _refresh_beside_a_due_timer(qtbot, panel, 0.0)
    assert events[0] == "paint" and "timer" in events, events
    assert panel.glw.updatesEnabled() and not panel.paint_due


def test_a_forced_refresh_never_holds_its_paint(qtbot, show_widget):
    """An export or a figure forces a refresh and takes the picture at once."""
    panel = _shown_panel(qtbot, show_widget)
    draw = panel.draw
    panel.draw = lambda state: (draw(state), _burn(2.5 * PAINT_LATER_AFTER_S))
    assert panel.refresh(_state(3), force=True)
    assert panel.glw.updatesEnabled() and not panel.paint_due


@pytest.mark.parametrize("cls", [c for c in PANEL_CLASSES if c.plot_id != "sweep"],
                         ids=lambda c: c.plot_id)
def test_a_first_draw_of_seven_rules_paints_once_and_settled(qtbot, show_widget, cls):
    """The first data widen the axes: the rest of the settling runs in a later turn (the
    weights' row axis at least: "20 40 60" is narrower than pyqtgraph's first guess), and the
    one paint comes after it, every axis already drawn when it begins."""
    panel = show_widget(cls(), (420, 300))
    qtbot.wait(100)
    events: list[str] = []
    order = Order(events, panel)
    panel.glw.viewport().installEventFilter(order)
    rest = panel._settle_rest
    later: list[bool] = []
    panel._settle_rest = lambda: (later.append(not panel.glw.updatesEnabled()), rest())
    state = _state(4, trials=600, rules=RULES)
    while panel.draw_count == 0:
        events.clear()
        order.settled.clear()
        assert panel.refresh(state)
        # (a busy machine may take a while: the turns come when they come)
        qtbot.waitUntil(lambda: not panel.paint_due and panel.glw.updatesEnabled(), timeout=5000)
        qtbot.wait(60)  # a second paint, were there one, would land here
    panel.glw.viewport().removeEventFilter(order)
    assert events.count("paint") == 1 and order.settled == [True], (events, order.settled)
    assert panel.glw.updatesEnabled() and not panel.paint_due
    # the settling that went on later did so with the panel's paint held
    assert all(later), later
    if cls.plot_id == "weights":
        assert later, "the weights' first draw settled in one round: this test shows nothing"


def test_a_panel_hidden_while_its_paint_is_held_owes_no_paint(qtbot, show_widget):
    """Hidden (another tab) before its held paint came, a panel says no paint is due: the
    page's ticks would otherwise keep waiting for it (every other tick drew nothing)."""
    panel = _shown_panel(qtbot, show_widget)
    draw = panel.draw
    panel.draw = lambda state: (draw(state), _burn(2.5 * PAINT_LATER_AFTER_S))
    assert panel.refresh(_state(5))
    assert panel.paint_due and not panel.glw.updatesEnabled()
    panel.hide()
    qtbot.waitUntil(panel.glw.updatesEnabled, timeout=5000)
    assert not panel.paint_due
    panel.draw = draw
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.refresh(_state(6))
    qtbot.waitUntil(lambda: not panel.paint_due, timeout=2000)


def test_a_picture_taken_at_once_shows_a_held_panel_whole(qtbot, show_widget):
    """``--screenshot`` grabs the window right after the redraws: ``finish_held`` settles and
    releases a held panel first (grabbed held, its view came out other than when painted)."""
    panel = _shown_panel(qtbot, show_widget)
    draw = panel.draw
    panel.draw = lambda state: (draw(state), _burn(2.5 * PAINT_LATER_AFTER_S))
    assert panel.refresh(_state(7))
    panel.draw = draw
    assert not panel.glw.updatesEnabled()
    panel.finish_held()
    now = panel.glw.grab().toImage()
    qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
    qtbot.wait(60)
    assert now == panel.glw.grab().toImage()


def test_the_screenshot_releases_every_held_panel_before_its_grab(qtbot, monkeypatch):
    """``main.py --screenshot`` (ui.app._paint_everything) grabs right after the redraws,
    whenever the turns that would settle and release a panel come (here: not before 10 s)."""
    from types import SimpleNamespace

    import ui.plots.base as base

    monkeypatch.setattr(base, "TURN_MS", 10_000)

    from PySide6.QtWidgets import QVBoxLayout, QWidget

    from ui.app import _paint_everything

    window = QWidget()
    qtbot.addWidget(window)
    panel = ScoresPanel()
    QVBoxLayout(window).addWidget(panel)
    window.resize(420, 300)
    window.show()
    qtbot.waitExposed(window)
    page = SimpleNamespace(redraw=lambda budget: [], stale=lambda: [], panels={"scores": panel})
    window.page = page
    window.tabs = SimpleNamespace(currentWidget=lambda: page)
    assert panel.refresh(_state(8))  # a first draw: its settling is left to a later turn
    assert not panel.glw.updatesEnabled()
    from PySide6.QtWidgets import QApplication

    _paint_everything(QApplication.instance(), window)
    assert panel.glw.updatesEnabled()


def test_a_first_draw_settles_one_round_a_turn(qtbot, show_widget):
    """The weights' first draw needs more than one settling round (its axes change width);
    each later turn runs one round (three in one turn were 17-24 ms of the GUI thread's CPU),
    and the one paint comes once the panel is settled."""
    from ui.plots.weights import WeightsPanel

    panel = show_widget(WeightsPanel(), (420, 300))
    qtbot.wait(100)
    events: list[str] = []
    order = Order(events, panel)
    panel.glw.viewport().installEventFilter(order)
    rounds: list[int] = []
    turns: list[bool] = []  # per later turn: the paint still held when it began
    settle, rest = panel.settle, panel._settle_rest

    def counted(*args, **kwargs) -> bool:
        rounds.append(kwargs.get("rounds", args[0] if args else SETTLE_ROUNDS))
        return settle(*args, **kwargs)

    def one_turn() -> None:
        turns.append(not panel.glw.updatesEnabled())
        rounds.clear()
        rest()
        events.append(f"rounds {rounds}")

    panel.settle = counted
    panel._settle_rest = one_turn
    state = _state(4, trials=600, rules=RULES)
    while panel.draw_count == 0:
        events.clear()  # (the ticks that make its items first paint them)
        order.settled.clear()
        assert panel.refresh(state)
        qtbot.waitUntil(lambda: not panel.paint_due and panel.glw.updatesEnabled(), timeout=5000)
        qtbot.wait(60)  # a second paint, were there one, would land here
    panel.glw.viewport().removeEventFilter(order)
    later = [e for e in events if e.startswith("rounds")]
    assert len(later) >= 2, events  # (one round would show nothing here)
    assert all(e == "rounds [1]" for e in later), events
    assert all(turns) and events.count("paint") == 1 and order.settled == [True], events


@pytest.mark.parametrize(("work_s", "in_tick"), [(0.0, True), (2.5 * PAINT_LATER_AFTER_S, False)])
def test_a_long_draw_settles_in_a_later_turn_and_paints_once_settled(qtbot, show_widget,
                                                                     work_s, in_tick,
                                                                     monkeypatch):
    """A later draw (not a first) that took long (seven rules' histograms: 10-15 ms) leaves its
    layout round (auto-range, axes: 5-10 ms) to the event loop's next turn, its paint held
    until then; a short one settles in the tick. Both paint once, settled."""
    panel = _shown_panel(qtbot, show_widget)
    if in_tick:  # short whatever this machine's speed (see the test above)
        monkeypatch.setattr(base, "PAINT_LATER_AFTER_S", 1.0)
    events: list[str] = []
    order = Order(events, panel)
    settled_in: list[str] = []
    settle, draw = panel.settle, panel.draw
    where = ["tick"]

    def counted(*args, **kwargs) -> bool:
        settled_in.append(where[0])
        return settle(*args, **kwargs)

    panel.settle = counted
    panel.draw = lambda state: (draw(state), _burn(work_s))
    panel.glw.viewport().installEventFilter(order)
    try:
        assert panel.refresh(_state(5, trials=900))  # new ranges: there is settling to do
        where[0] = "later"
        assert panel.glw.updatesEnabled() is in_tick or panel.paint_due
        qtbot.waitUntil(lambda: not panel.paint_due and panel.glw.updatesEnabled(), timeout=5000)
        qtbot.wait(60)  # a second paint, were there one, would land here
    finally:
        panel.settle, panel.draw = settle, draw
        panel.glw.viewport().removeEventFilter(order)
    assert ("tick" in settled_in) is in_tick, settled_in
    assert "later" in settled_in or in_tick, settled_in
    assert events.count("paint") == 1 and order.settled == [True], events


def test_a_first_draw_lays_out_nothing_in_its_tick(qtbot, show_widget):
    """A first draw's layout (new ranges resize every axis) runs in a turn of its own, after the
    tick: beside a first draw of seven rules in the tick it made 25-40 ms blocks (bench_gui.py
    --rules 7, a run's first second). The paint still comes once, settled."""
    panel = show_widget(ScoresPanel(), (420, 300))
    qtbot.wait(100)
    events: list[str] = []
    order = Order(events, panel)
    lay_out = panel._lay_out
    where = ["tick"]
    laid_out_in: list[str] = []
    panel._lay_out = lambda: (laid_out_in.append(where[0]), lay_out())
    panel.glw.viewport().installEventFilter(order)
    try:
        state = _state(4, trials=600, rules=RULES)
        while True:
            laid_out_in.clear()
            where[0] = "tick"
            assert panel.refresh(state)
            first = panel.draw_count == 1
            where[0] = "later"
            if first:
                break
            qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)  # (its items' ticks)
        events.clear()
        order.settled.clear()
        assert laid_out_in == [] and not panel.glw.updatesEnabled()
        qtbot.waitUntil(lambda: not panel.paint_due and panel.glw.updatesEnabled(), timeout=5000)
        qtbot.wait(60)  # a second paint, were there one, would land here
    finally:
        panel._lay_out = lay_out
        panel.glw.viewport().removeEventFilter(order)
    assert laid_out_in and set(laid_out_in) == {"later"}
    assert events.count("paint") == 1 and order.settled == [True], events
