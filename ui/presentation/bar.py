"""Presentation mode's compact parameter bar: the few parameters a lecture changes (d_k, n, the
rules, trials) on one line above the plots, instead of the full parameter panel; the plot being
shown with ◀ ▶ to step through the plots (or the tour's steps), and Play."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QSpinBox, QToolBar, QToolButton, QWidget

from engine.config import D_K_MAX, N_KEYS_MAX, RULES, TRIALS_MAX
from ui.theme import ERROR_TEXT_BOLD, Theme, current_theme, rule_text_color, themed_css

#: (field, label, lowest, highest) of the bar's number fields
FIELDS = (("d_k", "d_k", 1, D_K_MAX), ("n_keys", "n", 2, N_KEYS_MAX),
          ("trials", "trials", 1, TRIALS_MAX))
#: rows of rule chips (every rule in view at 1280 px, none in the bar's » menu)
RULE_ROWS = 3


class ParamBar(QToolBar):
    """Emits ``edited`` with a partial config when the user changes a field; ``sync`` shows the
    window's current values (never emitting)."""

    edited = Signal(dict)
    step_requested = Signal(int)  #: ◀ (-1) or ▶ (+1)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Presentation parameters", parent)
        self.setObjectName("presentation_bar")
        self.setMovable(False)
        self.setFloatable(False)
        #: shown only in presentation mode: a window state saved in that mode (restoreState) or
        #: the tool bars' context menu must not bring it back outside it
        self.allowed = False
        self.toggleViewAction().setVisible(False)
        self.spins: dict[str, QSpinBox] = {}
        for field, label, lo, hi in FIELDS:
            self.addWidget(QLabel(f" {label} "))
            spin = QSpinBox(self)
            spin.setObjectName(f"bar_{field}")
            spin.setRange(lo, hi)
            spin.setKeyboardTracking(False)  # one rerun per typed value, not per digit
            spin.setAccelerated(True)
            spin.valueChanged.connect(lambda v, f=field: self.edited.emit({f: int(v)}))
            self.addWidget(spin)
            self.spins[field] = spin
        # the plot navigation before the rule chips; the chips in RULE_ROWS rows (twelve in one row
        # made the bar wider than a 1280 px window and the newest rules fell into its » menu)
        self.addSeparator()
        self.prev_button = self._button("◀", "Previous plot, or the tour's previous step (Left)",
                                        lambda: self.step_requested.emit(-1))
        self.plot_label = QLabel("")
        self.plot_label.setObjectName("bar_plot")
        self.addWidget(self.plot_label)
        self.next_button = self._button("▶", "Next plot, or the tour's next step (Right)",
                                        lambda: self.step_requested.emit(1))
        self.addSeparator()
        self.rule_buttons = self._add_rules()
        #: "⚠ not run: plots show d_k 65,536, n 8" while they do: first in the bar, beside the
        #: fields (at the end, a full bar at 1280 px put it out of sight)
        self.outdated_label = QLabel("")
        self.outdated_label.setObjectName("bar_outdated")
        self._outdated_action = self.insertWidget(self.actions()[0], self.outdated_label)
        self._outdated_action.setVisible(False)
        self.apply_theme(current_theme())

    def set_outdated(self, text: str | None) -> None:
        """Say in the bar that the plots do not show the parameters set now (None: they do)."""
        self._outdated_action.setVisible(text is not None)
        short = text.split(" (")[0] + text[text.find("):") + 1:] if text and "):" in text else text
        self.outdated_label.setText(f" ⚠ {short} " if short else "")  # the reason: its tooltip
        self.outdated_label.setToolTip(text or "")
        self._colour_outdated()
        self.outdated_label.setVisible(text is not None)  # (restyled, it showed itself again)

    def _colour_outdated(self) -> None:
        themed_css(self.outdated_label, ERROR_TEXT_BOLD)

    def apply_theme(self, theme: Theme) -> None:
        """The rule chips in this theme: each rule's text colour on the theme's button when
        checked, the theme's quiet text when not (fixed colours kept the old theme's chips)."""
        for rule, b in self.rule_buttons.items():
            b.setStyleSheet(
                f"QToolButton {{ color: {rule_text_color(rule, theme)}; font-weight: bold; "
                f"background-color: {theme.button}; border: 1px solid {theme.muted}; "
                "border-radius: 3px; padding: 0px 1px; }"
                f"QToolButton:!checked {{ color: {theme.muted}; font-weight: normal; "
                "background-color: transparent; border: 1px solid transparent; }")

    def setVisible(self, visible: bool) -> None:  # Qt's name: show(), hide() and restoreState()
        super().setVisible(visible and self.allowed)

    def _button(self, text: str, tip: str, slot: Any) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        b.clicked.connect(slot)
        self.addWidget(b)
        return b

    def _add_rules(self) -> dict[str, QToolButton]:
        """Every rule's chip, in RULE_ROWS rows of one box (one item of the bar)."""
        box = QWidget(self)
        box.setObjectName("bar_rules")
        grid = QGridLayout(box)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(2)
        grid.setVerticalSpacing(1)
        per_row = -(-len(RULES) // RULE_ROWS)
        buttons = {}
        for i, rule in enumerate(RULES):
            b = QToolButton(box)
            b.setObjectName(f"bar_rule_{rule}")
            b.setText(rule)
            b.setCheckable(True)
            b.setToolTip(f"Show the {rule} rule")
            b.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            b.toggled.connect(lambda _on: self._rules_edited())
            grid.addWidget(b, i // per_row, i % per_row)
            buttons[rule] = b
        self.addWidget(box)
        return buttons

    def _rules_edited(self) -> None:
        rules = [r for r, b in self.rule_buttons.items() if b.isChecked()]
        if rules:
            self.edited.emit({"scalings": rules})
        else:  # at least one rule: undo the last uncheck
            self.sync({"scalings": [next(iter(self.rule_buttons))]})

    def sync(self, values: dict[str, Any]) -> None:
        """Show ``values`` (the window's parameters) without emitting ``edited``; a field being
        typed into keeps what the user is typing."""
        for field, spin in self.spins.items():
            if field in values and not spin.hasFocus() and spin.value() != values[field]:
                spin.blockSignals(True)
                spin.setValue(int(values[field]))
                spin.blockSignals(False)
        if "scalings" in values:
            chosen = set(values["scalings"])
            for rule, b in self.rule_buttons.items():
                b.blockSignals(True)
                b.setChecked(rule in chosen)
                b.blockSignals(False)

    def values(self) -> dict[str, Any]:
        return {**{f: s.value() for f, s in self.spins.items()},
                "scalings": [r for r, b in self.rule_buttons.items() if b.isChecked()]}
