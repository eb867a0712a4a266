"""A panel's view closed in the event-loop turn it was built in, its multi-word axis title's
refit still waiting on a layout, crashed Qt (a segfault while the scene was cleared). Run in a
child process: a crash would take the test runner with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
from PySide6.QtWidgets import QApplication
app = QApplication([])
from ui.plots.base import PanelView
from ui.plots.tidy_axis import tidy_axes
for _ in range(10):
    view = PanelView()
    plot = view.addPlot(axisItems=tidy_axes())
    plot.setLabel("left", "a title of several words")
    view.resize(200, 100)
    view.show()
    app.processEvents()
    view.close()
    view.deleteLater()
    app.processEvents()
print("closed")
"""


def test_a_view_closed_before_its_layout_settles_does_not_crash():
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "closed"
