"""The score inspector page: numbers read back from the widget against an mpmath oracle."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from PySide6.QtCore import QPointF

from engine.inspect import MAX_SCORES
from engine.io import read_csv
from ui.pages.inspector.export import JACOBIAN_CSV_MAX, jacobian_path
from ui.pages.inspector.fmt import cell
from ui.pages.inspector.page import DEBOUNCE_MS
from ui.pages.inspector.views import CELL_TEXT_MAX

mpmath.mp.dps = 50


def oracle(scores: list[float], scale: float = 1.0) -> dict[str, object]:
    """softmax, Jacobian, its Frobenius norm and largest entry in 50-digit arithmetic."""
    s = [mpmath.mpf(x) / mpmath.mpf(scale) for x in scores]
    top = max(s)
    e = [mpmath.exp(x - top) for x in s]
    z = mpmath.fsum(e)
    p = [x / z for x in e]
    n = len(p)
    jac = [[(p[i] if i == j else 0) - p[i] * p[j] for j in range(n)] for i in range(n)]
    fro = mpmath.sqrt(mpmath.fsum(v * v for row in jac for v in row))
    return {
        "weights": [float(x) for x in p],
        "jacobian": [[float(v) for v in row] for row in jac],
        "fro": float(fro),
        "max_abs": float(max(abs(v) for row in jac for v in row)),
        "entropy": float(-mpmath.fsum(x * mpmath.log(x) for x in p)),
    }


def type_into(qtbot, edit, text: str) -> None:
    edit.clear()
    qtbot.keyClicks(edit, text)


def shown_float(label) -> float:
    """The first number of a summary label's text."""
    return float(label.text().split()[0])


def test_typing_8_0_minus8_shows_the_worked_example(inspector_page, qtbot) -> None:
    type_into(qtbot, inspector_page.scale_edit, "1")
    type_into(qtbot, inspector_page.scores_edit, "1, 2")
    qtbot.waitUntil(lambda: inspector_page.model.rowCount() == 2, timeout=2000)
    type_into(qtbot, inspector_page.scores_edit, "8, 0, -8")  # live update, debounced
    qtbot.waitUntil(lambda: inspector_page.model.rowCount() == 3, timeout=5 * DEBOUNCE_MS + 2000)
    want = oracle([8, 0, -8])

    np.testing.assert_allclose(inspector_page.model.column("weight"), want["weights"], rtol=1e-12)
    np.testing.assert_allclose(inspector_page.weights_plot.weights.opts["height"], want["weights"], rtol=1e-12)
    assert shown_float(inspector_page.summary["fro"]) == pytest.approx(want["fro"], rel=1e-9)
    assert shown_float(inspector_page.summary["max_abs"]) == pytest.approx(want["max_abs"], rel=1e-7)
    # the gauge shows the largest entry far below the 0.25 ceiling
    assert inspector_page.gauge.value == pytest.approx(want["max_abs"], rel=1e-12)
    assert inspector_page.gauge.bar.opts["width"][0] == pytest.approx(want["max_abs"], rel=1e-12)
    assert inspector_page.gauge.limit.value() == 0.25
    assert inspector_page.gauge.value < 0.01 * 0.25
    # the heatmap writes every entry in its cell, computed by the oracle
    expected_cells = [cell(v) for row in want["jacobian"] for v in row]
    assert inspector_page.heatmap.cell_texts() == expected_cells
    np.testing.assert_allclose(inspector_page.heatmap.image.image, want["jacobian"], rtol=1e-9, atol=1e-300)
    assert inspector_page.error_text("scores") == "" and inspector_page.error_text("scale") == ""


@pytest.mark.parametrize(
    ("scores", "scale"),
    [([1, 0, -1], 1.0), ([2, 1, 0, -1], 1.0), ([16, 8, 0, -8], 8.0), ([8, 0, -8], 4.0)],
)
def test_set_scores_matches_the_oracle(inspector_page, scores, scale) -> None:
    assert inspector_page.set_scores(scores, scale)
    want = oracle(scores, scale)
    assert inspector_page.model.column("weight") == pytest.approx(want["weights"], rel=1e-12)
    assert shown_float(inspector_page.summary["fro"]) == pytest.approx(want["fro"], rel=1e-9)
    assert inspector_page.gauge.value == pytest.approx(want["max_abs"], rel=1e-12)
    assert shown_float(inspector_page.summary["entropy"]) == pytest.approx(want["entropy"], rel=1e-7)
    assert shown_float(inspector_page.summary["entropy_norm"]) == pytest.approx(
        want["entropy"] / math.log(len(scores)), rel=1e-5)
    p = np.array(want["weights"])
    np.testing.assert_allclose(inspector_page.model.column("p_one_minus_p"), p * (1 - p), rtol=1e-9)


def test_soft_scores_have_a_large_jacobian_and_saturated_ones_a_tiny_one(inspector_page) -> None:
    inspector_page.set_scores([1, 0, -1], 1)
    soft = inspector_page.gauge.value
    assert shown_float(inspector_page.summary["fro"]) == pytest.approx(oracle([1, 0, -1])["fro"], rel=1e-9)
    inspector_page.set_scores([16, 8, 0, -8], 1)
    hard = inspector_page.gauge.value
    assert hard < soft / 100 and soft <= 0.25


def test_sqrt_scale_is_understood(inspector_page, qtbot) -> None:
    inspector_page.set_scores([16, 8, 0, -8], 1)
    type_into(qtbot, inspector_page.scale_edit, "sqrt(64)")
    inspector_page.refresh()
    assert inspector_page.model.column("weight") == pytest.approx(oracle([2, 1, 0, -1])["weights"], rel=1e-12)


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("scores", "8, x, -8"),
        ("scores", "5"),
        ("scores", ""),
        ("scores", "nan, 1"),
        ("scores", "1e400, 0"),
        ("scores", " ".join(["0"] * (MAX_SCORES + 1))),  # the limit grew from 4096 to 65,536
        ("scale", "0"),
        ("scale", "-2"),
        ("scale", "abc"),
        ("scale", "inf"),
        ("scale", "1e-320"),  # 8 / 1e-320 overflows
    ],
)
def test_invalid_input_is_refused_next_to_its_field_and_results_stay(inspector_page, qtbot, field, text) -> None:
    inspector_page.set_scores([8, 0, -8], 1)
    before = inspector_page.result
    heights = np.array(inspector_page.weights_plot.weights.opts["height"])
    edit = inspector_page.scores_edit if field == "scores" else inspector_page.scale_edit
    edit.setText(text)
    qtbot.wait(DEBOUNCE_MS + 50)  # the debounced refresh runs; must not raise
    assert not inspector_page.refresh()
    assert inspector_page.error_text(field), "no visible message"
    assert field in inspector_page.error_text(field)
    label = inspector_page.scores_error if field == "scores" else inspector_page.scale_error
    assert label.isVisible()
    assert "border" in edit.styleSheet()
    assert inspector_page.result is before
    np.testing.assert_array_equal(inspector_page.weights_plot.weights.opts["height"], heights)
    # fixing the text clears the message
    edit.setText("8, 0, -8" if field == "scores" else "1")
    assert inspector_page.refresh()
    assert inspector_page.error_text(field) == "" and edit.styleSheet() == ""


def test_both_fields_report_their_own_error(inspector_page) -> None:
    inspector_page.scores_edit.setText("1, x")
    inspector_page.scale_edit.setText("0")
    assert not inspector_page.refresh()
    assert inspector_page.error_text("scores") and inspector_page.error_text("scale")


def test_csv_export_round_trips(inspector_page, tmp_path) -> None:
    inspector_page.set_scores([16, 8, 0, -8], 1)
    r = inspector_page.result
    written = inspector_page.export_csv(tmp_path / "insp.csv")
    assert written == [tmp_path / "insp.csv", jacobian_path(tmp_path / "insp.csv")]
    rows = read_csv(written[0])
    assert [int(row["index"]) for row in rows] == [0, 1, 2, 3]
    for key, values in (("score", r.scores), ("scaled_score", r.scaled), ("weight", r.weights),
                        ("p_one_minus_p", r.p_one_minus_p)):
        assert [float(row[key]) for row in rows] == values.tolist()
    assert {float(row["jacobian_fro"]) for row in rows} == {r.jacobian_fro}
    assert {float(row["entropy_norm"]) for row in rows} == {r.entropy_norm}
    jac_rows = read_csv(written[1])
    back = np.array([[float(row[f"j_{j}"]) for j in range(4)] for row in jac_rows])
    np.testing.assert_array_equal(back, r.jacobian)
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temp files


def test_csv_skips_the_matrix_for_large_n(inspector_page, tmp_path) -> None:
    inspector_page.set_scores(list(np.linspace(-3, 3, JACOBIAN_CSV_MAX + 1)), 1)
    written = inspector_page.export_csv(tmp_path / "big.csv")
    assert written == [tmp_path / "big.csv"]
    assert len(read_csv(written[0])) == JACOBIAN_CSV_MAX + 1


def test_png_export_writes_the_three_plots(inspector_page, tmp_path) -> None:
    import xml.etree.ElementTree as ET

    from PySide6.QtGui import QImage

    written = inspector_page.export_plots(tmp_path / "fig.png")
    names = ["fig_weights", "fig_jacobian", "fig_gauge"]
    assert [p.name for p in written] == [f"{n}.{k}" for n in names for k in ("png", "svg")]
    assert written == inspector_page.plot_paths(tmp_path / "fig.png")
    for path in written[::2]:
        image = QImage(str(path))
        assert not image.isNull() and image.width() > 50 and image.height() > 50
    for path in written[1::2]:
        root = ET.parse(path).getroot()
        assert root.tag.endswith("svg") and any(el.tag.endswith("path") for el in root.iter())


def test_large_n_hides_cell_numbers_but_hover_reads_them(inspector_page, qtbot) -> None:
    n = CELL_TEXT_MAX + 28
    inspector_page.set_scores(list(range(n)), 8)
    assert inspector_page.heatmap.cell_texts() == []
    assert inspector_page.heatmap.image.image.shape == (n, n)
    vb = inspector_page.heatmap.plot.vb
    with qtbot.waitSignal(inspector_page.heatmap.hovered) as blocker:
        inspector_page.heatmap._on_mouse_moved(vb.mapViewToScene(QPointF(3.1, 5.2)))  # column 3, row 5
    assert blocker.args[0].startswith("J[5, 3] = ")
    value = float(blocker.args[0].split(";")[0].split("=")[-1])
    assert value == pytest.approx(oracle(list(range(n)), 8)["jacobian"][5][3], rel=1e-7)
    assert inspector_page.hover_label.text() == blocker.args[0]


def test_small_n_writes_numbers_in_every_cell(inspector_page) -> None:
    inspector_page.set_scores(list(range(CELL_TEXT_MAX)), 3)
    assert len(inspector_page.heatmap.cell_texts()) == CELL_TEXT_MAX**2


def test_fit_colours_rescales_the_heatmap(inspector_page) -> None:
    inspector_page.set_scores([8, 0, -8], 1)
    assert inspector_page.heatmap.image.levels.tolist() == [-0.25, 0.25]
    inspector_page.fit_colors.setChecked(True)
    want = oracle([8, 0, -8])["max_abs"]
    assert inspector_page.heatmap.image.levels.tolist() == pytest.approx([-want, want], rel=1e-9)


def test_examples_menu_sets_the_fields(inspector_page) -> None:
    inspector_page.examples.activated.emit(5)  # 16, 8, 0, -8 divided by 8
    assert inspector_page.scale_edit.text() == "8"
    assert inspector_page.model.column("weight") == pytest.approx(oracle([2, 1, 0, -1])["weights"], rel=1e-12)


def test_render_offscreen(inspector_page, tmp_path) -> None:
    inspector_page.set_scores([2, 1, 0, -1], 1)
    path = tmp_path / "inspector.png"
    assert inspector_page.grab().save(str(path))
    assert path.stat().st_size > 1000


def test_log_axis_shows_tiny_weights(inspector_page) -> None:
    inspector_page.set_scores([8, 0, -8, -1e6], 1)  # the last weight underflows to exactly 0
    inspector_page.log_weights.setChecked(True)
    bars = inspector_page.weights_plot.weights.opts
    top = np.asarray(bars["y0"]) + np.asarray(bars["height"])
    want = np.log10(oracle([8, 0, -8])["weights"])
    np.testing.assert_allclose(top[:3], want, rtol=1e-9, atol=1e-12)
    assert np.all(np.isfinite(top)) and top[3] == bars["y0"] < want.min()
    assert inspector_page.weights_plot.limit.value() == pytest.approx(math.log10(0.25))
    inspector_page.log_weights.setChecked(False)
    assert inspector_page.weights_plot.weights.opts["y0"] == 0.0


def test_max_scores_are_accepted_and_one_more_refused(inspector_page) -> None:
    """The limit grew from 4096 to the simulator's largest n (65,536), typed as a repeat."""
    assert inspector_page.set_scores(list(np.linspace(-2, 2, 4096)), 1)
    assert inspector_page.model.rowCount() == 4096
    inspector_page.scores_edit.setText(f"3, -2*{MAX_SCORES - 1}")
    assert inspector_page.refresh() and inspector_page.model.rowCount() == MAX_SCORES
    inspector_page.scores_edit.setText(inspector_page.scores_edit.text() + ", 1")
    assert not inspector_page.refresh() and str(MAX_SCORES) in inspector_page.error_text("scores")


def test_dark_theme_recolours_plots_and_errors(inspector_page) -> None:
    from PySide6.QtWidgets import QApplication

    from ui.theme import DARK, LIGHT, apply_app_theme

    apply_app_theme(QApplication.instance(), DARK)  # as the window's theme switch does
    try:
        inspector_page.apply_theme(DARK)
        assert inspector_page.weights_plot.glw.backgroundBrush().color().name().lower() == DARK.background.lower()
        inspector_page.scale_edit.setText("0")
        assert not inspector_page.refresh()
        assert DARK.error in inspector_page.scale_edit.styleSheet()
        assert DARK.error in inspector_page.scale_error.styleSheet()
        assert DARK.base in inspector_page.scale_edit.styleSheet()  # (not a pink field under white text)
    finally:
        apply_app_theme(QApplication.instance(), LIGHT)


def test_series_colours_come_from_the_theme(inspector_page) -> None:
    from ui.pages.inspector import views
    from ui.theme import DARK, LIGHT

    assert not hasattr(views, "COLORS")  # no local palette: one table for every page
    inspector_page.set_scores([1, 0, -1], 1)
    for theme in (DARK, LIGHT):
        inspector_page.apply_theme(theme)
        wp, gauge = inspector_page.weights_plot, inspector_page.gauge
        assert wp.weights.opts["brush"] == theme.weight
        assert wp.diag.opts["brush"] == theme.jacobian
        assert gauge.bar.opts["brush"] == theme.jacobian
        for line in (wp.limit, gauge.limit, wp.limit_sample, gauge.limit_sample):
            pen = line.pen if hasattr(line, "pen") and not callable(line.pen) else line.opts["pen"]
            assert pen.color().name().lower() == theme.limit.lower()
        for _sample, label in wp.legend.items:  # legend text re-rendered in the theme's colour
            assert f"color:{theme.foreground.lower()}" in label.item.toHtml().lower().replace(" ", "")


def test_the_saturated_diagonal_shown_is_not_rounded_to_zero(inspector_page, qtbot) -> None:
    """40, 0, -3: 1 - p_max rounds away in float64; the heatmap and hover show 4.46e-18."""
    with mpmath.workdps(100):
        p = [mpmath.exp(x) for x in (40, 0, -3)]
        want = float(p[0] / mpmath.fsum(p) * (p[1] + p[2]) / mpmath.fsum(p))
    inspector_page.set_scores([40, 0, -3], 1)
    assert inspector_page.heatmap.image.image[0, 0] == pytest.approx(want, rel=1e-13)
    vb = inspector_page.heatmap.plot.vb
    with qtbot.waitSignal(inspector_page.heatmap.hovered) as blocker:
        inspector_page.heatmap._on_mouse_moved(vb.mapViewToScene(QPointF(0.1, 0.1)))
    assert blocker.args[0] == f"J[0, 0] = ∂p_0/∂z_0 = {want:.8g}"


def test_the_heatmap_says_it_is_the_derivative_by_the_scaled_logit(inspector_page, qtbot) -> None:
    """J = ∂p/∂z with z = s / scale: per unit of raw score s the entry is J / scale (the axis and
    the hover say so)."""
    assert "z = s / scale" in inspector_page.heatmap.plot.getAxis("bottom").labelText
    inspector_page.set_scores([16, 8, 0, -8], 8)
    vb = inspector_page.heatmap.plot.vb
    with qtbot.waitSignal(inspector_page.heatmap.hovered) as blocker:
        inspector_page.heatmap._on_mouse_moved(vb.mapViewToScene(QPointF(0.1, 0.1)))
    j00 = float(inspector_page.heatmap.image.image[0, 0])
    assert blocker.args[0].endswith(f"∂p_0/∂s_0 = J/8 = {j00 / 8:.8g}")
def test_the_ssmax_examples_type_a_needle_among_999_scores(inspector_page) -> None:
    """SSMax paper, Figure 1 at n = 1,000: softmax 0.1293; as SSMax's scale 0.9996."""
    from ui.pages.inspector.page import EXAMPLES

    first = next(i for i, e in enumerate(EXAMPLES) if e[1] == "3, -2*999")
    inspector_page.examples.activated.emit(first + 1)
    assert inspector_page.scores_edit.text() == "3, -2*999" and inspector_page.model.rowCount() == 1000
    assert round(float(inspector_page.result.weights[0]), 4) == 0.1293
    inspector_page.examples.activated.emit(first + 2)
    assert round(float(inspector_page.result.weights[0]), 4) == 0.9996


def test_a_sink_logit_takes_its_weight_and_is_shown(qtbot, inspector_page):
    type_into(qtbot, inspector_page.scores_edit, "8, 0, -8")
    type_into(qtbot, inspector_page.sink_edit, "8")
    assert inspector_page.refresh()
    r = inspector_page.result
    # the sink ties the top score: it takes about half of the row, and the page says so
    assert r.sink == 8.0 and r.sink_weight == pytest.approx(1 / (2 + math.exp(-8) + math.exp(-16)))
    assert r.key_mass + r.sink_weight == pytest.approx(1.0, abs=1e-15)
    assert "sink takes" in inspector_page.summary["top"].text()
    assert "sink" in inspector_page.formula.text()
    # every entry's weight: e^s_i / (sum e^s + e^sink)
    z = math.exp(8) + 1 + math.exp(-8) + math.exp(8)
    np.testing.assert_allclose(inspector_page.model.column("weight"), [math.exp(8) / z, 1 / z,
                                                            math.exp(-8) / z], rtol=1e-13)


def test_softcap_and_sigmoid_fields_and_bad_text(qtbot, inspector_page):
    type_into(qtbot, inspector_page.scores_edit, "30, 0, -30")
    type_into(qtbot, inspector_page.softcap_edit, "5")
    assert inspector_page.refresh()
    assert inspector_page.result.softcap == 5.0 and np.abs(inspector_page.result.scaled).max() <= 5.0
    inspector_page.softcap_edit.setText("")
    inspector_page.sigmoid_box.setChecked(True)
    assert inspector_page.refresh()
    assert inspector_page.result.sigmoid and inspector_page.result.key_mass != 1.0
    inspector_page.sink_edit.setText("1")  # a sink needs a softmax
    assert not inspector_page.refresh()
    assert "sink" in inspector_page.error_text("options")
    inspector_page.sigmoid_box.setChecked(False)
    inspector_page.sink_edit.setText("abc")
    assert not inspector_page.refresh()
    assert "not a number" in inspector_page.error_text("options")
    inspector_page.sink_edit.setText("")
    assert inspector_page.refresh() and inspector_page.error_text("options") == ""
