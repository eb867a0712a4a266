"""Start the desktop app (``python main.py``), or take one screenshot and exit (``--screenshot``)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from ui.headless import install_message_filter

_T0 = time.perf_counter()
SCREENSHOT_TIMEOUT_S = 180.0


def _timing(label: str) -> None:
    if os.environ.get("ATTENTION_LAB_TIMING"):
        sys.stderr.write(f"[timing] {label}: {time.perf_counter() - _T0:.3f} s after ui.app import\n")


def _writable_target(path: str) -> bool:
    target = Path(path)
    folder = target.parent
    return folder.is_dir() and os.access(folder, os.W_OK) and not target.is_dir()


def _save_png_atomically(pixmap: Any, path: str) -> bool:
    """PNG bytes in memory, then temp file + rename: a screenshot is never half-written."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice

    from engine.io import atomic_write_bytes

    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not pixmap.save(buf, "PNG"):
        return False
    try:
        atomic_write_bytes(path, bytes(data.data()))
    except OSError:
        return False
    return True


#: redraw passes a screenshot takes at most to draw every plot (the sweep row: 6 plots, a few
#: curves per pass)
MAX_PAINT_PASSES = 50


def _paint_everything(app: Any, window: Any) -> None:
    """Every panel of the shown page drawn now (a page's redraw may take a panel budget)."""
    import inspect

    app.processEvents()
    page = window.page
    for _ in range(MAX_PAINT_PASSES):  # the sweep row draws its plots a few per pass
        page.redraw(budget=len(page.panels))
        app.processEvents()
        if not page.stale():
            break
    current = window.tabs.currentWidget()
    redraw = getattr(current, "redraw", None)
    if current is not window.page and callable(redraw):
        takes_budget = "budget" in inspect.signature(redraw).parameters
        redraw(**({"budget": 99} if takes_budget else {}))
    from ui.plots.base import PlotPanel

    for panel in window.findChildren(PlotPanel):  # (a paint left to a later turn: now)
        panel.finish_held()
    app.processEvents()


def _open_window(args: Any, screenshot: str | None) -> Any:
    """The main window, shown as the arguments ask; None (message written) for a bad --page."""
    from ui.window.main_window import MainWindow

    # a screenshot starts from the defaults and must leave the user's settings untouched
    window = MainWindow(theme=getattr(args, "theme", None), restore=not screenshot,
                        reset=bool(getattr(args, "reset_settings", False)), persist=not screenshot)
    size = getattr(args, "size", None)
    if size:
        window.resize(*size)
    window.show()
    if getattr(args, "present", False):
        window.set_presentation(True)
    page = getattr(args, "page", None)
    if page and not window.open_page_titled(page):
        sys.stderr.write(f"attention-lab: error: --page: no page titled {page!r}\n")
        window.shutdown()
        window.deleteLater()
        return None
    return window


def _schedule_screenshot(app: Any, window: Any, screenshot: str, code: dict[str, int]) -> None:
    """Grab the window once the results are complete (or after the time-out), then quit;
    ``code["value"]`` becomes 1 on a failure."""
    from PySide6.QtCore import QTimer

    def save() -> None:
        try:
            _paint_everything(app, window)
            ok = _save_png_atomically(window.grab(), screenshot)
            if not ok:
                sys.stderr.write(f"attention-lab: error: --screenshot: cannot write {screenshot}\n")
                code["value"] = 1
        except Exception as exc:  # never hang: a failed picture still ends the process
            sys.stderr.write(f"attention-lab: error: --screenshot: {type(exc).__name__}: {exc}\n")
            code["value"] = 1
        finally:
            window.close()
            app.quit()

    def timed_out() -> None:
        sys.stderr.write("attention-lab: error: --screenshot: results did not complete in time\n")
        code["value"] = 1
        save()
        code["value"] = 1

    window.results_complete.connect(lambda: QTimer.singleShot(300, save))
    QTimer.singleShot(int(SCREENSHOT_TIMEOUT_S * 1000), timed_out)


def set_identity(app: Any) -> None:
    """The application's name, its icon (every window's, and the taskbar's) and, for Wayland's
    taskbar, the desktop entry it matches (``--install-desktop-entry`` writes that file)."""
    from PySide6.QtGui import QIcon

    from engine.bundled import resource
    from ui.desktop_entry import APP_ID

    app.setApplicationName("Attention Scaling Lab")
    app.setOrganizationName("AttentionScalingLab")
    app.setDesktopFileName(APP_ID)
    app.setWindowIcon(QIcon(str(resource("icon.png"))))


def run_gui(args: Any) -> int:
    """Open the main window; returns the process exit code."""
    screenshot = getattr(args, "screenshot", None)
    if screenshot and not _writable_target(screenshot):
        sys.stderr.write(f"attention-lab: error: --screenshot: cannot write {screenshot} "
                         "(its folder does not exist or is not writable)\n")
        return 2
    if screenshot and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from ui.heap import collect_at_safe_points, freeze_startup_objects, thaw

    install_message_filter()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    set_identity(app)
    _timing("QApplication")
    window = _open_window(args, screenshot)
    if window is None:
        return 2
    if not screenshot and window.persist:  # the very first start offers the tour (once)
        from ui.pages.tour.first_start import offer_tour_once

        offer_tour_once(window, window.settings, window.show_tour)
    _timing("window shown")
    QTimer.singleShot(0, lambda: _timing("event loop running (first window painted)"))
    # once the window is up, a full collection walks only what is made after (ui/heap.py)
    QTimer.singleShot(0, lambda: _timing(f"froze {freeze_startup_objects():,} start-up objects"))
    # and collections run at the event loop's top level only, never inside a Qt lock
    collect_at_safe_points(app)
    if not screenshot:  # the pages not built yet import in the background (ui/preimport.py)
        from ui.preimport import preimport_later

        preimport_later(idle=window.is_idle)
    window.rerun()
    code = {"value": 0}
    if screenshot:
        _schedule_screenshot(app, window, screenshot, code)
    else:  # the process ends once the window closes (leave_now): closing waits for no worker
        window.exits_on_close = True
    rc = app.exec()
    window.shutdown()
    if not screenshot:  # (nothing to tidy up first: deleting every page's widgets took time)
        leave_now(window, code["value"] or int(rc))
    thaw()
    window.deleteLater()
    app.processEvents()
    return code["value"] or int(rc)


def leave_now(window: Any, code: int) -> None:
    """End the process once the window is closed and its settings are written: the interpreter's
    own exit would join every pool thread still inside a job (an experiment job, a training step
    of a cancelled run: seconds of waiting for results nobody will see). Outputs are staged, so
    a run cut here leaves no half-written folder."""
    window.settings.sync()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe
            pass
    os._exit(code)
