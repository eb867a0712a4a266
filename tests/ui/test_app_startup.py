"""``python main.py --screenshot FILE``: opens, waits for complete results, saves, exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_screenshot_command(tmp_path, theme):
    out = tmp_path / f"shot_{theme}.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTENTION_LAB_SETTINGS": "memory",
           "ATTENTION_LAB_TIMING": "1"}
    proc = subprocess.run([sys.executable, "main.py", "--screenshot", str(out), "--theme", theme],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # once the window is up its objects leave the collector's reach (ui/heap.py: no full
    # collection of them stalls a run), and the process still exits cleanly
    froze = [line for line in proc.stderr.splitlines() if "start-up objects" in line]
    assert froze and int(froze[0].split("froze ")[1].split()[0].replace(",", "")) > 10_000
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert img.width() >= 1200 and img.height() >= 800
    # the theme reached the window: the plot background colour is in the picture
    bg = (0x1E, 0x1F, 0x22) if theme == "dark" else (0xFF, 0xFF, 0xFF)
    centre = img.pixelColor(img.width() // 2, img.height() // 2)
    assert centre.isValid()
    found = any(img.pixelColor(x, y).getRgb()[:3] == bg
                for x in range(400, img.width(), 97) for y in range(100, img.height(), 53))
    assert found


def test_screenshot_to_an_unwritable_place_exits_2_with_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTENTION_LAB_SETTINGS": "memory"}
    proc = subprocess.run([sys.executable, "main.py", "--screenshot", str(blocker / "shot.png")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--screenshot" in proc.stderr
    assert list(tmp_path.iterdir()) == [blocker]


def test_gui_imports_no_torch(tmp_path):
    """Opening the window must not import torch (it costs ~1.7 s)."""
    code = (
        "import sys, os\n"
        "os.environ['QT_QPA_PLATFORM']='offscreen'; os.environ['ATTENTION_LAB_SETTINGS']='memory'\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from ui.window.main_window import MainWindow\n"
        "w = MainWindow(restore=False); w.show(); app.processEvents()\n"
        "print('torch' in sys.modules)\n"
        "w.close(); w.deleteLater(); app.processEvents()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


def test_a_window_that_does_not_persist_writes_no_settings(qtbot, tmp_path, monkeypatch):
    """``--screenshot`` overwrote the user's theme and parameters: its window writes nothing."""
    ini = tmp_path / "settings.ini"
    monkeypatch.setenv("ATTENTION_LAB_SETTINGS", str(ini))
    from ui.settings import open_settings
    from ui.window.main_window import MainWindow

    seeded = open_settings()
    seeded.setValue("theme", "dark")
    seeded.sync()
    before = ini.read_bytes()
    w = MainWindow(theme="light", restore=False, persist=False)
    w.show()
    w.set_theme("dark")
    w.set_theme("light")
    w.window_settings.remember_dir(tmp_path)
    w.close()
    w.deleteLater()
    qtbot.wait(10)
    assert ini.read_bytes() == before


@pytest.mark.slow
def test_screenshot_leaves_the_saved_settings_untouched(tmp_path):
    ini = tmp_path / "settings.ini"
    ini.write_text("[General]\ntheme=dark\nconfig=\"{\\\"d_k\\\": 512}\"\n")
    before = ini.read_bytes()
    out = tmp_path / "shot.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTENTION_LAB_SETTINGS": str(ini)}
    proc = subprocess.run([sys.executable, "main.py", "--screenshot", str(out), "--theme", "light",
                           "--size", "1280x720"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ini.read_bytes() == before
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert (img.width(), img.height()) == (1280, 720)


def test_size_must_be_width_x_height():
    proc = subprocess.run([sys.executable, "main.py", "--size", "big", "--screenshot", "x.png"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--size" in proc.stderr


@pytest.mark.slow
def test_screenshot_of_the_experiments_page_finishes(tmp_path):
    """Its page redraws without a panel budget: the screenshot used to raise in the save slot
    and then wait forever (the time-out called the same failing save)."""
    out = tmp_path / "experiments.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTENTION_LAB_SETTINGS": "memory"}
    proc = subprocess.run([sys.executable, "main.py", "--screenshot", str(out), "--size", "1280x720",
                           "--page", "Experiments"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=200)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and out.stat().st_size > 0
