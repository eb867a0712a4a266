"""One summary of a probe run, the same figures for ``probe-model`` and the Real model page.

Std ratio = measured score std / the i.i.d. prediction, per head; entropy and saturation are
means over heads (each head's own mean over its rows); per-layer rows are medians over heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.probe.analyze import ProbeResult
from engine.probe.export import head_table


@dataclass(frozen=True)
class LayerSummary:
    """Medians over the heads of one layer (the std ratio as its range)."""

    layer: int
    ratio_min: float
    ratio_max: float
    raw_std: float
    entropy_norm_model: float
    entropy_norm_none: float
    entropy_norm_dk: float
    saturated_frac_none: float
    attn_max_abs_diff: float  #: largest over the layer's heads


@dataclass(frozen=True)
class ProbeSummary:
    heads: int  #: layers x heads
    ratio_min: float
    ratio_max: float
    ratio_median: float
    ratio_se_median: float | None  #: typical bootstrap SE; None without a bootstrap
    heads_above_1: int  #: heads whose score std exceeds the i.i.d. prediction
    heads_above_1_by_2se: int  #: ... by more than two bootstrap standard errors
    entropy_norm: dict[str, float]  #: rule -> mean over heads of H / log n
    saturated_frac: dict[str, float]  #: rule -> mean over heads of the saturated fraction
    attn_max_abs_diff: float  #: recomputed attention vs the model's own, largest |difference|
    layers: tuple[LayerSummary, ...]


def summarize(result: ProbeResult, table: dict[str, np.ndarray] | None = None) -> ProbeSummary:
    """The summary of ``result`` (``table`` = its head_table, if already computed)."""
    t = head_table(result) if table is None else table
    ratio, se = t["std_ratio"], t["std_ratio_se"]
    rules = [k.removeprefix("entropy_norm_") for k in t if k.startswith("entropy_norm_")]
    layers = tuple(
        LayerSummary(
            layer=layer,
            ratio_min=float(ratio[layer].min()), ratio_max=float(ratio[layer].max()),
            raw_std=float(np.median(t["raw_std"][layer])),
            entropy_norm_model=float(np.median(t["entropy_norm_model"][layer])),
            entropy_norm_none=float(np.median(t["entropy_norm_none"][layer])),
            entropy_norm_dk=float(np.median(t["entropy_norm_dk"][layer])),
            saturated_frac_none=float(np.median(t["saturated_frac_none"][layer])),
            attn_max_abs_diff=float(t["attn_max_abs_diff"][layer].max()),
        )
        for layer in range(result.n_layers)
    )
    return ProbeSummary(
        heads=int(ratio.size),
        ratio_min=float(ratio.min()), ratio_max=float(ratio.max()),
        ratio_median=float(np.median(ratio)),
        ratio_se_median=float(np.median(se)) if se.max() > 0 else None,
        heads_above_1=int((ratio > 1).sum()),
        heads_above_1_by_2se=int((ratio - 2 * se > 1).sum()) if se.max() > 0 else 0,
        entropy_norm={r: float(np.mean(t[f"entropy_norm_{r}"])) for r in rules},
        saturated_frac={r: float(np.mean(t[f"saturated_frac_{r}"])) for r in rules},
        attn_max_abs_diff=float(t["attn_max_abs_diff"].max()),
        layers=layers,
    )
