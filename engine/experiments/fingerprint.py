"""The fingerprint of a job: everything that decides its numbers. A job file is reused (by the
claims' cache, ``reproduce --cache``) only under the same fingerprint; made under another, it
is rerun, never used to judge a claim.

It hashes the job's training config, the source of every module a training job runs (the
training package, the rules, the job itself, the numerics and kernel policy), torch's version
and the CPU kernels in use (``engine.cpu_kernels.kernels_in_use``). The statistics over seeds are
not in it: they are computed again from the job files every time.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from typing import Any

#: the modules whose code decides a training job's numbers (a test checks that a job imports no
#: other engine module)
TRAINING_MODULES = (
    "engine", "engine.config", "engine.cpu_kernels", "engine.device", "engine.errors",
    "engine.rules", "engine.softmax", "engine.validate", "engine.sampling",
    "engine.experiments", "engine.experiments.job",
    "engine.readers", "engine.readers.json_file", "engine.readers.schema",  # (config parsing)
    "engine.training", "engine.training.config", "engine.training.gradients",
    "engine.training.lengths", "engine.training.model", "engine.training.numerics",
    "engine.training.observe", "engine.training.parametrization", "engine.training.qk_clip",
    "engine.training.tasks",
    "engine.training.trainer",
)


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """SHA-256 over the source files of TRAINING_MODULES (names and bytes)."""
    h = hashlib.sha256()
    for name in TRAINING_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"cannot find the source of {name}")
        with open(spec.origin, "rb") as f:
            h.update(name.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def job_fingerprint(config: dict[str, Any], device: str = "cpu", kernels: str | None = None
                    ) -> str:
    """The fingerprint of a job of ``config`` (a TrainingConfig.to_dict()) trained on ``device``
    here, or under ``kernels`` (what ``kernels_in_use`` said where it ran). Imports torch."""
    import torch

    from engine.cpu_kernels import kernels_in_use

    data = {"config": config, "code": code_hash(), "torch": torch.__version__, "device": device,
            "kernels": kernels if kernels is not None else kernels_in_use()}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
