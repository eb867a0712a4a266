"""The parameter panel: widgets <-> SimulationConfig, both ways.

``config_from_widgets()`` builds a validated config (or raises the engine's ConfigError, after
marking that field red and showing the message); ``set_config(cfg)`` puts a config back into the
widgets without emitting ``changed``. The panel never runs anything itself.
"""

from __future__ import annotations

import math
import os
import random
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QRegularExpressionValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.config import (
    BACKENDS,
    D_K_MAX,
    DEVICES,
    DISTRIBUTIONS,
    DTYPES,
    METHODS,
    N_KEYS_MAX,
    RULES,
    TRIALS_MAX,
    SimulationConfig,
)
from engine.errors import ConfigError
from engine.rules import RULE_REGISTRY
from ui.params.fields import ClampDoubleSpinBox, ClampSpinBox, guard_wheel, notice_text
from ui.theme import (
    ERROR_TEXT_BOLD,
    Theme,
    color_rule_widget,
    field_error_css,
    themed_css,
)

SLIDER_STEPS_PER_OCTAVE = 10
CLAMP_NOTICE_MS = 15_000  #: how long "… set to 65,536" stays under the parameters' title
#: rules whose logits use the temperature T
RULES_WITH_T = ("temperature", "cosine")

TIPS = {
    "d_k": "Key width of one attention head (not d_model): the length of q and k.",
    "n_keys": "Number of keys each query attends over (the softmax length n).",
    "trials": "Number of independent queries simulated; more trials shrink the standard errors.",
    "dist": "Distribution of the standardized entries of q and k.",
    "q_mean": "Mean of every query entry.",
    "q_std": "Standard deviation of every query entry (must be > 0).",
    "k_mean": "Mean of every key entry.",
    "k_std": "Standard deviation of every key entry (must be > 0).",
    "correlation": "Correlation rho between the query and key 0 (a 'target' key, like trained q/k).",
    "temperature": "Temperature T used by the temperature and cosine rules (logits = similarity / T).",
    "saturation_threshold": "A row counts as saturated when its top softmax weight exceeds this value.",
    "seed": "Random seed: the same seed and backend reproduce the same numbers.",
    "new_seed": "Draw a new random seed and rerun.",
    "backend": "Array library: auto picks torch on a GPU, else NumPy.",
    "device": "Where torch computes: auto, CPU, or a CUDA GPU.",
    "dtype": "Floating-point precision of the sampled vectors and scores.",
    "method": "How scores are drawn: exact samples them directly (Gaussian entries; not for cosine/qknorm), explicit draws the vectors.",
    "scalings": "Scaling rules to compare; each keeps its colour in every plot.",
    "n_ref": "Reference length of the logn and yarn_dynamic rules: beyond n_ref, logn multiplies the sqrt logits by ln(n)/ln(n_ref) and yarn_dynamic by (0.1·ln(n/n_ref) + 1)²; both equal sqrt up to n_ref.",
    "yarn_s": "Context-extension factor s of the yarn rule (YaRN as shipped): every sqrt logit times (0.1·ln s + 1)², whatever the row's length; Qwen2.5 uses 4, gpt-oss 32, DeepSeek-V3 40.",
    "softcap": "c of the softcap rule (Gemma 2: 50): logits = c·tanh(q·k/√d_k / c), never beyond c.",
    "sink": "Logit of the sink rule's extra entry (0 = softmax plus one): it joins each row's softmax and its weight is dropped.",
    "ssmax_s": "s of the ssmax rule (Scalable-Softmax): logits = s · ln(n) · q·k/√d_k; 0.43 is the paper's example.",
}


def d_k_to_slider(d_k: int) -> int:
    return round(SLIDER_STEPS_PER_OCTAVE * math.log2(max(1, d_k)))


def slider_to_d_k(value: int) -> int:
    return max(1, min(D_K_MAX, round(2 ** (value / SLIDER_STEPS_PER_OCTAVE))))


def cuda_hint() -> bool:
    """A GPU driver is visible (cheap; importing torch to ask would cost ~1.7 s at startup)."""
    return (os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidia0")
            or bool(os.environ.get("CUDA_VISIBLE_DEVICES")))


def _torch_installed() -> bool:
    from engine.sampling import torch_available

    return torch_available()


class ParamPanel(QScrollArea):
    #: any widget changed (the window debounces and reruns)
    changed = Signal()
    #: "new seed" pressed (the seed widget already holds the new seed)
    new_seed = Signal()
    #: a typed value was outside its field's range and was clamped (the message says so)
    clamped = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("param_panel")
        self.setWidgetResizable(True)
        inner = QWidget(self)
        col = QVBoxLayout(inner)
        col.setContentsMargins(6, 6, 6, 6)
        self.error_label = QLabel("")
        self.error_label.setObjectName("param_error")
        self.error_label.setWordWrap(True)
        themed_css(self.error_label, ERROR_TEXT_BOLD)
        self.error_label.hide()
        col.addWidget(self.error_label)
        #: "d_k: 999999 is outside 0 … 65,536; set to 65,536": a clamped entry is never silent
        self.clamp_label = QLabel("")
        self.clamp_label.setObjectName("param_clamped")
        self.clamp_label.setWordWrap(True)
        self.clamp_label.hide()
        self._clamp_timer = QTimer(self)
        self._clamp_timer.setSingleShot(True)
        self._clamp_timer.setInterval(CLAMP_NOTICE_MS)
        self._clamp_timer.timeout.connect(self._clamp_notice_over)
        col.addWidget(self.clamp_label)
        self.fields: dict[str, QWidget] = {}
        self._loading = False
        col.addWidget(self._head_group())
        col.addWidget(self._entries_group())
        col.addWidget(self._rules_group())
        col.addWidget(self._run_group())
        col.addStretch(1)
        self.setWidget(inner)
        self.error_field: str | None = None
        self.set_config(SimulationConfig())
        guard_wheel(inner)

    # -- construction --------------------------------------------------------------------------
    def _register(self, name: str, widget: QWidget, tip: str | None = None) -> QWidget:
        widget.setObjectName(f"param_{name}")
        widget.setToolTip(tip or TIPS[name])
        self.fields[name] = widget
        return widget

    def _spin(self, name: str, lo: int, hi: int, step: int = 1) -> QSpinBox:
        w = ClampSpinBox()
        w.clamped.connect(self.show_clamp)
        w.setRange(lo, hi)
        w.setSingleStep(step)
        w.setGroupSeparatorShown(True)
        w.setKeyboardTracking(False)
        w.valueChanged.connect(self._emit)
        return self._register(name, w)

    def _dspin(self, name: str, lo: float, hi: float, step: float, decimals: int = 3) -> QDoubleSpinBox:
        w = ClampDoubleSpinBox()
        w.clamped.connect(self.show_clamp)
        w.setRange(lo, hi)
        w.setDecimals(decimals)
        w.setSingleStep(step)
        w.setKeyboardTracking(False)
        w.valueChanged.connect(self._emit)
        return self._register(name, w)

    def _combo(self, name: str, items: tuple[str, ...]) -> QComboBox:
        w = QComboBox()
        w.addItems(list(items))
        w.currentIndexChanged.connect(self._emit)
        return self._register(name, w)

    def _head_group(self) -> QGroupBox:
        box = QGroupBox("Attention head")
        form = QFormLayout(box)
        self.d_k_slider = QSlider(Qt.Orientation.Horizontal)
        self.d_k_slider.setRange(0, d_k_to_slider(D_K_MAX))
        self.d_k_slider.setToolTip("d_k on a log scale, 1 to 65,536 (drag to sweep octaves).")
        self.d_k_slider.setObjectName("param_d_k_slider")
        # each field's range is the config's own: one range, one message (0 once passed the
        # field, said "outside 0 … 65,536", then was refused with "must be from 1")
        d_k = self._spin("d_k", 1, D_K_MAX)
        self.d_k_slider.valueChanged.connect(self._slider_moved)
        d_k.valueChanged.connect(self._spin_moved)
        row = QHBoxLayout()
        row.addWidget(self.d_k_slider, 1)
        row.addWidget(d_k)
        form.addRow("d_k", row)
        form.addRow("keys n", self._spin("n_keys", 2, N_KEYS_MAX))
        form.addRow("trials", self._spin("trials", 1, TRIALS_MAX, 1000))
        return box

    def _entries_group(self) -> QGroupBox:
        box = QGroupBox("Query and key entries")
        form = QFormLayout(box)
        form.addRow("distribution", self._combo("dist", DISTRIBUTIONS))
        form.addRow("q mean", self._dspin("q_mean", -1000, 1000, 0.1))
        form.addRow("q std", self._dspin("q_std", 0, 1000, 0.1))
        form.addRow("k mean", self._dspin("k_mean", -1000, 1000, 0.1))
        form.addRow("k std", self._dspin("k_std", 0, 1000, 0.1))
        form.addRow("correlation ρ", self._dspin("correlation", -1, 1, 0.05))
        return box

    def _rules_group(self) -> QGroupBox:
        box = QGroupBox("Scaling rules to compare")
        self._register("scalings", box)
        lay = QVBoxLayout(box)
        self.rule_boxes: dict[str, QCheckBox] = {}
        for name in RULES:
            cb = QCheckBox(RULE_REGISTRY[name].label)
            cb.setObjectName(f"rule_{name}")
            cb.setToolTip(RULE_REGISTRY[name].description)
            color_rule_widget(cb, name)
            cb.toggled.connect(self._emit)
            cb.toggled.connect(self._update_enabled)
            lay.addWidget(cb)
            self.rule_boxes[name] = cb
        form = QFormLayout()
        form.addRow("temperature T", self._dspin("temperature", 0, 1e6, 0.1, 4))
        form.addRow("logn/yarn_dyn. n_ref", self._spin("n_ref", 2, N_KEYS_MAX))
        form.addRow("yarn s", self._dspin("yarn_s", 1, 1e6, 1.0, 3))
        form.addRow("ssmax s", self._dspin("ssmax_s", 0, 1000, 0.01, 4))
        form.addRow("softcap c", self._dspin("softcap", 0, 1e6, 1.0, 3))
        form.addRow("sink logit", self._dspin("sink", -1e6, 1e6, 0.5, 3))
        form.addRow("saturation >", self._dspin("saturation_threshold", 0, 1, 0.005, 4))
        lay.addLayout(form)
        return box

    def _run_group(self) -> QGroupBox:
        box = QGroupBox("Run")
        form = QFormLayout(box)
        seed = QLineEdit()
        seed.setValidator(QRegularExpressionValidator(r"[0-9]{0,19}"))
        seed.editingFinished.connect(self._emit)
        self._register("seed", seed)
        self.new_seed_button = QPushButton("New seed")
        self.new_seed_button.setObjectName("param_new_seed")
        self.new_seed_button.setToolTip(TIPS["new_seed"])
        self.new_seed_button.clicked.connect(self.draw_new_seed)
        row = QHBoxLayout()
        row.addWidget(seed, 1)
        row.addWidget(self.new_seed_button)
        form.addRow("seed", row)
        backend = self._combo("backend", BACKENDS)
        if not _torch_installed():
            backend.model().item(BACKENDS.index("torch")).setEnabled(False)
            backend.setItemText(BACKENDS.index("torch"), "torch (not installed)")
        device = self._combo("device", DEVICES)
        if not cuda_hint():
            device.setItemText(DEVICES.index("cuda"), "cuda (no GPU seen)")
        form.addRow("backend", backend)
        form.addRow("device", device)
        form.addRow("dtype", self._combo("dtype", DTYPES))
        form.addRow("method", self._combo("method", METHODS))
        return box

    # -- widget events -------------------------------------------------------------------------
    def _emit(self, *_: Any) -> None:
        if not self._loading:
            self.changed.emit()

    def _slider_moved(self, value: int) -> None:
        d_k = slider_to_d_k(value)
        spin = self.fields["d_k"]
        if spin.value() != d_k:
            spin.setValue(d_k)

    def _spin_moved(self, d_k: int) -> None:
        self.d_k_slider.blockSignals(True)
        self.d_k_slider.setValue(d_k_to_slider(d_k))
        self.d_k_slider.blockSignals(False)

    def _update_enabled(self, *_: Any) -> None:
        uses_t = any(self.rule_boxes[n].isChecked() for n in RULES_WITH_T)
        self.fields["temperature"].setEnabled(uses_t)
        checked = {n for n, box in self.rule_boxes.items() if box.isChecked()}
        self.fields["n_ref"].setEnabled(bool(checked & {"logn", "yarn_dynamic"}))
        self.fields["yarn_s"].setEnabled("yarn" in checked)
        self.fields["ssmax_s"].setEnabled("ssmax" in checked)
        self.fields["softcap"].setEnabled("softcap" in checked)
        self.fields["sink"].setEnabled("sink" in checked)

    def draw_new_seed(self) -> None:
        self.fields["seed"].setText(str(random.randrange(0, 2**31)))
        self.new_seed.emit()
        self._emit()

    # -- config <-> widgets --------------------------------------------------------------------
    @staticmethod
    def _combo_value(w: QComboBox, choices: tuple[str, ...]) -> str:
        return choices[w.currentIndex()]

    def widget_values(self) -> dict[str, Any]:
        """The raw values in the widgets, as a SimulationConfig dict (not validated)."""
        f = self.fields
        seed_text = f["seed"].text().strip()
        return {
            "d_k": f["d_k"].value(), "n_keys": f["n_keys"].value(), "trials": f["trials"].value(),
            "seed": int(seed_text) if seed_text else -1,
            "dist": self._combo_value(f["dist"], DISTRIBUTIONS),
            "q_mean": f["q_mean"].value(), "q_std": f["q_std"].value(),
            "k_mean": f["k_mean"].value(), "k_std": f["k_std"].value(),
            "correlation": f["correlation"].value(),
            "scalings": tuple(n for n in RULES if self.rule_boxes[n].isChecked()),
            "temperature": f["temperature"].value(),
            "saturation_threshold": f["saturation_threshold"].value(),
            "backend": self._combo_value(f["backend"], BACKENDS),
            "device": self._combo_value(f["device"], DEVICES),
            "dtype": self._combo_value(f["dtype"], DTYPES),
            "method": self._combo_value(f["method"], METHODS),
            "n_ref": f["n_ref"].value(), "ssmax_s": f["ssmax_s"].value(),
            "softcap": f["softcap"].value(), "sink": f["sink"].value(),
            "yarn_s": f["yarn_s"].value(),
        }

    def config_from_widgets(self) -> SimulationConfig:
        """A validated config; on ConfigError the field is marked and the message shown, then
        the error is raised again for the caller (which must not run)."""
        try:
            cfg = SimulationConfig.from_dict(self.widget_values())
        except ConfigError as exc:
            self.show_error(exc)
            raise
        self.clear_error()
        return cfg

    def set_config(self, cfg: SimulationConfig) -> None:
        self._loading = True
        try:
            f = self.fields
            f["d_k"].setValue(cfg.d_k)
            self._spin_moved(cfg.d_k)
            f["n_keys"].setValue(cfg.n_keys)
            f["trials"].setValue(cfg.trials)
            f["seed"].setText(str(cfg.seed))
            f["dist"].setCurrentIndex(DISTRIBUTIONS.index(cfg.dist))
            for name in ("q_mean", "q_std", "k_mean", "k_std", "correlation", "temperature",
                         "saturation_threshold", "n_ref", "ssmax_s", "softcap", "sink", "yarn_s"):
                f[name].setValue(getattr(cfg, name))
            for name, cb in self.rule_boxes.items():
                cb.setChecked(name in cfg.scalings)
            f["backend"].setCurrentIndex(BACKENDS.index(cfg.backend))
            f["device"].setCurrentIndex(DEVICES.index(cfg.device))
            f["dtype"].setCurrentIndex(DTYPES.index(cfg.dtype))
            f["method"].setCurrentIndex(METHODS.index(cfg.method))
            self._update_enabled()
        finally:
            self._loading = False
        self.clear_error()

    # -- errors --------------------------------------------------------------------------------
    def show_clamp(self, message: str) -> None:
        """Say that a typed value was set to the nearest end of its range; one message at a
        time: an error shown before steps aside while this one is up (its field stays marked)."""
        self.clamp_label.setText(notice_text(message))
        self.clamp_label.show()
        self.error_label.hide()
        self._clamp_timer.start()
        self.clamped.emit(message)

    def _clamp_notice_over(self) -> None:
        self.clamp_label.hide()
        if self.error_field is not None and self.error_label.text():
            self.error_label.show()  # an error that still holds is said again

    def show_error(self, exc: ConfigError) -> None:
        """Mark the field and say why; one message at a time: a new error replaces a clamp
        notice, the same error found again (the rerun after the clamp) waits for it to end."""
        again = self.error_field == exc.field and self.error_label.text().endswith(exc.message)
        self.clear_error()
        if again and self._clamp_timer.isActive():
            self._mark_field(exc)
            self.error_label.hide()
            return
        self._clamp_timer.stop()
        self.clamp_label.hide()
        self._mark_field(exc)
        self.error_label.show()

    def _mark_field(self, exc: ConfigError) -> None:
        widget = self.fields.get(exc.field)
        if widget is not None:
            themed_css(widget, field_error_css(f"#{widget.objectName()}"))
        self.error_field = exc.field
        self.error_label.setText(f"⚠ {exc.field}: {exc.message}")
        if widget is not None:
            self.ensureWidgetVisible(widget)

    def apply_theme(self, theme: Theme) -> None:
        """(The error line and a marked field follow the theme by themselves: ui.theme's
        themed_css.)"""

    def clear_error(self) -> None:
        if self.error_field is not None:
            widget = self.fields.get(self.error_field)
            if widget is not None:
                themed_css(widget, "")
        self.error_field = None
        self.error_label.hide()
        self.error_label.setText("")

    @property
    def error_text(self) -> str:
        return self.error_label.text()
