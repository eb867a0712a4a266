"""The port audit's plain-data result: one row per layer, side by side with the source."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.probe.port.compare import Side, compare, state


@dataclass(frozen=True)
class PortLayer:
    """One attention layer: the port's measured scale beside the source's (as x 1/sqrt(d_k))."""

    layer: int
    name: str  #: the port's node (ONNX) or tensor prefix (GGUF)
    block: str  #: the source's block (encoder, decoder, cross) or the port's pattern
    kind: str  #: unfused, a fused operator's name, or "GGUF weights"
    port_x: float  #: port scale x sqrt(d_k)
    port_tol_rel: float  #: its band (inf: not identifiable)
    port_verdict: str
    declared_x: float  #: what the port declares (the graph's constants, the attribute), or NaN
    declared_source: str
    features: tuple[str, ...]
    source_x: float = math.nan  #: NaN without a source
    source_verdict: str = ""
    ratio: float = math.nan
    state: str = ""  #: "as the source", "MISMATCH", "" without a source
    finding: str = ""


@dataclass(frozen=True)
class PortAudit:
    kind: str  #: "onnx" or "gguf"
    path: str
    source_name: str | None
    layers: tuple[PortLayer, ...] | list[PortLayer]
    sites: tuple[Any, ...]  #: ONNX: PortSite per layer; GGUF: ()
    source: Any  #: the source's AuditResult, or None
    n_tokens: int
    tokens: tuple[str, ...]
    id_source: str
    findings: tuple[str, ...]  #: every MISMATCH or metadata finding, one line each
    timings: dict[str, float]
    meta: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    metadata: tuple[Any, ...] = ()  #: GGUF: the attention keys compared (MetaRow)

    def series(self) -> dict[str, np.ndarray]:
        """Per-layer s * sqrt(d_k) of the port and the source (NaN where absent), for plots."""
        return {"port": np.array([r.port_x for r in self.layers]),
                "source": np.array([r.source_x for r in self.layers])}


@dataclass(frozen=True)
class PortSnapshot:
    stage: str
    fraction: float
    done: bool = False
    result: PortAudit | None = None


def _tol_rel(tol_log: float) -> float:
    return math.expm1(tol_log) if math.isfinite(tol_log) else math.inf


def build_layers(sites: list[Any], source: Any) -> tuple[list[PortLayer], list[str]]:
    """The side-by-side rows of fitted port sites (ONNX) and the findings."""
    rows, findings = [], []
    same = source is not None and source.n_layers == len(sites)
    if source is not None and not same:
        findings.append(f"the port has {len(sites)} attention layers, the source "
                        f"{source.n_layers}: layers are not compared")
    for i, s in enumerate(sites):
        sq = math.sqrt(s.d_k)
        declared = s.declared * sq if s.declared is not None else math.nan
        row = dict(layer=i, name=s.name, kind=s.kind, port_x=float(s.fit.layer.scale[0]) * sq,
                   port_tol_rel=_tol_rel(float(s.fit.layer.tol_log[0])),
                   port_verdict=s.fit.layer_verdict, declared_x=declared,
                   declared_source=s.declared_source, features=s.features,
                   block="cross" if s.cross else ("decoder" if s.causal else "encoder"))
        if same:
            src = Side(source.head_fits[i], source.layer_fits[i], source.layer_verdicts[i],
                       source.d_k)
            c = compare(Side(s.fit.head, s.fit.layer, s.fit.layer_verdict, s.d_k), src, i)
            row.update(source_x=src.scale * math.sqrt(src.d_k), source_verdict=src.verdict,
                       ratio=c.ratio, state=state(c), finding=c.finding)
            if source.sites:
                row["block"] = source.sites[i].block
            if c.finding:
                findings.append(c.finding)
        rows.append(PortLayer(**row))
    return rows, findings
