"""The page grid keeps its columns when a run's first data arrive: the Softmax weights panel's
heatmap rule box, sized to its items, changed the panel's width on the first snapshot, the grid
moved its columns by 20 px and every panel was laid out and painted again in that event-loop
turn (a 40 ms stall of the window, ``bench/bench_gui.py --profile``). The box is now as wide as a
7-letter rule name whatever it holds."""

from __future__ import annotations

from ui.plots.weights import WeightsPanel


def test_a_runs_first_data_leave_the_grid_columns_where_they_were(window, qtbot, wait_complete):
    window.resize(1280, 720)
    qtbot.wait(50)
    page = window.page
    widths = {pid: p.width() for pid, p in page.panels.items()}
    window.apply_config({"method": "explicit", "trials": 64, "d_k": 64, "n_keys": 32,
                         "scalings": ["none", "sqrt"]})
    wait_complete(window)
    assert {pid: p.width() for pid, p in page.panels.items()} == widths


def test_the_box_shows_the_usual_rule_names_whole(qtbot):
    panel = WeightsPanel()
    qtbot.addWidget(panel)
    fm = panel.rule_box.fontMetrics()
    room = panel.rule_box.minimumContentsLength() * fm.horizontalAdvance("x")
    for name in ("softcap", "sigmoid", "qknorm", "cosine", "ssmax", "sqrt"):
        assert fm.horizontalAdvance(name) <= room, name
