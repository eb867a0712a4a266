"""Everything about a handful of scores: softmax, Jacobian, its size, entropy (the inspector)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import ConfigError
from engine.softmax import jacobian, row_metrics

MAX_SCORES = 4096


@dataclass(frozen=True)
class InspectResult:
    scores: np.ndarray
    scale: float
    scaled: np.ndarray  #: scores / scale: what the softmax sees
    weights: np.ndarray
    jacobian: np.ndarray  #: diag(p) - p p^T (n x n)
    jacobian_fro: float
    log10_jacobian_fro: float
    jacobian_max_abs: float
    entropy: float
    entropy_norm: float  #: entropy / log(n)
    p_one_minus_p: np.ndarray  #: diagonal of the Jacobian, p_i (1 - p_i)

    def to_dict(self) -> dict[str, object]:
        return {
            "scores": self.scores.tolist(), "scale": self.scale, "scaled": self.scaled.tolist(),
            "weights": self.weights.tolist(), "jacobian": self.jacobian.tolist(),
            "jacobian_fro": self.jacobian_fro, "log10_jacobian_fro": self.log10_jacobian_fro,
            "jacobian_max_abs": self.jacobian_max_abs, "entropy": self.entropy,
            "entropy_norm": self.entropy_norm, "p_one_minus_p": self.p_one_minus_p.tolist(),
        }


def inspect_scores(scores: Sequence[float], scale: float = 1.0) -> InspectResult:
    """Validate and analyse ``softmax(scores / scale)``; errors name ``scores`` or ``scale``."""
    try:
        s = np.asarray([float(x) for x in scores], dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError("scores", "must be numbers") from None
    if s.size < 2:
        raise ConfigError("scores", f"needs at least 2 scores, got {s.size}")
    if s.size > MAX_SCORES:
        raise ConfigError("scores", f"at most {MAX_SCORES} scores, got {s.size}")
    if not np.all(np.isfinite(s)):
        raise ConfigError("scores", "must be finite numbers (no nan or inf)")
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise ConfigError("scale", f"must be a positive number, got {scale!r}") from None
    if not (math.isfinite(scale) and scale > 0):
        raise ConfigError("scale", f"must be a positive finite number, got {scale}")
    with np.errstate(over="ignore"):
        scaled = s / scale
    if not np.all(np.isfinite(scaled)):
        raise ConfigError("scale", "too small: scores / scale overflow")
    with np.errstate(over="ignore"):
        spread = float(scaled.max() - scaled.min())
    if not math.isfinite(spread):  # the softmax shifts by the max: the shift itself would overflow
        raise ConfigError("scores", "max - min of scores / scale must stay below 1.8e308")
    m = row_metrics(scaled)
    jac = jacobian(m.weights)
    n = s.size
    return InspectResult(
        scores=s, scale=scale, scaled=scaled, weights=m.weights, jacobian=jac,
        jacobian_fro=float(m.jacobian_fro), log10_jacobian_fro=float(m.log10_jacobian_fro),
        jacobian_max_abs=float(m.jacobian_max_abs), entropy=float(m.entropy),
        entropy_norm=float(m.entropy) / math.log(n), p_one_minus_p=np.diag(jac).copy(),
    )
