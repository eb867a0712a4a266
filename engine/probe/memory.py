"""The memory a model folder's config commits the lab to, counted before anything is allocated.

transformers allocates every tensor the config describes before it compares them with the
weights: a config.json asking for 10,000,000 positions, a ``type_vocab_size`` of 14,000,000 (a
field the lab never reads) or 24 layers of width 1024 beside a weights file holding one tensor
costs gigabytes before any error. So the lab builds the config's model on PyTorch's ``meta``
device (shapes and dtypes only, no storage), counts its parameters and buffers, and refuses,
in one line naming the budget, a model whose tensors would not fit the memory budget (an option:
``--memory-budget`` on the command line, the Real model page's field) or whose weights files
hold far fewer numbers than the config builds (the rest would be allocated and left random).

:func:`model_memory` is the estimator (others may call it); :func:`check_model_memory` is the
check :func:`engine.probe.loader.load_model` runs between reading the folder and loading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, FileFormatError

#: the default memory budget for a model's tensors (GB): a laptop's share for one model, room
#: for a 1-billion-parameter model in float32 (the lab runs every model in float32)
DEFAULT_BUDGET_GB = 4.0
#: the budgets one may choose (GB)
BUDGET_MIN_GB, BUDGET_MAX_GB = 0.1, 4096.0
#: the weights files must hold at least this share of the numbers the config builds
MIN_COVERED = 0.5
#: ... give or take this many (a model's own small additions: a pooler, a bias)
COVER_SLACK = 1_000_000


@dataclass(frozen=True)
class ModelMemory:
    """What the config's model holds: numbers in parameters and in buffers, their bytes as
    the lab runs the model (floating tensors in float32 at least), and its largest tensor."""

    parameters: int
    buffers: int
    nbytes: int
    largest: str  #: name and shape of the largest tensor, e.g. "embeddings.x.weight (10 x 4)"


def check_budget(budget_gb: float, field: str = "memory_budget") -> float:
    """``budget_gb`` as a float in BUDGET_MIN_GB..BUDGET_MAX_GB (ConfigError naming ``field``)."""
    from engine.validate import check_float

    return check_float(field, budget_gb, BUDGET_MIN_GB, BUDGET_MAX_GB)


def model_memory(folder: str | Path) -> ModelMemory:
    """Count the tensors of the model a local folder's config.json describes, built on the meta
    device (no storage is allocated, nothing is read but config.json, no code from the folder
    runs). ConfigError ("model") when transformers cannot build it."""
    import torch
    from transformers import AutoConfig, AutoModel

    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True,
                                            trust_remote_code=False)
        with torch.device("meta"):
            net = AutoModel.from_config(config, trust_remote_code=False,
                                        attn_implementation="eager")
    except Exception as exc:  # transformers raises many kinds for a config it cannot build
        raise ConfigError("model", f"cannot build the model {str(folder)!r}'s config describes: "
                          f"{_one_line(exc)}") from None
    return count_tensors(net)


def count_tensors(net: Any) -> ModelMemory:
    """Numbers and bytes of a torch module's parameters and buffers (each shared one once)."""
    seen: set[int] = set()
    counts = {"parameters": 0, "buffers": 0}
    nbytes, largest, largest_n = 0, "", -1
    for kind, tensors in (("parameters", net.named_parameters()),
                          ("buffers", net.named_buffers())):
        for name, t in tensors:
            if id(t) in seen:
                continue
            seen.add(id(t))
            n = t.numel()
            counts[kind] += n
            nbytes += n * (max(4, t.element_size()) if t.is_floating_point() else t.element_size())
            if n > largest_n:
                largest_n = n
                largest = f"{name} ({' x '.join(f'{s:,}' for s in t.shape)})"
    return ModelMemory(counts["parameters"], counts["buffers"], nbytes, largest)


def check_model_memory(folder: Path, n_params: int | None, budget_gb: float,
                       label: str) -> ModelMemory:
    """The memory of the model in ``folder``, refused (FileFormatError on ``label``, its
    config.json, option "model") over ``budget_gb`` GB, or when its weights files hold
    ``n_params`` numbers, fewer than MIN_COVERED of what the config builds."""
    budget = check_budget(budget_gb)
    mem = model_memory(folder)
    if mem.nbytes > budget * 1e9:
        raise FileFormatError(label, "", f"the model it describes needs {_gb(mem.nbytes)} for its "
                              f"tensors ({mem.parameters + mem.buffers:,} numbers; the largest "
                              f"{mem.largest}), more than the memory budget of {budget:g} GB "
                              "(refused before allocating; raise the budget to load it)", "model")
    if n_params is not None and n_params < MIN_COVERED * mem.parameters - COVER_SLACK:
        raise FileFormatError(label, "", f"the model it describes has {mem.parameters:,} "
                              f"parameters ({_gb(mem.nbytes)}), but its weights files hold "
                              f"{n_params:,}: the rest would be allocated and left random "
                              f"(the largest tensor: {mem.largest})", "model")
    return mem


def _gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.2f} GB" if nbytes < 10e9 else f"{nbytes / 1e9:,.0f} GB"


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "…"
