"""GUI responsiveness: time to first window, and event-loop lag while a large run streams.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_gui.py [--trials 200000] [--d-k 1024]
        [--rules 2|7] [--real-model] [--profile] [--sched] [--no-nice] [--settle S]

``--rules 7`` checks seven rules (a lecturer comparing today's controls; every panel then draws
seven curves and its header seven values) instead of the default two. ``--real-model`` then clicks
the Real model tab for the first time, with the probe still running, and prints that stall.

A 10 ms QTimer probe measures how late the event loop serves it while the window runs an explicit
simulation (and then the d_k sweep); lags are also printed as a ratio of the 33 ms frame budget.

``--profile`` also times every block the GUI thread runs for the live run (the redraw tick, each
panel's draw, each plot's paint, the results table, the hand-over of a snapshot) in wall and in
the thread's own CPU time, and prints the longest ones and what ran during the largest lags: on a
loaded machine a lag without a long block is the scheduler's (or the worker's GIL), not the GUI's.

``--sched`` (Linux) tells which: each probe interval late by more than a frame is split, from the
kernel's per-thread accounting, into the GUI thread's CPU, its wait for a CPU (the load) and its
sleep beyond the period (the GIL); ``bench/sched_split.py``. ``--no-nice`` leaves the worker at
the GUI thread's priority, as before ``ui/thread_priority.py``.
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
#: the rules checked by ``--rules``: the default pair, and seven (no rule that needs vectors:
#: the run stays on the same path, only the drawing grows)
RULE_SETS = {2: ("none", "sqrt"),
             7: ("none", "sqrt", "dk", "logn", "ssmax", "softcap", "sigmoid")}
PROBE_MS = 10
#: the last run's probes, (when served, lag s, GUI CPU s), for a script that imports this one
PROBES: list[tuple[float, float, float]] = []


class BlockTimer:
    """Wraps functions to record (start, wall s, cpu s, name) of each call (the GUI thread's
    blocks); nested blocks are kept too (a panel's draw inside the tick)."""

    def __init__(self) -> None:
        self.blocks: list[tuple[float, float, float, str]] = []

    def wrap(self, owner: type, attr: str, name: str | None = None) -> None:
        original = getattr(owner, attr)
        label = name or f"{owner.__name__}.{attr}"
        blocks = self.blocks

        def timed(*a, **k):
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return original(*a, **k)
            finally:
                who = label
                if attr in ("paintEvent", "draw", "refresh", "_settle_rest") and a:
                    panel = a[0] if attr != "paintEvent" else a[0].parentWidget()
                    who = f"{label}[{getattr(panel, 'plot_id', type(panel).__name__)}]"
                blocks.append((t0, time.perf_counter() - t0, time.thread_time() - c0, who))

        setattr(owner, attr, timed)

    def install(self) -> None:
        import pyqtgraph as pg

        from ui.pages.simulation.page import SimulationPage
        from ui.pages.simulation.results_table import ResultsTable
        from ui.plots import PANEL_CLASSES
        from ui.plots.base import PlotPanel
        from ui.window.run import WindowRun
        from ui.worker import Worker

        self.wrap(WindowRun, "tick")
        self.wrap(WindowRun, "_show_progress")
        self.wrap(Worker, "take_latest")
        self.wrap(SimulationPage, "redraw")
        self.wrap(ResultsTable, "show_snapshot")
        self.wrap(SimulationPage, "show_rules")
        self.wrap(PlotPanel, "refresh", "refresh")
        for cls in PANEL_CLASSES:
            self.wrap(cls, "draw", "draw")
            if "refresh" in vars(cls):  # its own (the sweep draws a change over several ticks)
                self.wrap(cls, "refresh", "refresh")
        self.wrap(pg.GraphicsView, "paintEvent", "paint")
        self.wrap(PlotPanel, "_settle_rest", "settle_rest")  # (a first draw's rest, a turn later)
        from ui.plots.sweep import SweepPanel
        self.wrap(SweepPanel, "make_items_ahead")

    def time_garbage_collections(self) -> None:
        """The collector's passes on the GUI thread as blocks too ("gc2" for a full one): a
        collection runs inside whatever allocated last, and its time showed as that block's."""
        import gc
        import threading

        gui = threading.get_ident()
        started: list[tuple[float, float]] = []

        def on_gc(phase: str, info: dict) -> None:
            if threading.get_ident() != gui:
                return
            if phase == "start":
                started.append((time.perf_counter(), time.thread_time()))
            elif started:
                t0, c0 = started.pop()
                self.blocks.append((t0, time.perf_counter() - t0, time.thread_time() - c0,
                                    f"gc{info['generation']}"))

        gc.callbacks.append(on_gc)

    def report(self, lags: list[tuple[float, float]], top: int = 12) -> None:
        import numpy as np

        for what, index in (("wall", 1), ("the thread's CPU", 2)):
            print(f"\nlongest GUI-thread blocks of {len(self.blocks)} by {what} time "
                  "(wall ms / CPU ms):")
            for _t0, wall, cpu, name in sorted(self.blocks, key=lambda b: -b[index])[:top]:
                print(f"  {wall * 1000:7.1f} / {cpu * 1000:6.1f}  {name}")
        by_name: dict[str, list[tuple[float, float]]] = {}
        for _t0, wall, cpu, name in self.blocks:
            by_name.setdefault(name.split("[")[0], []).append((wall * 1000, cpu * 1000))
        print("per kind (calls; wall ms median, p99, max; the thread's CPU ms p99, max):")
        for name, v in sorted(by_name.items(), key=lambda kv: -max(c for _w, c in kv[1])):
            w, c = np.array([a for a, _ in v]), np.array([b for _, b in v])
            print(f"  {name:28s} {len(v):6d} {np.median(w):7.2f} {np.percentile(w, 99):7.1f} "
                  f"{w.max():7.1f}   {np.percentile(c, 99):7.1f} {c.max():7.1f}")
        ticks = [b for b in self.blocks if b[3] in ("WindowRun.tick", "paint") or
                 b[3].startswith("paint[")]
        worst = max(ticks, key=lambda b: b[2])
        print(f"longest top-level GUI block in the thread's CPU time: {worst[2] * 1000:.1f} ms "
              f"({worst[3]}; {worst[1] * 1000:.1f} ms wall)")
        t_start = lags[0][0] if lags else 0.0
        for what, index in (("lags", 1), ("GUI CPU times between two probes", 2)):
            print(f"largest {what} and the blocks that ran then (ms wall/CPU):")
            for end, lag, cpu in sorted(lags, key=lambda x: -x[index])[:5]:
                start = end - lag - PROBE_MS / 1000
                inside = [b for b in self.blocks if b[0] < end and b[0] + b[1] > start]
                names = ", ".join(f"{b[3]} {b[1] * 1000:.0f}/{b[2] * 1000:.0f}" for b in
                                  sorted(inside, key=lambda b: -b[2])[:4])
                print(f"  at {end - t_start:6.1f} s: lag {lag * 1000:6.1f}, GUI CPU "
                      f"{cpu * 1000:5.1f}: {names or 'no timed block'}")


def host_steal_ticks() -> int | None:
    """The machine's CPU time taken by its host for other guests so far (/proc/stat's "steal",
    in clock ticks, usually 10 ms; None off Linux). A virtual machine counts a stolen stretch
    in its threads' own CPU time too, so a lag with "GUI CPU" in it can still be the host's."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8])
    except (OSError, IndexError, ValueError):
        return None


def _report_collections(blocks: list[tuple[float, float, float, str]],
                        probes: list[tuple[float, float, float]]) -> None:
    """The garbage collector's passes on the GUI thread while the run streamed, and the one
    (if any) inside the probe interval of the largest lag: a full collection (gc2) takes
    20-35 ms of that thread here, and falls wherever the allocations make it fall."""
    if not probes:
        return
    start, end = probes[0][0], probes[-1][0]
    passes = [b for b in blocks if b[3].startswith("gc") and start <= b[0] <= end]
    full = [b for b in passes if b[3] == "gc2"]
    worst_end, worst_lag, _cpu = max(probes, key=lambda p: p[1])
    inside = [b for b in passes
              if b[0] < worst_end and b[0] + b[1] > worst_end - worst_lag - PROBE_MS / 1000]
    print(f"garbage collections on the GUI thread during the run: {len(passes)}, of them "
          f"{len(full)} full (gc2) of {', '.join(f'{b[1] * 1000:.1f}' for b in full) or '-'} ms; "
          f"in the largest lag's interval: "
          f"{', '.join(f'{b[3]} {b[1] * 1000:.1f} ms' for b in inside) or 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200_000)
    ap.add_argument("--d-k", type=int, default=1024)
    ap.add_argument("--profile", action="store_true",
                    help="time the GUI thread's blocks and name the longest")
    ap.add_argument("--no-freeze", action="store_true",
                    help="leave the start-up objects to the garbage collector and its own "
                         "schedule (as before ui/heap.py): its full collections then stall the "
                         "loop mid-run, and may start inside a Qt call")
    ap.add_argument("--no-preimport", action="store_true",
                    help="leave the pages' modules to be imported when first opened (as "
                         "before ui/preimport.py)")
    ap.add_argument("--rules", type=int, choices=sorted(RULE_SETS), default=2,
                    help="how many rules are checked (default 2)")
    ap.add_argument("--sched", action="store_true",
                    help="split each late probe interval into the GUI thread's CPU, its wait "
                         "for a CPU (the load) and its sleep beyond the period (the GIL), from "
                         "/proc/self/task/*/schedstat (Linux)")
    ap.add_argument("--settle", type=float, default=0.0, metavar="S",
                    help="let the shown window's first full paint (all panels, ~55 ms of GUI "
                         "CPU in one event-loop turn) end, S seconds, before the run starts; by "
                         "default the run starts at once and its first probes hold that paint")
    ap.add_argument("--no-nice", action="store_true",
                    help="leave the worker thread at the GUI thread's priority (as before "
                         "ui/thread_priority.py)")
    ap.add_argument("--real-model", action="store_true",
                    help="after the run, click the Real model tab for the first time and print "
                         "the event loop's largest lag while it opens")
    args = ap.parse_args()
    if args.no_nice:
        import ui.worker

        ui.worker.lower_current_thread = lambda: False
    blocks = BlockTimer()
    blocks.time_garbage_collections()  # (in every run; the other blocks with --profile)
    profiler = blocks if args.profile else None
    if profiler is not None:
        profiler.install()

    import numpy as np
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication([])
    from ui.window.main_window import MainWindow

    w = MainWindow(restore=False)
    w.show()
    app.processEvents()
    if not args.no_freeze:  # as the app does once its window is up (ui/heap.py)
        from ui.heap import collect_at_safe_points, freeze_startup_objects

        freeze_startup_objects()
        collect_at_safe_points(app)  # (collections at the event loop's top level only)
    if not args.no_preimport:  # as the app does (ui/preimport.py)
        from ui.preimport import preimport_later

        preimport_later(idle=w.is_idle)
    first_window = time.perf_counter() - T0
    settle_end = time.perf_counter() + args.settle
    while time.perf_counter() < settle_end:
        app.processEvents()
        time.sleep(0.005)
    torch_loaded = "torch" in sys.modules

    lags: list[float] = []
    stamped = PROBES  #: (when served, lag, GUI CPU time)
    stamped.clear()
    #: the GUI thread's own CPU time between two probes: what it was busy with, whatever the
    #: machine's load (on a busy machine the wall lag also holds the time others had the CPU)
    busy: list[float] = []
    last = [time.perf_counter(), time.thread_time()]
    run_end_box = [1 << 62]  #: the probes after the run (the Real model tab) are not split
    split = None
    if args.sched:
        from bench.sched_split import SchedSplit, available

        split = SchedSplit() if available() else None

    steal: list[int | None] = []  #: the host's steal count at each probe

    def probe() -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        steal.append(host_steal_ticks())
        lags.append(now - last[0] - PROBE_MS / 1000)
        busy.append(cpu - last[1])
        stamped.append((now, lags[-1], busy[-1]))
        if split is not None and len(lags) <= run_end_box[0]:
            state = w.state
            split.sample(now, state.phase if state is not None else "")
        last[0], last[1] = now, cpu

    timer = QTimer()
    timer.setInterval(PROBE_MS)
    timer.timeout.connect(probe)
    w.apply_config({"method": "explicit", "trials": args.trials, "d_k": args.d_k,
                    "scalings": list(RULE_SETS[args.rules])})
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
    real_model = None
    run_end = len(lags)  # the run's probes; the Real model tab's come after
    run_end_box[0] = run_end
    if args.real_model:  # the first opening of the Real model tab, clicked, the probe running
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest

        index = next(i for i in range(w.tabs.count()) if w.tabs.tabText(i) == "Real model")
        bar = w.tabs.tabBar()
        from ui.preimport import is_imported

        imported = is_imported("ui.pages.real_model.page")  # (not half-way in the preimport)
        t_open, c_open = time.perf_counter(), time.thread_time()
        QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
        call_s, call_cpu = time.perf_counter() - t_open, time.thread_time() - c_open
        while "RealModelPage" not in w.pages and time.perf_counter() - t_open < 60:
            app.processEvents()
            time.sleep(0.001)
        built_s = time.perf_counter() - t_open
        while time.perf_counter() - t_open < built_s + 1.0:  # the probe's next turns
            app.processEvents()
            time.sleep(0.001)
        real_model = (call_s, max(lags[run_end:], default=float("nan")), call_cpu, built_s,
                      imported)
    timer.stop()
    w.close()
    w.deleteLater()
    app.processEvents()

    lag = np.array(lags[5:run_end]) * 1000
    print(f"time to first window: {first_window:.3f} s (torch imported: {torch_loaded})")
    print(f"rules checked: {len(RULE_SETS[args.rules])} ({', '.join(RULE_SETS[args.rules])}); "
          f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"run: explicit, d_k={args.d_k}, trials={args.trials:,}: simulation {sim_s or float('nan'):.1f} s, "
          f"with sweep {total:.1f} s, {w.redraw_count} redraw ticks "
          f"({w.redraw_timer.deferred} left to the next turn: their timer fired late)")
    for name, v in (("median", np.median(lag)), ("p99", np.percentile(lag, 99)), ("max", lag.max())):
        print(f"event-loop lag {name}: {v:.1f} ms = {v / FRAME_MS:.2f} x the {FRAME_MS:.0f} ms frame")
    worst = 5 + int(lag.argmax())  # when it was: in the simulation, or in the sweep after it
    print(f"the max lag came {stamped[worst][0] - start:.2f} s into the run "
          f"({'in the simulation' if sim_s is None or stamped[worst][0] - start < sim_s else 'in the sweep'})")
    cpu = np.array(busy[5:run_end]) * 1000
    print(f"GUI thread busy between two probes (its own CPU time; the lag a quiet machine would "
          f"show): p99 {np.percentile(cpu, 99):.1f} ms, max {cpu.max():.1f} ms = "
          f"{cpu.max() / FRAME_MS:.2f} x the frame; intervals over 50 ms: {(cpu > 50).sum()}")
    _report_collections(blocks.blocks, stamped[5:run_end])
    if steal and steal[0] is not None and steal[run_end - 1] is not None:
        print(f"the host took {steal[run_end - 1] - steal[0]} clock ticks (~10 ms each) of this "
              f"machine's CPUs during the run, {steal[worst] - steal[worst - 1]} of them in the "
              "largest lag's interval (a run with many is not a quiet one)")
    if real_model is not None:
        print(f"Real model tab, first opening (clicked; its module "
              f"{'was' if real_model[4] else 'was not'} imported before): the click took "
              f"{real_model[0] * 1000:.0f} ms ({real_model[2] * 1000:.0f} ms of the GUI thread's "
              f"CPU), the page was there after {real_model[3] * 1000:.0f} ms; largest event-loop "
              f"lag from the click to 1 s after {real_model[1] * 1000:.1f} ms")
    if split is not None:
        split.report(PROBE_MS / 1000, FRAME_MS)
    if profiler is not None:
        profiler.report(stamped[5:])


if __name__ == "__main__":
    main()
