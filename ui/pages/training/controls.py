"""The Training page's parameter form: widgets <-> TrainingConfig, both ways.

``config_from_widgets()`` returns a validated config or raises the engine's ConfigError (the
form marks that field red); ``set_config(cfg)`` fills the widgets. Tooltips are the same
sentences as the CLI's ``--help`` (``engine.training.config.FIELD_HELP``).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError
from engine.training.config import (
    D_MODEL_MAX,
    DEVICES,
    FIELD_HELP,
    HEADS_MAX,
    LAYERS_MAX,
    OPTIMIZERS,
    PARAMS,
    POSITIONS,
    TASKS,
    TRAINING_RULES,
    WIDTH_AXES,
    TrainingConfig,
)
from engine.training.presets import DEFAULT_PRESET, load_presets
from ui.params.fields import (
    ClampDoubleSpinBox,
    ClampSpinBox,
    guard_wheel,
    notice_text,
    rule_check_boxes,
)
from ui.plots.training.panels import rule_label
from ui.theme import (
    ERROR_TEXT,
    NOTE_TEXT,
    WARNING_TEXT,
    Theme,
    field_error_css,
    themed_css,
)

#: field -> (kind, lo, hi, decimals or step); kind: int | float | choice | bool
FIELDS: dict[str, tuple[Any, ...]] = {
    "task": ("choice", TASKS),
    "items_min": ("int", 1, 1024),
    "items_max": ("int", 1, 1024),
    "key_dim": ("int", 1, 4096),
    "noise": ("float", 0.0, 10.0, 3, 0.05),
    "classes": ("int", 2, 4096),
    "pairs": ("int", 1, 256),
    "positions": ("choice", POSITIONS),
    "d_model": ("int", 1, D_MODEL_MAX),
    "heads": ("int", 1, HEADS_MAX),
    "d_k": ("int", 0, D_MODEL_MAX),
    "layers": ("int", 1, LAYERS_MAX),
    "mlp": ("bool",),
    "layernorm": ("bool",),
    "qk_init": ("float", 0.001, 100.0, 3, 0.1),
    "param": ("choice", PARAMS),
    "width_axis": ("choice", WIDTH_AXES),
    "base_width": ("int", 0, D_MODEL_MAX),
    "attn_mult": ("float", 0.0, 1e6, 4, 0.5),
    "temperature": ("float", 1e-6, 1e6, 4, 0.5),
    "cosine_temperature": ("float", 1e-6, 1e6, 4, 0.01),
    "softcap": ("float", 1e-3, 1e6, 3, 1.0),
    "qk_clip_tau": ("float", 1e-3, 1e6, 3, 1.0),
    "optimizer": ("choice", OPTIMIZERS),
    "lr": ("float", 1e-6, 100.0, 6, 0.0005),
    "batch": ("int", 1, 65_536),
    "steps": ("int", 1, 1_000_000),
    "seed": ("int", 0, 2**31 - 1),
    "device": ("choice", DEVICES),
    "log_every": ("int", 1, 1_000_000),
    "probe_size": ("int", 1, 4096),
    "hist_bins": ("int", 2, 2000),
    "hist_range": ("float", 0.01, 1e6, 2, 5.0),
    "saturation_threshold": ("float", 0.5, 0.999999, 6, 0.001),
    "collapse_threshold": ("float", 0.0, 1.0, 3, 0.01),
    "collapse_logs": ("int", 1, 10_000),
    "eval_lengths": ("ints",),
    "eval_size": ("int", 1, 65_536),
    "eval_every": ("int", 1, 1_000_000),
}
GROUPS = (
    ("Task", ("task", "items_min", "items_max", "key_dim", "noise", "classes", "pairs",
              "positions")),
    ("Model", ("d_model", "heads", "d_k", "layers", "mlp", "layernorm", "qk_init")),
    ("Parametrization (muP)", ("param", "width_axis", "base_width", "attn_mult")),
    ("Rules", ("temperature", "cosine_temperature", "softcap", "qk_clip_tau")),
    ("Optimisation", ("optimizer", "lr", "batch", "steps", "seed", "device")),
    ("Observation", ("log_every", "probe_size", "hist_bins", "hist_range",
                     "saturation_threshold", "collapse_threshold", "collapse_logs")),
    ("Evaluation at other lengths", ("eval_lengths", "eval_size", "eval_every")),
)
LABELS = {"d_k": "d_k (0 = d_model/heads)", "qk_init": "W_Q/W_K init gain",
          "cosine_temperature": "cosine T (initial)", "lr": "learning rate",
          "softcap": "softcap c", "qk_clip_tau": "qkclip tau",
          "hist_range": "histogram range ±", "hist_bins": "histogram bins",
          "collapse_threshold": "collapse: entropy <", "collapse_logs": "collapse: for logs",
          "eval_lengths": "set sizes (items; recall: pairs)", "eval_size": "examples per size",
          "eval_every": "evaluate every K logs", "param": "parametrization",
          "width_axis": "muP: width is", "base_width": "muP: base width (0 = own)",
          "attn_mult": "muP: attn_mult (0 = auto)"}


def parse_ints(text: str, field: str) -> tuple[int, ...]:
    """"64 256, 1024" -> (64, 256, 1024); a non-integer raises ConfigError naming ``field``."""
    try:
        return tuple(int(t) for t in text.replace(",", " ").split())
    except ValueError:
        raise ConfigError(field, f"whole numbers separated by spaces, got {text!r}") from None


#: the preset box's item for a config from elsewhere (an experiment job), not a preset
SOURCE_KEY = "__source__"


class TrainingControls(QWidget):
    """The form; ``changed`` fires on any edit (the page re-validates)."""

    changed = Signal()
    #: a typed value was outside its field's range and was clamped (the message says so)
    clamped = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.widgets: dict[str, QWidget] = {}
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        self.preset_box = QComboBox(self)
        self.presets = load_presets()
        for name, p in self.presets.items():
            self.preset_box.addItem(p.title, name)
        self.preset_box.setToolTip("Load a preset's parameters (the demo is the default)")
        # the titles are long: let the side panel set the width, not the longest title
        self.preset_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.preset_box.setMinimumContentsLength(16)
        self.preset_text = QLabel(self)
        self.preset_text.setWordWrap(True)
        themed_css(self.preset_text, NOTE_TEXT)
        self.lock_label = QLabel(
            "Parameters are locked while a run is in progress (a paused run resumes with the "
            "parameters it started with): Stop or Reset to change them for the next Start.", self)
        self.lock_label.setWordWrap(True)
        themed_css(self.lock_label, WARNING_TEXT)
        self.lock_label.hide()
        outer.addWidget(self.lock_label)
        outer.addWidget(QLabel("<b>Preset</b>"))
        outer.addWidget(self.preset_box)
        outer.addWidget(self.preset_text)
        rules_box = self._build_rules_box()
        outer.addWidget(rules_box)
        self._lockable: list[QWidget] = [self.preset_box, rules_box]
        for title, names in GROUPS:
            box = self._build_group(title, names)
            outer.addWidget(box)
            self._lockable.append(box)
        self.error_label = QLabel(self)
        self.error_label.setWordWrap(True)
        themed_css(self.error_label, ERROR_TEXT)
        outer.addWidget(self.error_label)
        self.clamp_label = QLabel(self)
        self.clamp_label.setWordWrap(True)
        outer.addWidget(self.clamp_label)
        outer.addStretch(1)
        self.preset_box.currentIndexChanged.connect(self._load_preset)
        self._load_preset()
        guard_wheel(self)  # scrolling the long form must not change the field under the pointer

    def _build_rules_box(self) -> QGroupBox:
        """One check box per rule, in its colour."""
        rules_box = QGroupBox("Scaling rules (trained side by side)", self)
        tips = {rule: f"{rule_label(rule)}. {FIELD_HELP['scalings']}" for rule in TRAINING_RULES}
        _grid, self.rule_checks = rule_check_boxes(rules_box, TRAINING_RULES, self.changed, tips)
        return rules_box

    def _build_group(self, title: str, names: tuple[str, ...]) -> QGroupBox:
        """A titled box of fields, each with its label and help."""
        box = QGroupBox(title, self)
        form = QFormLayout(box)
        form.setContentsMargins(6, 4, 6, 4)
        for name in names:
            w = self._make(name, box)
            w.setToolTip(FIELD_HELP[name])
            label = QLabel(LABELS.get(name, name.replace("_", " ")), box)
            label.setToolTip(FIELD_HELP[name])
            form.addRow(label, w)
            self.widgets[name] = w
        return box

    def _make(self, name: str, parent: QWidget) -> QWidget:
        spec = FIELDS[name]
        kind = spec[0]
        if kind == "int":
            w = ClampSpinBox(parent)
            w.setObjectName(name)
            w.clamped.connect(self._clamped)
            w.setRange(spec[1], spec[2])
            w.setKeyboardTracking(False)
            w.valueChanged.connect(self.changed)
        elif kind == "float":
            w = ClampDoubleSpinBox(parent)
            w.setObjectName(name)
            w.clamped.connect(self._clamped)
            w.setDecimals(spec[3])
            w.setRange(spec[1], spec[2])
            w.setSingleStep(spec[4])
            w.setKeyboardTracking(False)
            w.valueChanged.connect(self.changed)
        elif kind == "ints":
            w = QLineEdit(parent)
            w.setPlaceholderText("e.g. 64 256 1024")
            w.editingFinished.connect(self.changed)
        elif kind == "choice":
            w = QComboBox(parent)
            w.addItems(spec[1])
            w.currentIndexChanged.connect(self.changed)
        else:
            w = QCheckBox(parent)
            w.toggled.connect(self.changed)
        if not isinstance(w, QCheckBox):
            # spin boxes size themselves to their range (up to 1e6): let the form decide instead
            w.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
            w.setMinimumWidth(80)
        return w

    def _clamped(self, message: str) -> None:
        self.clamp_label.setText(notice_text(message))
        self.clamped.emit(message)

    def set_locked(self, locked: bool) -> None:
        """Lock the form while a run exists that it can no longer change (running or paused)."""
        for w in self._lockable:
            w.setEnabled(not locked)
        self.lock_label.setVisible(locked)

    @property
    def locked(self) -> bool:
        return not self.preset_box.isEnabled()

    # -- config <-> widgets --------------------------------------------------------------------
    def _load_preset(self) -> None:
        name = self.preset_box.currentData() or DEFAULT_PRESET
        if name == SOURCE_KEY:  # the form holds another run's config (show_source), not a preset
            return
        self._drop_source()
        p = self.presets[name]
        self.preset_text.setText(p.description)
        self.set_config(p.config)

    def show_source(self, label: str, description: str, cfg: TrainingConfig) -> None:
        """The form takes ``cfg`` from elsewhere (an experiment's job): the preset box names it
        ("experiment job 3") and the line under it says what it is, instead of a preset's."""
        self.preset_box.blockSignals(True)
        self._drop_source()
        self.preset_box.insertItem(0, label, SOURCE_KEY)
        self.preset_box.setItemData(0, description, Qt.ItemDataRole.ToolTipRole)
        self.preset_box.setCurrentIndex(0)
        self.preset_box.blockSignals(False)
        self.preset_text.setText(description)
        self.set_config(cfg)

    def _drop_source(self) -> None:
        index = self.preset_box.findData(SOURCE_KEY)
        if index >= 0:
            was = self.preset_box.blockSignals(True)
            self.preset_box.removeItem(index)
            self.preset_box.blockSignals(was)

    def set_config(self, cfg: TrainingConfig) -> None:
        self.blockSignals(True)
        try:
            for name, w in self.widgets.items():
                value = getattr(cfg, name)
                w.blockSignals(True)
                if isinstance(w, QComboBox):
                    w.setCurrentText(str(value))
                elif isinstance(w, QLineEdit):
                    w.setText(" ".join(str(v) for v in value))
                elif isinstance(w, QCheckBox):
                    w.setChecked(bool(value))
                else:
                    w.setValue(value)
                w.blockSignals(False)
            for rule, cb in self.rule_checks.items():
                cb.blockSignals(True)
                cb.setChecked(rule in cfg.scalings)
                cb.blockSignals(False)
        finally:
            self.blockSignals(False)
        self._mark(None)
        self.changed.emit()

    def config_from_widgets(self) -> TrainingConfig:
        values: dict[str, Any] = {}
        for name, w in self.widgets.items():
            if isinstance(w, QComboBox):
                values[name] = w.currentText()
            elif isinstance(w, QLineEdit):
                values[name] = w.text()
            elif isinstance(w, QCheckBox):
                values[name] = w.isChecked()
            else:
                values[name] = w.value()
        values["scalings"] = tuple(r for r, cb in self.rule_checks.items() if cb.isChecked())
        try:
            values["eval_lengths"] = parse_ints(values["eval_lengths"], "eval_lengths")
            cfg = TrainingConfig(**values)
        except ConfigError as exc:
            self._mark(exc)
            raise
        self._mark(None)
        return cfg

    def _mark(self, exc: ConfigError | None) -> None:
        self._error = exc
        for name, w in self.widgets.items():
            themed_css(w, field_error_css(f"#{w.objectName()}" if w.objectName() else "*")
                       if exc is not None and exc.field == name else "")
        self.error_label.setText("" if exc is None else f"{exc.field}: {exc.message}")

    def apply_theme(self, theme: Theme) -> None:
        """The error red of the current theme (a shown error is recoloured)."""
        self._mark(getattr(self, "_error", None))
