"""Port against source, layer by layer: the same fit on both sides, compared within both bands.

A head's port scale matches the source's when ``|log(s_port / s_source)|`` is within the sum of
the two fits' consistency bands (each the band :mod:`engine.probe.scale_fit` accepts a known
scale in; no tolerance is chosen here). A layer whose identifiable heads differ beyond that, or
whose verdict is of another kind (weights scaled after the softmax), is a MISMATCH naming the
factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.probe.scale_fit import AFTER_SOFTMAX, NOT_AUDITABLE, ScaleFit, verdict_kind


@dataclass(frozen=True)
class Side:
    """One side's fit of one layer (source or port)."""

    head: ScaleFit
    layer: ScaleFit
    verdict: str
    d_k: int

    @property
    def scale(self) -> float:
        return float(self.layer.scale[0])

    @property
    def n_heads(self) -> int:
        return int(self.head.scale.size)


@dataclass(frozen=True)
class LayerComparison:
    matches: bool | None  #: None: neither side identifiable (nothing to compare)
    ratio: float  #: port layer scale / source layer scale
    finding: str  #: "" when it matches


def compare(port: Side, source: Side, layer: int) -> LayerComparison:
    """Does the port apply the source's scale in this layer?"""
    ratio = port.scale / source.scale if source.scale > 0 else math.nan
    if port.n_heads != source.n_heads or port.d_k != source.d_k:
        return LayerComparison(False, ratio, f"layer {layer}: the port has {port.n_heads} heads "
                               f"of width {port.d_k}, the source {source.n_heads} of width "
                               f"{source.d_k}")
    after = [verdict_kind(v).startswith(AFTER_SOFTMAX) for v in (port.verdict, source.verdict)]
    if after[0] != after[1]:
        who = "port" if after[0] else "source"
        return LayerComparison(False, ratio, f"layer {layer}: the {who} scales the weights after "
                               "the softmax, the other does not")
    ok = port.head.identifiable & source.head.identifiable
    gap = np.abs(np.log(port.head.scale / source.head.scale))
    bad = ok & (gap > port.head.tol_log + source.head.tol_log)
    if bad.any():
        x = float(np.exp(np.median(np.log(port.head.scale[bad] / source.head.scale[bad]))))
        where = ("all heads" if bad.sum() == ok.sum() else
                 f"heads {', '.join(map(str, np.flatnonzero(bad)))}")
        return LayerComparison(False, ratio, f"layer {layer}: the port applies x{x:.4g} the "
                               f"source's scale ({where})")
    if ok.any():
        return LayerComparison(True, ratio, "")
    pl, sl = port.layer, source.layer
    if bool(pl.identifiable[0]) and bool(sl.identifiable[0]):
        if abs(math.log(ratio)) > float(pl.tol_log[0] + sl.tol_log[0]):
            return LayerComparison(False, ratio, f"layer {layer}: the port applies x{ratio:.4g} "
                                   "the source's scale (the heads jointly)")
        return LayerComparison(True, ratio, "")
    return LayerComparison(None, ratio, "")


def state(c: LayerComparison) -> str:
    """The comparison in words, for tables."""
    if c.matches is None:
        return NOT_AUDITABLE
    return "as the source" if c.matches else "MISMATCH"
