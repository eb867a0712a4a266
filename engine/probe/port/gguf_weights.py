"""A GGUF file's weights in the source architecture: dequantized by transformers' GGUF reader
into a copy of the source model, compared tensor by tensor and audited layer by layer.

Each element of a stored tensor may differ from the source's by what its type's storage rounds
away, and no more (:func:`tolerance`, from the source's own values): half an ulp for a float type;
for Q8_0 (blocks of 32 along a row, one float16 step ``d = max|x| / 127`` and an int8 per element,
gguf-py's ``quants.Q8_0``) half a step for the rounding to an integer plus ``127 |d - f16(d)|``
for the step's own float16 rounding (and 2^-10 of a step for float32 arithmetic). A tensor any element of which is further from the source than
that (a row moved, a q/k permutation gone wrong) is a finding; a type without a bound here
(k-quants, ...) is reported as not compared.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.errors import Cancelled
from engine.probe.port.compare import Side, compare
from engine.probe.port.compare import state as state_text
from engine.probe.port.gguf_meta import GgufMeta
from engine.probe.port.result import PortLayer

#: half an ulp of a float type, relative, and half its smallest subnormal step
FLOAT_ROUNDING = {"F32": (2.0**-24, 2.0**-150), "F16": (2.0**-11, 2.0**-25),
                  "BF16": (2.0**-8, 2.0**-134), "F64": (2.0**-53, 0.0)}
#: Q8_0: elements per block and the largest int8 level (gguf-py quants.Q8_0)
Q8_BLOCK, Q8_LEVELS = 32, 127
#: relative slack on a float bound, and on a Q8_0 bound a share of the step: the float32
#: arithmetic of quantizing (x / d within 127 * 2^-24 of its value) stays 100x inside it
SLACK, Q8_SLACK = 1e-6, 2.0**-10
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_ATTN = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv", "query", "key", "value")


def supported(meta: GgufMeta) -> bool:
    try:
        from transformers.integrations.ggml import GGUF_CONFIG_MAPPING
    except ImportError:
        return False
    return meta.arch in GGUF_CONFIG_MAPPING


def gguf_state(meta: GgufMeta, net: Any) -> dict[str, Any]:
    """The file's tensors under the source model's names (dequantized, float)."""
    import contextlib
    import io

    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with contextlib.redirect_stderr(io.StringIO()):  # its own tqdm bar ignores the setting
        return load_gguf_checkpoint(str(meta.path), return_tensors=True,
                                    model_to_load=net)["tensors"]


def tolerance(qtype: str, source: np.ndarray) -> np.ndarray | None:
    """Per element, how far the stored ``source`` may be from it after ``qtype``'s rounding
    (None: no bound for that type)."""
    a = np.abs(np.asarray(source, dtype=np.float64))
    if qtype in FLOAT_ROUNDING:
        rel, tiny = FLOAT_ROUNDING[qtype]
        return a * rel * (1 + SLACK) + tiny
    if qtype != "Q8_0" or a.ndim < 1 or a.shape[-1] % Q8_BLOCK:
        return None
    blocks = a.reshape(*a.shape[:-1], -1, Q8_BLOCK)
    d = blocks.max(axis=-1, keepdims=True) / Q8_LEVELS
    d16 = d.astype(np.float16).astype(np.float64)
    bound = d / 2 + Q8_LEVELS * np.abs(d - d16) + d * Q8_SLACK
    return np.broadcast_to(bound, blocks.shape).reshape(a.shape)


def gguf_names(meta: GgufMeta, state: dict[str, Any]) -> dict[str, str]:
    """The source-side tensor name -> its name in the file (llama.cpp's tensor map)."""
    import gguf

    arch_id = next((k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == meta.arch), None)
    blocks = int(meta.get("block_count") or 0)
    if arch_id is None or not blocks:
        return {}
    names = gguf.get_tensor_name_map(arch_id, blocks)
    out = {}
    for name in state:
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is not None:
            out[name] = new
    return out


def weight_diffs(state: dict[str, Any], source: dict[str, Any], types: dict[str, str]
                 ) -> dict[int, tuple[str, float, str]]:
    """Per layer, the attention tensor furthest from the source: (name, its largest difference
    over the bound of its type, the type); inf for a shape that differs, NaN with no bound."""
    worst: dict[int, tuple[str, float, str]] = {}
    for name, t in state.items():
        m = _LAYER.search(name)
        if m is None or name not in source or not any(a in name for a in _ATTN):
            continue
        a = t.detach().double().cpu().numpy()
        b = source[name].detach().double().cpu().numpy()
        qtype = types.get(name, "?")
        bound = tolerance(qtype, b) if a.shape == b.shape else None
        if a.shape != b.shape:
            ratio = math.inf
        elif bound is None:
            ratio = math.nan
        else:
            ratio = float(np.max(np.abs(a - b) / np.maximum(bound, 1e-300)))
        layer = int(m.group(1))
        old = worst.get(layer)
        if old is None or math.isnan(old[1]) or ratio > old[1]:
            worst[layer] = (name, ratio, qtype)
    return worst


def weights_audit(meta: GgufMeta, loaded: Any, ids: Sequence[int], source: Any,
                  cancelled: Callable[[], bool] = lambda: False
                  ) -> tuple[list[PortLayer], list[str], dict[str, Any]]:
    """(layer rows of the file's weights audited in the source architecture, findings, info)."""
    if not supported(meta):
        return [], [], {"compared": False, "why": f"transformers does not read {meta.arch} "
                                                  "from GGUF"}
    import copy

    from engine.probe.audit import audit_ids
    from engine.probe.loader import wrap_model

    src_state = loaded.model.state_dict()
    state = gguf_state(meta, loaded.model)
    findings = []
    stored = gguf_names(meta, state)
    types = {k: meta.tensor_types.get(v, "?") for k, v in stored.items()}
    diffs = weight_diffs(state, src_state, types)
    for layer, (name, ratio, qtype) in sorted(diffs.items()):
        if ratio > 1.0:
            findings.append(f"layer {layer}: the file's {name} differs from the source's by "
                            f"{ratio:.3g} x what its {qtype} storage rounds away")
    if cancelled():
        raise Cancelled()
    net = copy.deepcopy(loaded.model)
    merged = {k: v for k, v in state.items() if k in src_state and v.shape == src_state[k].shape}
    net.load_state_dict(merged, strict=False)
    port = audit_ids(wrap_model(net, loaded.info), ids, cancelled=cancelled)
    rows = []
    for i in range(min(port.n_layers, source.n_layers)):
        ps = Side(port.head_fits[i], port.layer_fits[i], port.layer_verdicts[i], port.d_k)
        ss = Side(source.head_fits[i], source.layer_fits[i], source.layer_verdicts[i],
                  source.d_k)
        c = compare(ps, ss, i)
        sq = math.sqrt(port.d_k)
        tol = float(port.layer_fits[i].tol_log[0])
        rows.append(PortLayer(
            layer=i, name=port.sites[i].name if port.sites else str(i),
            block=port.sites[i].block if port.sites else "", kind="GGUF weights",
            port_x=ps.scale * sq, port_tol_rel=math.expm1(tol) if math.isfinite(tol) else math.inf,
            port_verdict=ps.verdict, declared_x=float(port.declared_scale[i]) * sq,
            declared_source=port.sites[i].declared_source if port.sites else "",
            features=port.sites[i].features if port.sites else (),
            source_x=ss.scale * sq, source_verdict=ss.verdict, ratio=c.ratio, state=state_text(c),
            finding=c.finding))
        if c.finding:
            findings.append(c.finding)
    info = {"compared": True, "tensors_read": len(state), "tensors_loaded": len(merged),
            "largest_diff_over_rounding": {str(k): v[1] for k, v in sorted(diffs.items())},
            "not_compared": sorted({v[2] for v in diffs.values() if math.isnan(v[1])})}
    return rows, findings, info
