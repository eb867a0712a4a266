"""Where the app remembers window layout, theme and last parameters (QSettings).

``ATTENTION_LAB_SETTINGS=memory`` (set by the tests) keeps everything in a throw-away INI file in a
temporary folder, so tests never read or write the user's settings; any other value is used as
the path of an INI file. Unset: the platform's normal place (e.g. ~/.config/AttentionScalingLab).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from PySide6.QtCore import QSettings

ENV = "ATTENTION_LAB_SETTINGS"
ORG = "AttentionScalingLab"
APP = "attention-lab"

_tmpdir: tempfile.TemporaryDirectory[str] | None = None


def open_settings() -> QSettings:
    global _tmpdir
    where = os.environ.get(ENV, "")
    if where == "memory":
        if _tmpdir is None:
            _tmpdir = tempfile.TemporaryDirectory(prefix="attention-lab-settings-")
        return QSettings(os.path.join(_tmpdir.name, "settings.ini"), QSettings.Format.IniFormat)
    if where:
        return QSettings(where, QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORG, APP)


def settings_location() -> str:
    return open_settings().fileName()


#: the largest remembered value read back (parameters: a few hundred bytes)
MAX_SETTING_CHARS = 100_000


def load_json(settings: QSettings, key: str) -> Any | None:
    """A remembered JSON value, or None when it is missing or not bounded, valid JSON (a stale
    or hand-edited settings file costs nothing: the defaults stay)."""
    from engine.errors import FileFormatError
    from engine.readers.json_file import parse_json

    raw = settings.value(key)
    if not raw:
        return None
    try:
        return parse_json(str(raw), key, max_bytes=MAX_SETTING_CHARS, kind="setting")
    except FileFormatError:
        return None


def save_json(settings: QSettings, key: str, value: Any) -> None:
    settings.setValue(key, json.dumps(value))
