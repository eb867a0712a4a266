"""A tour step's question, asked before the step shows its plot: the question, a button per
choice, then (once answered or skipped) which choice was right, why, and the value the step's
own simulation measured."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from ui.pages.tour.steps import Question
from ui.theme import current_theme

SKIPPED = -1  #: "just show me": no choice made
COLUMNS = 2  #: choice buttons per row


class QuestionBox(QWidget):
    """Hidden for a step without a question."""

    answered = Signal(int)  #: the chosen index, or SKIPPED

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tourQuestion")
        self.question: Question | None = None
        self.chosen: int | None = None  #: None while asking
        self.measured: tuple[float, float] | None = None
        self.prompt = QLabel()
        self.prompt.setObjectName("tourQuestionText")
        self.prompt.setWordWrap(True)
        self.prompt.setTextFormat(Qt.TextFormat.PlainText)
        font = self.prompt.font()
        font.setBold(True)
        self.prompt.setFont(font)
        #: the choices in two columns: a row of four long labels would widen the tour's dock
        #: (and squeeze the plots, worst in presentation mode's larger text)
        self._row = QGridLayout()
        self._row.setSpacing(4)
        self.buttons: list[QPushButton] = []
        self.result = QLabel()
        self.result.setObjectName("tourAnswer")
        self.result.setWordWrap(True)
        self.result.setTextFormat(Qt.TextFormat.RichText)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.addWidget(self.prompt)
        layout.addLayout(self._row)
        layout.addWidget(self.result)
        self.hide()

    @property
    def asking(self) -> bool:
        return self.question is not None and self.chosen is None

    def ask(self, question: Question | None) -> None:
        """Show ``question`` with its choices (None: hide the box)."""
        self.question, self.chosen, self.measured = question, None, None
        for b in self.buttons:
            self._row.removeWidget(b)
            b.hide()  # at once: deleteLater waits for the event loop
            b.deleteLater()
        self.buttons = []
        if question is None:
            self.hide()
            return
        self.prompt.setText(question.ask)
        for i, choice in enumerate(question.choices):
            b = QPushButton(f"{i + 1}: {choice.label}")
            b.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the keys stay with the tour
            b.setToolTip(f"Answer {choice.label} (key {i + 1})")
            b.clicked.connect(lambda _c=False, k=i: self.answer(k))
            self._row.addWidget(b, i // COLUMNS, i % COLUMNS)
            self.buttons.append(b)
        self.result.setText("Choose an answer to see the plot (or press Right / Next to just "
                            "see it).")
        self.show()

    def answer(self, index: int) -> bool:
        """Choose ``index`` (or SKIPPED); False if nothing is being asked or no such choice."""
        q = self.question
        if q is None or self.chosen is not None or not (index == SKIPPED or 0 <= index < len(q.choices)):
            return False
        self.chosen = index
        for i, b in enumerate(self.buttons):
            b.setEnabled(False)
            if i == q.answer:
                b.setText(f"✔ {i + 1}: {q.choices[i].label}")
        self._render()
        self.answered.emit(index)
        return True

    def show_measured(self, value: tuple[float, float] | None) -> None:
        self.measured = value
        if self.chosen is not None:
            self._render()

    def _render(self) -> None:
        q = self.question
        if q is None or self.chosen is None:
            return
        theme = current_theme()
        # the choice's number and its value: "The answer: 1" read as choice 1 (0.05)
        right = html.escape(q.choice_text(q.answer))
        if self.chosen == SKIPPED:
            verdict = f"The answer: <b>{right}</b>."
        elif self.chosen == q.answer:
            verdict = f"✔ Right: <b>{right}</b>."
        else:
            verdict = (f"<span style='color:{theme.error}'>✖ Not quite</span>: it is "
                       f"<b>{right}</b> (you chose {html.escape(q.choice_text(self.chosen))}).")
        parts = [verdict]
        if q.explain:
            parts.append(html.escape(q.explain))
        if self.measured is not None:
            mean, se = self.measured
            parts.append(f"Measured in this run: <b>{mean:.3g}</b> ± {1.96 * se:.2g} (95 %).")
        self.result.setText(" ".join(parts))
