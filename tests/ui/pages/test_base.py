"""What the pages share (ui.pages.base): the round-robin redraw with its stale bookkeeping, the
worker stopped when the window around a page closes, and export failures reported, not raised."""

from __future__ import annotations

import threading

from PySide6.QtWidgets import QMainWindow


class FakePanel:
    """Draws ``source`` when its key changed; on screen unless told otherwise."""

    def __init__(self, on_screen: bool = True) -> None:
        self._drawn_key = None
        self.on_screen = on_screen
        self.draws = 0

    def data_key(self, source):
        return id(source)

    def is_on_screen(self) -> bool:
        return self.on_screen

    def refresh(self, source) -> bool:
        self._state = source  # (as PlotPanel: the data it is to show, drawn or not yet)
        if not self.on_screen or self.data_key(source) == self._drawn_key:
            return False
        self._drawn_key = self.data_key(source)
        self.draws += 1
        return True


def test_redraw_takes_turns_and_stale_lists_what_is_left():
    from ui.pages.base import PanelRedraw

    class Page(PanelRedraw):
        panels_per_tick = 2

        def __init__(self) -> None:
            self.panels = {k: FakePanel(on_screen=k != "hidden") for k in ("a", "b", "c", "hidden")}
            self.source = None

        def redraw_source(self):
            return self.source

    page = Page()
    assert page.redraw_panels() == [] and page.stale() == []  # nothing to draw yet
    page.source = object()
    assert page.stale() == ["a", "b", "c"]  # an off-screen panel is not waited for
    assert page.redraw_panels() == ["a", "b"]
    assert page.stale() == ["c"]
    assert page.redraw_panels() == ["c"]
    assert page.stale() == [] and page.redraw_panels() == []  # nothing changed: nothing drawn
    page.source = object()
    assert page.redraw_panels(budget=1) == ["a"]  # the turn goes on where it stopped... then wraps
    # the panels left for a later tick export the new data already (an export taken then
    # showed a snapshot several ticks old: 13 % of a histogram's pixels)
    assert all(p._state is page.source for p in page.panels.values())
    assert page.redraw_panels(budget=5) == ["b", "c"]
    assert [p.draws for p in page.panels.values()] == [2, 2, 2, 0]


def test_closing_the_window_around_a_page_stops_its_worker(qtbot):
    from ui.pages.base import LivePage

    release = threading.Event()
    window = QMainWindow()
    qtbot.addWidget(window)
    page = LivePage(window)
    window.setCentralWidget(page)
    window.show()
    qtbot.waitExposed(window)

    def job(cancelled):
        while not cancelled():
            release.wait(0.01)
            yield 1

    page.worker.start(job)
    qtbot.waitUntil(lambda: page.worker.peek_latest() is not None, timeout=10_000)
    assert page.worker.is_running()
    window.close()
    assert not page.worker.is_running() and not page.timer.isActive()
    page.shutdown()  # safe twice
    window.deleteLater()


def test_an_export_that_fails_is_reported(qtbot, monkeypatch, tmp_path):
    from PySide6.QtWidgets import QFileDialog

    from ui.export.plot_files import ExportError
    from ui.pages.base import LivePage

    class Page(LivePage):
        def __init__(self) -> None:
            super().__init__()
            self.reports: list[tuple[str, bool]] = []

        def report(self, text: str, error: bool = False) -> None:
            self.reports.append((text, error))

        def export_all(self, parent):
            if parent.endswith("full"):
                raise ExportError("disk full")
            return tmp_path / "out"

    page = Page()
    qtbot.addWidget(page)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(tmp_path / "full"))
    page.export_all_dialog()
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(tmp_path))
    page.export_all_dialog()
    assert page.reports == [("export failed: disk full", True), (f"exported to {tmp_path / 'out'}", False)]
    page.shutdown()


def test_a_tick_waits_for_a_panel_paint_left_to_the_next_turn_but_not_for_ever():
    """A panel whose long refresh left its paint to the event loop's next turn (``paint_due``):
    the next ticks draw nothing, so that paint and another panel's refresh are not one block;
    MAX_PAINT_WAITS ticks at most (a paint that never comes never starves the others)."""
    from ui.pages.base import MAX_PAINT_WAITS, PanelRedraw

    class Page(PanelRedraw):
        panels_per_tick = 1

        def __init__(self) -> None:
            self.panels = {k: FakePanel() for k in ("a", "b")}
            self.source = object()

        def redraw_source(self):
            return self.source

    page = Page()
    assert page.redraw_panels() == ["a"]
    page.panels["a"].paint_due = True
    for _ in range(MAX_PAINT_WAITS):
        assert page.redraw_panels() == []  # a's paint first
    assert page.redraw_panels() == ["b"]  # still due (never painted): the others go on
    page.source = object()
    page.panels["a"].paint_due = False
    assert page.redraw_panels() == ["a"]
