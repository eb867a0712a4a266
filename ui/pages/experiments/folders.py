"""Where an experiment writes its jobs by default: a new time-stamped folder under the app's data
folder (a temporary folder while the tests keep settings in memory)."""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from pathlib import Path

from PySide6.QtCore import QStandardPaths

from ui.settings import ENV


def default_root() -> Path:
    if os.environ.get(ENV) == "memory":
        return Path(tempfile.gettempdir()) / "attention-lab-experiments"
    data = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    return Path(data or tempfile.gettempdir()) / "experiments"


def new_run_dir(name: str, root: str | Path | None = None) -> Path:
    """A folder that does not exist yet (the runner creates it): ``<root>/<name>-<stamp>``."""
    base = Path(root) if root else default_root()
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, i = base / f"{name}-{stamp}", 1
    while path.exists():
        i += 1
        path = base / f"{name}-{stamp}-{i}"
    return path
