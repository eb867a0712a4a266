"""What llama.cpp applies to the attention logits of a GGUF file, read as llama.cpp reads it.

Each rule follows llama.cpp's own source (ggml-org/llama.cpp, read 2026; the file and function
named at each rule), not the source model's config:

* **kq_scale.** ``src/models/llama.cpp`` (``llama_model_llama::graph``) and the other decoders
  pass ``1/sqrt(n_embd_head_k)`` to ``build_attn`` (``n_embd_head_k``: ``{arch}.attention.
  key_length``, else ``embedding_length / head_count``, ``llama_model::load_hparams``);
  ``{arch}.attention.scale`` is read only where the architecture's ``load_arch_hparams`` asks for
  it: Granite (``src/models/granite.cpp``: ``llama_model_granite::load_arch_hparams`` reads
  ``LLM_KV_ATTENTION_SCALE`` into ``f_attention_scale``, ``build_attention_layer`` uses it when
  non-zero). Llama, Qwen2 and Gemma ignore the key.
* **Gemma 2 and 3.** ``llama_model_gemma2::load_arch_hparams`` (``src/models/gemma2.cpp``) and
  Gemma 3's set ``f_attention_scale = 1/sqrt(n_embd / n_head)`` for the 27B type (46 blocks; Gemma
  3: 62) and ``1/sqrt(n_embd_head_k)`` otherwise; the graph multiplies Q by it and calls
  ``build_attn`` with 1.0. The source's ``query_pre_attn_scalar`` is not in the file (llama.cpp
  #8444).
* **Soft-cap.** ``llm_graph_context::build_attn_mha`` (``src/llama-graph.cpp``) caps ``k.q`` with
  ``f_attn_logit_softcapping`` only when ``hparams.attn_soft_cap``, which Gemma 2's
  ``load_arch_hparams`` sets; the key is optional there, and ``llama_hparams``
  (``src/llama-hparams.h``) defaults it to 50 and ``f_final_logit_softcapping`` (which Gemma 2's
  graph applies to the output unconditionally) to 30. A Gemma 2 file without the keys is
  therefore capped at 50 / 30 (builds before PR #8197, llama.cpp #8156, did not cap at all).
* **YaRN.** ``llama_context::llama_context`` (``src/llama-context.cpp``) sets
  ``yarn_attn_factor``: ``get_mscale(f, m) / get_mscale(f, L)`` when ``rope_yarn_log_mul`` L is
  non-zero (m = L for DeepSeek 2 when L != 1, else 1), ``get_mscale(f, 1)`` otherwise, divided by
  ``1 + 0.1 ln f`` (ggml's rope multiplies it back, ``rope_yarn`` in ggml-cpu ``ops.cpp``) and
  times ``{arch}.rope.scaling.attn_factor``; with ``get_mscale(f, m) = 1 + 0.1 m ln f``. So the
  rotary cos/sin carry ``yarn_attn_factor * (1 + 0.1 ln f)``; where every dimension rotates the
  logits carry its square.
* **DeepSeek 2/3.** ``llama_model_deepseek2::load_arch_hparams`` reads
  ``rope.scaling.yarn_log_multiplier`` (optional) and divides it by 0.1 (the converter wrote
  ``0.1 * mscale_all_dim``; PR #17945, ``[TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]``); the graph
  (``src/models/deepseek2.cpp``) takes ``attn_factor_org = attn_factor * (1 + 0.1 ln f)``,
  ``mscale = attn_factor_org * (1 + 0.1 L ln f)`` and ``kq_scale = mscale^2 / sqrt(key_length)``.
  A file without the multiplier keeps kq_scale at ``(1 + 0.1 ln f)^2 / sqrt(d)`` (DeepSeek-V3's own
  value) but its rotary dimensions' cos/sin then carry ``1 + 0.1 ln f``: their part of the logits
  ``(1 + 0.1 ln f)^2`` (x1.874 at f = 40) too large. Builds before PR #17945 required the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.errors import ConfigError
from engine.probe.port.gguf_meta import GgufMeta, first_int

#: block counts of the 27B sizes, where llama.cpp's Gemma scale is 1/sqrt(n_embd / n_head)
GEMMA_27B_BLOCKS = {"gemma2": 46, "gemma3": 62}
#: architectures whose load_arch_hparams reads ``{arch}.attention.scale``
SCALE_KEY_ARCHS = frozenset({"granite", "granitemoe"})
#: architectures with ``attn_soft_cap`` set: (default attention cap, default final cap)
SOFTCAP_ARCHS = {"gemma2": (50.0, 30.0)}
#: architectures whose loader reads the YaRN log multiplier (divided by 0.1) into kq_scale
YARN_LOG_MUL_ARCHS = frozenset({"deepseek2"})


@dataclass(frozen=True)
class LlamaCppAttention:
    """What llama.cpp applies to one file's attention logits."""

    key_length: int
    n_rot: int  #: dimensions of a head the rotary embedding turns
    kq: float  #: the factor on q.k (kq_scale, or Gemma's Q multiplier)
    how: str
    rope: float  #: the magnitude the rotary cos/sin carry (on q and on k)
    rope_how: str
    attn_cap: float | None  #: None: not capped
    attn_cap_how: str
    final_cap: float | None
    final_cap_how: str

    @property
    def full_rotary(self) -> bool:
        return self.n_rot >= self.key_length

    @property
    def logit_scale(self) -> float:
        """The factor on the projections' q.k as the source audit measures it: kq_scale, and the
        rotary magnitude squared where every dimension rotates."""
        return self.kq * (self.rope**2 if self.full_rotary else 1.0)


def get_mscale(scale: float, mscale: float) -> float:
    """``get_mscale`` of llama_context::llama_context (and transformers' yarn_get_mscale)."""
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


def _float(meta: GgufMeta, key: str) -> float | None:
    v = meta.get(key)
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _rope(meta: GgufMeta) -> tuple[float, float, float, bool, str]:
    """(the graph's attn_factor, the rotary magnitude, f, YaRN on, in words)."""
    kind = str(meta.get("rope.scaling.type", "") or "linear").lower()
    f = _float(meta, "rope.scaling.factor") or 1.0
    if kind == "none" or f <= 0:
        f = 1.0
    a = _float(meta, "rope.scaling.attn_factor")
    a = 1.0 if a is None else a
    yarn = kind == "yarn"
    factor = 1.0
    how = ""
    if yarn:
        lm = _log_mul(meta)
        if lm:
            m = lm if meta.arch in YARN_LOG_MUL_ARCHS and lm != 1.0 else 1.0
            factor = get_mscale(f, m) / get_mscale(f, lm)
        else:
            factor = get_mscale(f, 1.0)
        factor /= 1.0 + 0.1 * math.log(f)
    attn_factor = factor * a
    rope = attn_factor * (1.0 + 0.1 * math.log(f)) if yarn else attn_factor
    parts = ([f"YaRN x{f:g}"] if yarn else []) + ([f"attn_factor {a:g}"] if a != 1.0 else [])
    how = f"rotary cos/sin x{rope:.4g} ({', '.join(parts)})" if parts else ""
    return attn_factor, rope, f, yarn, how


def _log_mul(meta: GgufMeta) -> float:
    """llama.cpp's ``rope_yarn_log_mul`` (the file's value / 0.1; 0 where it is not read)."""
    if meta.arch not in YARN_LOG_MUL_ARCHS:
        return 0.0
    raw = _float(meta, "rope.scaling.yarn_log_multiplier")
    return 0.0 if raw is None else raw / 0.1


def _base(meta: GgufMeta, kl: int) -> tuple[float, str]:
    arch = meta.arch
    key = _float(meta, "attention.scale")
    if arch in GEMMA_27B_BLOCKS:
        ignored = " (attention.scale in the file is not read for gemma)" if key else ""
        if first_int(meta.get("block_count")) == GEMMA_27B_BLOCKS[arch]:
            emb, heads = first_int(meta.get("embedding_length")), meta.n_heads
            width = emb // heads if emb and heads else kl
            return width**-0.5, f"1/sqrt(embedding_length / head_count = {width}) (27B rule)" \
                + ignored
        return kl**-0.5, f"1/sqrt(key_length {kl}){ignored}"
    if arch in SCALE_KEY_ARCHS and key:
        return key, f"attention.scale {key:.6g}"
    ignored = f" (attention.scale in the file is not read for {arch})" if key and \
        arch not in SCALE_KEY_ARCHS else ""
    return kl**-0.5, f"1/sqrt(key_length {kl}){ignored}"


def _caps(meta: GgufMeta) -> tuple[float | None, str, float | None, str]:
    if meta.arch not in SOFTCAP_ARCHS:
        present = [k for k in ("attn_logit_softcapping", "final_logit_softcapping")
                   if meta.get(k) is not None]
        why = (f"not applied: llama.cpp's {meta.arch} graph has no soft-cap"
               + (f" ({', '.join(present)} in the file is not read)" if present else ""))
        return None, why, None, why
    out: list[float | str | None] = []
    for key, default in zip(("attn_logit_softcapping", "final_logit_softcapping"),
                            SOFTCAP_ARCHS[meta.arch]):
        v = _float(meta, key)
        out += [v, f"{v:g} (the file's key)"] if v else \
            [default, f"{default:g} (llama.cpp's default: the file has no key)"]
    return out[0], out[1], out[2], out[3]  # type: ignore[return-value]


def llama_cpp_attention(meta: GgufMeta) -> LlamaCppAttention:
    """What llama.cpp applies to ``meta``'s attention logits (ConfigError when the file lacks
    the head width)."""
    kl = meta.key_length
    if not kl:
        raise ConfigError("gguf", f"{meta.path.name}: neither {meta.arch}.attention.key_length "
                          "nor embedding_length / head_count is in the file")
    n_rot = first_int(meta.get("rope.dimension_count")) or kl
    attn_factor, rope, f, _yarn, rope_how = _rope(meta)
    if meta.arch in YARN_LOG_MUL_ARCHS:
        org = attn_factor * (1.0 + 0.1 * math.log(f))
        lm = _log_mul(meta)
        mscale = org * (1.0 + 0.1 * lm * math.log(f))
        kq = mscale * mscale / math.sqrt(kl)
        how = (f"mscale^2/sqrt(key_length {kl}), mscale = {org:.4g} x (1 + 0.1 x {lm:.4g} ln "
               f"{f:g}) = {mscale:.4g}")
    else:
        kq, how = _base(meta, kl)
    attn_cap, attn_how, final_cap, final_how = _caps(meta)
    return LlamaCppAttention(kl, n_rot, kq, how, rope, rope_how or "rotary cos/sin x1",
                             attn_cap, attn_how, final_cap, final_how)
