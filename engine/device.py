"""Where torch work runs: one resolution of auto / cpu / cuda for the simulation and training.

``auto`` means CUDA when torch sees a device, else the CPU; asking for ``cuda`` where there is
none is a ConfigError naming ``device``. Torch is imported only where an NVIDIA driver exists.
"""

from __future__ import annotations

import os
from importlib.util import find_spec

from engine.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    """True when torch sees a CUDA device. Avoids importing torch where no NVIDIA driver exists."""
    if not (os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidia0")
            or os.environ.get("CUDA_VISIBLE_DEVICES")):
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def torch_available() -> bool:
    return find_spec("torch") is not None


def resolve_device(requested: str) -> str:
    """The device actually used for ``requested`` (one of DEVICES): "cpu" or "cuda"."""
    if requested not in DEVICES:
        raise ConfigError("device", f"must be one of {', '.join(DEVICES)}, got {requested!r}")
    if requested == "cpu":
        return "cpu"
    if cuda_available():
        return "cuda"
    if requested == "cuda":
        raise ConfigError("device", "cuda requested but torch sees no CUDA device here")
    return "cpu"
