"""Every checked rule is in view in the rule strip at 1280x720 (one line cut off the seventh rule
and never showed yarn): full labels when they fit in two lines, short names otherwise, the
formulas on hover; the strip's height never changes with the rules."""

from __future__ import annotations

import re

from PySide6.QtWidgets import QApplication

from engine.rules import RULES, rule_label
from tests.ui.plot_layout import label_cut


def _plain(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&nbsp;", " ")


def _settle(qtbot):
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(5)


def test_every_rule_is_in_view_in_the_strip_at_1280x720(window, qtbot):
    window.resize(1280, 720)
    _settle(qtbot)
    strip = window.page.rule_strip
    height = strip.height()
    window.page.show_rules(("sqrt", "dk"))
    _settle(qtbot)
    assert "sqrt: q·k/√d_k" in _plain(strip.text())  # two rules: the full labels
    window.page.show_rules(RULES)
    _settle(qtbot)
    shown = _plain(strip.text())
    for rule in RULES:
        assert re.search(rf"\b{re.escape(rule)}\b", shown), rule
        assert rule_label(rule) in _plain(strip.toolTip())  # the formula on hover
    assert label_cut(strip) == "", label_cut(strip)
    lines = [_plain(line) for line in strip.text().split("<br>")]
    assert len(lines) <= 2
    window.page.show_rules(RULES[:7])  # seven full labels: two lines, no entry broken
    _settle(qtbot)
    lines = [_plain(line) for line in strip.text().split("<br>")]
    assert len(lines) == 2, lines
    for rule in RULES[:7]:
        assert sum(rule_label(rule) in line for line in lines) == 1, (rule, lines)
    assert strip.height() == height  # the plots under it never move
