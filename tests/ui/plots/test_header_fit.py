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
