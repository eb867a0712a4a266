"""The preset texts of resources/probe_texts.json, shared by the Real model page and the CLI.

The first preset is the default text: ``audit-model`` without ``--text`` audits the same text the
page opens with, so a bare command line and the GUI show the same figures.
"""

from __future__ import annotations

import json
from pathlib import Path

PRESETS_FILE = Path(__file__).resolve().parents[2] / "resources" / "probe_texts.json"
#: used when the presets file cannot be read (a broken install still has a text to run)
FALLBACK = ("Short sentence", "The quick brown fox jumps over the lazy dog.")


def load_text_presets(path: Path = PRESETS_FILE) -> list[tuple[str, str]]:
    """(name, text) pairs; the built-in one if the file cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        out = [(str(p["name"]), str(p["text"])) for p in data["presets"]]
    except (OSError, ValueError, KeyError, TypeError):
        return [FALLBACK]
    return out or [FALLBACK]


def default_text() -> str:
    """The text the Real model page opens with (the first preset)."""
    return load_text_presets()[0][1]
