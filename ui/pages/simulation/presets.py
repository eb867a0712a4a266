"""Simulation presets: data in ``resources/presets/simulation.json`` (title, description, a
partial SimulationConfig dict), applied through ``MainWindow.apply_config``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.bundled import resource

PRESET_FILE = resource("presets", "simulation.json")


@dataclass(frozen=True)
class SimulationPreset:
    key: str
    title: str
    description: str
    config: dict[str, Any]


#: the largest presets file read
PRESETS_FILE_MAX = 1_000_000


def load_presets(path: Path = PRESET_FILE) -> list[SimulationPreset]:
    """The presets in file order, each config a valid (partial) SimulationConfig; a broken file
    is one FileFormatError naming it, the field and what is wrong."""
    from engine.config import SimulationConfig
    from engine.errors import ConfigError
    from engine.readers.json_file import read_json
    from engine.readers.schema import AnyObject, MapOf, Record, Text, errors_in_file

    data = read_json(path, max_bytes=PRESETS_FILE_MAX, kind="presets file")
    entry = Record({"title": Text(max_chars=500), "description": Text(max_chars=20_000),
                    "config": AnyObject()}, required=frozenset({"title", "config"}))
    with errors_in_file(str(path)):
        MapOf(entry, max_items=100).check(data)
        if not data:
            raise ConfigError("", "holds no preset")
    for key, v in data.items():
        with errors_in_file(str(path), f"{key}.config"):
            SimulationConfig.from_dict(v["config"])
    return [SimulationPreset(k, v["title"], v.get("description", ""), dict(v["config"]))
            for k, v in data.items()]
