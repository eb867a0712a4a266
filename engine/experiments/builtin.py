"""Built-in experiments: data in ``resources/experiments/*.json`` (title, what it shows and does
not, base preset and overrides, axes, figures, verdict), not code."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from engine.errors import ConfigError
from engine.experiments.spec import ExperimentSpec

EXPERIMENT_DIR = Path(__file__).resolve().parents[2] / "resources" / "experiments"
#: display order; files not listed here follow alphabetically
ORDER = ("seeds", "head_width", "learning_rate", "logit_control", "heads")


@lru_cache(maxsize=1)
def load_builtins() -> dict[str, ExperimentSpec]:
    """Every built-in experiment by name (the file's stem)."""
    paths = sorted(EXPERIMENT_DIR.glob("*.json"),
                   key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else len(ORDER), p.stem))
    out = {}
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        out[path.stem] = ExperimentSpec.from_dict({"name": path.stem, **data})
    return out


def builtin(name: str) -> ExperimentSpec:
    specs = load_builtins()
    if name not in specs:
        raise ConfigError("experiment", f"must be one of {', '.join(specs)}; got {name!r}")
    return specs[name]
