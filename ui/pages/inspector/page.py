"""The score inspector: type a few scores and a scale, see softmax(scores / scale) and its Jacobian.

All numbers come from ``engine.inspect.inspect_scores``; this page only parses text, shows the
result and exports it. Invalid text is refused next to its field and the last valid result stays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError
from engine.inspect import InspectResult, inspect_scores
from engine.softmax import JACOBIAN_ENTRY_MAX
from ui.file_dialogs import save_file
from ui.pages.inspector.export import jacobian_path, write_inspection_csv
from ui.pages.inspector.fmt import plain, sig
from ui.pages.inspector.parse import parse_scale, parse_scores
from ui.pages.inspector.table import EntriesModel
from ui.pages.inspector.views import JacobianHeatmap, MaxEntryGauge, WeightsPlot
from ui.theme import ERROR_TEXT, LIGHT, Theme, field_error_css, themed_css

DEBOUNCE_MS = 150
MAX_TEXT = 1_000_000
#: the gauge's height on the page (its header, the bar, its axis and its legend)
GAUGE_HEIGHT = 175
#: the longest scores text an exported figure carries (File -> Open restores it)
FIGURE_TEXT_MAX = 200_000
#: the worked examples of docs/SCIENCE.md (scores, scale)
EXAMPLES: tuple[tuple[str, Sequence[float] | str, float], ...] = (
    ("8, 0, −8: saturated", (8, 0, -8), 1.0),
    ("8, 0, −8 divided by 4", (8, 0, -8), 4.0),
    ("1, 0, −1: soft", (1, 0, -1), 1.0),
    ("16, 8, 0, −8: saturated", (16, 8, 0, -8), 1.0),
    ("16, 8, 0, −8 divided by 8", (16, 8, 0, -8), 8.0),
    ("2, 1, 0, −1", (2, 1, 0, -1), 1.0),
    # the SSMax paper's Figure 1: one +3 among n - 1 scores of -2 (here n = 1,000); at one n,
    # SSMax (s ln n, s = 0.43) is a scale of 1 / (0.43 ln 1000)
    ("3 among 999 × −2: a needle fades (n = 1,000)", "3, -2*999", 1.0),
    ("… with SSMax s = 0.43: divide by 1/(0.43 ln 1000)", "3, -2*999",
     round(1.0 / (0.43 * math.log(1000)), 4)),
)


PLAIN_FORMULA = "p = softmax(scores / scale),  J = diag(p) − p pᵀ  (entry p_i(δ_ij − p_j))"


def formula_text(r: InspectResult) -> str:
    """What the page computes for this result, in one line."""
    z = "z = scores / scale"
    logit = "c·tanh(z/c)" if r.softcap else "z"
    #: the cap's value follows the expression it belongs to, never inside it
    c = f", c = {r.softcap:g}" if r.softcap else ""
    if r.sigmoid:
        text = f"{z},  p_i = σ({logit} − ln n){c},  J = diag(p_i (1 − p_i))"
    elif r.sink is not None:
        text = (f"{z},  p = softmax({logit}, sink {r.sink:g}) without the sink{c},  "
                "J = diag(p) − p pᵀ")
    else:
        text = PLAIN_FORMULA if not r.softcap else f"{z},  p = softmax({logit}){c},  J = diag(p) − p pᵀ"
    return text + ("  × tanh′(z/c) per column" if r.softcap else "")


class InspectorPage(QWidget):
    """Scores + scale -> weights bar chart, Jacobian heatmap, largest-entry gauge, table, summary."""

    result_changed = Signal(object)  #: the new InspectResult after each valid input

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inspectorPage")
        self._result: InspectResult | None = None
        #: the texts and sigmoid box of the result drawn (what a figure carries)
        self._inputs: dict[str, object] | None = None
        self._errors: dict[str, str] = {}
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.refresh)
        inputs = self._build_inputs()
        formula = QLabel(PLAIN_FORMULA)
        formula.setObjectName("inspectorFormula")
        self.formula = formula
        splitter = self._build_views()
        bottom = self._build_export_row()
        layout = QVBoxLayout(self)
        layout.addLayout(inputs)
        layout.addWidget(formula)
        layout.addWidget(splitter, 1)
        layout.addLayout(bottom)
        self.theme: Theme = LIGHT
        self.apply_theme(LIGHT)
        self.refresh()

    # -- construction --------------------------------------------------------------------------
    def _build_inputs(self) -> QGridLayout:
        """The scores and scale fields (with their error labels) and the worked examples."""
        self.scores_edit = QLineEdit("8, 0, -8")
        self.scores_edit.setPlaceholderText("e.g. 8, 0, -8 or 3, -2*999 (2 to 65,536 numbers; V*K repeats V)")
        self.scores_edit.setToolTip("The raw scores s_i of one query row (q·k_i).")
        self.scores_edit.setMaxLength(MAX_TEXT)  # Qt's default (32767) would cut 4096 scores
        self.scale_edit = QLineEdit("1")
        self.scale_edit.setPlaceholderText("e.g. 8 or sqrt(64)")
        self.scale_edit.setToolTip("The scores are divided by this before the softmax "
                                   "(sqrt(d_k) for standard attention; sqrt(64) works).")
        self.scale_edit.setMaximumWidth(140)
        self.scores_error = _error_label("scoresError")
        self.scale_error = _error_label("scaleError")
        self.examples = QComboBox()
        self.examples.addItem("Worked examples…")
        for label, _, _ in EXAMPLES:
            self.examples.addItem(label)
        self.examples.activated.connect(self._on_example)
        self.scores_edit.textChanged.connect(self._schedule)
        self.scale_edit.textChanged.connect(self._schedule)
        self.scores_edit.returnPressed.connect(self.refresh)
        self.scale_edit.returnPressed.connect(self.refresh)

        inputs = QGridLayout()
        inputs.addWidget(QLabel("Scores"), 0, 0)
        inputs.addWidget(self.scores_edit, 0, 1)
        inputs.addWidget(QLabel("Divide by (scale)"), 0, 2)
        inputs.addWidget(self.scale_edit, 0, 3)
        inputs.addLayout(self._build_rule_row(), 0, 4)
        inputs.addWidget(self.examples, 0, 5)
        inputs.addWidget(self.scores_error, 1, 1)
        inputs.addWidget(self.scale_error, 1, 2, 1, 2)
        inputs.addWidget(self.options_error, 1, 4, 1, 2)
        inputs.setColumnStretch(1, 1)
        return inputs

    def _build_rule_row(self) -> QHBoxLayout:
        """The scale controls after the scale: a soft-cap, a sink logit, sigmoid weights."""
        self.softcap_edit = QLineEdit("")
        self.softcap_edit.setPlaceholderText("off")
        self.softcap_edit.setToolTip("Soft-capping: the logits z become c·tanh(z/c) (empty: off). "
                                     "The Jacobian then includes the cap's slope tanh'(z/c).")
        self.sink_edit = QLineEdit("")
        self.sink_edit.setPlaceholderText("off")
        self.sink_edit.setToolTip("An attention sink: this logit joins the row's softmax and its "
                                  "weight is dropped, so the row may attend to nothing "
                                  "(empty: off; gpt-oss learns one per head).")
        self.sigmoid_box = QCheckBox("sigmoid")
        self.sigmoid_box.setToolTip("Sigmoid attention: each score gets sigmoid(z − ln n) on its "
                                    "own; the weights need not sum to 1.")
        for edit in (self.softcap_edit, self.sink_edit):
            edit.setMaximumWidth(60)
            edit.textChanged.connect(self._schedule)
            edit.returnPressed.connect(self.refresh)
        self.sigmoid_box.toggled.connect(self._schedule)
        self.options_error = _error_label("optionsError")
        row = QHBoxLayout()
        for label, widget in (("cap c", self.softcap_edit), ("sink", self.sink_edit)):
            text = QLabel(label)
            text.setToolTip(widget.toolTip())
            row.addWidget(text)
            row.addWidget(widget)
        row.addWidget(self.sigmoid_box)
        return row

    def rule_options(self) -> dict[str, object]:
        """The soft-cap, sink and sigmoid fields as ``inspect_scores`` keywords (ConfigError
        naming ``softcap`` or ``sink`` for text that is not a number)."""
        return _options_from_text(self.softcap_edit.text(), self.sink_edit.text(),
                                  self.sigmoid_box.isChecked())

    def _build_views(self) -> QSplitter:
        """Weights, gauge and summary on the left; the Jacobian heatmap and its table right."""
        self.weights_plot = WeightsPlot(self)  # (made in the order File -> Export plot lists)
        self.heatmap = JacobianHeatmap(self)
        self.gauge = MaxEntryGauge(self)
        self.gauge.setFixedHeight(GAUGE_HEIGHT)  # a bar: the weights and the table get the rest
        for panel in self.panels():
            # the same ⋯ menu and right-click exports as every page's plots (File -> Export
            # plot lists them too); the figure carries the inputs that File -> Open restores
            panel.export_requested.connect(self.export_panel_dialog)
            panel.figure_source = self.figure_source
        self.hover_label = QLabel("Hover over the heatmap to read an entry.")
        self.heatmap.hovered.connect(
            lambda text: self.hover_label.setText(text or "Hover over the heatmap to read an entry."))
        self.log_weights = self.weights_plot.log_box  # (the view choices sit in the headers)
        self.fit_colors = self.heatmap.fit_box
        self.model = EntriesModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setDefaultSectionSize(20)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.weights_plot, 3)
        left_layout.addWidget(self.gauge, 1)
        left_layout.addLayout(self._build_summary())
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.heatmap, 3)
        right_layout.addWidget(self.hover_label)
        right_layout.addWidget(self.table, 2)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setChildrenCollapsible(False)
        return splitter

    def _build_summary(self) -> QFormLayout:
        self.summary: dict[str, QLabel] = {}
        summary = QFormLayout()
        for key, label in (
            ("n", "number of scores n"),
            ("top", "top weight max p_i"),
            ("fro", "Jacobian size ‖J‖_F"),
            ("max_abs", "largest |J_ij|"),
            ("entropy", "entropy H (nats)"),
            ("entropy_norm", "H / log n"),
        ):
            value = QLabel("–")
            value.setObjectName(f"summary_{key}")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            summary.addRow(label, value)
            self.summary[key] = value
        return summary

    def _build_export_row(self) -> QHBoxLayout:
        """The status line and the two save buttons."""
        self.status = QLabel()
        self.status.setObjectName("inspectorStatus")
        save_png = QPushButton("Save plots (PNG, SVG)…")
        save_png.setToolTip("Write each plot as PNG and SVG: <name>_weights, _jacobian, _gauge")
        save_png.clicked.connect(self._on_save_png)
        save_csv = QPushButton("Save data (CSV)…")
        save_csv.clicked.connect(self._on_save_csv)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(save_png)
        bottom.addWidget(save_csv)
        return bottom

    # -- public API ---------------------------------------------------------------------------
    @property
    def result(self) -> InspectResult | None:
        """The last valid result (stays when the current text is invalid)."""
        return self._result

    def set_scores(self, scores: Sequence[float], scale: float = 1.0) -> bool:
        """Show these scores at once (no debounce); the tour uses it. False if refused."""
        for edit, text in ((self.scores_edit, ", ".join(plain(float(s)) for s in scores)),
                           (self.scale_edit, plain(float(scale)))):
            edit.blockSignals(True)
            edit.setText(text)
            edit.blockSignals(False)
        return self.refresh()

    def set_rule_options(self, options: dict) -> None:
        """Set the soft-cap and sink fields (absent = off) and clear sigmoid, without
        recomputing (the tour calls ``set_scores`` next)."""
        for name, edit in (("softcap", self.softcap_edit), ("sink", self.sink_edit)):
            edit.blockSignals(True)
            edit.setText(plain(float(options[name])) if name in options else "")
            edit.blockSignals(False)
        self.sigmoid_box.blockSignals(True)
        self.sigmoid_box.setChecked(bool(options.get("sigmoid", False)))
        self.sigmoid_box.blockSignals(False)

    def refresh(self) -> bool:
        """Parse both fields and recompute; on invalid input show why and keep the last result."""
        self._timer.stop()
        errors: dict[str, str] = {}
        scores: list[float] = []
        scale = 1.0
        try:
            if len(self.scores_edit.text()) >= MAX_TEXT:
                raise ConfigError("scores", f"text too long (at most {MAX_TEXT - 1:,} characters)")
            scores = parse_scores(self.scores_edit.text())
        except ConfigError as exc:
            errors["scores"] = exc.message
        try:
            scale = parse_scale(self.scale_edit.text())
        except ConfigError as exc:
            errors["scale"] = exc.message
        options: dict[str, object] = {}
        try:
            options = self.rule_options()
        except ConfigError as exc:
            errors["options"] = f"{exc.field}: {exc.message}"
        result = None
        if not errors:
            try:
                with np.errstate(over="ignore"):  # an overflowing scale is refused just below
                    result = inspect_scores(scores, scale, **options)
            except ConfigError as exc:
                field = exc.field if exc.field in ("scores", "scale") else "options"
                errors[field] = exc.message if field != "options" else f"{exc.field}: {exc.message}"
        if "scores" in errors and "scale" not in errors:
            # the scores are unusable, but say now whether the scale is valid too (engine rules)
            try:
                inspect_scores([0.0, 0.0], scale)
            except ConfigError as exc:
                errors["scale"] = exc.message
        self._show_errors(errors)
        if result is None:
            return False
        self._result = result
        self._inputs = {"scores": self.scores_edit.text(), "scale": self.scale_edit.text(),
                        "softcap": self.softcap_edit.text(), "sink": self.sink_edit.text(),
                        "sigmoid": self.sigmoid_box.isChecked()}
        self._update_views(result)
        self.result_changed.emit(result)
        return True

    def apply_theme(self, theme: Theme) -> None:
        """Recolour the plots and the error messages (light/dark, from ui.theme)."""
        self.theme = theme
        for panel in self.panels():
            panel.apply_theme(theme)
        for label in (self.scores_error, self.scale_error, self.options_error):
            themed_css(label, ERROR_TEXT)
        self._show_errors(self._errors)

    def error_text(self, field: str) -> str:
        """The message shown next to ``scores``, ``scale`` or the rule ``options`` (soft-cap,
        sink, sigmoid; '' when valid)."""
        label = {"scores": self.scores_error, "options": self.options_error}.get(
            field, self.scale_error)
        return label.text() if not label.isHidden() else ""

    def export_csv(self, path: str | Path) -> list[Path]:
        """Write the current result as CSV (no dialog); returns the files written."""
        if self._result is None:
            raise ValueError("nothing to export: no valid scores yet")
        return write_inspection_csv(path, self._result)

    def panels(self) -> list[Any]:
        """The page's plots (ui.plots.base.PlotPanel), in their order on it."""
        return [self.weights_plot, self.heatmap, self.gauge]

    def _plot_names(self, base: str | Path) -> list[tuple[str, Any]]:
        """(file stem, panel) of ``<base>_{weights,jacobian,gauge}``."""
        base = Path(base)
        stem = base.with_suffix("") if base.suffix.lower() in (".png", ".svg") else base
        return [(f"{stem.name}_{name}", panel) for name, panel in
                zip(("weights", "jacobian", "gauge"), self.panels(), strict=True)]

    def plot_paths(self, base: str | Path) -> list[Path]:
        """The files ``export_plots(base)`` writes."""
        folder = Path(base).parent
        return [folder / f"{name}.{kind}" for name, _panel in self._plot_names(base)
                for kind in ("png", "svg")]

    def export_plots(self, base: str | Path) -> list[Path]:
        """Write ``<base>_{weights,jacobian,gauge}.png`` and the same as ``.svg``, in the
        "screen" export style (the size of the figure, never of the window)."""
        from ui.export.plot_files import ExportError, write_styled_figures

        if self._result is None:
            raise ValueError("nothing to export: no valid scores yet")
        written = []
        for name, panel in self._plot_names(base):
            try:
                written += write_styled_figures(panel, Path(base).parent, name, "screen")
            except ExportError as exc:
                raise OSError(str(exc)) from exc
        return written

    def export_panel_dialog(self, panel: Any, kind: str) -> None:
        """One plot as PNG, SVG, CSV or a slide/paper figure (its ⋯ menu, File -> Export plot)."""
        from ui.export.dialog import export_panel_dialog

        export_panel_dialog(self, panel, kind, lambda text, _error: self.status.setText(text))

    # -- figures: what drew them, and File -> Open ----------------------------------------------
    def figure_source(self) -> dict[str, Any] | None:
        """The inputs of the result drawn, as typed (``3, -2*999`` stays short): an exported
        figure carries them and File -> Open restores them (None before any valid input, or
        for a text too long to carry)."""
        inputs = self._inputs
        if inputs is None or len(str(inputs["scores"])) > FIGURE_TEXT_MAX:
            return None
        return {"inspector": dict(inputs)}

    def restore_figure(self, meta: dict[str, Any], name: str) -> str:
        """An exported figure opened (File -> Open): its scores, scale, soft-cap, sink and
        sigmoid, and the plot's view choices. Returns what was restored, in words; ValueError
        naming the field when the figure's inputs are not valid (nothing changes then)."""
        inputs = meta.get("inspector")
        if not isinstance(inputs, dict):
            raise ValueError("the figure carries no scores")
        texts = {key: inputs.get(key, "") for key in ("scores", "scale", "softcap", "sink")}
        if not all(isinstance(v, str) for v in texts.values()) or \
                not isinstance(inputs.get("sigmoid", False), bool):
            raise ValueError("the figure's scores, scale, cap and sink must be text")
        try:  # checked before anything changes
            options = _options_from_text(texts["softcap"], texts["sink"], inputs.get("sigmoid", False))
            inspect_scores(parse_scores(texts["scores"]), parse_scale(texts["scale"]), **options)
        except ConfigError as exc:
            raise ValueError(f"{exc.field}: {exc.message}") from None
        for key, edit in (("scores", self.scores_edit), ("scale", self.scale_edit),
                          ("softcap", self.softcap_edit), ("sink", self.sink_edit)):
            edit.blockSignals(True)
            edit.setText(texts[key])
            edit.blockSignals(False)
        self.sigmoid_box.blockSignals(True)
        self.sigmoid_box.setChecked(bool(inputs.get("sigmoid", False)))
        self.sigmoid_box.blockSignals(False)
        self.refresh()
        panel = next((p for p in self.panels() if p.plot_id == meta.get("plot")), None)
        done = panel.apply_view_state(meta.get("view")) if panel is not None else []
        result = self._result
        what = f"{result.scores.size:,} scores divided by {result.scale:g}" if result else "scores"
        title = panel.title.lower() if panel is not None else "inspector"
        return f"the {title} figure: {what}" + (f"; {', '.join(done)}" if done else "")

    # -- internals ----------------------------------------------------------------------------
    def _schedule(self) -> None:
        self._timer.start()

    def _on_example(self, index: int) -> None:
        if index <= 0:
            return
        _, scores, scale = EXAMPLES[index - 1]
        # an example's documented weights are of a plain softmax: cap, sink and sigmoid go off
        self.set_rule_options({})
        if isinstance(scores, str):  # repeats stay short in the field ("3, -2*999")
            for edit, text in ((self.scores_edit, scores), (self.scale_edit, plain(scale))):
                edit.blockSignals(True)
                edit.setText(text)
                edit.blockSignals(False)
            self.refresh()
        else:
            self.set_scores(list(scores), scale)
        self.examples.setCurrentIndex(0)

    def _show_errors(self, errors: dict[str, str]) -> None:
        self._errors = dict(errors)
        stale = " (showing the last valid input)" if self._result is not None else ""
        for field, edit, label in (("scores", self.scores_edit, self.scores_error),
                                   ("scale", self.scale_edit, self.scale_error)):
            message = errors.get(field)
            themed_css(edit, field_error_css("QLineEdit") if message else "")
            label.setText(f"{field}: {message}{stale}" if message else "")
            label.setHidden(not message)
        message = errors.get("options", "")
        for name, edit in (("softcap", self.softcap_edit), ("sink", self.sink_edit)):
            themed_css(edit, field_error_css("QLineEdit") if message.startswith(name) else "")
        self.options_error.setText(f"{message}{stale}" if message else "")
        self.options_error.setHidden(not message)

    def _update_views(self, r: InspectResult) -> None:
        self.weights_plot.update_result(r)
        self.gauge.update_result(r)
        self.heatmap.update_result(r)
        self.model.set_result(r)
        n = r.scores.size
        s = self.summary
        s["n"].setText(str(n))
        top = sig(float(r.weights.max()))
        if r.sink is not None:
            top += f"   Σp_i = {sig(r.key_mass)}, the sink takes {sig(r.sink_weight)}"
        elif r.sigmoid:
            top += f"   Σp_i = {sig(r.key_mass)} (no normalization)"
        s["top"].setText(top)
        self.formula.setText(formula_text(r))
        s["fro"].setText(f"{sig(r.jacobian_fro, 10)}   (log₁₀ = {r.log10_jacobian_fro:.4f})")
        share = r.jacobian_max_abs / JACOBIAN_ENTRY_MAX
        s["max_abs"].setText(f"{sig(r.jacobian_max_abs)}   = {share:.3g} × the maximum 0.25")
        of = "   of p / Σp" if r.key_mass != 1.0 else ""
        s["entropy"].setText(f"{sig(r.entropy)}   of at most log n = {math.log(n):.6g}{of}")
        s["entropy_norm"].setText(sig(r.entropy_norm, 6))

    def _on_save_csv(self) -> None:
        path = save_file(self, "Save inspector data", "inspector.csv", "CSV files (*.csv)")
        # (the dialog asked about the file picked; the Jacobian's file beside it is asked here)
        if path and self._may_replace([jacobian_path(path)]):
            self._report(lambda: self.export_csv(path))

    def _on_save_png(self) -> None:
        path = save_file(self, "Save inspector plots (base name)", "inspector.png",
                         "PNG images (*.png)")
        if path and self._may_replace(self.plot_paths(path)):
            self._report(lambda: self.export_plots(path))

    def _may_replace(self, paths: list[Path]) -> bool:
        """True unless files the user did not pick in the dialog exist and they keep them."""
        from ui.export.dialog import ask_overwrite

        there = [p for p in paths if p.exists()]
        return not there or ask_overwrite(self, there[0].parent, [p.name for p in there])

    def _report(self, action) -> None:
        try:
            written = action()
        except (OSError, ValueError) as exc:
            self.status.setText(f"Could not save: {exc}")
            return
        self.status.setText("Saved " + ", ".join(p.name for p in written))


def _options_from_text(softcap: str, sink: str, sigmoid: bool) -> dict[str, object]:
    """The soft-cap and sink texts (empty: off) and sigmoid as ``inspect_scores`` keywords."""
    out: dict[str, object] = {"sigmoid": sigmoid}
    for name, text in (("softcap", softcap.strip()), ("sink", sink.strip())):
        if text:
            try:
                out[name] = float(text)
            except ValueError:
                raise ConfigError(name, f"{text!r} is not a number") from None
    return out


def _error_label(name: str) -> QLabel:
    label = QLabel()
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setHidden(True)
    return label
