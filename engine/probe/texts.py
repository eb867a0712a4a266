"""The preset texts of resources/probe_texts.json, shared by the Real model page and the CLI.

The first preset is the default text: ``audit-model`` without ``--text`` audits the same text the
page opens with, so a bare command line and the GUI show the same figures. A broken file is
named, never replaced by a text of the program's own: the CLI says which file and what is wrong
(exit 2), the page says it in its status line and leaves the text to the user.
"""

from __future__ import annotations

from pathlib import Path

from engine.bundled import resource

PRESETS_FILE = resource("probe_texts.json")
#: the largest presets file read, the most presets, and the longest preset text
PRESETS_FILE_MAX = 2_000_000
MAX_PRESETS = 100
MAX_TEXT_CHARS = 500_000


def load_text_presets(path: Path | None = None) -> list[tuple[str, str]]:
    """(name, text) pairs of ``path`` (default: PRESETS_FILE, looked up at call time), at least
    one; read bounded and its structure checked, every problem one FileFormatError
    (``FILE: presets[2].text: must be a string, got 5``)."""
    from engine.errors import ConfigError
    from engine.readers.json_file import read_json
    from engine.readers.schema import ListOf, Record, Text, errors_in_file

    preset = Record({"name": Text(max_chars=200), "text": Text(max_chars=MAX_TEXT_CHARS)},
                    required=frozenset({"name", "text"}))
    schema = Record({"presets": ListOf(preset, max_items=MAX_PRESETS, min_items=1)},
                    required=frozenset({"presets"}), extra="keep")
    path = PRESETS_FILE if path is None else path
    data = read_json(path, max_bytes=PRESETS_FILE_MAX, kind="probe texts file")
    with errors_in_file(str(path)):
        data = schema.check(data)
        for i, p in enumerate(data["presets"]):
            for key in ("name", "text"):
                if not p[key].strip():
                    raise ConfigError(f"presets[{i}].{key}", "must not be blank")
    return [(p["name"], p["text"]) for p in data["presets"]]


def default_text() -> str:
    """The text the Real model page opens with (the first preset)."""
    return load_text_presets()[0][1]
