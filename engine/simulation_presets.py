"""Simulation presets: data in ``resources/presets/simulation.json`` (title, description, a
partial SimulationConfig dict). The window applies them through ``MainWindow.apply_config``,
``simulate --preset`` as the starting values its options override."""

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


def preset_config(key: str, path: Path = PRESET_FILE) -> dict[str, Any]:
    """The (partial) config of the preset named ``key``; an unknown name is a ConfigError on
    ``preset`` listing the names there are."""
    from engine.errors import ConfigError

    presets = {p.key: p for p in load_presets(path)}
    if key not in presets:
        raise ConfigError("preset", f"no preset {key[:40]!r}; one of {', '.join(presets)}")
    return dict(presets[key].config)
