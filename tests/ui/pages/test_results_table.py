"""The results table: its "±" is one standard error and says so; with one trial there is no
standard error, and the table says "n/a" (it showed "± 0")."""

from __future__ import annotations

from engine.config import SimulationConfig
from engine.simulate import run_simulation
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
