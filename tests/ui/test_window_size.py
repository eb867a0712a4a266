"""A 1280x720 window (a projector) keeps its size through every page and presentation mode: no
page, panel or mode raises its minimum size above 1280x720 (a page that needs more room scrolls
in its tab). Leaving presentation mode restores every page exactly: fonts, sizes, scroll bars,
tick fonts and pen widths, after the sequences a lecturer uses. File -> Export plot lists the
plots of the page shown."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget

from ui.plots.base import EXPORT_ACTIONS, PlotPanel

PAGES = ("Simulation", "Score inspector", "Training", "Real model", "Experiments")
SIZE = (1280, 720)


@pytest.fixture(autouse=True)
def _one_estimate_line(monkeypatch):
    """The Experiments page's plan line is timed, and notes a busy machine: its length (and so
    its wrap, and the page's layout) would follow the machine's load, not the window."""
    monkeypatch.setattr("ui.pages.experiments.page.plan_estimate",
                        lambda *args: ("about 1 min (40 s to 2 min)", "timed"))


def _settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(5)


def _fresh(qtbot, present: bool = False):
    from ui.window.main_window import MainWindow

    w = MainWindow(theme="light", restore=False, persist=False)
    w.resize(*SIZE)
    w.show()
    qtbot.waitExposed(w)
    w.apply_config({"trials": 500})  # plots with data (their header boxes hold the rules)
    gen = w.worker.generation
    qtbot.waitUntil(lambda: (latest := w.worker.peek_latest()) is not None
                    and latest.generation == gen and latest.done, timeout=60_000)
    if present:  # as ``--present`` does: before any other page is built
        w.set_presentation(True)
    _settle(qtbot)
    return w


def _close(w, qtbot) -> None:
    w.shutdown()
    w.close()
    w.deleteLater()
    qtbot.wait(10)


def _fits(w) -> None:
    assert (w.width(), w.height()) == SIZE
    hint = w.minimumSizeHint()
    assert hint.width() <= SIZE[0] and hint.height() <= SIZE[1], hint
    assert w.minimumWidth() <= SIZE[0] and w.minimumHeight() <= SIZE[1]


def _never_widens(w, qtbot) -> None:
    """Every page, in and out of presentation mode, and the tour: the window stays 1280x720."""
    for present in (False, True, False):
        if present != w.presenter.active:
            w.set_presentation(present)
            _settle(qtbot)
            _fits(w)
        for title in (*PAGES, "Simulation"):
            assert w.open_page_titled(title)
            _settle(qtbot)
            _fits(w)
        w.show_tour()
        _settle(qtbot)
        _fits(w)
        w.window_tour.leave()
        _settle(qtbot)
        _fits(w)


def _path(widget: QWidget, top: QWidget) -> str:
    parts = []
    while widget is not None and widget is not top:
        parent = widget.parentWidget()
        siblings = parent.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly) \
            if parent is not None else [widget]
        parts.append(f"{type(widget).__name__}[{widget.objectName() or siblings.index(widget)}]")
        widget = parent
    return "/".join(reversed(parts))


def _look(w, qtbot) -> dict[str, Any]:
    """Every page as a user sees it: each visible widget's font size and size, each scroll
    area's scroll ranges, each plot's tick fonts and pen widths; the window's size and dock."""
    seen: dict[str, Any] = {}
    for title in PAGES:
        assert w.open_page_titled(title)
        _settle(qtbot)
        page = w.tabs.currentWidget()
        if hasattr(page, "stale"):  # (panels are redrawn a few per tick: slow under load)
            qtbot.waitUntil(lambda p=page: not p.stale(), timeout=60_000)
            _settle(qtbot)
        if hasattr(page, "estimator"):  # the Experiments page times a job: its line changes
            qtbot.waitUntil(lambda p=page: not p.estimate_timer.isActive()
                            and not p.estimator.is_running() and p.estimate is not None
                            and "timing" not in p.plan_label.text(), timeout=60_000)
            _settle(qtbot)
        seen[f"{title}: window"] = (w.size().toTuple(), w.params_dock.isVisible(),
                                    w.presenter.bar.isVisible())
        area = w.tabs.scroll_area(page)
        for widget in [area, page, *page.findChildren(QWidget)]:
            if widget is None or not widget.isVisible():
                continue
            look: tuple = (widget.font().pointSizeF(), widget.size().toTuple())
            if isinstance(widget, QAbstractScrollArea):
                look += (widget.horizontalScrollBar().maximum(),
                         widget.verticalScrollBar().maximum())
            seen[f"{title}: {_path(widget, w)}"] = look
        for panel in page.findChildren(PlotPanel):
            for i, plot in enumerate(panel.plot_items()):
                for side in ("left", "bottom"):
                    font = plot.getAxis(side).style.get("tickFont")
                    seen[f"{title}: {panel.objectName()} {i} {side} ticks"] = (
                        None if font is None else font.pointSizeF())
                for j, item in enumerate(plot.listDataItems()):
                    pen = item.opts.get("pen")
                    if pen is not None:
                        seen[f"{title}: {panel.objectName()} {i} {j} pen"] = round(
                            pg.mkPen(pen).widthF(), 6)
    assert w.open_page_titled("Simulation")
    _settle(qtbot)
    return seen


def _differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [f"{k}: {before.get(k)} -> {after.get(k)}" for k in sorted(set(before) | set(after))
            if before.get(k) != after.get(k)]


def _every_page_in_presentation(w, qtbot) -> None:
    w.set_presentation(True)
    for title in (*PAGES, "Simulation"):
        w.open_page_titled(title)
        _settle(qtbot)
    w.set_presentation(False)


def _presentation_tour_esc_f11(w, qtbot) -> None:
    w.set_presentation(True)
    _settle(qtbot)
    w.show_tour()
    _settle(qtbot)
    qtbot.keyClick(w.tour, Qt.Key.Key_Escape)  # leaves the tour
    _settle(qtbot)
    assert not w.tour_dock.isVisible()
    qtbot.keyClick(w, Qt.Key.Key_F11)
    _settle(qtbot)


SEQUENCES = {"every page": _every_page_in_presentation,
             "presentation, tour, Esc, F11": _presentation_tour_esc_f11}


@pytest.mark.slow
def test_the_window_keeps_its_size_and_leaving_presentation_restores_every_page(qtbot):
    """One window (a window costs seconds, and each look visits every page): its look before
    presentation mode is the reference; each sequence a lecturer uses must restore it exactly,
    one after the other (a drift that adds up shows too); then the walk over every page, in and
    out of presentation mode and through the tour, never widens it. Last, ``--present`` ->
    Real model -> Training -> F11 looks like that window never presented (its pages were built
    in presentation mode)."""
    w = _fresh(qtbot)
    try:
        before = _look(w, qtbot)
        for name, sequence in SEQUENCES.items():
            sequence(w, qtbot)
            assert not w.presenter.active, name
            diffs = _differences(before, _look(w, qtbot))
            assert diffs == [], (name, "\n".join(diffs))
        _never_widens(w, qtbot)
    finally:
        _close(w, qtbot)
    w = _fresh(qtbot, present=True)
    try:
        for title in ("Real model", "Training"):
            w.open_page_titled(title)
            _settle(qtbot)
        qtbot.keyClick(w, Qt.Key.Key_F11)
        _settle(qtbot)
        assert not w.presenter.active
        diffs = _differences(before, _look(w, qtbot))
        assert diffs == [], "\n".join(diffs)
    finally:
        _close(w, qtbot)


def test_file_export_plot_lists_the_plots_of_the_page_shown(qtbot, window):
    for title in PAGES:
        assert window.open_page_titled(title)
        _settle(qtbot)
        menu = window.plots_menu
        menu.aboutToShow.emit()
        subs = [a.menu() for a in menu.actions() if a.menu() is not None]
        want = window.exports.page_panels()
        if title == "Score inspector":  # its three plots too (they were plain plot widgets)
            assert [p.plot_id for p in want] == ["inspector_weights", "inspector_jacobian",
                                                 "inspector_gauge"]
        assert [m.title() for m in subs] == [p.title for p in want] and want, title
        page = window.tabs.currentWidget()
        assert all(page.isAncestorOf(p) for p in want)
        for sub in subs:
            texts = [a.text() for a in sub.actions() if a.text()]
            assert texts[:5] == [text for text, _kind in EXPORT_ACTIONS], (title, sub.title())
