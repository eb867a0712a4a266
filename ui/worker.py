"""Run any engine generator off the GUI thread and keep only its latest item.

The producer thread runs at a lower priority than the GUI thread (ui/thread_priority.py) and
writes each yielded item into one shared slot (a lock and a sequence number);
nothing is queued and no Qt signal is emitted per item. The GUI side reads the slot on its own
timer with :meth:`Worker.take_latest`, so a fast generator costs the GUI at most one redraw per
tick. Only the end of a run (finished / error / cancelled) is announced with a signal, emitted from
the GUI thread by a small poll timer, so no signal ever crosses threads.

Usage (also by the Training and Real-model pages)::

    worker = Worker(parent)
    worker.start(lambda cancelled: engine.simulate.simulate(cfg, cancelled))
    ...
    got = worker.take_latest()       # None, or Latest(generation, seq, item, done)
    worker.stop()                    # cancel now; the engine sees it between chunks

A new ``start`` cancels the previous run; items from an older generation are never returned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from engine.errors import Cancelled
from ui.thread_priority import lower_current_thread

GeneratorFactory = Callable[[Callable[[], bool]], Iterable[Any]]


@dataclass(frozen=True)
class Latest:
    generation: int
    seq: int  #: how many items this generation has produced so far
    item: Any
    done: bool  #: the generator is exhausted (this is its final item)


class _Run:
    """One generation: its thread, cancel flag and outcome (written by the thread, under lock)."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.cancel = threading.Event()
        self.thread: threading.Thread | None = None
        self.outcome: str | None = None  # "finished" | "cancelled" | "error"
        self.error: BaseException | None = None
        self.reported = False
        self.started = time.perf_counter()


class Worker(QObject):
    #: generation; the generator ran to its end (its last item is in the slot)
    finished = Signal(int)
    #: generation, the exception (e.g. ConfigError); the run is over
    error = Signal(int, object)
    #: generation; stop() or a newer start() ended it early
    cancelled = Signal(int)

    def __init__(self, parent: QObject | None = None, poll_ms: int = 30) -> None:
        super().__init__(parent)
        self._lock = threading.Lock()
        self._generation = 0
        self._run: _Run | None = None
        self._old: list[_Run] = []
        self._slot: Latest | None = None
        self._taken_seq = -1
        self._taken_gen = -1
        #: items produced by all runs (the soak test counts them)
        self.produced = 0
        self._poll = QTimer(self)
        self._poll.setInterval(poll_ms)
        self._poll.timeout.connect(self._check_outcome)

    # -- control (GUI thread) ------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._generation

    def is_running(self) -> bool:
        run = self._run
        return run is not None and run.outcome is None

    def start(self, factory: GeneratorFactory) -> int:
        """Cancel any current run and start ``factory(cancelled)`` in a new thread; returns the
        new generation id."""
        self._cancel_current()
        with self._lock:
            self._generation += 1
            gen = self._generation
            self._slot = None
        run = _Run(gen)
        self._run = run
        run.thread = threading.Thread(target=self._produce, args=(run, factory),
                                      name=f"lab-worker-{gen}", daemon=True)
        run.thread.start()
        self._poll.start()
        return gen

    def stop(self, wait: float = 0.0) -> None:
        """Cancel the current run at once (the generator sees it at its next check); optionally
        wait up to ``wait`` seconds for its thread to end."""
        run = self._run
        self._cancel_current()
        if wait > 0:
            self.join(wait)
        if run is not None:
            self._check_outcome()

    def join(self, timeout: float = 5.0) -> bool:
        """Wait for every thread this worker started; True if all ended."""
        deadline = time.monotonic() + timeout
        for run in [*self._old, *([self._run] if self._run else [])]:
            if run.thread is not None:
                run.thread.join(max(0.0, deadline - time.monotonic()))
        self._old = [r for r in self._old if r.thread is not None and r.thread.is_alive()]
        return all(not (r.thread and r.thread.is_alive())
                   for r in [*self._old, *([self._run] if self._run else [])])

    def take_latest(self) -> Latest | None:
        """The newest item of the current generation if it was not taken yet, else None."""
        with self._lock:
            slot = self._slot
            if slot is None or slot.generation != self._generation:
                return None
            if slot.generation == self._taken_gen and slot.seq == self._taken_seq:
                return None
            self._taken_gen, self._taken_seq = slot.generation, slot.seq
            return slot

    def peek_latest(self) -> Latest | None:
        with self._lock:
            return self._slot

    def elapsed(self) -> float:
        return time.perf_counter() - self._run.started if self._run else 0.0

    # -- internals -----------------------------------------------------------------------------
    def _cancel_current(self) -> None:
        run = self._run
        if run is not None and run.outcome is None:
            run.cancel.set()
            self._old.append(run)
        self._old = [r for r in self._old if r.thread is not None and r.thread.is_alive()]

    def _produce(self, run: _Run, factory: GeneratorFactory) -> None:
        lower_current_thread()  # the GUI thread first whenever both want a CPU
        seq = 0
        outcome, err = "finished", None
        try:
            last, have = None, False
            for item in factory(run.cancel.is_set):
                if run.cancel.is_set():
                    raise Cancelled
                seq += 1
                self._publish(run, seq, item, False)
                last, have = item, True
            if have and not run.cancel.is_set():
                # the same final item again, marked done (the consumer may draw it twice)
                self._publish(run, seq + 1, last, True)
        except Cancelled:
            outcome = "cancelled"
        except Exception as exc:
            outcome, err = "error", exc
        if run.cancel.is_set() and outcome == "finished":
            outcome = "cancelled"
        run.error = err
        run.outcome = outcome

    def _publish(self, run: _Run, seq: int, item: Any, done: bool) -> None:
        with self._lock:
            self.produced += 1
            if run.generation == self._generation and not run.cancel.is_set():
                self._slot = Latest(run.generation, seq, item, done)

    def _check_outcome(self) -> None:
        run = self._run
        if run is None or run.outcome is None or run.reported:
            return
        run.reported = True
        self._poll.stop()
        if run.outcome == "finished":
            self.finished.emit(run.generation)
        elif run.outcome == "error":
            self.error.emit(run.generation, run.error)
        else:
            self.cancelled.emit(run.generation)
