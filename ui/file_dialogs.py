"""Every file and folder dialog of the app, so that each opens where the user expects: in the last
folder used (remembered in the settings), else the user's Pictures folder (figures) or Documents
folder (sessions, data, folders), else the home folder; never the working directory the app was
started from."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QStandardPaths
from PySide6.QtWidgets import QFileDialog, QWidget

from ui.settings import open_settings

#: the settings key of the last folder a dialog used
LAST_DIR = "last_dir"
#: suffixes of figures: their dialogs fall back to Pictures instead of Documents
IMAGE_SUFFIXES = (".png", ".svg")


def default_dir(images: bool = False) -> Path:
    """Pictures (``images``) or Documents, as the platform names them, if it exists; else home."""
    kinds = [QStandardPaths.StandardLocation.DocumentsLocation]
    if images:
        kinds.insert(0, QStandardPaths.StandardLocation.PicturesLocation)
    for kind in kinds:
        where = QStandardPaths.writableLocation(kind)
        if where and Path(where).is_dir():
            return Path(where)
    return Path.home()


def start_dir(images: bool = False) -> Path:
    """The last folder used, if it still exists; else :func:`default_dir`."""
    last = open_settings().value(LAST_DIR)
    if last and Path(str(last)).is_dir():
        return Path(str(last))
    return default_dir(images)


def remember_dir(folder: str | Path) -> None:
    settings = open_settings()
    settings.setValue(LAST_DIR, str(folder))
    settings.sync()


def save_file(parent: QWidget | None, title: str, name: str, filters: str) -> str:
    """Ask where to save ``name`` (a file name); "" when cancelled. The folder is remembered."""
    images = Path(name).suffix.lower() in IMAGE_SUFFIXES
    path, _ = QFileDialog.getSaveFileName(parent, title, str(start_dir(images) / name), filters)
    if path:
        remember_dir(Path(path).parent)
    return path


def open_file(parent: QWidget | None, title: str, filters: str) -> str:
    """Ask for a file to open; "" when cancelled. Its folder is remembered."""
    path, _ = QFileDialog.getOpenFileName(parent, title, str(start_dir()), filters)
    if path:
        remember_dir(Path(path).parent)
    return path


def choose_dir(parent: QWidget | None, title: str, start: str | Path | None = None) -> str:
    """Ask for a folder (starting in ``start`` when it exists); "" when cancelled. Remembered."""
    begin = Path(start) if start and Path(start).is_dir() else start_dir()
    folder = QFileDialog.getExistingDirectory(parent, title, str(begin))
    if folder:
        remember_dir(folder)
    return folder
