"""A GGUF file's attention metadata, the keys llama.cpp reads at run time (what it makes of them:
:mod:`engine.probe.port.llama_cpp`).

The file is read by the ``gguf`` package's reader (memory-mapped: tensors are not loaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

GGUF_HINT = 'pip install "attention-scaling-lab[deploy]"'
#: the keys (after ``{arch}.``) the audit reads
ATTENTION_KEYS = (
    "block_count", "embedding_length", "context_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.scale", "attn_logit_softcapping", "final_logit_softcapping",
    "attention.sliding_window", "rope.dimension_count", "rope.scaling.type", "rope.scaling.factor",
    "rope.scaling.attn_factor", "rope.scaling.yarn_log_multiplier",
    "rope.scaling.original_context_length",
)


@dataclass(frozen=True)
class GgufMeta:
    path: Path
    arch: str
    values: dict[str, Any]  #: ATTENTION_KEYS present in the file (without the arch prefix)
    tensor_types: dict[str, str]  #: tensor name -> GGML type name (F32, F16, Q8_0, ...)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def n_heads(self) -> int | None:
        return first_int(self.get("attention.head_count"))

    @property
    def n_kv_heads(self) -> int | None:
        return first_int(self.get("attention.head_count_kv"))

    @property
    def key_length(self) -> int | None:
        kl = first_int(self.get("attention.key_length"))
        if kl:
            return kl
        emb, h = first_int(self.get("embedding_length")), self.n_heads
        return emb // h if emb and h else None


def first_int(v: Any) -> int | None:
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def read_gguf(path: str | Path, field: str = "gguf") -> GgufMeta:
    """The attention metadata of a GGUF file; one line when it is not one."""
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(field, f"reading a GGUF file needs the optional 'deploy' extra: "
                          f"{GGUF_HINT}")
    from gguf import GGUFReader

    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(field, f"{str(p)!r} is not a file")
    try:
        reader = GGUFReader(str(p), "r")
    except Exception as exc:  # bad magic, truncated file, a text file
        text = str(exc).strip().splitlines()
        raise ConfigError(field, f"{str(p)!r} is not a GGUF file "
                          f"({text[0][:200] if text else type(exc).__name__})") from None
    arch = _value(reader, "general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ConfigError(field, f"{str(p)!r} has no general.architecture")
    values = {}
    for key in ATTENTION_KEYS:
        v = _value(reader, f"{arch}.{key}")
        if v is not None:
            values[key] = v
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    return GgufMeta(p, arch, values, types)


def _value(reader: Any, key: str) -> Any:
    f = reader.get_field(key)
    if f is None:
        return None
    try:
        v = f.contents()
    except Exception:
        return None
    return v
