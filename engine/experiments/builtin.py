"""Built-in experiments: data in ``resources/experiments/*.json`` (title, what it shows and does
not, base preset and overrides, axes, figures, verdict), not code."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from engine.bundled import resource
from engine.errors import ConfigError, quote
from engine.experiments.spec import ExperimentSpec

EXPERIMENT_DIR = resource("experiments")
#: display order; files not listed here follow alphabetically
ORDER = ("seeds", "head_width", "learning_rate", "logit_control", "heads")


@lru_cache(maxsize=1)
def load_builtins() -> dict[str, ExperimentSpec]:
    """Every built-in experiment by name (the file's stem)."""
    paths = sorted(EXPERIMENT_DIR.glob("*.json"),
                   key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else len(ORDER), p.stem))
    return {path.stem: read_builtin(path) for path in paths}


#: the largest built-in experiment file read
BUILTIN_FILE_MAX = 1_000_000


def read_builtin(path: Path) -> ExperimentSpec:
    """One built-in experiment file (its name is the file's stem); a broken one is one
    FileFormatError naming the file, the field and what is wrong."""
    from engine.errors import FileFormatError
    from engine.readers.json_file import read_json
    from engine.readers.schema import errors_in_file

    data = read_json(path, max_bytes=BUILTIN_FILE_MAX, kind="built-in experiment")
    if not isinstance(data, dict):
        raise FileFormatError(str(path), "", f"must be a JSON object, got {type(data).__name__}")
    with errors_in_file(str(path)):
        for key in ("title", "figures", "verdict"):  # (what the page and the CLI show)
            if key not in data:
                raise ConfigError(key, "required, but missing")
        return ExperimentSpec.from_dict({"name": path.stem, **data})


def builtin(name: str) -> ExperimentSpec:
    specs = load_builtins()
    if not isinstance(name, str) or name not in specs:
        raise ConfigError("experiment", f"must be one of {', '.join(specs)}; got {quote(name)}")
    return specs[name]
