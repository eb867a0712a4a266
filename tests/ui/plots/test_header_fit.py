"""A plot's header is exactly two lines that fit its width, whatever the number of rules (with 6-7
rules checked the Top weight header wrapped to 3-4 lines and ran over the y title and the data);
what is cut ends in "…" and the whole header is the title's tooltip."""

from __future__ import annotations

import re

from ui.plots.histograms import HEADER_LINES, _title_width, fit_header


def _parts(k: int) -> list[str]:
    return [f'<span style="color:#123456">rule{i} 12.3% ± 0.4</span>' for i in range(k)]


def _lines(html: str) -> list[str]:
    return html.split("<br>")


def test_a_header_is_two_lines_that_fit_however_many_rules(qapp):
    for k in (1, 2, 7, 12):
        for room in (120.0, 300.0, 900.0):
            text, cut = fit_header("saturated (&gt;0.99): ", _parts(k), "", room)
            lines = _lines(text)
            assert len(lines) == HEADER_LINES, (k, room, text)
            assert all(_title_width(line) <= room + 0.5 for line in lines), (k, room, text)
            shown = len(re.findall(r"rule\d+", text))
            assert cut == (shown < k), (k, room, text)  # cut exactly when a rule is left out
            assert text.endswith("…") == cut


def test_a_plain_note_too_wide_is_elided_and_a_short_header_is_padded(qapp):
    note = "(cosine, qknorm, softcap: large-d_k approximation)"
    text, cut = fit_header("raw q·k std 8.05 (theory 8)", [], note, 200.0)
    first, second = _lines(text)
    assert first == "raw q·k std 8.05 (theory 8)" and second.endswith("…") and cut
    assert _title_width(second) <= 200.5
    text, cut = fit_header("raw q·k std 8.05", [], "", 400.0)
    assert _lines(text) == ["raw q·k std 8.05", "&nbsp;"] and not cut  # the same height as two


def test_a_streaming_header_waits_its_turn_but_a_final_or_new_one_shows_at_once(qtbot, monkeypatch):
    """A header is laid out at most every HEADER_MIN_S while one configuration streams (the
    latest shown by a timer); a final snapshot's header, or a new configuration's, at once."""
    from ui.plots import histograms
    from ui.plots.histograms import EntropyPanel

    monkeypatch.setattr(histograms, "HEADER_MIN_S", 600.0)  # (no timing: only the order)
    panel = EntropyPanel()
    qtbot.addWidget(panel)

    def shown() -> str:
        return panel.plot.titleLabel.text

    panel._live_config = ("config", 1)  # what draw() sets from a snapshot still streaming
    panel.set_title("mean H/log n: ", ["sqrt 0.111"])
    assert "0.111" in shown()  # the configuration's first header: at once
    panel.set_title("mean H/log n: ", ["sqrt 0.222"])
    assert "0.111" in shown() and panel._title_timer.isActive()  # held back, not lost
    panel._title_timer.timeout.emit()
    assert "0.222" in shown() and not panel._title_timer.isActive()
    panel.set_title("mean H/log n: ", ["sqrt 0.333"])
    assert "0.222" in shown()
    panel._live_config = ("config", 2)  # another configuration: never under the old header
    panel.set_title("mean H/log n: ", ["sqrt 0.444"])
    assert "0.444" in shown() and not panel._title_timer.isActive()
    panel.set_title("mean H/log n: ", ["sqrt 0.555"])
    panel._live_config = None  # the run's final snapshot
    panel.set_title("mean H/log n: ", ["sqrt 0.666"])
    assert "0.666" in shown() and not panel._title_timer.isActive()
