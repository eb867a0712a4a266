"""Simulation presets: data in ``resources/presets/simulation.json`` (title, description, a
partial SimulationConfig dict), applied through ``MainWindow.apply_config``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRESET_FILE = Path(__file__).resolve().parents[3] / "resources" / "presets" / "simulation.json"


@dataclass(frozen=True)
class SimulationPreset:
    key: str
    title: str
    description: str
    config: dict[str, Any]


def load_presets(path: Path = PRESET_FILE) -> list[SimulationPreset]:
    """The presets in file order; an unreadable file gives none (the menu is then empty)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [SimulationPreset(k, str(v["title"]), str(v.get("description", "")), dict(v["config"]))
            for k, v in data.items()]
