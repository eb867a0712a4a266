"""The guided tour: one step at a time, each setting the parameters and naming the plot to watch.

The panel only emits signals; the main window applies the parameters and highlights the plot.
A step's inspector example is loaded into the Score inspector, which opens when the user clicks
the link in the hint (so the highlighted plot stays in view). Leaving the tour (the button, or
Esc while the tour has the focus) keeps whatever settings the last step applied.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ui.pages.tour.question import SKIPPED, QuestionBox
from ui.pages.tour.steps import PLOT_IDS, TourError, TourStep, find_step, load_steps

INSPECTOR_LINK = "inspector"

#: what the user reads for each plot id
PLOT_NAMES = {
    "scores": "the score / logit histogram",
    "weights": "the attention weights",
    "top_weight": "the top weight",
    "entropy": "the attention entropy",
    "jacobian": "the Jacobian size",
    "sweep": "the d_k sweep",
}


#: how the hint names an example's scale controls (the inspector's field labels)
OPTION_NAMES = {"softcap": "cap c", "sink": "sink"}


class MarkdownLabel(QLabel):
    """A label whose Markdown links follow the theme: Qt bakes the palette's link colour into the
    text when it is set, so a theme switched later left dark blue links on the dark theme's grey;
    a palette change sets the text again, once the label's own palette is in place."""

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            QTimer.singleShot(0, self, self._reset_text)  # after the whole palette has changed

    def _reset_text(self) -> None:
        text = self.text()
        if text:
            self.clear()  # setText with the same text would keep the old colours
            self.setText(text)


class TourPanel(QWidget):
    """Step k of N: title, two or three sentences, Back / Next / Leave tour (arrow keys work)."""

    apply_config = Signal(dict)  #: partial SimulationConfig fields of the entered step
    sweep_axis = Signal(str)  #: what the entered step's sweep runs along (before apply_config)
    highlight = Signal(str)  #: plot id of the entered step
    show_inspector = Signal(list, float)  #: scores and scale, when the step has an example
    #: the example's scale controls (soft-cap c, sink logit; {} for none), just before
    #: ``show_inspector`` / ``open_inspector``
    inspector_options = Signal(dict)
    #: the user clicked "open the Score inspector": scores and scale of the step's example
    open_inspector = Signal(list, float)
    finished = Signal()  #: the user left the tour (the settings stay)
    #: plot ids to cover until the question is answered (an empty list: uncover them all)
    conceal = Signal(list)
    #: a question waits: the previous step's plot is no longer the one to watch (no outline)
    unhighlight = Signal()

    def __init__(self, parent: QWidget | None = None, path: str | Path | None = None,
                 ask: bool = True) -> None:
        super().__init__(parent)
        self.setObjectName("tourPanel")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._steps: list[TourStep] = []
        self._index = -1
        self._answered: set[int] = set()
        self._build_question(ask)
        self._build_labels()
        self._lay_out(self._build_buttons())
        self.load_steps(path)

    # -- building -----------------------------------------------------------------------------
    def _build_question(self, ask: bool) -> None:
        """A step with a question asks it before it shows its plot (the check box turns it off)."""
        self.ask_check = QCheckBox("Ask before showing")
        self.ask_check.setObjectName("tourAsk")
        self.ask_check.setToolTip("Steps with a question ask it first; the plot follows the answer")
        self.ask_check.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.ask_check.setChecked(ask)
        self.question = QuestionBox()
        self.question.answered.connect(self._on_answered)

    def _build_labels(self) -> None:
        """The counter, the title, the step's text and the hint naming the plot to watch."""
        self._counter = QLabel()
        self._counter.setObjectName("tourCounter")
        self._title = QLabel()
        self._title.setObjectName("tourTitle")
        self._title.setWordWrap(True)
        font = self._title.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        self._title.setFont(font)
        # a long title wraps instead of widening the dock (and squeezing the plots)
        self._title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._text = MarkdownLabel()
        self._text.setObjectName("tourText")
        self._text.setTextFormat(Qt.TextFormat.MarkdownText)
        self._text.setWordWrap(True)
        self._text.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self._text.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        # selectable, and its links ([the score histogram](plot:scores), [means](step:means)) work
        self._text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                           | Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self._text.setOpenExternalLinks(False)
        self._text.linkActivated.connect(self.follow_link)
        self._plot_hint = QLabel()
        self._plot_hint.setObjectName("tourPlotHint")
        self._plot_hint.setWordWrap(True)
        self._plot_hint.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._plot_hint.setTextFormat(Qt.TextFormat.RichText)
        self._plot_hint.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self._plot_hint.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keys stay with the panel
        self._plot_hint.linkActivated.connect(self._on_link)

    def _build_buttons(self) -> QHBoxLayout:
        """Back / Next / Leave tour; they never take the focus, so the arrow keys stay here."""
        self.back_button = QPushButton("◀ Back")
        self.next_button = QPushButton("Next ▶")
        self.leave_button = QPushButton("Leave tour")
        for b in (self.back_button, self.next_button, self.leave_button):
            b.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # arrow keys stay with the panel
        self.back_button.setToolTip("Previous step (Left arrow)")
        self.next_button.setToolTip("Next step (Right arrow)")
        self.leave_button.setToolTip("Close the tour and keep the current settings")
        self.back_button.clicked.connect(self.back)
        self.next_button.clicked.connect(self.next)
        self.leave_button.clicked.connect(self.leave)
        buttons = QHBoxLayout()
        buttons.addWidget(self.back_button)
        buttons.addWidget(self.next_button)
        buttons.addStretch(1)
        buttons.addWidget(self.leave_button)
        return buttons

    def _lay_out(self, buttons: QHBoxLayout) -> None:
        """Counter, title, question, the scrolling text, the hint, the buttons, the check box."""
        layout = QVBoxLayout(self)
        layout.addWidget(self._counter)
        layout.addWidget(self._title)
        layout.addWidget(self.question)
        scroll = QScrollArea()  # a short dock scrolls the text instead of clipping it
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        scroll.setWidget(self._text)
        layout.addWidget(scroll, 1)
        layout.addWidget(self._plot_hint)
        layout.addLayout(buttons)
        layout.addWidget(self.ask_check)

    # -- data ---------------------------------------------------------------------------------
    def load_steps(self, path: str | Path | None = None) -> list[TourStep]:
        """Load the tour (default resources/tour.json); a bad file shows its error, no traceback."""
        try:
            steps = load_steps(path)
        except TourError as exc:
            self.set_steps([])
            self._title.setText("The tour could not be loaded")
            self._text.setTextFormat(Qt.TextFormat.PlainText)
            self._text.setText(str(exc))
            return []
        self._text.setTextFormat(Qt.TextFormat.MarkdownText)
        self.set_steps(steps)
        return steps

    def set_steps(self, steps: list[TourStep]) -> None:
        self._steps = list(steps)
        self._index = -1
        self._answered: set[int] = set()  #: steps whose question was answered (or skipped)
        self._show(0 if self._steps else -1)

    @property
    def steps(self) -> list[TourStep]:
        return list(self._steps)

    @property
    def index(self) -> int:
        """The current step (0-based); -1 when there are no steps."""
        return self._index

    @property
    def current_step(self) -> TourStep | None:
        return self._steps[self._index] if 0 <= self._index < len(self._steps) else None

    # -- navigation ---------------------------------------------------------------------------
    def start(self, index: int = 0) -> None:
        """Enter a step (default the first) and emit its signals."""
        self.go_to(index)

    def go_to(self, index: int) -> None:
        if not self._steps:
            return
        index = max(0, min(index, len(self._steps) - 1))
        self._show(index)
        step = self.current_step
        ask = (step is not None and step.question is not None and self.ask_check.isChecked()
               and index not in self._answered)  # coming back to a step does not ask again
        self.question.ask(step.question if ask else None)
        self.conceal.emit(list(step.question.hide) if self.question.asking else [])
        self._text.setVisible(not self.question.asking)  # the explanation comes with the answer
        if self.question.asking:  # Next first reveals the answer, even on the last step
            self.unhighlight.emit()  # the outline on the previous step's plot would mislead
            self.next_button.setEnabled(True)
        else:
            self._emit_step()

    @property
    def asking(self) -> bool:
        """The current step's question waits for an answer (its plot is not shown yet)."""
        return self.question.asking

    def answer(self, index: int) -> bool:
        """Answer the current step's question (index of a choice); the step then shows."""
        return self.question.answer(index)

    def show_result(self, snapshot: object) -> None:
        """A finished simulation: if it is this step's (same parameters), show what it measured
        for the question."""
        step = self.current_step
        if step is None or step.question is None or snapshot is None:
            return
        cfg = getattr(snapshot, "config", None)
        have = cfg.to_dict() if cfg is not None else {}
        same = all((list(have.get(k)) if isinstance(have.get(k), tuple) else have.get(k)) == v
                   for k, v in step.config.items())
        if same:
            self.question.show_measured(step.question.measured(snapshot))

    def _on_answered(self, _index: int) -> None:
        self.conceal.emit([])  # revealed: the covered plots show the answer now
        self._answered.add(self._index)
        self._text.setVisible(True)
        self.next_button.setEnabled(self._index < len(self._steps) - 1)
        self._emit_step()

    def next(self) -> None:
        """The next step; on a step still asking, Next (Right) first shows its answer and plot."""
        if self.question.asking:
            self.question.answer(SKIPPED)
        elif self._index < len(self._steps) - 1:
            self.go_to(self._index + 1)

    def back(self) -> None:
        if self._index > 0:
            self.go_to(self._index - 1)

    def leave(self) -> None:
        self.conceal.emit([])
        self.finished.emit()

    def event(self, event: QEvent) -> bool:
        """With the focus in the tour, Esc leaves the tour: claim the key before the window's
        Esc = Stop shortcut sees it (anywhere else Esc still stops the run)."""
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) \
                and event.key() == Qt.Key.Key_Escape and event.modifiers() == Qt.KeyboardModifier.NoModifier:
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        digit = getattr(key, "value", key) - Qt.Key.Key_1.value
        if self.question.asking and 0 <= digit < 9:
            self.question.answer(digit)
        elif event.key() == Qt.Key.Key_Right:
            self.next()
        elif event.key() == Qt.Key.Key_Left:
            self.back()
        elif event.key() == Qt.Key.Key_Escape:
            self.leave()
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    # -- view ---------------------------------------------------------------------------------
    def _show(self, index: int) -> None:
        self._index = index
        n = len(self._steps)
        step = self.current_step
        if step is None:
            self._counter.setText("")
            self._title.setText("No tour steps")
            self._text.setText("")
            self._plot_hint.setText("")
        else:
            self._counter.setText(f"Step {index + 1} of {n}")
            self._title.setText(step.title)
            self._text.setText(step.text)
            name = PLOT_NAMES.get(step.plot, step.plot)
            if step.plot == "sweep" and step.sweep_axis == "n_keys":
                name = "the sweep along n"
            hint = f"Look at: <b>{html.escape(name)}</b>"
            if step.inspector is not None:
                scores = step.inspector.scores_text
                extra = "".join(f", {OPTION_NAMES[k]} {v:g}"
                                for k, v in step.inspector.options.items())
                hint += (f'; then <a href="{INSPECTOR_LINK}">open the Score inspector</a> '
                         f"(scores {scores}, scale {step.inspector.scale:g}{extra})")
            self._plot_hint.setText(hint)
        self.back_button.setEnabled(step is not None and index > 0)
        self.next_button.setEnabled(step is not None and index < n - 1)

    def open_example(self) -> bool:
        """Ask the window to show this step's example in the Score inspector; False if none."""
        step = self.current_step
        if step is None or step.inspector is None:
            return False
        self.inspector_options.emit(dict(step.inspector.options))
        self.open_inspector.emit(list(step.inspector.scores), float(step.inspector.scale))
        return True

    def _on_link(self, href: str) -> None:
        if href == INSPECTOR_LINK:
            self.open_example()

    def follow_link(self, href: str) -> bool:
        """A link of the step's text: ``plot:ID`` outlines that plot (in presentation mode it
        shows it), ``step:WORD`` enters the step whose title contains WORD. False if unknown."""
        kind, _, target = href.partition(":")
        if kind == "plot" and target in PLOT_IDS:
            self.highlight.emit(target)
            return True
        found = find_step(self._steps, target) if kind == "step" and target else []
        if len(found) == 1:
            self.go_to(found[0])
            return True
        return False

    def _emit_step(self) -> None:
        step = self.current_step
        if step is None:
            return
        self.sweep_axis.emit(step.sweep_axis)
        self.apply_config.emit(dict(step.config))
        self.highlight.emit(step.plot)
        if step.inspector is not None:
            self.inspector_options.emit(dict(step.inspector.options))
            self.show_inspector.emit(list(step.inspector.scores), float(step.inspector.scale))
