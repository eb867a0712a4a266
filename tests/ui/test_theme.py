"""One colour table for every page: each rule (simulator and training) has one distinct colour,
and the two themes define every series colour the pages use."""

from __future__ import annotations

import dataclasses

from engine.config import RULES
from engine.training.config import TRAINING_RULES
from ui.theme import DARK, LIGHT, RULE_COLORS, THEMES, rule_color, rule_text_color


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


def _colours(widget) -> set[str]:
    img = widget.grab().toImage()
    return {img.pixelColor(x, y).name() for x in range(0, img.width(), 2)
            for y in range(0, img.height(), 2)}


def test_rule_check_boxes_follow_the_theme_both_ways(show_widget, qtbot):
    """dark -> light left the rule check boxes black (their style sheet kept the old palette)."""
    from PySide6.QtWidgets import QApplication

    from ui.params.panel import ParamPanel
    from ui.theme import apply_app_theme

    app = QApplication.instance()
    try:
        apply_app_theme(app, LIGHT)
        panel = show_widget(ParamPanel(), (320, 900))
        box = panel.rule_boxes["sqrt"]
        apply_app_theme(app, DARK)
        qtbot.wait(10)
        dark = _colours(box)
        assert DARK.window.lower() in dark and LIGHT.window.lower() not in dark
        apply_app_theme(app, LIGHT)
        qtbot.wait(10)
        light = _colours(box)
        assert LIGHT.window.lower() in light and DARK.window.lower() not in light
        # the label keeps its rule's colour, as dark as it takes to be read on this theme
        assert rule_text_color("sqrt", LIGHT).lower() in light
    finally:
        apply_app_theme(app, LIGHT)


def test_the_error_colour_comes_from_the_theme(show_widget):
    from PySide6.QtWidgets import QApplication

    from engine.errors import ConfigError
    from ui.params.panel import ParamPanel
    from ui.theme import apply_app_theme, current_theme

    app = QApplication.instance()
    try:
        apply_app_theme(app, DARK)
        assert current_theme() is DARK
        panel = show_widget(ParamPanel(), (320, 900))
        panel.show_error(ConfigError("d_k", "must be at least 1"))
        assert DARK.error in panel.error_label.styleSheet()
        assert DARK.error in panel.fields["d_k"].styleSheet()
        apply_app_theme(app, LIGHT)
        panel.apply_theme(LIGHT)  # the window calls it on a theme switch
        assert LIGHT.error in panel.error_label.styleSheet()
        assert LIGHT.error in panel.fields["d_k"].styleSheet()
    finally:
        apply_app_theme(app, LIGHT)


def test_no_page_hard_codes_the_light_error_red():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "ui"
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "theme.py" and LIGHT.error.lower() in p.read_text().lower()]
    assert offenders == []
