"""One colour table for every page: each rule (simulator and training) has one distinct colour,
and the two themes define every series colour the pages use."""

from __future__ import annotations

import dataclasses

from engine.config import RULES
from engine.training.config import TRAINING_RULES
from ui.theme import DARK, LIGHT, RULE_COLORS, THEMES, rule_color


def test_every_rule_of_every_page_has_one_distinct_colour():
    assert set(RULE_COLORS) == set(TRAINING_RULES) >= set(RULES)
    colours = [rule_color(r).upper() for r in TRAINING_RULES]
    assert len(set(colours)) == len(colours)
    assert all(c.startswith("#") and len(c) == 7 for c in colours)
    assert rule_color("sqrt_twice") == "#7B3294" and rule_color("scale_after_softmax") == "#8C6D31"


def test_rule_colours_differ_from_the_theme_series_colours():
    for theme in THEMES.values():
        series = {theme.raw, theme.weight, theme.jacobian}
        assert not {c.upper() for c in series} & {c.upper() for c in RULE_COLORS.values()}


def test_both_themes_define_every_colour():
    assert set(THEMES) == {"light", "dark"}
    for theme in (LIGHT, DARK):
        for field in dataclasses.fields(theme):
            if field.name not in ("name", "grid_alpha"):
                value = getattr(theme, field.name)
                assert value.startswith("#") and len(value) == 7, (theme.name, field.name)
    assert LIGHT.background != DARK.background and LIGHT.foreground != DARK.foreground
