"""The experiment form: a built-in experiment or a grid of one's own (the base config taken from
the Training page's form, the rules, the axes), the number of workers and the output folder.

``spec()`` returns the validated ExperimentSpec or raises the engine's ConfigError (the offending
axis row is marked red with the message).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError
from engine.experiments.builtin import load_builtins
from engine.experiments.runner import WORKERS_MAX
from engine.experiments.spec import ExperimentSpec
from engine.training.config import TRAINING_RULES
from ui.file_dialogs import choose_dir
from ui.pages.experiments.axes import AxesEditor
from ui.pages.experiments.custom import describe_base, form_spec
from ui.params.fields import rule_check_boxes
from ui.theme import ERROR_TEXT, NOTE_TEXT, themed_css

CUSTOM_DESCRIPTION = ("A grid of your own: the base configuration (take it from the Training "
                      "page), the rules trained side by side in every job, and the axes. Every "
                      "combination of axis values is one job; put several seeds on a 'seed' axis "
                      "to get rates with their intervals.")


class ExperimentForm(QWidget):
    changed = Signal()
    #: another experiment was chosen (a built-in one, or "Build your own"); ``changed`` follows
    chosen = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.builtins: dict[str, ExperimentSpec] = load_builtins()
        first = next(iter(self.builtins.values()))
        self.base = first.base
        #: returns the Training page's config (the window sets it); None: the button is off
        self.base_source: Callable[[], Any] | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)

        outer.addWidget(QLabel("<b>Experiment</b>"))
        self.choice = QComboBox(self)
        self.choice.addItem("Build your own", "")
        for name, spec in self.builtins.items():
            self.choice.addItem(spec.title or name, name)
        self.choice.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.choice.setMinimumContentsLength(18)
        self.choice.setToolTip("A built-in experiment, or a grid of your own")
        outer.addWidget(self.choice)
        self.description = QLabel(self)
        self.description.setWordWrap(True)
        themed_css(self.description, NOTE_TEXT)
        outer.addWidget(self.description)
        base_box = self._build_base_box()
        outer.addWidget(base_box)
        rules_box = self._build_rules_box()
        outer.addWidget(rules_box)
        axes_box = QGroupBox("Axes (the grid is their product)", self)
        axes_layout = QVBoxLayout(axes_box)
        self.axes = AxesEditor(axes_box)
        self.axes.changed.connect(self.changed)
        axes_layout.addWidget(self.axes)
        outer.addWidget(axes_box)
        run_box = self._build_run_box()
        outer.addWidget(run_box)
        outer.addStretch(1)
        self._run_box, self._editable = run_box, [self.choice, base_box, rules_box, axes_box, run_box]
        self._set_rules(self.base.scalings)
        self.choice.setCurrentIndex(1)  # the first built-in experiment
        self.choice.currentIndexChanged.connect(self._choice_changed)
        self._choice_changed()

    # -- construction --------------------------------------------------------------------------
    def _build_base_box(self) -> QGroupBox:
        """The base configuration: what it is, and a button taking the Training page's."""
        base_box = QGroupBox("Base configuration", self)
        base_layout = QVBoxLayout(base_box)
        self.base_label = QLabel(base_box)
        self.base_label.setWordWrap(True)
        themed_css(self.base_label, NOTE_TEXT)
        base_layout.addWidget(self.base_label)
        self.use_training = QPushButton("Use the Training page's settings", base_box)
        self.use_training.setToolTip("Take the base configuration from the Training page's form "
                                     "(its rules too); the axes then vary it")
        self.use_training.clicked.connect(self.use_training_settings)
        base_layout.addWidget(self.use_training)
        self.base_error = QLabel(base_box)
        self.base_error.setWordWrap(True)
        themed_css(self.base_error, ERROR_TEXT + " font-size: 9pt;")
        self.base_error.hide()
        base_layout.addWidget(self.base_error)
        return base_box

    def _build_rules_box(self) -> QGroupBox:
        """One check box per rule (in its colour) and the box's error line."""
        rules_box = QGroupBox("Rules (trained side by side in every job)", self)
        grid, self.rule_checks = rule_check_boxes(rules_box, TRAINING_RULES, self.changed)
        self.rules_error = QLabel(rules_box)
        themed_css(self.rules_error, ERROR_TEXT + " font-size: 9pt;")
        self.rules_error.setWordWrap(True)
        self.rules_error.hide()
        grid.addWidget(self.rules_error, len(TRAINING_RULES) // 2 + 1, 0, 1, 2)
        return rules_box

    def _build_run_box(self) -> QGroupBox:
        """Worker processes and the output folder."""
        run_box = QGroupBox("Run", self)
        run_layout = QGridLayout(run_box)
        run_layout.addWidget(QLabel("workers"), 0, 0)
        self.workers = QSpinBox(run_box)
        self.workers.setRange(1, WORKERS_MAX)
        self.workers.setValue(os.cpu_count() or 1)
        self.workers.setToolTip("Worker processes (each job runs single-threaded in one; the "
                                "results do not depend on this number)")
        self.workers.valueChanged.connect(self.changed)
        run_layout.addWidget(self.workers, 0, 1, 1, 2)
        run_layout.addWidget(QLabel("output"), 1, 0)
        self.out_edit = QLineEdit(run_box)
        self.out_edit.setPlaceholderText("a new folder under the app's data folder")
        self.out_edit.setToolTip("Folder the jobs are written into as they finish (empty: a new "
                                 "folder under the app's data folder). Resume continues there.")
        run_layout.addWidget(self.out_edit, 1, 1)
        choose = QPushButton("Choose…", run_box)
        choose.clicked.connect(self._choose_out)
        run_layout.addWidget(choose, 1, 2)
        run_layout.setColumnStretch(1, 1)
        return run_box

    # -- choices -------------------------------------------------------------------------------
    @property
    def builtin_name(self) -> str:
        return self.choice.currentData() or ""

    def select_builtin(self, name: str) -> None:
        i = self.choice.findData(name)
        if i >= 0:
            self.choice.setCurrentIndex(i)

    def _choice_changed(self) -> None:
        spec = self.builtins.get(self.builtin_name)
        if spec is None:
            self.description.setText(CUSTOM_DESCRIPTION)
        else:
            self.description.setText(spec.description)
            self.base = spec.base
            self._set_rules(spec.rules)
            self.axes.set_spec_axes(spec)
        self._show_base()
        self.chosen.emit()
        self.changed.emit()

    def show_spec(self, spec: ExperimentSpec) -> None:
        """Put ``spec`` into the form: its built-in choice when it is one, else its base, rules
        and axes as a grid of one's own (an opened figure's experiment)."""
        builtin = self.builtins.get(spec.name)
        if builtin is not None and builtin.to_dict() == spec.to_dict():
            self.select_builtin(spec.name)
            return
        self.set_base(spec.base)
        self._set_rules(spec.rules)
        self.axes.set_axes([(a.field, ", ".join(repr(v) if isinstance(v, float) else str(v)
                                                for v in a.values)) for a in spec.axes])
        self.changed.emit()

    def set_base(self, cfg: Any) -> None:
        """A new base configuration (its rules too); a built-in choice becomes "your own"."""
        self.base = cfg
        self._set_rules(cfg.scalings)
        if self.builtin_name:
            self.choice.blockSignals(True)
            self.choice.setCurrentIndex(0)
            self.choice.blockSignals(False)
            self.description.setText(CUSTOM_DESCRIPTION)
        self._show_base()
        self.changed.emit()

    def use_training_settings(self) -> bool:
        if self.base_source is None:
            self._base_message("The Training page is not available.")
            return False
        try:
            cfg = self.base_source()
        except ConfigError as exc:
            self._base_message(f"The Training page's form is invalid: {exc.field}: {exc.message}")
            return False
        self._base_message("")
        self.set_base(cfg)
        return True

    def _base_message(self, text: str) -> None:
        self.base_error.setText(text)
        self.base_error.setVisible(bool(text))

    def _show_base(self) -> None:
        self.base_label.setText(describe_base(self.base))

    def _set_rules(self, rules: tuple[str, ...]) -> None:
        for rule, cb in self.rule_checks.items():
            cb.blockSignals(True)
            cb.setChecked(rule in rules)
            cb.blockSignals(False)

    def _choose_out(self) -> None:
        folder = choose_dir(self, "Experiment output folder", self.out_edit.text())
        if folder:
            self.out_edit.setText(folder)

    def set_locked(self, locked: bool) -> None:
        for w in self._editable:
            w.setEnabled(not locked)

    # -- the spec ------------------------------------------------------------------------------
    def rules(self) -> tuple[str, ...]:
        return tuple(r for r, cb in self.rule_checks.items() if cb.isChecked())

    def spec(self) -> ExperimentSpec:
        """The experiment (ConfigError names what is wrong; axis rows are marked)."""
        try:
            base = self.base.replace(scalings=self.rules())
            self.rules_error.hide()
        except ConfigError as exc:
            self.rules_error.setText(f"{exc.field}: {exc.message}")
            self.rules_error.show()
            self.axes.axes(self.base)  # mark the axis rows too
            raise
        axes = self.axes.axes(base)
        builtin = self.builtins.get(self.builtin_name)
        if builtin is not None:
            spec = form_spec(builtin.name, base, axes, builtin)
            if spec.to_dict() == builtin.to_dict():
                return spec
            return form_spec(f"{builtin.name}-custom", base, axes, builtin)
        return form_spec("custom", base, axes, None)

    def out_dir(self) -> str:
        return self.out_edit.text().strip()

    # -- remembered choices --------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"builtin": self.builtin_name, "base": self.base.to_dict(),
                "rules": list(self.rules()), "axes": [list(t) for t in self.axes.texts()],
                "workers": self.workers.value(), "out": self.out_dir()}

    def restore(self, data: Any) -> None:
        """Back to a saved state (anything stale is skipped)."""
        if not isinstance(data, dict):
            return
        from engine.training.config import TrainingConfig

        if isinstance(data.get("builtin"), str) and data["builtin"] in self.builtins:
            self.select_builtin(data["builtin"])
        else:
            self.choice.setCurrentIndex(0)
            try:
                self.set_base(TrainingConfig.from_dict(data.get("base")))
            except (ConfigError, TypeError, ValueError):
                pass
        rules = data.get("rules")
        if isinstance(rules, list):
            self._set_rules(tuple(r for r in rules if isinstance(r, str) and r in self.rule_checks))
        axes = data.get("axes")
        if isinstance(axes, list) and all(isinstance(a, list) and len(a) == 2 for a in axes):
            self.axes.set_axes([(str(f), str(t)) for f, t in axes])
        if isinstance(data.get("workers"), int) and not isinstance(data["workers"], bool):
            self.workers.setValue(min(max(data["workers"], 1), WORKERS_MAX))
        if isinstance(data.get("out"), str):
            self.out_edit.setText(data["out"])
        self.changed.emit()
