"""Guards for the Qt runtime we pin: PySide6 6.12.0 aborts CPython 3.11 after ~1000
``Signal.emit()`` calls (bool_dealloc). This emits far more, across threads, as the pages do."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    item = Signal(object)
    flag = Signal(bool)


def test_10000_cross_thread_signal_emissions(qtbot) -> None:
    emitter = _Emitter()
    received = {"items": 0, "flags": 0}
    emitter.item.connect(lambda _x: received.__setitem__("items", received["items"] + 1))
    emitter.flag.connect(lambda _b: received.__setitem__("flags", received["flags"] + 1))
    n = 10_000

    def produce() -> None:
        for i in range(n):
            emitter.item.emit({"i": i})
            emitter.flag.emit(i % 2 == 0)

    thread = threading.Thread(target=produce)
    thread.start()
    qtbot.waitUntil(lambda: received["items"] == n and received["flags"] == n, timeout=60_000)
    thread.join()
    assert received == {"items": n, "flags": n}
