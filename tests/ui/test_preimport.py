"""The pages not built yet are imported in a background thread after start-up (the first opening
of the Real model tab froze the window while its modules were imported)."""

from __future__ import annotations

import sys
import threading

from ui.preimport import PREIMPORT, preimport_later


def _modules(tmp_path, monkeypatch, **sources: str) -> None:
    """Fresh importable modules (name=source), none of them imported yet."""
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_modules_are_imported_off_the_gui_thread_and_a_failure_is_left_for_later(
        qtbot, tmp_path, monkeypatch) -> None:
    _modules(tmp_path, monkeypatch,
             lab_probe_module="import threading\nTHREAD = threading.current_thread().name\n",
             lab_broken_module="raise RuntimeError('broken')\n")
    preimport_later(("lab_broken_module", "lab_probe_module"), delay_ms=0)
    qtbot.waitUntil(lambda: "lab_probe_module" in sys.modules, timeout=10_000)
    assert sys.modules["lab_probe_module"].THREAD == "lab-preimport"
    assert threading.current_thread().name != "lab-preimport"
    assert "lab_broken_module" not in sys.modules  # imported again (and failing) by its page
    assert "ui.pages.real_model.page" in PREIMPORT


def test_the_imports_wait_until_the_window_is_idle(qtbot, tmp_path, monkeypatch) -> None:
    """An import in the middle of a streaming run stalled the event loop (100 ms): given
    ``idle``, the thread starts only once it says the window is at rest."""
    import ui.preimport as preimport

    _modules(tmp_path, monkeypatch, lab_idle_module="X = 1\n")
    monkeypatch.setattr(preimport, "IDLE_RECHECK_MS", 10)
    asked = []
    idle = [False]
    preimport_later(("lab_idle_module",), delay_ms=0, idle=lambda: asked.append(1) or idle[0])
    qtbot.waitUntil(lambda: len(asked) >= 3, timeout=5_000)  # asked again while busy
    qtbot.wait(50)
    assert "lab_idle_module" not in sys.modules
    idle[0] = True
    qtbot.waitUntil(lambda: "lab_idle_module" in sys.modules, timeout=10_000)


def test_the_window_is_idle_only_when_no_worker_runs(window, qtbot) -> None:
    window.stop()
    qtbot.waitUntil(lambda: not window.worker.is_running(), timeout=30_000)
    assert window.is_idle()
    window.apply_config({"trials": 200_000, "d_k": 1024})  # (seconds of streaming)
    qtbot.waitUntil(window.worker.is_running, timeout=10_000)
    assert not window.is_idle()  # the simulation streams
    window.stop()
    qtbot.waitUntil(window.is_idle, timeout=30_000)


def test_a_window_never_idle_never_gets_the_imports(qtbot, tmp_path, monkeypatch) -> None:
    """No time limit on the wait for idle: an import after one ended in the middle of a long
    run (bench/bench_gui.py: the largest lag of the run, 11 s in); a tab clicked meanwhile
    imports its own module (ui.preimport.import_then)."""
    import ui.preimport as preimport

    _modules(tmp_path, monkeypatch, lab_busy_module="X = 1\n")
    monkeypatch.setattr(preimport, "IDLE_RECHECK_MS", 10)
    asked = []
    preimport_later(("lab_busy_module",), delay_ms=0, idle=lambda: asked.append(1) and False)
    qtbot.waitUntil(lambda: len(asked) >= 30, timeout=10_000)
    assert "lab_busy_module" not in sys.modules


def test_import_then_calls_back_on_the_gui_thread_after_the_import(qtbot, tmp_path,
                                                                   monkeypatch) -> None:
    from PySide6.QtCore import QObject

    from ui.preimport import import_then, is_imported

    _modules(tmp_path, monkeypatch,
             lab_then_module="import threading, time\n"
                             "THREAD = threading.current_thread().name\ntime.sleep(0.2)\n",
             lab_then_broken="raise RuntimeError('broken')\n")
    owner = QObject()
    called = []
    import_then("lab_then_module",
                lambda: called.append((threading.current_thread().name,
                                       is_imported("lab_then_module"))), owner)
    assert not called and not is_imported("lab_then_module")
    qtbot.waitUntil(lambda: bool(called), timeout=10_000)
    assert called == [(threading.current_thread().name, True)]
    assert sys.modules["lab_then_module"].THREAD == "lab-import"
    import_then("lab_then_broken", lambda: called.append("broken"), owner)  # called all the same
    qtbot.waitUntil(lambda: len(called) == 2, timeout=10_000)
    assert not is_imported("lab_then_broken")
    gone = QObject()
    import_then("lab_then_module", lambda: called.append("gone"), gone)
    gone.deleteLater()  # its owner is gone before the GUI thread looks: nothing is called
    qtbot.wait(200)
    assert len(called) == 2


def test_a_module_half_way_through_its_import_is_not_imported(tmp_path, monkeypatch) -> None:
    import importlib

    from ui.preimport import is_imported

    _modules(tmp_path, monkeypatch, lab_half_module="from ui.preimport import is_imported\n"
                                                     "DURING = is_imported(__name__)\n")
    assert not is_imported("lab_half_module")
    module = importlib.import_module("lab_half_module")
    assert module.DURING is False and is_imported("lab_half_module")
