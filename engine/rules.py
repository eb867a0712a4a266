"""Scaling rules: how raw query-key similarities become the logits the softmax sees.

One small function each, one registry. ``needs`` names the similarity a rule starts from:
``dot`` = q.k, ``cos`` = q.k / (|q| |k|), ``ln`` = LayerNorm(q) . LayerNorm(k).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RawScores:
    """Similarities of one chunk, each (trials, n_keys); ``cos``/``ln`` only when a rule needs them."""

    dot: np.ndarray
    cos: np.ndarray | None = None
    ln: np.ndarray | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    label: str  #: legend text
    description: str  #: one sentence for tooltips and help
    needs: str  #: "dot", "cos" or "ln"
    #: for rules that divide q.k by a constant: divisor(d_k, T); None otherwise
    divisor: Callable[[int, float], float] | None
    #: for the others: similarity -> logits
    transform: Callable[[np.ndarray, int, float], np.ndarray] | None = None

    def logits(self, raw: RawScores, d_k: int, temperature: float) -> np.ndarray:
        source = getattr(raw, self.needs)
        if source is None:
            raise ValueError(f"rule {self.name} needs {self.needs!r} similarities")
        if self.divisor is not None:
            div = self.divisor(d_k, temperature)
            return source if div == 1.0 else source / source.dtype.type(div)
        assert self.transform is not None
        return self.transform(source, d_k, temperature)


RULE_REGISTRY: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule("none", "none: q·k", "No scaling (the bug): logits are the raw dot products.",
             "dot", lambda d, t: 1.0),
        Rule("sqrt", "sqrt: q·k/√d_k", "Divide by sqrt(d_k) (the Transformer's rule): unit variance for independent zero-mean, unit-variance entries.",
             "dot", lambda d, t: math.sqrt(d)),
        Rule("dk", "dk: q·k/d_k", "Divide by d_k (muP): right when trained q and k correlate and scores grow like d_k.",
             "dot", lambda d, t: float(d)),
        Rule("temperature", "temperature: q·k/T", "Divide by a fixed temperature T, whatever d_k is.",
             "dot", lambda d, t: t),
        Rule("cosine", "cosine: cos(q,k)/T", "Unit-normalize q and k, then divide by T: logits stay in [-1/T, 1/T].",
             "cos", None, lambda c, d, t: c / c.dtype.type(t)),
        Rule("qknorm", "qknorm: LN(q)·LN(k)/√d_k", "Layer-normalize q and k (no affine), then divide by sqrt(d_k) (ViT-22B).",
             "ln", None, lambda s, d, t: s / s.dtype.type(math.sqrt(d))),
    )
}


def rule(name: str) -> Rule:
    return RULE_REGISTRY[name]
