"""The preset texts of resources/probe_texts.json, shared by the Real model page and the CLI.

The first preset is the default text: ``audit-model`` without ``--text`` audits the same text the
page opens with, so a bare command line and the GUI show the same figures.
"""

from __future__ import annotations

from pathlib import Path

PRESETS_FILE = Path(__file__).resolve().parents[2] / "resources" / "probe_texts.json"
#: used when the presets file cannot be read (a broken install still has a text to run)
FALLBACK = ("Short sentence", "The quick brown fox jumps over the lazy dog.")
#: the largest presets file read, and the longest preset text
PRESETS_FILE_MAX = 2_000_000
MAX_TEXT_CHARS = 500_000


def load_text_presets(path: Path = PRESETS_FILE) -> list[tuple[str, str]]:
    """(name, text) pairs; the built-in one if the file cannot be read (read bounded, its
    structure checked: a broken file never costs more than falling back)."""
    from engine.readers.json_file import read_json
    from engine.readers.schema import ListOf, Record, Text

    preset = Record({"name": Text(max_chars=200), "text": Text(max_chars=MAX_TEXT_CHARS)},
                    required=frozenset({"name", "text"}))
    try:
        data = read_json(path, max_bytes=PRESETS_FILE_MAX, kind="probe texts file")
        data = Record({"presets": ListOf(preset, max_items=100)}, extra="keep").check(data)
        out = [(p["name"], p["text"]) for p in data.get("presets", ())]
    except ValueError:  # (FileFormatError, SchemaError)
        return [FALLBACK]
    return out or [FALLBACK]


def default_text() -> str:
    """The text the Real model page opens with (the first preset)."""
    return load_text_presets()[0][1]
