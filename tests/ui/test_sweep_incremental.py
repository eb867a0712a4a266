"""A new sweep point is drawn one of the six sweep plots per redraw tick (issue 17: all six at
once, with their items made on the first point, was the GUI thread's longest block while a
large run streamed, 0.1 s and more; bench/bench_gui.py --profile names the blocks)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from engine.config import SimulationConfig
from ui.plots.sweep import PLOTS_PER_REFRESH, SweepPanel
from ui.simulation_run import LabState, lab_run

#: seven rules (no rule that needs vectors): every plot of the strip draws seven curves
SEVEN_RULES = ("none", "sqrt", "dk", "logn", "ssmax", "softcap", "sigmoid")


@pytest.fixture(scope="module")
def full_state():
    cfg = SimulationConfig(trials=300, scalings=("none", "sqrt"))
    return list(lab_run(cfg, lambda: False))[-1]


def _state(full, n):
    return LabState(full.config, full.snapshot, tuple(full.sweep[:n]), full.sweep_total, "sweep")


@pytest.fixture
def panel(qtbot):
    panel = SweepPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 260)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def test_a_new_point_is_drawn_over_several_refreshes(panel, full_state):
    drawn: list[int] = []
    original = panel._draw_plot
    panel._draw_plot = lambda i: (drawn.append(i), original(i))
    n_plots = len(panel.plots)
    state = _state(full_state, 5)
    key = panel.data_key(state)
    rounds = []
    while panel._drawn_key != key:
        drawn.clear()
        assert panel.refresh(state)
        rounds.append(list(drawn))
        # the items of plots not drawn yet are not made yet either (made per plot)
        assert {i for i, _rule in panel.series} == {i for r in rounds for i in r}
        assert len(rounds) <= n_plots
    assert all(len(r) <= PLOTS_PER_REFRESH for r in rounds)
    assert sorted(i for r in rounds for i in r) == list(range(n_plots))
    assert len(rounds) == -(-n_plots // PLOTS_PER_REFRESH) and panel.draw_count == 1
    assert not panel.refresh(state)  # up to date: nothing more
    # every curve shows the 5 points, the header says so
    for (_i, _rule), series in panel.series.items():
        assert len(series.curve.xData) == 5
    assert "5/13 points" in panel.info_label.full_text  # (the caption under the header)
    # a forced redraw (an export) draws everything at once
    drawn.clear()
    assert panel.refresh(_state(full_state, 7), force=True)
    assert sorted(drawn) == list(range(n_plots)) and len(panel.data_rows()) > 0


def test_a_newer_point_mid_draw_starts_over_and_the_page_waits_for_it(panel, full_state):
    first, second = _state(full_state, 3), _state(full_state, 4)
    assert panel.refresh(first)  # two plots of the first
    assert panel._drawn_key is None  # not drawn yet: the page still counts it stale
    while panel.refresh(second):
        pass
    assert panel._drawn_key == panel.data_key(second)
    for series in panel.series.values():
        assert len(series.curve.xData) == 4


def test_the_x_range_is_the_whole_sweep_from_the_first_point(panel, full_state):
    """Points arriving do not move the x axis (each would repaint all six plots)."""
    ranges = []
    for n in (1, 4, 13):
        panel.refresh(_state(full_state, n), force=True)
        ranges.append(tuple(round(v, 6) for v in panel.plots[0].getViewBox().viewRange()[0]))
    assert ranges[0] == ranges[1] == ranges[2]
    lo, hi = ranges[0]
    assert lo < 0 < 3.6 < hi  # d_k 1 ... 4,096 on a log axis


def _view_rects(panel):
    return [tuple(round(v, 1) for v in p.getViewBox().sceneBoundingRect().getRect())
            for p in panel.plots]


def test_the_x_range_is_set_before_the_first_point(panel, full_state, qtbot):
    """The main run's state (no sweep point yet) already sets the sweep's x range: the first
    point then moves no axis (a moved axis repaints all six plots)."""
    empty = LabState(full_state.config, full_state.snapshot, (), full_state.sweep_total, "simulation")
    panel.refresh(empty)
    before = panel.plots[0].getViewBox().viewRange()[0]
    panel.refresh(_state(full_state, 13), force=True)
    assert panel.plots[0].getViewBox().viewRange()[0] == pytest.approx(before)


def test_the_first_point_moves_no_plot(panel, full_state, qtbot):
    """The legend's row keeps a line's height while empty: its first entries move no plot
    up or down (each plot's own y axis may still take its tick labels' width)."""
    empty = LabState(full_state.config, full_state.snapshot, (), full_state.sweep_total, "simulation")
    panel.refresh(empty)
    qtbot.wait(20)
    rows = [(y, h) for _x, y, _w, h in _view_rects(panel)]
    first = _state(full_state, 1)
    while panel.refresh(first):
        pass
    qtbot.wait(20)
    assert len(panel.legend.items) == 3  # raw q·k, none, sqrt
    assert [(y, h) for _x, y, _w, h in _view_rects(panel)] == rows


def test_a_wider_y_axis_moves_only_its_own_plot(panel, full_state, qtbot):
    """Equal fixed columns: a y axis that grows (longer tick labels) narrows its own view box
    and leaves the other five where they are (columns sized by the axes reflowed all six)."""
    panel.refresh(_state(full_state, 13), force=True)
    qtbot.wait(20)
    rects = _view_rects(panel)
    panel.plots[2].getAxis("left").setWidth(panel.plots[2].getAxis("left").width() + 30)
    qtbot.wait(20)
    after = _view_rects(panel)
    assert after[2] != rects[2]
    assert [r for i, r in enumerate(after) if i != 2] == [r for i, r in enumerate(rects) if i != 2]


def _moves_over_a_sweep(panel, full_state, qtbot) -> list[int]:
    """The points (1..13) after which some view box of the sweep moved."""
    empty = LabState(full_state.config, full_state.snapshot, (), full_state.sweep_total, "simulation")
    panel.refresh(empty)
    qtbot.wait(20)
    rects, moves = _view_rects(panel), []
    for n in range(1, 14):
        state = _state(full_state, n)
        while panel.refresh(state):
            pass
        qtbot.wait(5)  # (the layout runs in the event loop, after the refresh)
        now = _view_rects(panel)
        if now != rects:
            moves.append(n)
        rects = now
    return moves


def test_points_rarely_move_a_view_box(panel, full_state, qtbot):
    """Each point's new tick labels moved plots: pyqtgraph shrank a y axis to the first point's
    labels and widened it for the next ones, each time a relayout and a second paint of the
    whole plot, axes included (16 ms of GUI CPU at the sweep's start). Now an axis only grows,
    from pyqtgraph's 30 px of tick labels: a few moves in a whole sweep, never back."""
    moves = _moves_over_a_sweep(panel, full_state, qtbot)
    assert len(moves) <= 2, moves
    for plot in panel.plots:  # (pyqtgraph's own axes, shrinking: more moves, the check's other side)
        plot.getAxis("left").setStyle(autoReduceTextSpace=True)
    panel.clear_data()
    assert len(_moves_over_a_sweep(panel, full_state, qtbot)) > len(moves)


def test_a_new_point_leaves_the_raw_curve_to_its_plots_turn(panel, full_state):
    """The raw q·k curve is set with the plot it is in: set with every new point, it repainted
    that plot beside the one drawn in that refresh."""
    raw_plot = panel._raw_plot()
    before = _state(full_state, 3)
    while panel.refresh(before):
        pass
    assert len(panel.raw.curve.xData) == 3
    drawn: list[int] = []
    original = panel._draw_plot
    panel._draw_plot = lambda i: (drawn.append(i), original(i))
    panel._pending = [i for i in range(len(panel.plots)) if i != raw_plot]  # mid-pass
    after = _state(full_state, 4)
    while panel.refresh(after):
        if raw_plot not in drawn:
            assert len(panel.raw.curve.xData) == 3, drawn
    assert drawn[-1] == raw_plot and len(panel.raw.curve.xData) == 4


def test_many_rules_make_their_curves_over_several_refreshes(qtbot):
    """Twelve rules' curves (about 5 ms each) are made SERIES_PER_REFRESH per refresh, never a
    whole plot's at once; every curve shows every point in the end.

    The legend (plot 0's curves are its entries) takes the rows it needs as soon as plot 0 is
    drawn, so the reflow moves plots still empty: fitted only once all six were drawn, it
    reflowed and repainted the whole strip at once (seven rules: 8 -> 4 columns, ~90 ms of the
    GUI thread's CPU; bench/bench_gui.py --rules 7)."""
    from PySide6.QtWidgets import QApplication

    from engine.rules import RULES
    from ui.plots.sweep import SERIES_PER_REFRESH

    cfg = SimulationConfig(trials=50, scalings=RULES)
    full = list(lab_run(cfg, lambda: False))[-1]
    panel = SweepPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 260)
    panel.show()
    qtbot.waitExposed(panel)
    made = []
    heights = []  # plot 5's height after each refresh, once Qt has laid the strip out
    plot_0_drawn_at = None
    while True:
        count = len(panel.series)
        drawn = panel.refresh(full)
        made.append(len(panel.series) - count)
        QApplication.processEvents()
        heights.append(round(panel.plots[5].geometry().height()))
        if plot_0_drawn_at is None and 0 not in panel._pending:
            plot_0_drawn_at = len(heights) - 1
        if not drawn or panel._drawn_key == panel.data_key(full):
            break
    assert max(made) <= SERIES_PER_REFRESH
    assert panel.legend.columnCount < len(panel.legend.items)  # (more than one row: it matters)
    assert plot_0_drawn_at is not None and plot_0_drawn_at < len(heights) - 1
    assert len(set(heights[plot_0_drawn_at:])) == 1, heights  # no reflow after plot 0's turn
    assert len(panel.series) == len(RULES) * len(panel.plots)
    for (i, _rule), series in panel.series.items():  # (a log plot leaves out means <= 0)
        assert series.curve.xData is not None
        if not panel.metrics[i].log_y:
            assert len(series.curve.xData) == len(full.sweep)


def test_the_raw_series_is_in_the_legend_once_through_theme_switches(panel, full_state):
    from ui.theme import THEMES

    panel.refresh(_state(full_state, 3), force=True)
    for name in ("dark", "light"):
        panel.apply_theme(THEMES[name])
        panel.refresh(_state(full_state, 3), force=True)
    labels = [label.text for _sample, label in panel.legend.items]
    assert labels.count("raw q·k") == 1 and len(labels) == 3


@pytest.mark.parametrize("widths", [(700, 1800), (1800, 700)])
def test_the_columns_follow_the_panel_when_it_is_resized(qtbot, full_state, widths):
    """The six plots fill the strip at any width, after growing or shrinking (fixed columns
    must not pin the layout to the width it first had)."""
    panel = SweepPanel()
    qtbot.addWidget(panel)
    panel.resize(widths[0], 260)
    panel.show()
    qtbot.waitExposed(panel)
    panel.refresh(_state(full_state, 13), force=True)
    panel.resize(widths[1], 260)
    qtbot.wait(50)
    right = panel.plots[-1].sceneBoundingRect().right()
    view = panel.glw.viewport().width()
    assert view - 40 < right <= view + 0.5
    widths_now = [p.sceneBoundingRect().width() for p in panel.plots]
    assert max(widths_now) - min(widths_now) < 1.0



def test_a_new_point_of_many_rules_is_set_a_few_rules_per_refresh(qtbot, panel):
    """With seven rules a plot that already shows the sweep takes a new point's data
    RULES_PER_REFRESH rules a refresh (a plot of seven set at once made a tick and its paint
    ~45 ms of the GUI thread's CPU); a plot showing another configuration takes all its rules
    at once, so its old curves never stay beside the new ones."""
    from ui.plots.sweep import RULES_PER_REFRESH

    seven = SEVEN_RULES
    runs = [_seven_rule_run(seed) for seed in (1, 2)]
    calls: list[tuple[int, tuple[str, ...]]] = []
    original = panel._draw_rules
    panel._draw_rules = lambda i, rules: (calls.append((i, tuple(rules))), original(i, rules))

    def draw_all(state) -> list[list[tuple[int, tuple[str, ...]]]]:
        rounds = []
        while panel._drawn_key != panel.data_key(state):
            calls.clear()
            assert panel.refresh(state)
            rounds.append(list(calls))
        return rounds

    draw_all(_state(runs[0], 4))
    rounds = draw_all(_state(runs[0], 5))  # the same sweep, one point more
    per_plot: dict[int, list[str]] = {}
    for r in rounds:
        assert sum(len(rules) for _i, rules in r) <= RULES_PER_REFRESH
        for i, rules in r:
            per_plot.setdefault(i, []).extend(rules)
    assert max(sum(len(rules) for _i, rules in r) for r in rounds) < len(seven)  # split
    assert {i: sorted(v) for i, v in per_plot.items()} == \
        {i: sorted(seven) for i in range(len(panel.plots))}  # each rule of each plot, once
    assert len(rounds) == len(panel.plots) * -(-len(seven) // RULES_PER_REFRESH)
    for series in panel.series.values():
        if series.curve.xData is not None and len(series.curve.xData):
            assert len(series.curve.xData) <= 5
    assert all(len(panel.series[(0, name)].curve.xData) == 5 for name in seven)
    # another configuration: each plot emptied, then set in turns as well (never the old
    # configuration's curves beside the new ones, never all seven rules in one refresh)
    new_state = _state(runs[1], 5)
    seen_mixed = []
    rounds = []
    while panel._drawn_key != panel.data_key(new_state):
        calls.clear()
        assert panel.refresh(new_state)
        rounds.append(list(calls))
        for i in {i for r in rounds for i, _rules in r}:
            shown = [name for name in seven if panel.series[(i, name)].curve.xData is not None
                     and len(panel.series[(i, name)].curve.xData)]
            drawn = {name for r in rounds for j, rules in r if j == i for name in rules}
            seen_mixed += [(i, name) for name in shown if name not in drawn]
    assert seen_mixed == []  # a plot being redrawn shows only the new configuration's rules
    assert all(sum(len(rules) for _i, rules in r) <= RULES_PER_REFRESH for r in rounds)
    assert len(rounds) == len(panel.plots) * -(-len(seven) // RULES_PER_REFRESH)


def test_points_faster_than_a_pass_reach_every_plot(qtbot, panel):
    """A new point restarts the pass at the plots the last point had not reached: points
    arriving faster than a pass over six plots of seven rules never starve the last plots."""
    run = _seven_rule_run(seed=3)
    reached: set[int] = set()
    original = panel._draw_rules
    panel._draw_rules = lambda i, rules: (reached.add(i), original(i, rules))
    panel.refresh(_state(run, 2), force=True)
    reached.clear()
    for n in range(3, 14):  # a new point every two refreshes: fewer than a pass needs
        for _ in range(2):
            panel.refresh(_state(run, n))
    assert reached == set(range(len(panel.plots)))


def test_the_page_makes_the_sweep_items_in_the_ticks_before_the_first_point(qtbot, full_state):
    """While the simulation streams, each redraw tick makes one of the sweep's curves for the
    rules of the run (besides the panel it draws), with no data in them; the first point then
    makes none (seven rules' items made at the first point were 30-50 ms blocks)."""
    from ui.pages.simulation.page import SimulationPage
    from ui.plots.sweep import PREPARED_PER_TICK, THEORY

    page = SimulationPage()
    qtbot.addWidget(page)
    page.resize(1200, 680)
    page.show()
    qtbot.waitExposed(page)
    sweep = page.panels["sweep"]
    rules = tuple(full_state.snapshot.rules)
    before = LabState(full_state.config, full_state.snapshot, (), full_state.sweep_total,
                      "simulation")
    page.set_state(before)
    n_plots = len(sweep.plots)
    wanted = n_plots * len(rules)
    counts = []
    # the first ticks also draw the changed panels (and a tick whose panel took long, or left
    # its paint to the loop's next turn, makes nothing ahead: AHEAD_IF_UNDER_S); then one curve
    # a tick, none once all exist. The loop turns between ticks, as between the timer's
    for _ in range(wanted + 60):
        made = len(sweep.series) + len(sweep.theory)
        page.redraw()
        counts.append(len(sweep.series) + len(sweep.theory) - made)
        qtbot.wait(3)
        if not page.stale() and len(sweep.series) == wanted and counts[-1] == 0:
            break
    assert not page.stale()
    assert {(i, r) for i in range(n_plots) for r in rules} == set(sweep.series)
    theory_plots = [i for i, m in enumerate(sweep.metrics) if m.key in THEORY]
    assert {(i, r) for i in theory_plots for r in rules} == set(sweep.theory)
    # per tick: one curve (~5 ms; with its theory line), none once all exist
    assert PREPARED_PER_TICK == 1 and max(counts) <= 2 and counts[-1] == 0
    assert sum(counts) == len(sweep.series) + len(sweep.theory)
    assert all(s.curve.xData is None or len(s.curve.xData) == 0 for s in sweep.series.values())
    made = dict(sweep.series)
    page.set_state(_state(full_state, 1))
    for _ in range(40):  # the first point: drawn into the items made above
        page.redraw()
        if not page.stale():
            break
    assert sweep.series == made
    assert all(len(s.curve.xData) == 1 for s in sweep.series.values())


def test_items_made_ahead_fit_the_legend_so_the_first_point_moves_no_plot(qtbot):
    """Seven rules need a second legend row: it is fitted once the items made ahead exist
    (while the simulation streams), not at the sweep's first point, where the new row shortened
    all six plots and repainted the whole panel (~60 ms of the GUI thread's CPU)."""
    from PySide6.QtWidgets import QApplication

    panel, full = _seven_rules_before_their_sweep(qtbot)
    while not panel.make_items_ahead(tuple(full.snapshot.rules)):
        pass
    QApplication.processEvents()
    qtbot.wait(20)
    assert panel.legend.columnCount < len(panel.legend.items)  # (two rows: it matters)
    columns, rows = panel.legend.columnCount, [(y, h) for _x, y, _w, h in _view_rects(panel)]
    first = _state(full, 1)
    while panel.refresh(first):
        QApplication.processEvents()
    qtbot.wait(20)
    assert panel.legend.columnCount == columns
    assert [(y, h) for _x, y, _w, h in _view_rects(panel)] == rows


def test_the_legend_takes_plot_0s_entries_at_once_with_one_strip_repaint(qtbot):
    """The curves made ahead (one a tick) are plot 0's legend entries: added one a tick, each
    reflowed the legend and repainted the whole strip (seven rules: seven repaints of
    ~15 ms, two of them in one probe interval were the 7-rule bench's lags over a frame). They
    are added together once plot 0's curves all exist: one whole-strip repaint, the raw q·k
    entry first and the rules in their order."""
    from PySide6.QtWidgets import QApplication

    from engine.rules import rule_label

    panel, full = _seven_rules_before_their_sweep(qtbot)
    rules = tuple(full.snapshot.rules)
    paints = _Paints(panel)
    for _ in range(100):  # the empty state's paint, however late a loaded machine makes it
        seen = len(paints.events)
        qtbot.wait(50)
        if len(paints.events) == seen and not panel.paint_due:
            break
    paints.events.clear()
    entries = []
    while True:
        done = panel.make_items_ahead(rules)
        QApplication.processEvents()
        qtbot.wait(5)
        entries.append(len(panel.legend.items))
        if done:
            break
    paints.stop()
    assert len(entries) >= len(rules)  # (one curve a tick: the entries could trickle in)
    assert sorted(set(entries)) == [0, len(rules) + 1], entries
    labels = [label.text for _sample, label in panel.legend.items]
    assert labels == ["raw q·k"] + [rule_label(r) for r in rules]
    strip = panel.glw.viewport().width()
    wide = [region.width() for _paint, region in paints.events]  # (a timer's never started here)
    assert sum(w >= 0.9 * strip for w in wide) == 1, str((wide, entries))


def test_the_csv_rows_are_the_points_numbers(panel, full_state):
    """Every plot's CSV row is its point's estimate (mean and SE, read off the snapshots here),
    the raw q·k rows too; a new point's rows without a forced redraw."""
    from ui.plots.sweep import METRICS

    for n in (4, 13):
        state = _state(full_state, n)
        while panel.refresh(state):
            pass
        rows = panel.data_rows()
        points = sorted(state.sweep, key=lambda p: p.x)
        want = []
        for m in METRICS:
            for rule in full_state.snapshot.rules:
                for p in points:
                    e = getattr(p.snapshot.rules[rule], m.key)
                    want.append((m.key, rule, p.x, e.mean if e.estimable else "",
                                 e.se if e.estimable else ""))
        want += [("raw_score_std", "raw", p.x, p.snapshot.raw_std.mean, p.snapshot.raw_std.se)
                 for p in points]
        got = [(r["metric"], r["rule"], r["d_k"], r["mean"], r["se"]) for r in rows]
        assert len(got) == len(want) == (len(METRICS) * len(full_state.snapshot.rules) + 1) * n
        for g, w in zip(sorted(got, key=str), sorted(want, key=str), strict=True):
            assert g[:3] == w[:3]
            assert g[3:] == pytest.approx(w[3:], rel=1e-12) if w[3] != "" else g[3:] == w[3:]


def _seven_rules_before_their_sweep(qtbot):
    """A sweep panel shown, and a 7-rule run whose simulation it has seen (no point yet)."""
    full = _seven_rule_run(seed=0, trials=50)
    panel = SweepPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 260)
    panel.show()
    qtbot.waitExposed(panel)
    panel.refresh(LabState(full.config, full.snapshot, (), full.sweep_total, "simulation"))
    return panel, full


def _seven_rule_run(seed: int = 5, trials: int = 40):
    cfg = SimulationConfig(trials=trials, scalings=SEVEN_RULES, seed=seed)
    return list(lab_run(cfg, lambda: False))[-1]


class _Paints:
    """Records each paint of the panel's view ("paint", its region's bounding rectangle) and
    the timer that fell due beside it ("timer")."""

    def __init__(self, panel):
        from PySide6.QtCore import QEvent, QObject

        self.events: list[tuple[str, object]] = []
        events = self.events

        class Spy(QObject):
            def eventFilter(self, _obj, event):  # Qt's name
                if event.type() == QEvent.Type.Paint:
                    events.append(("paint", event.region().boundingRect()))
                return False

        self.spy = Spy()
        self.view = panel.glw.viewport()
        self.view.installEventFilter(self.spy)

    def stop(self):
        self.view.removeEventFilter(self.spy)


def test_a_plot_drawn_in_turns_paints_in_the_next_turn_and_only_itself(qtbot, panel):
    """A tick that goes on with a plot's rules leaves its paint to the loop's next turn (with
    seven rules, a plot's two rules set in a tick and its paint in one turn made lags over a
    frame), and that paint covers the plot drawn, not the strip (PlotPanel's hold repaints a
    widget whole: 13-25 ms for the strip)."""
    from PySide6.QtCore import QTimer

    run = _seven_rule_run()
    panel.refresh(_state(run, 4), force=True)
    qtbot.wait(100)
    state = _state(run, 5)
    assert panel.refresh(state)  # the new point's shared part and plot 0's first rules
    qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
    qtbot.wait(30)
    paints = _Paints(panel)
    timer = QTimer()
    timer.setSingleShot(True)
    timer.setInterval(0)
    timer.timeout.connect(lambda: paints.events.append(("timer", None)))
    plot = panel._pending[0]
    timer.start()
    assert panel.refresh(state)  # plot 0's next two rules
    assert panel._pending and panel._pending[0] == plot  # (going on: the case tested)
    assert panel.paint_due
    qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
    qtbot.wait(30)
    paints.stop()
    kinds = [k for k, _r in paints.events]
    assert kinds[0] == "timer" and kinds.count("paint") == 1, kinds
    region = next(r for k, r in paints.events if k == "paint")
    area = panel.glw.mapFromScene(panel.plots[plot].sceneBoundingRect()).boundingRect()
    assert area.adjusted(-3, -3, 3, 3).contains(region), (region, area)
    assert region.width() < 0.4 * panel.glw.viewport().width()


def test_what_the_strip_shows_after_held_paints_is_what_a_whole_repaint_shows(qtbot, panel):
    """Nothing is dropped while the view ignores the scene's updates: a hover read-out shown
    while a plot's paint is held releases it, and the strip drawn in turns (with the pointer
    over it) looks exactly as the whole strip repainted."""
    run = _seven_rule_run()
    panel.refresh(_state(run, 2), force=True)
    qtbot.wait(100)
    state = _state(run, 13)  # (eleven points more: the y axes change too)
    held = 0
    while panel.refresh(state):
        if panel._held_plots is not None:
            held += 1
            if held == 3:  # (the pointer over plot 3, between two of the strip's turns)
                panel.show_values_at(3, 1.5)
                assert panel._held_plots is None
        qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
        qtbot.wait(10)
        assert _on_screen(panel) == _painted_anew(panel), f"turn {held}"
    assert held > 10 and panel.hover_text


def _painted_anew(panel):
    """The panel's view painted now, whole, into an image of the screen's format."""
    from PySide6.QtGui import QImage

    return panel.glw.viewport().grab().toImage().convertToFormat(QImage.Format.Format_RGB32)


def _on_screen(panel):
    """What the window's backing store holds for the panel's view: what the screen shows (a
    widget's ``grab()`` paints it anew, and would show what a dropped update never drew)."""
    from PySide6.QtGui import QGuiApplication, QImage

    view = panel.glw.viewport()
    corner = view.mapTo(view.window(), view.rect().topLeft())
    return QGuiApplication.primaryScreen().grabWindow(
        view.window().winId(), corner.x(), corner.y(), view.width(), view.height()).toImage(
    ).convertToFormat(QImage.Format.Format_RGB32)


def test_the_header_counts_the_points_before_a_pass_over_the_plots_ends(qtbot, panel):
    """Points faster than a pass over six plots of seven rules: the header gives the count as
    soon as a plot shows them, not "no points yet" over the drawn points until the sweep's
    last point (seen in a real window: "no points yet" over ten points)."""
    import re

    run = _seven_rule_run(seed=3)
    empty = LabState(run.config, run.snapshot, (), run.sweep_total, "simulation")
    while panel.refresh(empty):
        pass
    assert panel.info_label.full_text.startswith("no points yet")
    for n in range(1, 14):  # a new point every two refreshes: fewer than a pass needs
        for _ in range(2):
            panel.refresh(_state(run, n))
    assert panel._drawn_key != panel.data_key(_state(run, 13))  # (no pass ended: the case)
    assert re.match(r"\d+/13 points, 40 trials each", panel.info_label.full_text), \
        panel.info_label.full_text


@pytest.mark.parametrize("change", ["resize", "theme", "legend", "axis", "clear", "hover"])
def test_whatever_else_changes_the_strip_lets_a_held_plot_paint_go_first(qtbot, panel, change):
    """While a plot's paint is held the view drops the scene's updates: each other change of
    the strip lets the held paint go first, so none of its updates is dropped."""
    from ui.theme import THEMES

    run = _seven_rule_run()
    panel.refresh(_state(run, 4), force=True)
    qtbot.wait(60)
    state = _state(run, 5)
    while panel.refresh(state) and panel._held_plots is None:
        qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
    assert panel._held_plots is not None
    held = type(panel._held_plots)(panel._held_plots)
    released = []
    original = panel._release_plot_paint

    def release():
        released.append(panel._held_plots)
        original()

    panel._release_plot_paint = release
    {"resize": lambda: panel.resize(900, 260),
     "theme": lambda: panel.apply_theme(THEMES["dark"]),
     "legend": lambda: panel.set_legend_on_screen(False),
     "axis": lambda: panel._use_axis("n_keys"),
     "clear": panel.clear_data,
     "hover": lambda: panel.show_values_at(2, 1.0)}[change]()
    # the held area was let go first (a redraw the change made may hold its own afterwards: a
    # theme's, which takes long, the whole strip)
    assert released and released[0] == held


@pytest.mark.parametrize("legend_on_screen", [True, False])
def test_items_made_ahead_paint_nothing_but_the_legend_once(qtbot, legend_on_screen):
    """A curve made ahead has no data yet: making it repaints nothing (adding an item to an
    auto-ranging plot queued its auto-range through a repaint of the whole strip, 5-15 ms a
    curve, a curve a tick through a seven-rule run's first second). The one paint is the
    legend's, once plot 0's entries are in; a legend kept off the screen (the Simulation
    page's) takes them a few a call and paints nothing, and shown again it is whole."""
    from PySide6.QtWidgets import QApplication

    from engine.rules import rule_label
    from ui.plots.sweep import LEGEND_ENTRIES_PER_CALL

    panel, full = _seven_rules_before_their_sweep(qtbot)
    panel.set_legend_on_screen(legend_on_screen)
    rules = tuple(full.snapshot.rules)
    qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
    qtbot.wait(50)
    paints = _Paints(panel)
    entries = [0]
    while True:
        done = panel.make_items_ahead(rules)
        entries.append(len(panel.legend.items))
        QApplication.processEvents()
        qtbot.wait(5)
        if done:
            break
    qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
    qtbot.wait(20)
    paints.stop()
    assert len(entries) > len(panel.plots) * len(rules)  # (a curve a call: the case)
    assert len(paints.events) == (1 if legend_on_screen else 0), paints.events
    assert _on_screen(panel) == _painted_anew(panel)  # (and nothing was left unpainted)
    steps = {b - a for a, b in pairwise(entries)} - {0}
    assert steps == ({len(rules) + 1} if legend_on_screen else {LEGEND_ENTRIES_PER_CALL})
    labels = [label.text for _sample, label in panel.legend.items]
    assert labels == ["raw q·k"] + [rule_label(r) for r in rules]
    # once all exist, a call makes nothing and holds nothing (the view keeps its updates)
    series = dict(panel.series)
    assert panel.make_items_ahead(rules) and panel._held_plots is None and panel.series == series


def test_a_legend_shown_again_before_its_entries_are_all_in_is_whole(qtbot):
    """Entries still to come to a legend kept off the screen all come when it is shown."""
    from engine.rules import rule_label

    panel, full = _seven_rules_before_their_sweep(qtbot)
    panel.set_legend_on_screen(False)
    rules = tuple(full.snapshot.rules)
    while len(panel.legend.items) < 2:
        panel.make_items_ahead(rules)
    assert len(panel.legend.items) < len(rules) + 1  # (not whole yet: the case)
    panel.set_legend_on_screen(True)
    labels = [label.text for _sample, label in panel.legend.items]
    assert labels == ["raw q·k"] + [rule_label(r) for r in rules]


def test_a_new_point_repaints_the_strip_in_pieces_of_two_plots(qtbot, panel):
    """A new point's first refresh repaints the whole strip (its markers, legend and titles
    may have moved) from the loop's next turn, two plots a turn: in the refresh's turn the
    paint joined it, and the six plots of seven rules in one paint were 25-40 ms of the GUI
    thread. The page's ticks wait for the last piece (``paint_due``), and the screen then
    shows what a whole repaint shows."""
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QRegion

    import ui.plots.sweep as sweep_module

    run = _seven_rule_run()
    panel.refresh(_state(run, 4), force=True)
    qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
    qtbot.wait(50)
    paints = _Paints(panel)
    #: paint_due just after each paint (what a redraw tick falling due then would see)
    due_after: list[bool] = []
    after = _Paints(panel)  # (installed last, it sees each paint first)
    original = after.spy.eventFilter

    def spy(obj, event):
        if event.type() == event.Type.Paint:
            QTimer.singleShot(0, lambda: due_after.append(panel.paint_due))
        return original(obj, event)

    after.spy.eventFilter = spy
    assert panel.refresh(_state(run, 5))  # a new point: its shared part and plot 0
    assert panel.paint_due and not paints.events  # (nothing painted in the tick itself)
    qtbot.waitUntil(lambda: not panel.paint_due, timeout=5000)
    qtbot.wait(30)
    paints.stop()
    after.stop()
    regions = [r for kind, r in paints.events if kind == "paint"]
    view = panel.glw.viewport().rect()
    assert len(regions) == -(-len(panel.plots) // sweep_module.PLOTS_PER_PAINT), regions
    assert all(r.width() < 0.4 * view.width() for r in regions)
    covered = QRegion()
    for r in regions:
        covered = covered.united(QRegion(r))
    assert QRegion(view).subtracted(covered).isEmpty()  # (the whole strip, in the pieces)
    assert due_after == [True] * (len(regions) - 1) + [False]  # (waited for to the last)
    assert _on_screen(panel) == _painted_anew(panel)
