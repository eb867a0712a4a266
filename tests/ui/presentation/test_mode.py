"""Presentation mode: larger text and lines, one plot at a time with the sweep below, arrow keys
step through the plots, Play walks d_k through the sweep; leaving restores the page."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from ui.presentation.mode import SEQUENCE


def test_presentation_mode_shows_one_plot_and_the_sweep_and_restores(qtbot, window, wait_complete):
    window.rerun()
    wait_complete(window)
    app = QApplication.instance()
    size = app.font().pointSizeF()
    pen = window.page.panels["entropy"].curves["sqrt"].opts["pen"].widthF()
    window.set_presentation(True)
    assert window.present_action.isChecked() and app.font().pointSizeF() > size
    assert not window.params_dock.isVisible()
    shown = [pid for pid, p in window.page.panels.items() if p.isVisible()]
    assert shown == [SEQUENCE[0], "sweep"] or sorted(shown) == sorted([SEQUENCE[0], "sweep"])
    grid = window.page.widget().layout()
    index = grid.indexOf(window.page.panels[SEQUENCE[0]])
    assert grid.getItemPosition(index)[2:] == (2, 3)  # it spans the plot area
    qtbot.keyClick(window, Qt.Key.Key_Right)
    assert window.presenter.shown == SEQUENCE[1] and window.page.panels[SEQUENCE[1]].isVisible()
    assert not window.page.panels[SEQUENCE[0]].isVisible()
    qtbot.keyClick(window, Qt.Key.Key_Left)
    qtbot.keyClick(window, Qt.Key.Key_Left)
    assert window.presenter.shown == SEQUENCE[-1]
    assert window.page.panels["entropy"].curves["sqrt"].opts["pen"].widthF() > pen
    window.set_presentation(False)
    assert app.font().pointSizeF() == size and window.params_dock.isVisible()
    assert all(p.isVisible() for p in window.page.panels.values())
    index = grid.indexOf(window.page.panels[SEQUENCE[-1]])
    assert grid.getItemPosition(index)[2:] == (1, 1)
    assert abs(window.page.panels["entropy"].curves["sqrt"].opts["pen"].widthF() - pen) < 1e-9


def test_play_walks_d_k_through_the_sweep(qtbot, window, wait_complete):
    window.rerun()
    wait_complete(window)
    values = sorted({p.d_k for p in window.state.sweep})
    start = window.params.widget_values()["d_k"]
    window.play_action.setChecked(True)
    try:
        assert window.presenter.playing
        first = window.params.widget_values()["d_k"]
        assert first == min(v for v in values if v > start)
        window.presenter._next_d_k()
        assert window.params.widget_values()["d_k"] == min(v for v in values if v > first)
    finally:
        window.play_action.setChecked(False)
    assert not window.presenter.playing


def test_the_compact_bar_replaces_the_panel_and_sets_the_parameters(qtbot, window):
    from ui.presentation.bar import ParamBar

    bar = window.findChild(ParamBar, "presentation_bar")
    assert bar is not None and not bar.isVisible()
    window.set_presentation(True)
    assert bar.isVisible() and not window.params_dock.isVisible()
    values = window.params.widget_values()
    assert bar.values() == {k: values[k] for k in ("d_k", "n_keys", "trials")} | {
        "scalings": list(values["scalings"])}
    bar.spins["d_k"].setValue(128)
    assert window.params.widget_values()["d_k"] == 128
    qtbot.mouseClick(bar.rule_buttons["dk"], Qt.MouseButton.LeftButton)
    assert "dk" in window.params.widget_values()["scalings"]
    window.apply_config({"n_keys": 16})  # changed elsewhere (a preset, the tour): the bar follows
    qtbot.waitUntil(lambda: bar.spins["n_keys"].value() == 16, timeout=2_000)
    qtbot.mouseClick(bar.next_button, Qt.MouseButton.LeftButton)
    assert window.presenter.shown == SEQUENCE[1] and SEQUENCE[1].split("_")[0] in bar.plot_label.text()
    state = window.saveState()  # a window state saved in presentation mode ...
    window.set_presentation(False)
    assert not bar.isVisible() and window.params_dock.isVisible()
    window.restoreState(state)  # ... does not bring the bar back outside it
    assert not bar.isVisible()


def test_arrow_keys_step_through_the_tour_while_it_runs(qtbot, window):
    window.set_presentation(True)
    window.show_tour()
    tour = window.tour
    assert tour.index == 0 and tour.asking  # the first step asks before it shows
    qtbot.keyClick(window, Qt.Key.Key_Right)  # reveals step 1's answer and its plot
    assert tour.index == 0 and not tour.asking
    assert window.presenter.shown == tour.current_step.plot == "scores"
    qtbot.keyClick(window, Qt.Key.Key_Right)  # step 2
    assert tour.index == 1
    if tour.asking:
        qtbot.keyClick(window, Qt.Key.Key_Right)
    assert window.presenter.shown == tour.current_step.plot == "jacobian"
    qtbot.keyClick(window, Qt.Key.Key_Left)  # back: answered before, so shown at once
    assert tour.index == 0 and not tour.asking and window.presenter.shown == "scores"
    tour.leave()  # the tour closed: the arrows step through the plots again
    qtbot.keyClick(window, Qt.Key.Key_Right)
    assert tour.index == 0 and window.presenter.shown == SEQUENCE[1]


def test_closing_in_presentation_mode_saves_the_normal_layout(qtbot, window):
    window.set_presentation(True)
    assert not window.params_dock.isVisible()
    window.close()  # saves the window state first
    assert not window.presenter.active and not window.present_action.isChecked()
    assert window.params_dock.isVisible() or not window.isVisible()
    from PySide6.QtCore import QByteArray

    state = window.settings.value("window_state")
    assert isinstance(state, QByteArray) and not state.isEmpty()
    fresh = type(window)(theme="light", restore=False)
    qtbot.addWidget(fresh)
    fresh.show()
    fresh.restoreState(state)
    try:
        assert fresh.params_dock.isVisible() and not fresh.presenter.bar.isVisible()
    finally:
        fresh.close()
        fresh.deleteLater()


def test_at_1280_the_bar_keeps_its_fields_and_plot_navigation_in_view(qtbot, window):
    """Every control of the bar is in view at 1280x720, each of the thirteen rule chips too (in two
    rows: in one, softcap, sink, sigmoid and yarn fell into the bar's » menu), and the window
    does not grow."""
    from PySide6.QtWidgets import QToolButton

    window.resize(1280, 720)
    window.set_presentation(True)
    try:
        for _ in range(3):
            QApplication.processEvents()
            qtbot.wait(5)
        bar = window.presenter.bar
        assert (window.width(), window.height()) == (1280, 720)
        shown = [bar.prev_button, bar.plot_label, bar.next_button, *bar.spins.values()]
        assert all(w.isVisible() and w.geometry().right() < bar.width() for w in shown)
        for rule, chip in bar.rule_buttons.items():
            right = chip.mapTo(window, chip.rect().bottomRight())
            assert chip.isVisible() and 0 < right.x() < 1280 and 0 < right.y() < 720, rule
            assert chip.visibleRegion().boundingRect().size() == chip.size(), rule  # not cut
        overflow = bar.findChild(QToolButton, "qt_toolbar_ext_button")
        assert overflow is None or not overflow.isVisible()  # nothing in the » menu
    finally:
        window.set_presentation(False)
