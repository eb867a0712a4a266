"""GUI responsiveness: time to first window, and event-loop lag while a large run streams.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_gui.py [--trials 200000] [--d-k 1024]

A 10 ms QTimer probe measures how late the event loop serves it while the window runs an explicit
simulation (and then the d_k sweep); lags are also printed as a ratio of the 33 ms frame budget.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["ATTENTION_LAB_SETTINGS"] = "memory"

FRAME_MS = 33.0
PROBE_MS = 10


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200_000)
    ap.add_argument("--d-k", type=int, default=1024)
    args = ap.parse_args()

    import numpy as np
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication([])
    from ui.main_window import MainWindow

    w = MainWindow(restore=False)
    w.show()
    app.processEvents()
    first_window = time.perf_counter() - T0
    torch_loaded = "torch" in sys.modules

    lags: list[float] = []
    last = [time.perf_counter()]

    def probe() -> None:
        now = time.perf_counter()
        lags.append(now - last[0] - PROBE_MS / 1000)
        last[0] = now

    timer = QTimer()
    timer.setInterval(PROBE_MS)
    timer.timeout.connect(probe)
    w.apply_config({"method": "explicit", "trials": args.trials, "d_k": args.d_k})
    timer.start()
    start = time.perf_counter()
    sim_s = None
    while time.perf_counter() - start < 900:
        app.processEvents()
        time.sleep(0.001)
        s = w.state
        if sim_s is None and s is not None and s.snapshot is not None and s.snapshot.done:
            sim_s = time.perf_counter() - start
        if s is not None and s.complete:
            break
    total = time.perf_counter() - start
    timer.stop()
    w.close()
    w.deleteLater()
    app.processEvents()

    lag = np.array(lags[5:]) * 1000
    print(f"time to first window: {first_window:.3f} s (torch imported: {torch_loaded})")
    print(f"run: explicit, d_k={args.d_k}, trials={args.trials:,}: simulation {sim_s or float('nan'):.1f} s, "
          f"with sweep {total:.1f} s, {w.redraw_count} redraw ticks")
    for name, v in (("median", np.median(lag)), ("p99", np.percentile(lag, 99)), ("max", lag.max())):
        print(f"event-loop lag {name}: {v:.1f} ms = {v / FRAME_MS:.2f} x the {FRAME_MS:.0f} ms frame")


if __name__ == "__main__":
    main()
