"""Training presets: data in ``resources/presets/training.json``, not code."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.errors import ConfigError
from engine.training.config import TrainingConfig

PRESET_FILE = Path(__file__).resolve().parents[2] / "resources" / "presets" / "training.json"
DEFAULT_PRESET = "demo"


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    description: str
    config: TrainingConfig


@lru_cache(maxsize=1)
def load_presets() -> dict[str, Preset]:
    """All presets in file order (the first is the default)."""
    data = json.loads(PRESET_FILE.read_text(encoding="utf-8"))
    return {name: Preset(name, p["title"], p["description"], TrainingConfig.from_dict(p["config"]))
            for name, p in data.items()}


def preset(name: str) -> Preset:
    presets = load_presets()
    if name not in presets:
        raise ConfigError("preset", f"must be one of {', '.join(presets)}; got {name!r}")
    return presets[name]
