"""Where the lab's own data is: presets, built-in experiments, the tour, probe texts, claims, the
icon (the checkout's ``resources/``), found from the engine package that is running.

An installed distribution carries that folder as the package data ``engine/resources/``
(pyproject.toml maps it there: ``package-dir``), found with importlib.resources. A source checkout
has no ``engine/resources/``: its data is the ``resources/`` folder beside ``engine/``. Looking
from the running engine, never by the distribution's name, keeps a checkout on its own files even
where another copy of the lab is installed in the same environment (an editable install of
another clone resolves the name to that clone).
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from pathlib import Path

#: the package data's folder inside the engine package of an installed distribution
PACKAGE_DATA = "resources"


def checkout_root() -> Path | None:
    """The source tree this ``engine/`` runs from (``resources/`` and ``pyproject.toml`` beside
    it), or None for an installed distribution."""
    root = Path(__file__).resolve().parent.parent
    if (root / "resources").is_dir() and (root / "pyproject.toml").is_file():
        return root
    return None


@lru_cache(maxsize=1)
def resources_root() -> Path:
    """The folder holding the lab's data: the installed package data, else the checkout's
    ``resources/``. A broken installation gets the package data's path, so that the reader's
    "no such file" names where the file should have been."""
    packaged = files(__package__ or "engine").joinpath(PACKAGE_DATA)
    # a wheel installs as files: importlib.resources hands back a real path (the readers stat it)
    packaged_path = Path(str(packaged))
    if packaged_path.is_dir():
        return packaged_path
    root = checkout_root()
    return root / "resources" if root is not None else packaged_path


def resource(*parts: str) -> Path:
    """One file or folder of the lab's data, e.g. ``resource("presets", "training.json")``."""
    return resources_root().joinpath(*parts)
