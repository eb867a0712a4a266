"""The Real model page's form beside the plots: which model (open a folder, the bundled one,
install hints), the text (presets, Analyze / Stop, progress, the status line) and its tokens as
the model sees them; and how the page words a refusal and a token list."""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.errors import ConfigError, FileFormatError
from engine.probe.loader import BUNDLED_NAME, text_length, tokenize
from engine.probe.memory import BUDGET_MAX_GB, BUDGET_MIN_GB, DEFAULT_BUDGET_GB
from engine.probe.texts import load_text_presets
from ui.file_dialogs import choose_dir


def error_text(exc: ConfigError) -> str:
    """What the status line says of a refusal: a file's whole line (``FILE: field: problem``),
    else the message (the field is the page's model or text)."""
    return str(exc) if isinstance(exc, FileFormatError) else exc.message


def format_tokens(tokens: tuple[str, ...]) -> str:
    """'0:[CLS]  1:the  2:quick ...': index and token as the model sees it."""
    return "  ".join(f"{i}:{t}" for i, t in enumerate(tokens))


class ModelTextForm:
    """Part of :class:`ui.pages.real_model.page.RealModelPage` (a base class of it): the form's
    boxes and what they do; the model choice itself (``set_model_dir``) is the page's."""

    def _build_model_box(self, side: QWidget) -> QGroupBox:
        """Which model: its name, open a folder or go back to the bundled one, install hints."""
        model_box = QGroupBox("Model", side)
        mb = QVBoxLayout(model_box)
        self.model_label = QLabel(model_box)
        self.model_label.setWordWrap(True)
        self.model_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        mb.addWidget(self.model_label)
        #: the two buttons side by side (one above the other in presentation mode)
        self.model_buttons = row = QHBoxLayout()
        self.open_button = QPushButton("Open model folder…", model_box)
        self.open_button.setToolTip("A local Hugging Face model folder of any architecture "
                                    "transformers runs on text (no remote code). Nothing is ever "
                                    "downloaded.")
        self.open_button.clicked.connect(self._choose_folder)
        # (its name on hover: "Bundled all-MiniLM-L6-v2" was cut in a 1280x720 window's form)
        self.bundled_button = QPushButton("Bundled model", model_box)
        self.bundled_button.setToolTip(f"Back to the bundled {BUNDLED_NAME}")
        self.bundled_button.clicked.connect(lambda: self.set_model_dir(None))
        row.addWidget(self.open_button)
        row.addWidget(self.bundled_button)
        mb.addLayout(row)
        mb.addLayout(self._build_budget_row(model_box))
        self.hint_label = QLabel(model_box)
        self.hint_label.setWordWrap(True)
        self.hint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        mb.addWidget(self.hint_label)
        return model_box

    def _build_budget_row(self, parent: QWidget) -> QHBoxLayout:
        """The memory budget: a model whose tensors would take more is refused before loading."""
        row = QHBoxLayout()
        label = QLabel("Memory budget", parent)
        self.budget_box = QDoubleSpinBox(parent)
        self.budget_box.setRange(BUDGET_MIN_GB, BUDGET_MAX_GB)
        self.budget_box.setDecimals(1)
        self.budget_box.setSingleStep(1.0)
        self.budget_box.setSuffix(" GB")
        self.budget_box.setValue(DEFAULT_BUDGET_GB)
        tip = ("A model whose parameters and buffers would take more memory than this (in "
               "float32, counted from its config.json before anything is allocated) is refused.")
        self.budget_box.setToolTip(tip)
        label.setToolTip(tip)
        label.setBuddy(self.budget_box)
        row.addWidget(label)
        row.addWidget(self.budget_box, 1)
        return row

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

    def _choose_folder(self) -> None:
        folder = choose_dir(self, "Open a Hugging Face model folder")
        if folder and self.set_model_dir(folder):
            self.analyze()

    def _pick_preset(self, index: int) -> None:
        if index >= 1:
            self.text_edit.setPlainText(self.presets[index - 1][1])
            self.preset_box.setCurrentIndex(0)

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
