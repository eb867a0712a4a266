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
