"""The main window's live behaviour: streaming to every plot, rerun on change, stop, close while
running, the tour API (apply_config / highlight_plot), themes, settings and lazy pages."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from engine.config import SimulationConfig
from engine.simulate import run_simulation
from ui.plots import PLOT_IDS


def _curve_y(panel, rule="sqrt"):
    return np.array(panel.curves[rule].yData, copy=True)


def test_a_run_streams_to_every_plot_and_the_table(qtbot, window, wait_complete):
    window.apply_config({"trials": 100_000})
    qtbot.waitUntil(lambda: window.state is not None and window.state.snapshot is not None, timeout=10_000)
    wait_complete(window)
    drawn = {pid: p.draw_count for pid, p in window.page.panels.items()}
    assert set(drawn) == set(PLOT_IDS)
    assert all(n >= 1 for n in drawn.values()), drawn
    # the progressive refinement reached the plots more than once
    assert drawn["scores"] >= 2
    snap = window.state.snapshot
    assert snap.done and snap.trials_done == 100_000
    scores = window.page.panels["scores"]
    np.testing.assert_allclose(scores.curves["sqrt"].yData, snap.rules["sqrt"].logit_hist.density())
    sweep = window.page.panels["sweep"]
    assert len(sweep._points) == 13
    assert window.page.results.table.columnCount() == 1 + len(snap.rules)
    assert "backend numpy" in window.status_label.text() and "100,000/100,000" in window.status_label.text()
    assert window.progress.value() == 1000


def test_parameter_change_reruns_after_debounce_and_drops_stale_results(qtbot, window, wait_complete):
    window.rerun()
    wait_complete(window)
    gen = window.worker.generation
    before = _curve_y(window.page.panels["top_weight"])
    window.params.fields["d_k"].setValue(512)  # the user drags: the debounce restarts the run
    assert window.worker.generation == gen  # not yet: debounced
    qtbot.waitUntil(lambda: window.worker.generation == gen + 1, timeout=3000)
    wait_complete(window)
    assert window.state.config.d_k == 512
    assert window.state.snapshot.config.d_k == 512
    assert not np.array_equal(before, _curve_y(window.page.panels["top_weight"]))
    # d_k does not change the sweep: it came from the cache, identical points
    assert len(window.state.sweep) == 13


def test_results_match_a_headless_run(qtbot, window, wait_complete):
    window.apply_config({"d_k": 128, "seed": 5, "trials": 3000})
    wait_complete(window)
    ref = run_simulation(SimulationConfig(d_k=128, seed=5, trials=3000))
    got = window.state.snapshot
    assert got.rules["sqrt"].top_weight == ref.rules["sqrt"].top_weight
    assert got.raw_var == ref.raw_var


def test_stop_takes_effect_at_once(qtbot, window):
    window.apply_config({"trials": 2_000_000, "d_k": 256, "method": "explicit"})
    qtbot.waitUntil(lambda: window.state is not None and window.state.snapshot is not None, timeout=10_000)
    with qtbot.waitSignal(window.worker.cancelled, timeout=3000):
        window.stop_action.trigger()
    assert not window.worker.is_running()
    assert not window.stop_button.isEnabled()
    assert not window.state.snapshot.done


def test_invalid_parameters_show_a_message_and_do_not_run(qtbot, window):
    gen = window.worker.generation
    assert window.apply_config({"method": "exact", "scalings": ["cosine"]}) is False
    assert window.worker.generation == gen
    assert window.params.error_field == "method"
    assert "method" in window.params.error_text
    window.params.fields["q_std"].setValue(0.0)
    assert window.rerun() is False
    assert "q_std" in window.status_label.text()


def test_engine_errors_appear_in_the_window(qtbot, window):
    # torch on a CUDA device that is not there: the engine raises ConfigError in the worker
    from engine.sampling import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present")
    window.apply_config({"backend": "auto", "device": "cuda"})
    qtbot.waitUntil(lambda: window.params.error_field == "device", timeout=5000)
    assert "cuda" in window.params.error_text


def test_highlight_plot_brings_it_into_view(qtbot, window):
    for pid in PLOT_IDS:
        assert window.highlight_plot(pid)
        panel = window.page.panels[pid]
        assert panel.highlighted
        qtbot.waitUntil(lambda p=panel: not p.visibleRegion().isEmpty(), timeout=2000)
    assert window.highlight_plot("nope") is False


def test_apply_config_partial_dict(qtbot, window, wait_complete):
    window.apply_config({"d_k": 1024, "scalings": ["none", "dk"]})
    wait_complete(window)
    cfg = window.params.config_from_widgets()
    assert cfg.d_k == 1024 and cfg.scalings == ("none", "dk")
    assert set(window.state.snapshot.rules) == {"none", "dk"}
    assert set(window.page.panels["scores"].curves) == {"none", "dk"}


def test_closing_while_a_run_streams_exits_cleanly(qtbot):
    from ui.window.main_window import MainWindow

    w = MainWindow(restore=False)
    qtbot.addWidget(w)
    w.show()
    w.apply_config({"trials": 5_000_000, "method": "explicit", "d_k": 512})
    qtbot.waitUntil(lambda: w.state is not None, timeout=10_000)
    w.close()
    assert w.worker.join(5.0)
    w.deleteLater()
    qtbot.wait(20)


def test_theme_switch_recolours_plots(qtbot, window):
    panel = window.page.panels["scores"]
    window.set_theme("dark")
    assert panel.glw.backgroundBrush().color().name().lower() == "#1e1f22"
    window.theme_actions["light"].trigger()
    assert panel.glw.backgroundBrush().color().name().lower() == "#ffffff"


def test_settings_restore_parameters_and_theme(qtbot):
    from ui.window.main_window import MainWindow

    w = MainWindow(restore=True)
    qtbot.addWidget(w)
    w.params.set_config(SimulationConfig(d_k=333, n_keys=5))
    w.set_theme("dark")
    real = w.open_page("RealModelPage")
    real.budget_box.setValue(12.5)
    real.port_panel.path_edit.setText("/models/port.gguf")
    w.close()
    w2 = MainWindow(restore=True)
    qtbot.addWidget(w2)
    assert w2.params.config_from_widgets().d_k == 333
    assert w2.theme_name == "dark"
    real2 = w2.open_page("RealModelPage")  # the Real model page's memory budget and port file
    assert real2.budget_box.value() == 12.5
    assert real2.port_panel.path_edit.text() == "/models/port.gguf"
    assert "attention-lab-settings-" in w2.settings.fileName()  # the test store, not the user's
    w2.close()
    w3 = MainWindow(restore=True, reset=True)
    qtbot.addWidget(w3)
    assert w3.params.config_from_widgets() == SimulationConfig()
    from engine.probe.memory import DEFAULT_BUDGET_GB

    assert w3.open_page("RealModelPage").budget_box.value() == DEFAULT_BUDGET_GB
    w3.close()


def test_other_pages_are_built_lazily(qtbot, window):
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert titles[0] == "Simulation"
    for index, (_module, cls) in list(window._lazy.items()):
        title = window.tabs.tabText(index)
        placeholder = window.tabs.widget(index)
        assert cls not in window.pages  # nothing built before the tab is shown
        window.tabs.setCurrentIndex(index)
        assert window.tabs.widget(index) is not placeholder
        assert window.tabs.tabText(index) == title
        assert type(window.pages[cls]).__name__ == cls, window.pages[cls].text()


def _slow_page_module(tmp_path, monkeypatch, name: str) -> None:
    """A page module that takes 0.4 s to import and records the thread that imported it."""
    import sys

    (tmp_path / f"{name}.py").write_text(
        "import threading, time\n"
        "from PySide6.QtWidgets import QLabel\n"
        "THREAD = threading.current_thread().name\n"
        "time.sleep(0.4)\n"
        "class SlowPage(QLabel):\n"
        "    def __init__(self, parent=None):\n"
        "        super().__init__('slow page', parent)\n"
        "    def status_summary(self):\n"
        "        return 'slow page: ready'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def _click_tab(qtbot, window, index: int) -> None:
    bar = window.tabs.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())


def test_a_clicked_tab_imports_its_page_off_the_gui_thread_and_shows_loading_meanwhile(
        qtbot, window, tmp_path, monkeypatch):
    """Clicking a tab whose module is not imported froze the window for the import: the tab
    shows its placeholder at once, the event loop turns while the module imports in another
    thread, and the page comes in its place, current, the window following it."""
    import sys
    import threading

    from PySide6.QtCore import QTimer

    _slow_page_module(tmp_path, monkeypatch, "lab_slow_page")
    index = 2
    monkeypatch.setitem(window._lazy, index, ("lab_slow_page", "SlowPage"))
    placeholder = window.tabs.widget(index)
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)
    _click_tab(qtbot, window, index)
    assert window.tabs.currentIndex() == index
    assert window.tabs.widget(index) is placeholder  # "Loading…" while it imports
    assert placeholder.text().startswith("Loading")
    qtbot.waitUntil(lambda: "SlowPage" in window.pages, timeout=10_000)
    timer.stop()
    assert sys.modules["lab_slow_page"].THREAD != threading.current_thread().name
    assert len(ticks) >= 10  # the loop turned during the 0.4 s import (a 10 ms timer)
    assert window.tabs.currentIndex() == index
    assert window.tabs.widget(index) is window.pages["SlowPage"]
    assert not window.params_dock.isVisible()  # the window followed the page
    assert window.status_text == "slow page: ready"  # (the status bar asked the page, not "Loading")


def test_a_tab_left_while_its_module_imports_is_built_when_shown_again(
        qtbot, window, tmp_path, monkeypatch):
    _slow_page_module(tmp_path, monkeypatch, "lab_slow_page2")
    index = 2
    monkeypatch.setitem(window._lazy, index, ("lab_slow_page2", "SlowPage"))
    _click_tab(qtbot, window, index)
    _click_tab(qtbot, window, 0)  # back to the Simulation page before the import ends
    qtbot.wait(800)
    assert window.tabs.currentIndex() == 0  # the import's end did not pull the user back
    assert "SlowPage" not in window.pages
    _click_tab(qtbot, window, index)  # imported now: built at once
    assert window.tabs.widget(index) is window.pages["SlowPage"]


def test_a_page_opened_from_code_is_built_before_the_call_returns(
        qtbot, window, tmp_path, monkeypatch):
    _slow_page_module(tmp_path, monkeypatch, "lab_slow_page3")
    monkeypatch.setitem(window._lazy, 2, ("lab_slow_page3", "SlowPage"))
    assert window.open_page_titled(window.tabs.tabText(2))
    assert window.tabs.widget(2) is window.pages["SlowPage"]


def test_shortcuts(window):
    from PySide6.QtGui import QKeySequence

    expected = {window.export_all_action: "Ctrl+E", window.save_action: "Ctrl+S",
                window.open_action: "Ctrl+O", window.rerun_action: "F5", window.stop_action: "Esc"}
    for action, keys in expected.items():
        assert action.shortcut() == QKeySequence(keys), action.text()


def test_only_changed_and_visible_plots_redraw(qtbot, window, wait_complete):
    window.rerun()
    wait_complete(window)
    counts = {pid: p.draw_count for pid, p in window.page.panels.items()}
    qtbot.wait(200)  # several ticks with no new data: nothing redraws
    assert counts == {pid: p.draw_count for pid, p in window.page.panels.items()}
    # a hidden page draws nothing; it catches up when shown again
    other = next(iter(window._lazy))
    window.tabs.setCurrentIndex(other)
    window.apply_config({"d_k": 32})
    qtbot.waitUntil(lambda: window.state is not None and window.state.config.d_k == 32
                    and window.state.complete, timeout=10_000)
    qtbot.wait(100)
    assert counts == {pid: p.draw_count for pid, p in window.page.panels.items()}
    window.tabs.setCurrentWidget(window.page)
    wait_complete(window)
    assert window.page.panels["scores"].draw_count > counts["scores"]


def test_sweep_hover_shows_exact_values(qtbot, window, wait_complete):
    window.rerun()
    wait_complete(window)
    sweep = window.page.panels["sweep"]
    text = sweep.show_values_at(1, np.log10(70.0))  # nearest sweep point: d_k = 64
    point = next(p for p in window.state.sweep if p.d_k == 64)
    assert "d_k = 64" in text
    assert f"{point.snapshot.rules['sqrt'].top_weight.mean:.4g}" in text
    assert sweep.hover[1].isVisible()


def test_plots_offer_export_in_their_context_menu(window):
    for panel in window.page.panels.values():
        for plot in panel.plot_items():
            texts = [a.text() for a in plot.getViewBox().menu.actions()]
            assert {"Export plot as PNG…", "Export plot as SVG…", "Export plot data as CSV…"} <= set(texts)


def test_tour_drives_the_window(qtbot, window):
    seen = []
    window.page.panels["scores"].flash = lambda ms=1800: seen.append("scores")
    window.show_tour()
    assert window.tour_dock is not None and window.tour_dock.isVisible()
    seen.clear()  # (entering step 1 may have highlighted a plot already)
    window.tour.apply_config.emit({"d_k": 256})
    assert window.params.config_from_widgets().d_k == 256
    window.tour.highlight.emit("scores")
    assert seen == ["scores"]
    window.tour.finished.emit()
    assert not window.tour_dock.isVisible()


def test_presets_menu_applies_a_preset(window):
    action = next(a for a in window.presets_menu.actions() if a.text().startswith("Reference 2"))
    assert action.toolTip()
    action.trigger()
    cfg = window.params.config_from_widgets()
    assert (cfg.d_k, cfg.n_keys, cfg.scalings) == (512, 8, ("none", "sqrt"))
    assert window.config == cfg  # it reran with the preset


def test_parameter_dock_steps_aside_on_other_pages(qtbot, window):
    assert window.params_dock.isVisible()
    window.tabs.setCurrentIndex(1)
    assert not window.params_dock.isVisible()
    window.tabs.setCurrentIndex(0)
    assert window.params_dock.isVisible()
    window.params_dock.hide()  # the user closed it: it stays closed after a round trip
    window.tabs.setCurrentIndex(1)
    window.tabs.setCurrentIndex(0)
    assert not window.params_dock.isVisible()


def _press_escape(qtbot, window, widget):
    window.activateWindow()
    qtbot.waitUntil(lambda: window.isActiveWindow(), timeout=2000)
    widget.setFocus()
    qtbot.waitUntil(widget.hasFocus, timeout=2000)
    qtbot.keyClick(widget, Qt.Key.Key_Escape)  # QTest sends the ShortcutOverride first, like Qt


def test_escape_stops_the_run_but_leaves_the_tour_when_the_tour_has_focus(qtbot, window):
    window.show_tour()
    assert window.tour_dock.isVisible()
    stopped = []
    window.stop_action.triggered.connect(lambda *_: stopped.append(True))
    # the tour has the focus: Esc leaves the tour, the run is not stopped
    _press_escape(qtbot, window, window.tour)
    assert not window.tour_dock.isVisible()
    assert stopped == []
    # also with the focus on the step text (the user clicked it to select words; a step that
    # asks first shows its text with the answer)
    window.show_tour()
    if window.tour.asking:
        window.tour.answer(0)
    _press_escape(qtbot, window, window.tour._text)
    assert not window.tour_dock.isVisible()
    assert stopped == []
    # anywhere else Esc is Stop
    window.apply_config({"trials": 2_000_000, "d_k": 256, "method": "explicit"})
    qtbot.waitUntil(lambda: window.worker.is_running(), timeout=5000)
    _press_escape(qtbot, window, window.params.fields["n_keys"])
    assert stopped == [True]
    qtbot.waitUntil(lambda: not window.worker.is_running(), timeout=3000)


def test_tour_keeps_its_plot_in_view_and_opens_the_inspector_on_request(qtbot, window):
    window.show_tour()
    tour = window.tour
    step = next(i for i, s in enumerate(tour.steps) if s.inspector is not None)
    tour.go_to(step)
    assert tour.asking == (tour.steps[step].question is not None)
    if tour.asking:  # the step shows its plot with the answer
        assert not window.page.panels[tour.steps[step].plot].highlighted
        tour.answer(tour.steps[step].question.answer)
    # the step highlights its plot on the Simulation page and stays there
    assert window.tabs.currentWidget() is window.page
    assert window.page.panels[tour.steps[step].plot].highlighted
    assert "open the Score inspector" in tour._plot_hint.text()
    tour._plot_hint.linkActivated.emit("inspector")  # the user clicks the link
    page = window.pages.get("InspectorPage")
    assert page is not None and window.tabs.currentWidget() is page
    example = tour.steps[step].inspector
    assert list(page.result.scores) == list(example.scores) and page.result.scale == example.scale
    # the next step with an example updates the (now built) inspector without switching to it
    window.tabs.setCurrentWidget(window.page)
    later = next(i for i, s in enumerate(tour.steps) if i > step and s.inspector is not None)
    tour.go_to(later)
    if tour.asking:
        tour.answer(0)
    assert window.tabs.currentWidget() is window.page
    assert list(page.result.scores) == list(tour.steps[later].inspector.scores)
    # a step whose example sets a sink or a soft-cap sets it in the inspector, the next one clears it
    for i, s in enumerate(tour.steps):
        if s.inspector is not None and i > later:
            tour.go_to(i)
            if tour.asking:
                tour.answer(0)
            assert page.result.sink == s.inspector.options.get("sink")
            assert page.result.softcap == s.inspector.options.get("softcap")


def test_sweep_axis_leaves_room_for_the_end_labels(qtbot, window, wait_complete):
    import math

    window.rerun()
    qtbot.waitUntil(lambda: window.state is not None and window.state.complete, timeout=60_000)
    wait_complete(window)
    (x0, x1), _ = window.page.panels["sweep"].plots[0].getViewBox().viewRange()
    d_ks = [p.d_k for p in window.state.sweep]
    lo, hi = math.log10(min(d_ks)), math.log10(max(d_ks))
    assert x0 < lo - 0.05 * (hi - lo) and x1 > hi + 0.05 * (hi - lo)


def test_sweep_hover_read_out_stays_inside_its_plot(qtbot, window, wait_complete):
    """With six rules the read-out is wide; anchored at a point just right of the middle it used
    to run past the plot's left edge and be cut off."""
    rules = ("none", "sqrt", "dk", "temperature", "cosine", "qknorm")
    window.apply_config({"trials": 400, "scalings": list(rules)})
    # the rerun starts after the debounce: wait for it, not for the run already on screen
    qtbot.waitUntil(lambda: window.state is not None and window.state.config.scalings == rules,
                    timeout=10_000)
    wait_complete(window)
    sweep = window.page.panels["sweep"]
    for plot_index in range(len(sweep.plots)):
        for d_k in (1, 64, 128, 4096):
            sweep.show_values_at(plot_index, np.log10(d_k))
            qtbot.wait(20)  # the text item places itself at the next paint
            box = sweep.hover[plot_index].mapRectToScene(sweep.hover[plot_index].boundingRect())
            view = sweep.plots[plot_index].getViewBox().sceneBoundingRect()
            assert box.left() >= view.left() - 1, (plot_index, d_k)  # the rule names stay readable
            if box.width() <= view.width():
                assert box.right() <= view.right() + 1, (plot_index, d_k)


def test_leaving_the_tour_gives_back_any_width_it_took(qtbot, window):
    window.resize(1400, 900)
    window.show_tour()
    assert window.tour is not None, window.last_message
    window.resize(1500, 900)  # as a platform without a window manager does when the dock opens
    window.tour.leave()
    assert not window.tour_dock.isVisible()
    assert window.width() == 1400


EXPECTED_TABS = ["Simulation", "Score inspector", "Training", "Real model", "Experiments"]
EXPECTED_TOUR_ACTIONS = {"View": "Guided &tour", "Help": "Start the guided &tour"}


def test_every_page_and_the_tour_menus_are_there(window):
    """A page or the tour that fails to import must not vanish: this fails (never skips)."""
    assert [window.tabs.tabText(i) for i in range(window.tabs.count())] == EXPECTED_TABS
    menus = {a.text().replace("&", ""): [m.text() for m in a.menu().actions()]
             for a in window.menuBar().actions() if a.menu() is not None}
    for menu, action in EXPECTED_TOUR_ACTIONS.items():
        assert action in menus[menu], (menu, action)


def test_every_page_loads_without_error(qtbot, window):
    for index in range(1, window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        page = window.tabs.widget(index)
        assert page.objectName() != "page_load_error", page.text()
    window.show_tour()
    assert window.tour is not None, window.last_message


def test_a_page_that_fails_to_load_shows_its_error(qtbot, window, monkeypatch):
    import ui.window.main_window as mw

    monkeypatch.setitem(window._lazy, 2, ("ui.pages.no_such_page", "NoSuchPage"))
    window.tabs.setCurrentIndex(2)
    page = window.tabs.widget(2)
    assert window.tabs.tabText(2) == mw.LAZY_PAGES[1][0]  # the tab stays
    assert page.objectName() == "page_load_error"
    assert "ModuleNotFoundError" in page.text() and "no_such_page" in page.text()


def test_a_tour_that_fails_to_load_says_why(qtbot, window, monkeypatch):
    import ui.window.main_window as mw

    monkeypatch.setattr(mw, "TOUR", ("ui.pages.no_such_tour", "Tour"))
    window.show_tour()
    assert window.tour is None and window.tour_dock is None
    assert "could not be loaded" in window.last_message and "no_such_tour" in window.last_message


def test_each_page_shows_its_own_status(qtbot, window, wait_complete):
    """The Simulation page's "backend numpy ... sweep 13/13" was shown on every page."""
    window.rerun()
    wait_complete(window)
    assert "backend" in window.status_text and window.progress.isVisible()
    page = window.open_page("TrainingPage")
    assert page is not None
    qtbot.waitUntil(lambda: window.status_text.startswith("Training: idle"), timeout=5_000)
    assert "backend" not in window.status_text
    assert not window.status_label.isVisible() and not window.progress.isVisible()
    window.tabs.setCurrentWidget(window.page)
    assert "backend" in window.status_text and window.progress.isVisible()


def test_a_clamped_parameter_is_said_in_the_status_bar(qtbot, window):
    window.params.show_clamp("d_k: 999999 is outside 0 … 65,536; set to 65,536")
    assert "999999" in window.statusBar().currentMessage()


def test_the_tours_plot_to_watch_stays_outlined_for_the_whole_step(qtbot, window):
    window.show_tour()  # the tour always loads (test_every_page_loads_without_error)
    assert window.tour is not None, window.last_message
    window.tour.highlight.emit("entropy")
    entropy, sweep = window.page.panels["entropy"], window.page.panels["sweep"]
    assert entropy.highlighted and not entropy._flash_timer.isActive()  # held, not timed
    entropy._flash_timer.timeout.emit()  # a stray end of a short flash does not clear it
    assert entropy.highlighted and "3px" in entropy.styleSheet()
    window.tour.highlight.emit("sweep")  # the next step moves the outline
    assert sweep.highlighted and not entropy.highlighted
    window.tour.finished.emit()
    assert not sweep.highlighted and "3px" not in sweep.styleSheet()
