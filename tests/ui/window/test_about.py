"""Help -> About names the version (pyproject.toml's), torch's and the device; the application
carries the lab's icon (every window and the taskbar) and its desktop entry's name."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from PySide6.QtWidgets import QApplication, QMenu, QMessageBox

ROOT = Path(__file__).resolve().parents[3]


def _pyproject_version() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'^version = "(.+)"$', text, flags=re.M).group(1)


def test_about_names_the_version_torch_and_the_device(window, monkeypatch) -> None:
    shown = []
    monkeypatch.setattr(QMessageBox, "about", lambda parent, title, text: shown.append(text))
    help_menu = next(m for m in window.menuBar().findChildren(QMenu) if m.title() == "&Help")
    [action] = [a for a in help_menu.actions() if a.text().startswith("&About")]
    action.trigger()
    [text] = shown
    assert f"Attention Scaling Lab {_pyproject_version()}</h3>" in text
    assert f"<td>torch</td><td>{importlib.metadata.version('torch')}</td>" in text
    assert re.search(r"<td>Device</td><td>(cpu|cuda \(.+\))</td>", text), text
    assert f"<td>Runs from</td><td>{ROOT}</td>" in text


def test_the_application_has_the_lab_icon_and_desktop_name(window) -> None:
    from ui.app import set_identity

    app = QApplication.instance()
    set_identity(app)
    assert app.desktopFileName() == "attention-lab"
    icon = window.windowIcon()  # a window without its own icon shows the application's
    assert not icon.isNull()
    assert icon.pixmap(64, 64).toImage().pixelColor(32, 32).alpha() == 255
    assert icon.cacheKey() == app.windowIcon().cacheKey()
