"""What llama.cpp will apply to attention logits, read from a GGUF file's metadata.

llama.cpp takes the attention scale from the file at run time, not from the source config:

* ``{arch}.attention.scale`` where the file has it (Granite's multiplier, ...);
* Gemma 2 and 3: ``1/sqrt(key_length)``, except the 27B sizes (46 / 62 blocks), which use
  ``1/sqrt(embedding_length / head_count)`` (llama.cpp #8444: the source's
  ``query_pre_attn_scalar`` is not in the file);
* otherwise ``1/sqrt(key_length)`` (``embedding_length / head_count`` when the key is absent);
* YaRN (``rope.scaling.type`` yarn, factor f): the rotary cos/sin carry
  ``attn_factor * (1 + 0.1 ln f)``, so the logits are multiplied by its square; DeepSeek 2/3
  instead multiply the scale by ``(attn_factor * (1 + yarn_log_multiplier * ln f))^2`` (a file
  without the multiplier loses that factor: x1.87 on DeepSeek-V3, f = 40);
* ``{arch}.attn_logit_softcapping`` caps the logits, ``final_logit_softcapping`` the output
  (a file without the key is not capped: llama.cpp #8156).

The file is read by the ``gguf`` package's reader (memory-mapped: tensors are not loaded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

GGUF_HINT = 'pip install "attention-scaling-lab[deploy]"'
#: block counts of the 27B sizes, where llama.cpp's Gemma scale is 1/sqrt(n_embd / n_head)
GEMMA_27B_BLOCKS = {"gemma2": 46, "gemma3": 62}
#: the keys (after ``{arch}.``) the audit reads
ATTENTION_KEYS = (
    "block_count", "embedding_length", "context_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.scale", "attn_logit_softcapping", "final_logit_softcapping",
    "attention.sliding_window", "rope.scaling.type", "rope.scaling.factor",
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
        return _first_int(self.get("attention.head_count"))

    @property
    def n_kv_heads(self) -> int | None:
        return _first_int(self.get("attention.head_count_kv"))

    @property
    def key_length(self) -> int | None:
        kl = _first_int(self.get("attention.key_length"))
        if kl:
            return kl
        emb, h = _first_int(self.get("embedding_length")), self.n_heads
        return emb // h if emb and h else None


def _first_int(v: Any) -> int | None:
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


def llama_cpp_scale(meta: GgufMeta) -> tuple[float, str]:
    """(the factor llama.cpp applies to q.k, how it gets there)."""
    kl = meta.key_length
    if not kl:
        raise ConfigError("gguf", f"{meta.path.name}: neither {meta.arch}.attention.key_length "
                          "nor embedding_length / head_count is in the file")
    scale_key = meta.get("attention.scale")
    if isinstance(scale_key, (int, float)) and scale_key:
        base, how = float(scale_key), f"attention.scale {float(scale_key):.6g}"
    elif meta.arch in GEMMA_27B_BLOCKS and _first_int(meta.get("block_count")) == \
            GEMMA_27B_BLOCKS[meta.arch]:
        width = _first_int(meta.get("embedding_length")) // meta.n_heads
        base, how = width**-0.5, f"1/sqrt(embedding_length / head_count = {width}) (27B rule)"
    else:
        base, how = kl**-0.5, f"1/sqrt(key_length {kl})"
    factor, yarn = yarn_logit_factor(meta)
    if yarn:
        return base * factor, f"{how} x {yarn}"
    return base, how


def yarn_logit_factor(meta: GgufMeta) -> tuple[float, str]:
    """(the factor YaRN puts on the logits as llama.cpp computes it, in words; "" without)."""
    if str(meta.get("rope.scaling.type", "")).lower() != "yarn":
        return 1.0, ""
    f = float(meta.get("rope.scaling.factor", 1.0) or 1.0)
    a = float(meta.get("rope.scaling.attn_factor", 1.0) or 1.0)
    if f <= 1:
        return 1.0, ""
    if meta.arch.startswith("deepseek2"):
        lm = float(meta.get("rope.scaling.yarn_log_multiplier", 0.0) or 0.0)
        m = a * (1.0 + lm * math.log(f))
        return m * m, (f"YaRN mscale^2 ({a:g} x (1 + {lm:g} ln {f:g}))^2 = {m * m:.4g}")
    m = a * (1.0 + 0.1 * math.log(f))
    return m * m, f"YaRN cos/sin factor^2 ({a:g} x (1 + 0.1 ln {f:g}))^2 = {m * m:.4g}"
