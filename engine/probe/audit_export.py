"""audit.csv (one row per head), layers.csv (one per layer), whatif.csv, written atomically.

A head that cannot be audited has no tolerance: its tolerance cell is empty (never inf/NaN).
Training lab audits carry a leading ``run`` column (one file holds every rule's run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.io import staged, write_csv, write_json
from engine.probe.audit import AuditResult
from engine.probe.scale_fit import is_flagged, verdict_kind

#: audit.csv columns (the spec's first, then the fit's own figures)
AUDIT_COLUMNS: tuple[str, ...] = (
    "layer", "head", "d_k", "fitted_scale", "scale_x_sqrt_dk", "residual_max_abs", "identifiable",
    "verdict", "tolerance_rel", "residual_at_0.9s", "residual_at_1.1s", "misfit_kl",
    "weight_sum", "n_rows", "block", "kv_head", "declared_scale", "softcap", "features",
)
LAYER_COLUMNS: tuple[str, ...] = (
    "layer", "verdict", "flagged", "fitted_scale", "scale_x_sqrt_dk", "tolerance_rel",
    "heads_agreeing", "n_heads", "d_k", "d_model", "injected", "declared_scale",
    "block", "name", "features", "declared_source", "matches_declared", "mismatch",
    "softcap_declared", "softcap", "declared_known", "declared_note", "shares_weights_with",
)


def _tol(tol_log: float) -> Any:
    return math.expm1(tol_log) if math.isfinite(tol_log) else ""


def _num(x: float | None) -> Any:
    return float(x) if x is not None and math.isfinite(x) else ""


def _site_cells(result: AuditResult, layer: int) -> dict[str, Any]:
    """The per-site columns (empty for Training lab runs, which have no sites)."""
    if not result.sites:
        return {"block": "", "features": ""}
    s = result.sites[layer]
    return {"block": s.block, "features": "; ".join(s.features)}


def audit_rows(result: AuditResult) -> list[dict[str, Any]]:
    rows = []
    for layer, fit in enumerate(result.head_fits):
        sq = math.sqrt(result.d_k_at(layer))
        for head in range(result.heads_at(layer)):
            row: dict[str, Any] = {} if result.run is None else {"run": result.run}
            row.update({
                "layer": layer, "head": head, "d_k": result.d_k_at(layer),
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
                **_site_cells(result, layer),
                "kv_head": int(result.sites[layer].kv_head[head]) if result.sites else "",
                "declared_scale": _num(float(result.declared_scale[layer])),
                "softcap": _num(float(result.sites[layer].softcap[head]))
                if result.sites and result.sites[layer].softcap is not None else "",
            })
            rows.append(row)
    return rows


def layer_rows(result: AuditResult) -> list[dict[str, Any]]:
    rows = []
    for layer, fit in enumerate(result.layer_fits):
        sq = math.sqrt(result.d_k_at(layer))
        v = result.layer_verdicts[layer]
        agree = sum(verdict_kind(h) == verdict_kind(v) for h in result.head_verdicts[layer])
        row: dict[str, Any] = {} if result.run is None else {"run": result.run}
        row.update({
            "layer": layer, "verdict": v, "flagged": is_flagged(v),
            "fitted_scale": float(fit.scale[0]), "scale_x_sqrt_dk": float(fit.scale[0]) * sq,
            "tolerance_rel": _tol(float(fit.tol_log[0])), "heads_agreeing": agree,
            "n_heads": result.heads_at(layer), "d_k": result.d_k_at(layer),
            "d_model": result.d_model,
            "injected": result.inject.get(layer, ""),
            "declared_scale": _num(float(result.declared_scale[layer])),
            **_site_cells(result, layer),
        })
        if result.sites:
            site = result.sites[layer]
            caps = None if site.softcap is None else site.softcap[np.isfinite(site.softcap)]
            row.update({"name": site.name, "declared_source": site.declared_source,
                        "matches_declared": site.matches_declared, "mismatch": site.mismatch,
                        "declared_known": site.declared_known,
                        "declared_note": site.declared_note,
                        "shares_weights_with": "" if site.shares_weights_with is None
                        else site.shares_weights_with,
                        "softcap_declared": _num(site.softcap_declared),
                        "softcap": _num(float(np.median(caps))) if caps is not None and caps.size
                        else ""})
        else:
            row.update({"name": "", "declared_source": "", "matches_declared": "",
                        "mismatch": "", "softcap_declared": "", "softcap": "",
                        "declared_known": "", "declared_note": "",
                        "shares_weights_with": ""})
        rows.append(row)
    return rows


#: the files ``write_audit_outputs`` may write
AUDIT_FILES = ("audit.csv", "layers.csv", "whatif.csv", "backends.csv", "audit.json")


def write_audit_outputs(out: str | Path, results: Sequence[AuditResult], whatif: Any = None,
                        extra: dict[str, Any] | None = None, backends: Any = None) -> list[Path]:
    """audit.csv, layers.csv, (whatif.csv, backends.csv) and audit.json (model, note, timings)
    in ``out``, all or none of them."""
    out = Path(out)
    lead = ("run",) if results and results[0].run is not None else ()
    a_rows = [r for res in results for r in audit_rows(res)]
    l_rows = [r for res in results for r in layer_rows(res)]
    tables = [("audit.csv", a_rows, lead + AUDIT_COLUMNS), ("layers.csv", l_rows, lead + LAYER_COLUMNS)]
    if whatif is not None:
        tables.append(("whatif.csv", whatif.rows(), whatif.columns()))
    first = results[0]
    if backends is not None:
        from engine.probe.backends import COLUMNS as BACKEND_COLUMNS

        tables.append(("backends.csv", backends.rows([s.block for s in first.sites]),
                       BACKEND_COLUMNS))
    meta = {
        "command": "audit-model",
        "model": {"name": first.model_name, "type": first.model_type, "layers": first.n_layers,
                  "heads": first.n_heads, "d_k": first.d_k, "d_model": first.d_model,
                  "causal": first.causal,
                  **({"layer_d_k": list(first.site_d_k), "layer_heads": list(first.site_heads)}
                     if first.site_d_k else {})},
        "runs": [r.run for r in results if r.run is not None],
        "n_tokens": first.n_tokens,
        "tokens": list(first.tokens),  # the text as the model saw it (the audit can be rerun)
        **({"whatif_layer": "all" if whatif.layer is None else whatif.layer,
            "whatif_model": whatif.model_state} if whatif is not None else {}),
        **({"backends": {"compared": list(backends.compared),
                         "unavailable": dict(backends.unavailable),
                         "tolerance_rel_floor": backends.tolerance,
                         "flagged": [{"backend": b.backend, "layer": b.site,
                                      "output_rel_diff": b.output_rel_diff}
                                     for b in backends.flagged()]}}
           if backends is not None else {}),
        "mismatched_layers": first.mismatched_layers(),
        "declaration_unknown_layers": first.unknown_layers(),
        "attention_layers": first.n_attention,
        "weights": first.weights_text,
        "not_seen": [{"name": m.name, "class": m.kind, "why": m.why} for m in first.not_seen],
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
