"""Training presets: data in ``resources/presets/training.json``, not code."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.bundled import resource
from engine.errors import ConfigError, quote
from engine.training.config import TrainingConfig

PRESET_FILE = resource("presets", "training.json")
DEFAULT_PRESET = "demo"


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    description: str
    config: TrainingConfig


#: the largest bundled presets file read
PRESETS_FILE_MAX = 1_000_000


def load_presets(path: Path | None = None) -> dict[str, Preset]:
    """All presets in file order (the first is the default); a broken file is one
    FileFormatError naming it, the field and what is wrong."""
    if path is None:
        return _bundled_presets()
    from engine.readers.json_file import read_json
    from engine.readers.schema import AnyObject, MapOf, Record, Text, errors_in_file

    data = read_json(path, max_bytes=PRESETS_FILE_MAX, kind="presets file")
    entry = Record({"title": Text(max_chars=500), "description": Text(max_chars=20_000),
                    "config": AnyObject()}, required=frozenset({"title", "description", "config"}))
    with errors_in_file(str(path)):
        MapOf(entry, max_items=100).check(data)
        if not data:
            raise ConfigError("", "holds no preset")
    presets = {}
    for name, p in data.items():
        with errors_in_file(str(path), f"{name}.config"):
            presets[name] = Preset(name, p["title"], p["description"],
                                   TrainingConfig.from_dict(p["config"]))
    return presets


@lru_cache(maxsize=1)
def _bundled_presets() -> dict[str, Preset]:
    return load_presets(PRESET_FILE)


def preset(name: str) -> Preset:
    presets = load_presets()
    if not isinstance(name, str) or name not in presets:
        raise ConfigError("preset", f"must be one of {', '.join(presets)}; got {quote(name)}")
    return presets[name]
