"""Every plot says what it shows: axis labels on every plot, a legend naming every series when a
plot has more than one, legend text in the theme's colour (also after a theme switch), and the
heatmap's row marker explained."""

from __future__ import annotations

import pyqtgraph as pg
import pytest

from engine.rules import rule_label
from ui.theme import DARK, LIGHT


@pytest.fixture
def finished(qtbot, window, wait_complete):
    window.apply_config({"trials": 1500, "scalings": ["none", "sqrt", "dk"]})
    wait_complete(window)
    return window


def _legend_texts(plot: pg.PlotItem) -> list[str]:
    return [label.text for _sample, label in plot.legend.items] if plot.legend is not None else []


def _series(plot: pg.PlotItem) -> list[pg.GraphicsObject]:
    """The data series drawn in a plot (curves and bars with data; not band edges or images)."""
    out = []
    for item in plot.items:
        if isinstance(item, pg.PlotDataItem) and item.xData is not None and len(item.xData) \
                and item.opts.get("pen") is not None and item.isVisible():
            out.append(item)
        elif isinstance(item, pg.BarGraphItem) and item.isVisible():
            out.append(item)
    return out


def test_every_plot_has_axis_labels(finished):
    for pid, panel in finished.page.panels.items():
        for k, plot in enumerate(panel.plot_items()):
            for side in ("bottom", "left"):
                label = plot.getAxis(side).labelText
                assert label and label.strip(), f"{pid}[{k}] has no {side} axis label"


def test_plots_with_several_series_have_a_legend_naming_each(finished):
    snap = finished.state.snapshot
    for pid, panel in finished.page.panels.items():
        legends = [t for plot in panel.plot_items() for t in _legend_texts(plot)]
        for plot in panel.plot_items():
            series = _series(plot)
            if len(series) > 1:
                assert legends, f"{pid}: {len(series)} series and no legend"
            for item in series:  # every named series is in its plot's legend
                name = item.name() if callable(getattr(item, "name", None)) else item.opts.get("name")
                if name:
                    assert name in _legend_texts(plot), f"{pid}: {name!r} not in its legend"
        if any(len(_series(p)) > 1 for p in panel.plot_items()):
            for rule in snap.rules:  # each compared rule is named (full label or short name)
                assert any(rule_label(rule) == t or rule == t for t in legends), (pid, rule, legends)


@pytest.mark.parametrize(("first", "second"), [("light", "dark"), ("dark", "light")])
def test_legend_text_follows_the_theme(finished, first, second):
    themes = {"light": LIGHT, "dark": DARK}
    for name in (first, second):
        finished.set_theme(name)
        want = themes[name].foreground.lower()
        checked = 0
        for pid, panel in finished.page.panels.items():
            for plot in panel.plot_items():
                if plot.legend is None:
                    continue
                for _sample, label in plot.legend.items:
                    html = label.item.toHtml().lower()
                    assert f"color:{want}" in html.replace(" ", ""), (pid, label.text, name)
                    checked += 1
        assert checked >= 10


def test_heatmap_row_marker_is_labelled(finished):
    panel = finished.page.panels["weights"]
    panel.row_box.setValue(3)
    panel.refresh(finished.state, force=True)
    marker = panel.row_marker
    assert marker.value() == 3
    assert marker.label is not None and marker.label.isVisible()
    text = marker.label.toPlainText()
    assert "row 3" in text and "bars" in text
    assert marker.pen.style() != pg.QtCore.Qt.PenStyle.SolidLine  # subtle: dashed and thin
    assert marker.pen.widthF() <= 1.0


def test_long_titles_do_not_push_a_narrow_plot_out_of_its_panel(qtbot, finished):
    """A title wider than the panel used to widen the plot past the view (axis and legend cut
    off at the right); now the plot fits and only the title text may run over."""
    from ui.plots import PANEL_CLASSES

    for cls in PANEL_CLASSES:
        if cls.plot_id == "sweep":  # five plots side by side: it is never that narrow
            continue
        panel = cls()
        qtbot.addWidget(panel)
        panel.resize(330, 300)
        panel.show()
        qtbot.waitExposed(panel)
        panel.refresh(finished.state, force=True)
        qtbot.wait(30)
        width = panel.glw.viewport().width()
        for plot in panel.plot_items():
            right = plot.sceneBoundingRect().right()
            assert right <= width + 1, (cls.plot_id, right, width)
        panel.close()


@pytest.mark.slow
def test_score_overlay_title_flags_approximate_theory(qtbot, window, wait_complete):
    """The normal overlay is exact in its moments for the divisor rules; for cosine and qknorm it
    is a large-d_k approximation, and the title must say so (and only then)."""
    window.apply_config({"trials": 800, "scalings": ["none", "sqrt"]})
    wait_complete(window)
    panel = window.page.panels["scores"]
    title = panel.plot.titleLabel.text
    assert "raw q·k std" in title and "approximation" not in title
    # the dashed overlay is named by the page's rule strip and by the figure's legend
    assert "normal theory" in window.page.rule_strip.text()
    assert any("normal theory" in label.text for _s, label in panel.plot.legend.items)
    window.apply_config({"trials": 800, "scalings": ["sqrt", "cosine", "qknorm"]})
    wait_complete(window)
    title = window.page.panels["scores"].plot.titleLabel.text
    assert "approximation" in title and "cosine" in title and "qknorm" in title


def test_saturated_fraction_in_the_title_carries_the_standard_error(finished):
    """The results table reads mean ± standard error; the top-weight title's ± must be the same
    (it used to be 1.96 SE, unlabelled: "36.1% ± 1.5" next to "0.3607 ± 0.0076")."""
    title = finished.page.panels["top_weight"].plot.titleLabel.text
    for name, r in finished.state.snapshot.rules.items():
        e = r.saturated_frac
        assert f"{name} {100 * e.mean:.1f}% ± {100 * e.se:.1f}" in title, (name, title)
    assert finished.state.snapshot.rules["none"].saturated_frac.se > 0.003  # 1.96 SE would differ


def test_titles_with_six_rules_keep_two_lines_instead_of_running_over_the_plot(qtbot, window,
                                                                              wait_complete):
    """A header is two lines whatever the rules (3-4 lines ran over the y title and the data):
    a rule left out ends the header in "…" and the whole header is the title's tooltip."""
    rules = ["none", "sqrt", "dk", "temperature", "cosine", "qknorm"]
    window.apply_config({"trials": 600, "scalings": rules})
    wait_complete(window)
    for pid in ("top_weight", "entropy", "jacobian"):
        label = window.page.panels[pid].plot.titleLabel
        title = label.text
        assert title.count("<br>") == 1, (pid, title)
        missing = [r for r in rules if f">{r} " not in title]
        assert bool(missing) == title.endswith("…"), (pid, title)
        tip = label.toolTip()
        assert all(f">{r} " in (tip if missing else title) for r in rules), (pid, tip)
    window.apply_config({"trials": 600, "scalings": ["none", "sqrt"]})
    wait_complete(window)
    for pid in ("top_weight", "entropy", "jacobian"):  # the default two rules: one line of text
        title = window.page.panels[pid].plot.titleLabel.text
        assert title.split("<br>")[1] == "&nbsp;", (pid, title)  # (the height of two)


def test_jacobian_title_names_rows_below_the_drawn_range(qtbot, window, wait_complete):
    """Correlated keys at d_k = 1024 put every unscaled row's ||J|| far below 1e-16: its curve
    was a flat line at 0 with no word of where the rows went."""
    window.apply_config({"d_k": 1024, "trials": 300, "correlation": 0.5, "dist": "uniform",
                         "method": "explicit", "scalings": ["none", "sqrt"]})
    wait_complete(window)
    snap = window.state.snapshot
    h = snap.rules["none"].log10_jacobian_hist
    assert h.underflow == h.total  # the premise: nothing of "none" is drawn
    title = window.page.panels["jacobian"].plot.titleLabel.text
    assert f"not drawn, below 1e{h.edges[0]:.0f}" in title and "none 100%" in title
    assert snap.rules["sqrt"].log10_jacobian_hist.underflow == 0
    assert "sqrt" not in title.split("not drawn")[1]  # only rules with hidden rows are named
