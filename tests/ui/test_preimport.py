"""The pages not built yet are imported in a background thread after start-up (the first opening
of the Real model tab froze the window while its modules were imported)."""

from __future__ import annotations

import sys
import threading

from ui.preimport import PREIMPORT, preimport_later


def test_modules_are_imported_off_the_gui_thread_and_a_failure_is_left_for_later(
        qtbot, tmp_path, monkeypatch) -> None:
    (tmp_path / "lab_probe_module.py").write_text(
        "import threading\nTHREAD = threading.current_thread().name\n")
    (tmp_path / "lab_broken_module.py").write_text("raise RuntimeError('broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("lab_probe_module", "lab_broken_module"):
        monkeypatch.delitem(sys.modules, name, raising=False)
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

    (tmp_path / "lab_idle_module.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lab_idle_module", raising=False)
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


def test_a_window_never_idle_gets_the_imports_after_the_longest_wait(qtbot, tmp_path,
                                                                      monkeypatch) -> None:
    """A run that streams on would leave the first opening of the Real model tab to import
    on the GUI thread: the wait for idle ends after IDLE_WAIT_MAX_MS (here 5 rechecks)."""
    import ui.preimport as preimport

    (tmp_path / "lab_busy_module.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lab_busy_module", raising=False)
    monkeypatch.setattr(preimport, "IDLE_RECHECK_MS", 10)
    monkeypatch.setattr(preimport, "IDLE_WAIT_MAX_MS", 50)
    asked = []
    preimport_later(("lab_busy_module",), delay_ms=0, idle=lambda: asked.append(1) and False)
    qtbot.waitUntil(lambda: "lab_busy_module" in sys.modules, timeout=10_000)
    assert len(asked) == 6  # at 0, 10, ..., 50 ms: busy each time, then imported anyway
