"""The results table: its "±" is one standard error and says so; with one trial there is no
standard error, and the table says "n/a" (it showed "± 0")."""

from __future__ import annotations

import dataclasses

from engine.config import SimulationConfig
from engine.simulate import run_simulation
from ui.pages.simulation import results_table
from ui.pages.simulation.results_table import ResultsTable


def test_one_trial_shows_n_a_not_zero(show_widget):
    table = show_widget(ResultsTable(), (600, 400))
    table.show_snapshot(run_simulation(SimulationConfig(trials=1, scalings=("none", "sqrt"))))
    text = table.as_text()
    assert "n/a" in text and "± 0\t" not in text and not text.rstrip().endswith("± 0")
    assert "n/a" in table.raw_label.text()


def test_the_convention_is_labelled(show_widget):
    table = show_widget(ResultsTable(), (600, 400))
    table.show_snapshot(run_simulation(SimulationConfig(trials=50, scalings=("sqrt",))))
    assert "1 SE" in table.caption.text() and "1.96" in table.caption.toolTip()
    assert "n/a" not in table.as_text()


def test_rule_headers_are_readable_in_both_themes(show_widget):
    """The rule colour is a swatch beside the header text, which keeps the theme's text colour
    (blue text on the dark header could not be read)."""
    table = show_widget(ResultsTable(), (600, 400))
    table.show_snapshot(run_simulation(SimulationConfig(trials=50, scalings=("sqrt",))))
    head = table.table.horizontalHeaderItem(1)
    assert head.text() == "sqrt" and not head.icon().isNull()
    assert head.data(9) is None or not head.foreground().style()  # no forced text colour


def _live(snap, trials: int, done: bool = False):
    """``snap`` as a streaming run's snapshot after ``trials`` (a new object, as each chunk's)."""
    return dataclasses.replace(snap, trials_done=trials, done=done)


def _cell(table: ResultsTable, col: int = 1) -> str:
    return table.table.item(0, col).text()


def test_a_streaming_run_updates_the_table_a_few_times_a_second_ending_on_the_latest(
        qtbot, show_widget, monkeypatch):
    """Rebuilt with each of ~30 snapshots a second, the table was 2-4 ms of every redraw tick
    (bench/bench_gui.py --rules 7 --profile). While one configuration streams it now shows a
    snapshot at most every LIVE_MIN_S, then the latest that waited; the trials count names
    which one it shows."""
    # a second between updates here: a loaded machine's pause between two calls never passes it
    monkeypatch.setattr(results_table, "LIVE_MIN_S", 1.0)
    table = show_widget(ResultsTable(), (600, 400))
    base = run_simulation(SimulationConfig(trials=400, scalings=("none", "sqrt")))
    table.show_snapshot(_live(base, 100))
    assert "100 trials" in table.raw_label.text()
    table.show_snapshot(_live(base, 200))
    table.show_snapshot(_live(base, 300))
    assert "100 trials" in table.raw_label.text()  # not yet: within LIVE_MIN_S of the last
    assert table.snapshot.trials_done == 100  # (what Copy and CSV take is what is shown)
    qtbot.waitUntil(lambda: "300 trials" in table.raw_label.text(),
                    timeout=5_000)  # the latest, the one in between skipped
    assert table.snapshot.trials_done == 300
    qtbot.wait(300)
    assert "300 trials" in table.raw_label.text()  # nothing older came after it


def test_a_final_snapshot_or_another_configuration_shows_at_once(show_widget, monkeypatch):
    monkeypatch.setattr(results_table, "LIVE_MIN_S", 1.0)  # (as above)
    table = show_widget(ResultsTable(), (600, 400))
    base = run_simulation(SimulationConfig(trials=400, scalings=("none", "sqrt")))
    table.show_snapshot(_live(base, 100))
    table.show_snapshot(_live(base, 400, done=True))
    assert "400 trials" in table.raw_label.text()
    other = run_simulation(SimulationConfig(trials=300, d_k=128, scalings=("sqrt",)))
    table.show_snapshot(_live(other, 50))
    assert "d_k=128" in table.raw_label.text() and "50 trials" in table.raw_label.text()
    assert table.table.columnCount() == 2 and table.table.horizontalHeaderItem(1).text() == "sqrt"
    table.show_snapshot(_live(other, 60))  # its second snapshot: within LIVE_MIN_S, waits
    assert "50 trials" in table.raw_label.text()


def test_a_new_snapshot_of_the_same_rules_rewrites_the_cells_it_has(qtbot, show_widget,
                                                                   monkeypatch):
    """The cells are the same items, their text the new estimates (an independent format of
    the snapshot's own numbers)."""
    monkeypatch.setattr(results_table, "LIVE_MIN_S", 0.0)
    table = show_widget(ResultsTable(), (600, 400))
    a = run_simulation(SimulationConfig(seed=1, trials=200, scalings=("none", "sqrt")))
    b = run_simulation(SimulationConfig(seed=2, trials=300, scalings=("none", "sqrt")))
    table.show_snapshot(a)
    items = [table.table.item(r, c) for r in range(table.table.rowCount()) for c in (1, 2)]
    table.show_snapshot(b)
    assert items == [table.table.item(r, c) for r in range(table.table.rowCount()) for c in (1, 2)]
    for col, name in ((1, "none"), (2, "sqrt")):
        var = b.rules[name].logit_var
        assert _cell(table, col) == f"{var.mean:.4g} ± {var.se:.2g}"
        assert table.table.horizontalHeaderItem(col).text() == name
