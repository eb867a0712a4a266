"""audit.csv (one row per head), layers.csv (one per layer), whatif.csv, written atomically.

A head that cannot be audited has no tolerance: its tolerance cell is empty (never inf/NaN).
Training lab audits carry a leading ``run`` column (one file holds every rule's run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.io import staged, write_csv, write_json
from engine.probe.audit import AuditResult
from engine.probe.scale_fit import is_flagged, verdict_kind

#: audit.csv columns (the spec's first, then the fit's own figures)
AUDIT_COLUMNS: tuple[str, ...] = (
    "layer", "head", "d_k", "fitted_scale", "scale_x_sqrt_dk", "residual_max_abs", "identifiable",
    "verdict", "tolerance_rel", "residual_at_0.9s", "residual_at_1.1s", "misfit_kl",
    "weight_sum", "n_rows",
)
LAYER_COLUMNS: tuple[str, ...] = (
    "layer", "verdict", "flagged", "fitted_scale", "scale_x_sqrt_dk", "tolerance_rel",
    "heads_agreeing", "n_heads", "d_k", "d_model", "injected", "declared_scale",
)


def _tol(tol_log: float) -> Any:
    return math.expm1(tol_log) if math.isfinite(tol_log) else ""


def _num(x: float) -> Any:
    return float(x) if math.isfinite(x) else ""


def audit_rows(result: AuditResult) -> list[dict[str, Any]]:
    rows = []
    sq = math.sqrt(result.d_k)
    for layer, fit in enumerate(result.head_fits):
        for head in range(result.n_heads):
            row: dict[str, Any] = {} if result.run is None else {"run": result.run}
            row.update({
                "layer": layer, "head": head, "d_k": result.d_k,
                "fitted_scale": float(fit.scale[head]),
                "scale_x_sqrt_dk": float(fit.scale[head]) * sq,
                "residual_max_abs": float(fit.residual_max_abs[head]),
                "identifiable": bool(fit.identifiable[head]),
                "verdict": result.head_verdicts[layer][head],
                "tolerance_rel": _tol(float(fit.tol_log[head])),
                "residual_at_0.9s": float(fit.residual_probe[head, 0]),
                "residual_at_1.1s": float(fit.residual_probe[head, 1]),
                "misfit_kl": float(fit.misfit[head]),
                "weight_sum": float(fit.weight_sum[head]),
                "n_rows": fit.rows,
            })
            rows.append(row)
    return rows


def layer_rows(result: AuditResult) -> list[dict[str, Any]]:
    rows = []
    sq = math.sqrt(result.d_k)
    for layer, fit in enumerate(result.layer_fits):
        v = result.layer_verdicts[layer]
        agree = sum(verdict_kind(h) == verdict_kind(v) for h in result.head_verdicts[layer])
        row: dict[str, Any] = {} if result.run is None else {"run": result.run}
        row.update({
            "layer": layer, "verdict": v, "flagged": is_flagged(v),
            "fitted_scale": float(fit.scale[0]), "scale_x_sqrt_dk": float(fit.scale[0]) * sq,
            "tolerance_rel": _tol(float(fit.tol_log[0])), "heads_agreeing": agree,
            "n_heads": result.n_heads, "d_k": result.d_k, "d_model": result.d_model,
            "injected": result.inject.get(layer, ""),
            "declared_scale": _num(float(result.declared_scale[layer])),
        })
        rows.append(row)
    return rows


#: the files ``write_audit_outputs`` may write
AUDIT_FILES = ("audit.csv", "layers.csv", "whatif.csv", "audit.json")


def write_audit_outputs(out: str | Path, results: Sequence[AuditResult], whatif: Any = None,
                        extra: dict[str, Any] | None = None) -> list[Path]:
    """audit.csv, layers.csv, (whatif.csv) and audit.json (model, note, timings) in ``out``,
    all or none of them."""
    out = Path(out)
    lead = ("run",) if results and results[0].run is not None else ()
    a_rows = [r for res in results for r in audit_rows(res)]
    l_rows = [r for res in results for r in layer_rows(res)]
    tables = [("audit.csv", a_rows, lead + AUDIT_COLUMNS), ("layers.csv", l_rows, lead + LAYER_COLUMNS)]
    if whatif is not None:
        tables.append(("whatif.csv", whatif.rows(), whatif.columns()))
    first = results[0]
    meta = {
        "command": "audit-model",
        "model": {"name": first.model_name, "type": first.model_type, "layers": first.n_layers,
                  "heads": first.n_heads, "d_k": first.d_k, "d_model": first.d_model,
                  "causal": first.causal},
        "runs": [r.run for r in results if r.run is not None],
        "n_tokens": first.n_tokens,
        "tokens": list(first.tokens),  # the text as the model saw it (the audit can be rerun)
        **({"whatif_layer": "all" if whatif.layer is None else whatif.layer}
           if whatif is not None else {}),
        "inject": {str(k): v for k, v in first.inject.items()},
        "note": first.note,
        "method": "per head, s minimizing mean KL(P || softmax(s q.k + mask)); a known scale is "
                  "accepted when its KL exceeds the minimum by at most the misfit (or float32 "
                  "rounding), tolerance_rel is that band",
        "timings_s": {"forward": sum(r.forward_s for r in results),
                      "fit": sum(r.fit_s for r in results),
                      **({"whatif": whatif.sweep_s} if whatif is not None else {})},
        **(extra or {}),
    }
    # all files or none: a failure (disk full) leaves no mix of new and old ones
    with staged(out, ".audit-model-") as stage:
        names = [write_csv(stage / name, rows, cols).name for name, rows, cols in tables]
        names.append(write_json(stage / "audit.json", meta).name)
    return [out / name for name in names]
