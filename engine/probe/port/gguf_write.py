"""Write a transformers model as a GGUF file the way llama.cpp's converter lays it out (float32
tensors, or Q8_0 as ``convert_hf_to_gguf.py --outtype q8_0`` writes them; the attention metadata
llama.cpp reads), for the port audit's own round trips.

``drop`` leaves keys out and ``override`` replaces values, so a test (or the bench) can write the
port bugs that shipped: a Gemma 2 file without its soft-cap key (llama.cpp #8156), a DeepSeek file
without YaRN's log multiplier (mobius #548).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

#: transformers model_type -> llama.cpp architecture
ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "gemma2": "gemma2",
        "gemma3_text": "gemma3", "deepseek_v3": "deepseek2", "granite": "granite"}
#: architectures whose converter permutes q/k rows for llama.cpp's rotary layout
PERMUTED = frozenset({"llama", "granite"})
#: tensor types the writer can store (Q8_0: blocks of 32 along a row; others stay float32)
QTYPES = ("F32", "Q8_0")


def metadata(config: Any) -> dict[str, Any]:
    """The attention keys (without the arch prefix) llama.cpp's converter writes for ``config``."""
    c = config
    heads = int(c.num_attention_heads)
    head_dim = int(getattr(c, "head_dim", None) or c.hidden_size // heads)
    if c.model_type == "deepseek_v3":
        head_dim = int(c.qk_nope_head_dim + c.qk_rope_head_dim)
    out: dict[str, Any] = {
        "block_count": int(c.num_hidden_layers), "embedding_length": int(c.hidden_size),
        "context_length": int(c.max_position_embeddings),
        "feed_forward_length": int(c.intermediate_size), "attention.head_count": heads,
        "attention.head_count_kv": int(getattr(c, "num_key_value_heads", None) or heads),
        "attention.key_length": head_dim,
        "attention.value_length": int(getattr(c, "v_head_dim", None) or head_dim),
        "attention.layer_norm_rms_epsilon": float(c.rms_norm_eps),
        "rope.dimension_count": int(getattr(c, "qk_rope_head_dim", None) or head_dim),
    }
    if c.model_type == "granite":  # convert_hf_to_gguf.py GraniteModel.set_gguf_parameters
        out.update({"attention.scale": float(c.attention_multiplier),
                    "embedding_scale": float(c.embedding_multiplier),
                    "residual_scale": float(c.residual_multiplier),
                    "logit_scale": float(c.logits_scaling)})
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        v = getattr(c, key, None)
        if v:
            out[key] = float(v)
    if getattr(c, "sliding_window", None):
        out["attention.sliding_window"] = int(c.sliding_window)
    rope = getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {}
    if str(rope.get("rope_type", rope.get("type", ""))) == "yarn":
        out["rope.scaling.type"] = "yarn"
        out["rope.scaling.factor"] = float(rope["factor"])
        orig = rope.get("original_max_position_embeddings")
        if orig:
            out["rope.scaling.original_context_length"] = int(orig)
        if c.model_type == "deepseek_v3" and rope.get("mscale_all_dim"):
            out["rope.scaling.yarn_log_multiplier"] = 0.1 * float(rope["mscale_all_dim"])
    return out


def write_gguf(net: Any, path: str | Path, drop: Iterable[str] = (),
               override: dict[str, Any] | None = None, permute_qk: bool = True,
               qtype: str = "F32") -> Path:
    """``net`` (a transformers base model) as a GGUF file at ``path``: float32, or ``qtype``
    "Q8_0" for every 2-D weight whose rows are whole blocks of 32 (``permute_qk`` False writes
    llama's q/k rows unpermuted: a converter bug)."""
    import gguf

    if qtype not in QTYPES:
        raise ValueError(f"qtype must be one of {QTYPES}, got {qtype!r}")
    cfg = net.config
    arch = ARCH[cfg.model_type]
    meta = {k: v for k, v in metadata(cfg).items() if k not in set(drop)}
    meta.update(override or {})
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny {cfg.model_type}")
    for key, value in meta.items():
        _add(w, f"{arch}.{key}", value, gguf)
    for name, t in _tensors(net, arch, gguf, permute_qk):
        q8 = gguf.GGMLQuantizationType.Q8_0
        if qtype == "Q8_0" and t.ndim == 2 and t.shape[-1] % gguf.GGML_QUANT_SIZES[q8][0] == 0:
            w.add_tensor(name, gguf.quants.quantize(t, q8), raw_dtype=q8)
        else:
            w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def _add(w: Any, key: str, value: Any, gguf: Any) -> None:
    if isinstance(value, str):
        w.add_string(key, value)
    elif isinstance(value, bool):
        w.add_bool(key, value)
    elif isinstance(value, int):
        w.add_uint32(key, value)
    else:
        w.add_float32(key, float(value))


def _tensors(net: Any, arch: str, gguf: Any, permute_qk: bool = True
             ) -> list[tuple[str, np.ndarray]]:
    """(GGUF name, float32 array) of every mapped tensor, laid out as llama.cpp's converter
    does: q/k rows permuted for llama's rotary layout, Gemma's norms stored as 1 + weight."""
    arch_id = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)
    names = gguf.get_tensor_name_map(arch_id, int(net.config.num_hidden_layers))
    cfg = net.config
    out = []
    for hf_name, t in net.state_dict().items():
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            continue
        a = t.detach().float().cpu().numpy()
        if permute_qk and arch in PERMUTED and (".attn_q." in new or ".attn_k." in new):
            heads = cfg.num_attention_heads if ".attn_q." in new else \
                (cfg.num_key_value_heads or cfg.num_attention_heads)
            a = permute(a, heads)
        if arch.startswith("gemma") and new.endswith("norm.weight"):
            a = a + 1.0
        out.append((new, np.ascontiguousarray(a, dtype=np.float32)))
    return out


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter's q/k row order (each head's halves interleaved)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))
