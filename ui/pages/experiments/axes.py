"""The axes editor: rows of (field, "v1, v2, ...") that become ``engine.experiments.spec.Axis``.

Each row is checked alone against the base config, so an invalid value marks its own row red with
the engine's ConfigError message (which names the axis and the value).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError
from engine.experiments.spec import Axis, ExperimentSpec, axis_fields, parse_value
from ui.theme import ERROR_TEXT, field_error_css, themed_css


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


class AxisRow:
    """One axis: a field combo, a values field, a remove button and its error line."""

    def __init__(self, editor: AxesEditor, field: str, text: str) -> None:
        self.field_box = QComboBox(editor)
        self.field_box.addItems(axis_fields())
        self.field_box.setCurrentText(field)
        self.field_box.setToolTip("The training-config field this axis varies")
        self.values_edit = QLineEdit(text, editor)
        self.values_edit.setPlaceholderText("1e-3, 1e-2")
        self.values_edit.setToolTip("Values separated by commas; the grid is the product of the axes")
        self.remove_button = QToolButton(editor)
        self.remove_button.setText("✕")
        self.remove_button.setToolTip("Remove this axis")
        self.error_label = QLabel(editor)
        self.error_label.setWordWrap(True)
        themed_css(self.error_label, ERROR_TEXT + " font-size: 9pt;")
        self.error_label.hide()
        self.error = ""

    @property
    def field(self) -> str:
        return self.field_box.currentText()

    @property
    def text(self) -> str:
        return self.values_edit.text()

    def widgets(self) -> list[QWidget]:
        return [self.field_box, self.values_edit, self.remove_button, self.error_label]

    def parse(self, base: Any) -> Axis:
        """The axis, checked alone against ``base`` (raises ConfigError)."""
        parts = [p for p in self.text.split(",") if p.strip()]
        if not parts:
            raise ConfigError("axis", f"{self.field}: needs at least one value")
        axis = Axis(self.field, tuple(parse_value(self.field, p) for p in parts))
        ExperimentSpec("check", base, (axis,))  # each value against the base config
        return axis

    def mark(self, error: str) -> None:
        self.error = error
        themed_css(self.values_edit, field_error_css("QLineEdit") if error else "")
        self.values_edit.setToolTip(error or "Values separated by commas; the grid is the "
                                             "product of the axes")
        self.error_label.setText(error)
        self.error_label.setVisible(bool(error))


class AxesEditor(QWidget):
    """``changed`` on any edit; ``axes(base)`` returns the axes or raises the first error (every
    invalid row is marked)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[AxisRow] = []
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.grid = QGridLayout()
        self.grid.setColumnStretch(1, 1)
        outer.addLayout(self.grid)
        self.add_button = QPushButton("Add axis", self)
        self.add_button.setToolTip("Vary one more field (e.g. lr, seed, d_k)")
        self.add_button.clicked.connect(lambda: self.add_row("seed", "0, 1"))
        outer.addWidget(self.add_button)

    def set_axes(self, axes: list[tuple[str, str]]) -> None:
        """Replace the rows with (field, text) pairs."""
        for row in self.rows:
            for w in row.widgets():
                self.grid.removeWidget(w)
                w.hide()
                w.deleteLater()
        self.rows = []
        for field, text in axes:
            self._add(field, text)
        self._relayout()
        self.changed.emit()

    def set_spec_axes(self, spec: ExperimentSpec) -> None:
        self.set_axes([(a.field, ", ".join(_fmt(v) for v in a.values)) for a in spec.axes])

    def add_row(self, field: str, text: str) -> AxisRow:
        row = self._add(field, text)
        self._relayout()
        self.changed.emit()
        return row

    def _add(self, field: str, text: str) -> AxisRow:
        row = AxisRow(self, field, text)
        row.field_box.currentIndexChanged.connect(self.changed)
        row.values_edit.textChanged.connect(self.changed)
        row.remove_button.clicked.connect(lambda _c=False, r=row: self.remove_row(r))
        self.rows.append(row)
        return row

    def remove_row(self, row: AxisRow) -> None:
        if row in self.rows:
            self.rows.remove(row)
            for w in row.widgets():
                self.grid.removeWidget(w)
                w.hide()
                w.deleteLater()
            self._relayout()
            self.changed.emit()

    def _relayout(self) -> None:
        for i, row in enumerate(self.rows):
            self.grid.addWidget(row.field_box, 2 * i, 0)
            self.grid.addWidget(row.values_edit, 2 * i, 1)
            self.grid.addWidget(row.remove_button, 2 * i, 2)
            self.grid.addWidget(row.error_label, 2 * i + 1, 0, 1, 3)

    def texts(self) -> list[tuple[str, str]]:
        return [(row.field, row.text) for row in self.rows]

    def axes(self, base: Any) -> tuple[Axis, ...]:
        out, first, seen = [], None, set()
        for row in self.rows:
            try:
                if row.field in seen:
                    raise ConfigError("axis", f"{row.field}: is already an axis")
                out.append(row.parse(base))
                seen.add(row.field)
                row.mark("")
            except ConfigError as exc:
                row.mark(f"{exc.field}: {exc.message}")
                first = first or exc
        if first is not None:
            raise first
        return tuple(out)
