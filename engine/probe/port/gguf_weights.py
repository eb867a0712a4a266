"""A GGUF file's weights in the source architecture: dequantized by transformers' GGUF reader
into a copy of the source model, compared tensor by tensor and audited layer by layer."""

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

#: relative rounding of one stored value, per tensor type (quantized types: not compared exactly)
TYPE_EPS = {"F32": 2.0**-23, "F16": 2.0**-10, "BF16": 2.0**-7, "F64": 2.0**-52}
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


def _eps(meta: GgufMeta, layer: int) -> float | None:
    types = {t for n, t in meta.tensor_types.items() if n.startswith(f"blk.{layer}.attn")}
    if not types or any(t not in TYPE_EPS for t in types):
        return None
    return max(TYPE_EPS[t] for t in types)


def weight_diffs(state: dict[str, Any], source: dict[str, Any]) -> dict[int, tuple[str, float]]:
    """Per layer, the attention tensor whose relative difference from the source is largest."""
    worst: dict[int, tuple[str, float]] = {}
    for name, t in state.items():
        m = _LAYER.search(name)
        if m is None or name not in source or not any(a in name for a in _ATTN):
            continue
        a = t.detach().double().cpu().numpy()
        b = source[name].detach().double().cpu().numpy()
        if a.shape != b.shape:
            rel = math.inf
        else:
            rel = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))
        layer = int(m.group(1))
        if layer not in worst or rel > worst[layer][1]:
            worst[layer] = (name, rel)
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
    diffs = weight_diffs(state, src_state)
    for layer, (name, rel) in sorted(diffs.items()):
        eps = _eps(meta, layer)
        if eps is not None and rel > eps:
            findings.append(f"layer {layer}: the file's {name} differs from the source's by "
                            f"{rel:.3g} of its size (its tensor type rounds to {eps:.2g})")
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
            "largest_rel_diff": {str(k): v[1] for k, v in sorted(diffs.items())}}
    return rows, findings, info
