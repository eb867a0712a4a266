"""The lab's version (single-sourced in pyproject.toml) and what it runs on, for ``--version`` and
Help -> About.

An installed distribution knows its version from its metadata (importlib.metadata). A checkout
reads its own pyproject.toml first: the metadata of an editable install is frozen when it is
installed, and may belong to another clone (engine/bundled.py says why the running engine decides).
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from engine.bundled import checkout_root

DISTRIBUTION = "attention-scaling-lab"


def pyproject_version(path: Path) -> str | None:
    """``version`` of the ``[project]`` table of a pyproject.toml, or None."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, flags=re.M | re.S)
    found = re.search(r'^version\s*=\s*"([^"\n]+)"', table.group(1), flags=re.M) if table else None
    return found.group(1) if found else None


def version() -> str:
    """This lab's version: the checkout's pyproject.toml, else the installed metadata."""
    root = checkout_root()
    found = pyproject_version(root / "pyproject.toml") if root is not None else None
    if found:
        return found
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def device_description() -> str:
    """What ``device auto`` runs on here: "cpu", or "cuda (the GPU's name)"."""
    from engine.device import resolve_device

    device = resolve_device("auto")
    if device == "cuda":
        import torch

        return f"cuda ({torch.cuda.get_device_name(0)})"
    return device


def version_line() -> str:
    """``attention-lab --version``: the lab's version, torch's, the device and Python's."""
    from engine.io import package_versions

    found = package_versions(("torch",))
    return (f"attention-lab {version()} (torch {found['torch']}, device {device_description()}, "
            f"Python {found['python']})")
