"""Training's Accuracy panel: the "chance" label is whole, inside the plot and above its line
(issue 31, item 11: centred on the line at 95% it was cut at the plot's right edge)."""

from __future__ import annotations

from ui.plots.training.panels import AccuracyPanel


def test_the_chance_label_is_inside_the_plot_and_above_its_line(show_widget, qtbot) -> None:
    panel = show_widget(AccuracyPanel(), (280, 220))
    panel.chance.setValue(1.0 / 16)  # 16 classes
    qtbot.wait(20)
    label = panel.chance.label
    box = panel.plot.getViewBox().sceneBoundingRect()
    r = label.sceneBoundingRect()
    assert label.isVisible() and r.width() > 10
    assert box.left() - 0.5 <= r.left() and r.right() <= box.right() + 0.5, (r, box)
    line_y = panel.plot.getViewBox().mapViewToScene(panel.chance.pos()).y()
    assert r.bottom() <= line_y + 0.5  # above the line (scene y grows downwards)
