"""The reader of what File -> Open takes: a session, an exported config.json, or an exported
figure (a PNG's text chunk, an SVG's metadata). One schema for all of them; every part that
reaches the window is validated first, each error one line ``FILE: field path: what is wrong``
(the window's parameters stay as they were).

A session is far smaller than MAX_SESSION_BYTES (a few kB: parameters and a text to probe); a
larger file is refused before it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, FileFormatError
from engine.probe.memory import BUDGET_MAX_GB, BUDGET_MIN_GB
from engine.readers.json_file import read_json
from engine.readers.schema import AnyObject, Nullable, Number, Record, Text, errors_in_file

#: the largest session, config.json or figure parameters File -> Open reads
MAX_SESSION_BYTES = 1_000_000
#: the longest text a session's Real model part carries
MAX_PROBE_TEXT_CHARS = 500_000

REAL_MODEL_SCHEMA = Record({"text": Text(max_chars=MAX_PROBE_TEXT_CHARS),
                            "model": Nullable(Text(max_chars=4096)), "rule": Text(max_chars=100),
                            "memory_budget": Number(BUDGET_MIN_GB, BUDGET_MAX_GB)},
                           required=frozenset({"text"}))


def check_config_part(data: Any) -> None:
    from engine.config import SimulationConfig

    SimulationConfig.from_dict(data)


def check_training_part(data: Any) -> None:
    from engine.training.config import TrainingConfig

    TrainingConfig.from_dict(data)


def check_real_model_part(data: Any) -> None:
    from engine.probe.config import PROBE_RULES, check_text_and_model

    REAL_MODEL_SCHEMA.check(data)
    check_text_and_model(data.get("text"), data.get("model"))
    if data.get("rule", "model") not in PROBE_RULES:
        raise ConfigError("rule", f"must be one of {', '.join(PROBE_RULES)}")


#: the parts of a session (key -> check raising ConfigError, whose field is the path inside);
#: other keys (an export's "versions", "resolved", ...) are kept unread
PART_CHECKS: dict[str, Callable[[Any], None]] = {
    "config": check_config_part,
    "training": check_training_part,
    "real_model": check_real_model_part,
}
#: a part: an object (checked by its PART_CHECKS entry) or null (left out)
_PART = Nullable(AnyObject())
SESSION_SCHEMA = Record({"app": Text(max_chars=100), "kind": Text(max_chars=100),
                         "plot": Text(max_chars=100), "sweep_axis": Text(max_chars=100),
                         **dict.fromkeys(PART_CHECKS, _PART)}, extra="keep")


def read_session_file(path: str | Path, current_config: Callable[[], dict]) -> dict:
    """The session in ``path`` (a session, a config.json or an exported figure) as a dict whose
    every part is valid; a bare SimulationConfig dict becomes ``{"config": it}``; a Training
    figure (no "config") takes ``current_config()``. FileFormatError names the problem."""
    path = Path(path)
    if path.suffix.lower() in (".png", ".svg"):
        from ui.plots.figure_metadata import read_figure_metadata

        data = read_figure_metadata(path)
        if data is None:
            raise FileFormatError(str(path), "", "this image carries no Attention Scaling Lab "
                                                 "parameters")
    else:
        data = read_json(path, max_bytes=MAX_SESSION_BYTES, kind="session")
    return check_session(data, str(path), current_config)


def check_session(data: Any, source: str, current_config: Callable[[], dict]) -> dict:
    """``data`` checked part by part (``source`` names the file in the error)."""
    if not isinstance(data, dict):
        raise FileFormatError(source, "", "not a session file (expected a JSON object, got "
                                          f"{type(data).__name__})")
    if not data:
        raise FileFormatError(source, "", "holds no parameters (an empty JSON object)")
    if "config" not in data:
        if set(data) & set(PART_CHECKS):  # e.g. a Training figure: the simulation stays
            data = {**data, "config": current_config()}
        else:  # a bare simulation config
            data = {"config": data}
    with errors_in_file(source):
        SESSION_SCHEMA.check(data)
    for key, check in PART_CHECKS.items():
        if data.get(key) is not None:
            with errors_in_file(source, key):
                check(data[key])
    return data
