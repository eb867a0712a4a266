"""The redraw timer: ~30 Hz, but never a redraw right behind another long block of the GUI
thread.

Qt fires the timers that fell due while the thread was busy in the order they fell due. A
redraw tick that fell due during a long paint (a panel's, 10-20 ms with seven rules) therefore
ran before the input and the timers that fell due a few ms after it, and they waited for the
paint and the tick together: one way two long blocks ran back to back in ``bench/bench_gui.py
--rules 7`` (lags of 40-48 ms, with 31-42 ms of the GUI thread's own CPU time between two
probes; tests/ui/test_paced_timer.py shows the order with and without the pacing).

A :class:`PacedTimer` that fires late (the thread was busy up to now) runs its work in the
event loop's next turn instead, after what fell due meanwhile; on time, it runs it at once.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt, QTimer, Signal

#: a tick later than this (ms) found the thread busy up to now: its work waits a turn. Above a
#: coarse timer's slack (5 % of 33 ms) and the event loop's own jitter (~1 ms)
LATE_MS = 3.0
#: "the event loop's next turn" (here and in ui.plots): a timer of 1 ms, served after the timers
#: already due. Not a 0 ms single shot, which Qt delivers as a posted event: with it a panel's
#: released paint still fell in its refresh's probe interval (bench_gui --rules 7 --profile: max
#: lag 61 and 71 ms in two runs, 42 and 48 ms with 1 ms)
TURN_MS = 1


class PacedTimer(QTimer):
    """A periodic QTimer whose ``paced_timeout`` (connect the work to it) is emitted with its
    ``timeout`` when on time, and in the next turn when late (once: a firing while one waits
    adds nothing). Stopped, a waiting emission is dropped. A signal, not a stored callable: a
    bound method held here kept its page's Python object alive after Qt deleted the page."""

    paced_timeout = Signal()

    def __init__(self, interval_ms: int, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setTimerType(Qt.TimerType.PreciseTimer)  # (its lateness is then the loop's)
        self.setInterval(interval_ms)
        self._due: float | None = None  #: when the next firing is due (perf_counter s)
        self._waiting = False  #: a late firing's work waits for the next turn
        self.deferred = 0  #: firings whose work waited a turn (for tests and benchmarks)
        self.timeout.connect(self._fired)

    def start(self, *args: int) -> None:  # Qt's name
        super().start(*args)
        self._due = time.perf_counter() + self.interval() / 1000

    def lateness_ms(self, now: float) -> float:
        """How late a firing at ``now`` is (0 before the first start)."""
        return 0.0 if self._due is None else (now - self._due) * 1000

    def _fired(self) -> None:
        now = time.perf_counter()
        late = self.lateness_ms(now)
        # Qt's next due time for a precise timer: one interval on, or one interval from now
        # when that is already past
        step = self.interval() / 1000
        due = (self._due if self._due is not None else now) + step
        self._due = due if due > now else now + step
        if late <= LATE_MS:
            self.paced_timeout.emit()
            return
        if not self._waiting:
            self._waiting = True
            self.deferred += 1
            QTimer.singleShot(TURN_MS, self, self._work_now)

    def _work_now(self) -> None:
        self._waiting = False
        if self.isActive():
            self.paced_timeout.emit()
