"""The GGUF side of the port audit: the file's attention metadata against the source, and the
file's weights run in the source architecture.

Each difference that changes the attention logits is one finding: the scale llama.cpp will apply
(:func:`llama_cpp.llama_cpp_attention`, its rules cited there from llama.cpp's source) against the
scale the source audit measures in every layer (beyond that fit's band), the rotary cos/sin
magnitude where only part of a head rotates (DeepSeek), the soft-caps llama.cpp applies against
the source's, head counts, head width, sliding window and RoPE scaling.
Where transformers reads the architecture from GGUF, the dequantized tensors are also put into a
copy of the source model: each layer's attention weights are compared with the source's (within
the rounding of the file's tensor type; a q/k row permutation for RoPE gone wrong shows here) and
that model is audited beside the source, layer by layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import Cancelled, ConfigError
from engine.probe.port.gguf_meta import GgufMeta, read_gguf
from engine.probe.port.llama_cpp import LlamaCppAttention, llama_cpp_attention
from engine.probe.port.onnx_audit import PortConfig
from engine.probe.port.result import PortAudit, PortSnapshot

NOTE = ("the file's metadata read as llama.cpp reads it at run time, compared with what the "
        "source declares and what its audit measures on the same token ids")


@dataclass(frozen=True)
class MetaRow:
    key: str
    file: str
    source: str
    effect: str  #: what llama.cpp does with it
    factor: float  #: the factor on the logits it causes against the source (NaN: none)
    finding: str  #: "" when the file agrees with the source


def _fmt(v: Any) -> str:
    if v is None:
        return "absent"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def compare_meta(meta: GgufMeta, config: Any, source: Any) -> list[MetaRow]:
    """One row per attention key; ``config``/``source`` None without a reference."""
    lc = llama_cpp_attention(meta)
    rows = [_scale_row(meta, lc, source)]
    if not lc.full_rotary:
        rows.append(_rotary_row(meta, lc, config))
    rows += _softcap_rows(meta, lc, config)
    pairs = (("attention.head_count", meta.n_heads, "num_attention_heads"),
             ("attention.head_count_kv", meta.n_kv_heads, "num_key_value_heads"),
             ("attention.sliding_window", meta.get("attention.sliding_window"), "sliding_window"))
    for key, fv, attr in pairs:
        sv = None if config is None else getattr(config, attr, None)
        if attr == "sliding_window" and getattr(config, "use_sliding_window", True) is False:
            sv = None  # Qwen2 keeps a window in its config that it does not use
        if key == "attention.head_count_kv" and sv is None and config is not None:
            sv = getattr(config, "num_attention_heads", None)
        bad = config is not None and sv is not None and fv is not None and int(fv) != int(sv)
        bad |= config is not None and key == "attention.sliding_window" and bool(sv) and fv is None
        shown = "" if config is None else _fmt(sv)
        rows.append(MetaRow(key, _fmt(fv), shown, "", math.nan,
                            f"{meta.arch}.{key}: the file has {_fmt(fv)}, the source "
                            f"{attr} {_fmt(sv)}" if bad else ""))
    rows.append(_rope_row(meta, config))
    return rows


def _scale_row(meta: GgufMeta, lc: LlamaCppAttention, source: Any) -> MetaRow:
    kl = lc.key_length
    s = lc.logit_scale
    how = lc.how + (f" x {lc.rope_how}^2" if lc.full_rotary and lc.rope != 1.0 else "")
    x_file = s * math.sqrt(kl)
    file_text = f"{x_file:.6g} x 1/sqrt(d_k) ({how})"
    if source is None:
        return MetaRow("attention scale", file_text, "", "", math.nan, "")
    if source.d_k != kl:
        return MetaRow("attention.key_length", str(kl), str(source.d_k), how,
                       math.sqrt(source.d_k / kl), f"{meta.arch}.attention.key_length: the file "
                       f"has {kl}, the source's heads are {source.d_k} wide")
    measured = np.array([float(f.scale[0]) for f in source.layer_fits])
    tol = np.array([float(f.tol_log[0]) for f in source.layer_fits])
    gap = np.abs(np.log(s / measured))
    bad = np.isfinite(tol) & (gap > tol)
    factor = float(np.exp(np.median(np.log(s / measured))))
    src_text = f"{np.median(measured) * math.sqrt(kl):.6g} x 1/sqrt(d_k) (measured)"
    finding = ""
    if bad.any():
        where = "every layer" if bad.all() else "layers " + ", ".join(map(str, np.flatnonzero(bad)))
        finding = (f"attention scale: llama.cpp applies {how} = {x_file:.4g} x 1/sqrt(d_k), the "
                   f"source {src_text}: logits x{factor:.4g} in {where}")
    return MetaRow("attention scale", file_text, src_text, "llama.cpp's kq_scale", factor, finding)


#: relative difference below which two values read from metadata or a config are the same
#: (float32 keys: 6e-8; the YaRN factors computed from them: a few ulp of float32)
SAME_REL = 1e-5


def _rotary_row(meta: GgufMeta, lc: LlamaCppAttention, config: Any) -> MetaRow:
    """Where only ``n_rot`` of a head's dimensions rotate, the cos/sin magnitude is not a factor
    on the whole logit: compared with the source's rotary ``attention_scaling`` on its own."""
    key = f"rotary magnitude ({lc.n_rot} of {lc.key_length} dims)"
    if config is None:
        return MetaRow(key, lc.rope_how, "", "", math.nan, "")
    src = _source_rope(config)
    factor = (lc.rope / src) ** 2
    finding = ""
    if abs(factor - 1.0) > SAME_REL:
        finding = (f"{meta.arch}.rope.scaling: llama.cpp's {lc.rope_how}, the source's x{src:.4g}:"
                   f" the rotary part of the logits ({lc.n_rot} of {lc.key_length} dims) "
                   f"x{factor:.4g}")
    return MetaRow(key, lc.rope_how, f"rotary cos/sin x{src:.4g}", "rotary cos/sin", factor,
                   finding)


def _source_rope(config: Any) -> float:
    """The magnitude the source's rotary embedding puts on cos/sin (transformers' yarn
    ``attention_factor``), from its rope parameters as transformers computes it."""
    from engine.probe.port.llama_cpp import get_mscale

    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if str(rope.get("rope_type", rope.get("type", ""))) != "yarn":
        return 1.0
    if rope.get("attention_factor") is not None:
        return float(rope["attention_factor"])
    f = float(rope.get("factor") or 1.0)
    m, m_all = rope.get("mscale"), rope.get("mscale_all_dim")
    if m and m_all:
        return get_mscale(f, float(m)) / get_mscale(f, float(m_all))
    return get_mscale(f, 1.0)


def _softcap_rows(meta: GgufMeta, lc: LlamaCppAttention, config: Any) -> list[MetaRow]:
    rows = []
    for key, what, applied, how in (
            ("attn_logit_softcapping", "attention logits", lc.attn_cap, lc.attn_cap_how),
            ("final_logit_softcapping", "output logits", lc.final_cap, lc.final_cap_how)):
        fv = meta.get(key)
        sv = None if config is None else getattr(config, key, None) or None
        finding = ""
        if config is not None and sv and applied is None:
            finding = (f"{meta.arch}.{key}: the source caps the {what} at {sv:g}, llama.cpp does "
                       f"not ({how})")
        elif config is not None and applied is not None and not sv:
            finding = (f"{meta.arch}.{key}: llama.cpp caps the {what} at {how}, the source does "
                       "not")
        elif config is not None and applied is not None and \
                abs(applied / float(sv) - 1) > SAME_REL:
            finding = (f"{meta.arch}.{key}: llama.cpp caps the {what} at {how}, the source at "
                       f"{sv:g} (x{applied / float(sv):.4g})")
        rows.append(MetaRow(key, _fmt(fv), "" if config is None else _fmt(sv),
                            f"caps the {what} at {how}" if applied is not None else how,
                            math.nan, finding))
    return rows


def _rope_row(meta: GgufMeta, config: Any) -> MetaRow:
    ftype = str(meta.get("rope.scaling.type", "none") or "none")
    ff = meta.get("rope.scaling.factor")
    file_text = ftype + (f" x{float(ff):g}" if ff else "")
    if config is None:
        return MetaRow("rope.scaling", file_text, "", "", math.nan, "")
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    stype = str(rope.get("rope_type", rope.get("type", "default")) or "default")
    stype = "none" if stype == "default" else stype
    sf = rope.get("factor")
    src_text = stype + (f" x{float(sf):g}" if sf and stype != "none" else "")
    same = stype == ftype and (stype == "none" or not sf or not ff or
                               abs(float(ff) / float(sf) - 1) < 1e-6)
    return MetaRow("rope.scaling", file_text, src_text, "rotary scaling", math.nan,
                   "" if same else f"{meta.arch}.rope.scaling: the file has {file_text}, the "
                   f"source {src_text}")


def audit_gguf(cfg: PortConfig, loaded: Any = None, cancelled: Callable[[], bool] = lambda: False,
               ids: Sequence[int] | None = None) -> Iterator[PortSnapshot]:
    """Audit ``cfg.path`` (a GGUF file) beside ``cfg.reference`` (or ``loaded``)."""
    yield PortSnapshot("reading the file", 0.0)
    meta = read_gguf(cfg.path, "gguf")
    llama_cpp_attention(meta)  # a file without the keys is refused before any model loads
    if loaded is None and cfg.reference is not None:
        from engine.probe.loader import load_model

        yield PortSnapshot("loading the source model", 0.05)
        loaded = load_model(cfg.reference, cfg.memory_budget)
    source = None
    tokens: tuple[str, ...] = ()
    id_source = ""
    if loaded is not None:
        ids, tokens, id_source = _ids(loaded, cfg, ids)
        from engine.probe.audit import audit_tokens

        for snap in audit_tokens(loaded, ids, tokens, {}, cancelled):
            yield PortSnapshot(f"source: {snap.stage}", 0.1 + 0.4 * snap.fraction)
            source = snap.result or source
    rows = compare_meta(meta, None if loaded is None else loaded.model.config, source)
    findings = [r.finding for r in rows if r.finding]
    layers: list[Any] = []
    weights: dict[str, Any] = {}
    if loaded is not None:
        if cancelled():
            raise Cancelled()
        yield PortSnapshot("the file's weights in the source architecture", 0.6)
        from engine.probe.port.gguf_weights import weights_audit

        layers, more, weights = weights_audit(meta, loaded, ids, source, cancelled)
        findings += more
    yield PortSnapshot("done", 1.0, done=True, result=PortAudit(
        kind="gguf", path=str(meta.path), source_name=None if loaded is None else loaded.info.name,
        layers=layers, sites=(), source=source, n_tokens=0 if ids is None else len(ids),
        tokens=tokens, id_source=id_source, findings=tuple(findings), timings={},
        meta={"architecture": meta.arch, "weights": weights}, note=NOTE, metadata=tuple(rows)))


def _ids(loaded: Any, cfg: PortConfig, ids: Sequence[int] | None):
    if ids is not None:
        return tuple(int(i) for i in ids), (), "token ids given"
    if loaded.tokenizer is None:
        raise ConfigError("reference", "the source model has no tokenizer")
    from engine.probe.loader import tokenize
    from engine.probe.texts import default_text

    t = tokenize(loaded, cfg.text or default_text(), cfg.max_tokens)
    return t.ids, t.tokens, "the reference's tokenizer"
