"""Every character the window shows exists in its font: a missing glyph draws as an empty box
(the clamp notice began with U+24D8, which DejaVu Sans, the usual Linux font, lacks)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics, QTextDocument
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QLabel

from ui.params.fields import NOTICE_MARK


def missing_glyphs(widget) -> set[str]:
    """The characters of ``widget``'s text (rich text as shown) its font cannot draw."""
    text = widget.text()
    if "<" in text:
        doc = QTextDocument()
        doc.setHtml(text)
        text = doc.toPlainText()
    metrics = QFontMetrics(widget.font())
    return {ch for ch in text if ch.strip() and not metrics.inFontUcs4(ord(ch))}


def test_the_clamp_notice_draws_every_character(window, qtbot):
    spin = window.params.fields["d_k"]
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    spin.selectAll()
    with qtbot.waitSignal(window.params.clamped, timeout=2000):
        QTest.keyClicks(spin, "999999")
        QTest.keyClick(spin, Qt.Key.Key_Return)
    label = window.params.clamp_label
    assert label.text().startswith(NOTICE_MARK) and "999999" in label.text()
    assert missing_glyphs(label) == set()


def test_every_label_and_button_of_every_page_draws_every_character(window, qtbot):
    for cls in ("InspectorPage", "TrainingPage", "RealModelPage", "ExperimentsPage"):
        window.ensure_page(cls)
    window.show_tour()
    qtbot.wait(50)
    bad = {}
    for widget in [*window.findChildren(QLabel), *window.findChildren(QAbstractButton)]:
        missing = missing_glyphs(widget)
        if missing:
            bad[widget.objectName() or type(widget).__name__] = missing
    assert not bad, bad
    # the scene text of every page's plots as drawn (axis titles such as "‖J‖<sub>F</sub> of
    # the row", plot titles): each character in the font its text item draws with (the Real
    # model page's per-head plots are built just after it shows)
    from ui.plots.base import PlotPanel

    qtbot.waitUntil(lambda: any(p.plot_id == "head_attention"
                                for p in window.findChildren(PlotPanel)), timeout=10_000)
    assert not plot_text_missing_glyphs(window)


def plot_text_missing_glyphs(window) -> dict[str, set[str]]:
    from ui.plots.base import PlotPanel

    bad, seen = {}, 0
    for panel in window.findChildren(PlotPanel):
        for plot in panel.plot_items():
            items = [plot.titleLabel.item] + [plot.getAxis(side).label for side in ("left", "bottom")]
            for item in items:
                text = item.toPlainText()
                metrics = QFontMetrics(item.font())
                missing = {ch for ch in text if ch.strip() and not metrics.inFontUcs4(ord(ch))}
                seen += bool(text)
                if missing:
                    bad[f"{panel.plot_id}: {text}"] = missing
    assert seen >= 40, seen  # (every page's plots were looked at)
    return bad

