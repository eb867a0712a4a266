"""port.csv (one row per layer, port beside source), port_gguf.csv (a GGUF file's attention keys
against the source) and port.json, written all or none."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine.io import staged, write_csv, write_json
from engine.probe.port.result import PortAudit

PORT_COLUMNS = ("layer", "block", "name", "kind", "port_scale_x_sqrt_dk", "port_tolerance_rel",
                "port_verdict", "source_scale_x_sqrt_dk", "source_verdict", "ratio", "state",
                "finding", "declared_x_sqrt_dk", "declared_source", "features")
GGUF_COLUMNS = ("key", "file", "source", "effect", "factor", "finding")
#: the files ``write_port_outputs`` may write
PORT_FILES = ("port.csv", "port_gguf.csv", "port.json")


def _num(x: float) -> Any:
    return float(x) if x is not None and math.isfinite(x) else ""


def port_rows(result: PortAudit) -> list[dict[str, Any]]:
    return [{"layer": r.layer, "block": r.block, "name": r.name, "kind": r.kind,
             "port_scale_x_sqrt_dk": _num(r.port_x), "port_tolerance_rel": _num(r.port_tol_rel),
             "port_verdict": r.port_verdict, "source_scale_x_sqrt_dk": _num(r.source_x),
             "source_verdict": r.source_verdict, "ratio": _num(r.ratio), "state": r.state,
             "finding": r.finding, "declared_x_sqrt_dk": _num(r.declared_x),
             "declared_source": r.declared_source, "features": "; ".join(r.features)}
            for r in result.layers]


def gguf_rows(result: PortAudit) -> list[dict[str, Any]]:
    return [{"key": m.key, "file": m.file, "source": m.source, "effect": m.effect,
             "factor": _num(m.factor), "finding": m.finding} for m in result.metadata]


def write_port_outputs(out: str | Path, result: PortAudit) -> list[Path]:
    out = Path(out)
    meta = {"command": "audit-model", "port": {"kind": result.kind, "path": result.path},
            "source": result.source_name, "n_tokens": result.n_tokens,
            "tokens": list(result.tokens), "token_ids_from": result.id_source,
            "findings": list(result.findings), "note": result.note,
            "timings_s": {k: v for k, v in result.timings.items()},
            **{k: _clean(v) for k, v in result.meta.items()}}
    with staged(out, ".audit-model-") as stage:
        names = []
        if result.layers:
            names.append(write_csv(stage / "port.csv", port_rows(result), PORT_COLUMNS).name)
        if result.metadata:
            names.append(write_csv(stage / "port_gguf.csv", gguf_rows(result),
                                   GGUF_COLUMNS).name)
        names.append(write_json(stage / "port.json", meta).name)
    return [out / n for n in names]


def _clean(v: Any) -> Any:
    """JSON without NaN/inf (they become null)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v
