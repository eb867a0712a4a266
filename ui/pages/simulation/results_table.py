"""The numbers behind the plots, per rule, each with its standard error; copyable as text or CSV.

The CSV is exactly the engine's ``summary_rows()`` (the columns of summary.csv).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtGui import QColor, QIcon, QKeySequence, QPixmap, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.io import csv_text
from engine.simulate import RuleResult, SimulationSnapshot
from engine.stats import Estimate
from ui.theme import rule_color

#: (header, tooltip, getter) per column after the rule name
COLUMNS: tuple[tuple[str, str, Callable[[RuleResult], Estimate]], ...] = (
    ("logit var", "Variance of the logits the softmax sees (pooled over keys)", lambda r: r.logit_var),
    ("logit std", "Standard deviation of the logits (pooled over keys and rows)", lambda r: r.logit_std),
    ("row std", "Within-row standard deviation of the logits: the spread the softmax sees. A shift "
     "shared by a whole row (a key mean times sum(q)) inflates the pooled variance but cancels "
     "here and in the softmax; a query mean does not cancel", lambda r: r.logit_row_std),
    ("top weight", "Mean of the largest softmax weight per row", lambda r: r.top_weight),
    ("saturated", "Fraction of rows whose top weight exceeds the threshold", lambda r: r.saturated_frac),
    ("H / log n", "Mean attention entropy divided by its ceiling log(n)", lambda r: r.entropy_norm),
    ("‖J‖_F", "Mean Frobenius norm of the softmax Jacobian per row", lambda r: r.jacobian_fro),
    ("max |J_ij|", "Mean largest Jacobian entry per row (at most 0.25)", lambda r: r.jacobian_max_abs),
    ("Σ p_i", "Mean sum of the key weights: 1 for a softmax, below 1 with a sink, any value for "
              "sigmoid attention", lambda r: r.key_mass),
    ("sink", "Mean weight on the sink (the sink rule; 0 for the others)", lambda r: r.sink_weight),
)


#: while one configuration's run streams, the table shows a new snapshot at most this often (a
#: timer shows the latest): rebuilt with every snapshot (~30 a second, more than anyone reads)
#: it was 2-4 ms of each redraw tick beside the panel drawn there (bench/bench_gui.py --rules 7
#: --profile); a final snapshot, or another configuration's, is shown at once
LIVE_MIN_S = 0.25


def fmt(e: Estimate, trials: int = 2) -> str:
    """Mean ± one standard error; with one trial there is no standard error: "n/a"."""
    if trials < 2:
        return f"{e.mean:.4g} ± n/a"
    return f"{e.mean:.4g} ± {e.se:.2g}"


def _swatch(colour: str, size: int = 12) -> QIcon:
    pix = QPixmap(size, size)
    pix.fill(QColor(colour))
    return QIcon(pix)


class ResultsTable(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("results_table")
        self.snapshot: SimulationSnapshot | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        head = QHBoxLayout()
        self.caption = QLabel("<b>Results</b> mean ± 1 SE")
        self.caption.setWordWrap(True)  # the grid cell may be narrow (e.g. with the tour open)
        self.caption.setToolTip("± here is one standard error of the Monte-Carlo mean (n/a with one "
                                "trial); the plots' bands and the sweep read-out are ± 1.96 SE, a "
                                "95% interval")
        head.addWidget(self.caption, 1)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the table as tab-separated text")
        self.copy_button.clicked.connect(self.copy_text)
        self.csv_button = QPushButton("CSV")
        self.csv_button.setToolTip("Copy the full results as CSV (the columns of summary.csv)")
        self.csv_button.clicked.connect(self.copy_csv)
        head.addWidget(self.copy_button)
        head.addWidget(self.csv_button)
        layout.addLayout(head)
        self.raw_label = QLabel("")
        self.raw_label.setWordWrap(True)
        font = self.raw_label.font()
        font.setPointSizeF(font.pointSizeF() * 0.9)
        self.raw_label.setFont(font)
        layout.addWidget(self.raw_label)
        # one row per measure, one column per rule: narrow enough for the grid cell
        self.table = QTableWidget(len(COLUMNS), 1, self)
        self.table.setHorizontalHeaderLabels(["measure"])
        for row, (name, tip, _) in enumerate(COLUMNS):
            item = QTableWidgetItem(name)
            item.setToolTip(tip)
            self.table.setItem(row, 0, item)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setHighlightSections(False)  # keep the rule colours readable
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setToolTip("Per-rule results; Ctrl+C copies the selection")
        # the table scrolls rather than making its row of plots taller (the page must fit 1280x720)
        self.table.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Ignored)
        self.table.setMinimumHeight(60)
        layout.addWidget(self.table, 1)
        QShortcut(QKeySequence.StandardKey.Copy, self.table, activated=self.copy_text).setWhatsThis(
            "copy the selected results (results table)")
        self._shown: int | None = None
        self._shown_at = -LIVE_MIN_S
        self._columns: tuple[str, ...] = ()  #: the rules whose columns (and items) exist
        self._pending: SimulationSnapshot | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._show_pending)

    def show_snapshot(self, snap: SimulationSnapshot | None) -> None:
        """Show ``snap``: at once if it ends a run or starts another configuration, else at most
        every LIVE_MIN_S (the latest one waiting for a timer)."""
        if snap is None or id(snap) == self._shown:
            return
        wait = LIVE_MIN_S - (time.perf_counter() - self._shown_at)
        shown = self.snapshot
        if (not snap.done and shown is not None and not shown.done
                and snap.config == shown.config and wait > 0):
            self._pending = snap
            if not self._timer.isActive():
                self._timer.start(max(1, round(wait * 1000)))
            return
        self._show(snap)

    def _show_pending(self) -> None:
        snap, self._pending = self._pending, None
        if snap is not None and id(snap) != self._shown:
            self._show(snap)

    def _show(self, snap: SimulationSnapshot) -> None:
        self._timer.stop()
        self._pending = None
        self._shown, self._shown_at = id(snap), time.perf_counter()
        self.snapshot = snap
        c = snap.config
        self.raw_label.setText(
            f"raw q·k (d_k={c.d_k}, n={c.n_keys}, {snap.trials_done:,} trials): mean "
            f"{fmt(snap.raw_mean, snap.trials_done)}, var {fmt(snap.raw_var, snap.trials_done)} "
            f"(theory {snap.raw_theory.var:.4g}); within rows var "
            f"{fmt(snap.raw_row_var, snap.trials_done)}")
        rules = list(snap.rules.items())
        names = tuple(snap.rules)
        if names != self._columns:  # the columns and their items, made once per rule set
            self._columns = names
            self.table.setColumnCount(len(rules) + 1)
            for col, name in enumerate(names, start=1):
                # the theme's text colour (rule blue on the dark header was unreadable) beside a
                # swatch of the rule's colour
                head = QTableWidgetItem(name)
                head.setIcon(_swatch(rule_color(name)))
                self.table.setHorizontalHeaderItem(col, head)
                for row in range(len(COLUMNS)):
                    self.table.setItem(row, col, QTableWidgetItem())
        for col, (_name, r) in enumerate(rules, start=1):
            for row, (_, _, get) in enumerate(COLUMNS):
                self.table.item(row, col).setText(fmt(get(r), snap.trials_done))
        self.table.resizeColumnsToContents()

    def as_text(self) -> str:
        """Tab-separated: header row (measure, rules), then one row per measure (what Copy puts
        on the clipboard)."""
        lines = ["\t".join(self.table.horizontalHeaderItem(i).text()
                           for i in range(self.table.columnCount()))]
        for row in range(self.table.rowCount()):
            lines.append("\t".join(self.table.item(row, col).text() if self.table.item(row, col) else ""
                                   for col in range(self.table.columnCount())))
        return "\n".join(lines) + "\n"

    def as_csv(self) -> str:
        return csv_text(self.snapshot.summary_rows()) if self.snapshot is not None else ""

    def copy_text(self) -> None:
        QApplication.clipboard().setText(self.as_text())

    def copy_csv(self) -> None:
        QApplication.clipboard().setText(self.as_csv())
