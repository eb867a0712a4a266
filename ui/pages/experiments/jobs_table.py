"""The per-job status list: pending, running, done (final loss per rule, seconds) or failed (the
error). Rows are updated only when a job's status changes."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QTableWidgetItem, QWidget

from ui.theme import current_theme

#: rows listed at most (a bigger grid lists its first jobs; the progress bar counts them all)
ROWS_MAX = 2000
#: status -> text colour; "failed" takes the current theme's error red (ui.theme.current_theme)
COLORS = {"pending": "#7F7F7F", "running": "#0072B2", "done": "#009E73", "resumed": "#009E73"}
#: the detail column holds a different thing per status: say each
DETAIL_HEADER = "running: steps done · done: seconds, final loss per rule · failed: the error"
#: characters of a running job's text progress bar
BAR_WIDTH = 12


def progress_text(fraction: float, width: int = BAR_WIDTH) -> str:
    """A text progress bar: "██████░░░░░░  37 %"."""
    full = round(fraction * width)
    return "█" * full + "░" * (width - full) + f" {100 * fraction:3.0f} %"


def job_statuses(spec: Any, progress: Any, running_now: bool) -> list[tuple[str, str]]:
    """(status, detail) per job of the grid from the latest progress (None: all pending). A job
    that reports its step progress is running (with its bar); the pool takes jobs in grid
    order, so the other running ones are the first unfinished ones."""
    jobs = spec.jobs()
    by_key = {r["key"]: r for r in progress.results} if progress is not None else {}
    steps = dict(getattr(progress, "job_progress", None) or {}) if running_now else {}
    # (a process pool hands one job more than it has workers to its queue: that one waits)
    running = min(progress.running, progress.workers) if (progress is not None and running_now) \
        else 0
    running -= sum(1 for j in jobs if j.index in steps and j.key not in by_key)
    out = []
    for job in jobs:
        res = by_key.get(job.key)
        if res is None and job.index in steps:
            out.append(("running", progress_text(steps[job.index])))
        elif res is None:
            if running > 0:
                out.append(("running", ""))
                running -= 1
            else:
                out.append(("pending", ""))
        elif res.get("error"):
            out.append(("failed", str(res["error"])))
        else:
            losses = ", ".join(f"{rule} {r['final_loss']:.3g}" if r.get("final_loss") is not None
                               else f"{rule} diverged" for rule, r in res["rules"].items())
            out.append(("done", f"{res['seconds']:.1f} s · {losses}"))
    return out


class JobTable(QTableWidget):
    """One row per job: index, axis values, status, detail."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 4, parent)
        # the detail column's header is its name, what it holds per status on hover: the whole
        # sentence was cut at both ends in a 1280x720 window ("done: seconds, final loss per")
        self.setHorizontalHeaderLabels(["job", "values", "status", "detail"])
        self.horizontalHeaderItem(3).setToolTip(DETAIL_HEADER)
        self.setWordWrap(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().hide()
        self.horizontalHeader().setStretchLastSection(True)
        self._shown: list[tuple[str, str]] = []

    def set_spec(self, spec: Any) -> None:
        jobs = spec.jobs()[:ROWS_MAX]
        self.setRowCount(len(jobs))
        for i, job in enumerate(jobs):
            self.setItem(i, 0, QTableWidgetItem(str(job.index)))
            self.setItem(i, 1, QTableWidgetItem(job.key))
            self.setItem(i, 2, QTableWidgetItem("pending"))
            self.setItem(i, 3, QTableWidgetItem(""))
        self._shown = [("pending", "")] * len(jobs)
        self.resizeColumnToContents(0)
        self.resizeColumnToContents(1)

    def set_statuses(self, statuses: list[tuple[str, str]]) -> int:
        """Update the rows that changed; returns how many did."""
        changed = 0
        for i, (status, detail) in enumerate(statuses[:len(self._shown)]):
            if self._shown[i] == (status, detail):
                continue
            self._shown[i] = (status, detail)
            item = self.item(i, 2)
            item.setText(status)
            item.setForeground(QColor(current_theme().error if status == "failed"
                                     else COLORS.get(status, "#202020")))
            self.item(i, 3).setText(detail)
            self.item(i, 3).setToolTip(detail)
            changed += 1
        return changed

    def status(self, index: int) -> str:
        return self._shown[index][0] if index < len(self._shown) else ""
