"""Everything about a handful of scores: softmax, Jacobian, its size, entropy (the inspector)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.config import N_KEYS_MAX
from engine.errors import ConfigError
from engine.softmax import jacobian, jacobian_diagonal, row_metrics

#: most scores (the simulator's largest n)
MAX_SCORES = N_KEYS_MAX
#: the full n x n Jacobian is kept up to this n (128 MiB); above it only its size and diagonal
JACOBIAN_FULL_MAX = 4096
_SEPARATORS = re.compile(r"[\s,;]+")
_REPEAT = re.compile(r"\s*[*×]\s*")


def parse_score_list(text: str) -> list[float]:
    """``"8, 0, -8"``, ``"8 0 -8"``, ``"[8; 0; -8]"`` -> [8.0, 0.0, -8.0]; ``"3, -2*9999"`` is 3
    followed by 9999 scores of -2 (the SSMax paper's example). Errors name ``scores``."""
    body = _REPEAT.sub("*", text.strip().strip("[]()").strip())
    if not body:
        raise ConfigError("scores", "type at least 2 numbers, e.g. 8, 0, -8 (or 3, -2*99)")
    values: list[float] = []
    for token in _SEPARATORS.split(body):
        if not token:
            continue
        value, _, count = token.partition("*")
        try:
            x = float(value)
        except ValueError:
            raise ConfigError("scores", f"{token!r} is not a number") from None
        reps = 1
        if count:
            if not count.isdigit() or int(count) < 1:
                raise ConfigError("scores", f"{token!r}: the count after * must be a whole number >= 1")
            reps = int(count)
        if len(values) + reps > MAX_SCORES:
            raise ConfigError("scores", f"at most {MAX_SCORES} scores")
        values.extend([x] * reps)
    return values


@dataclass(frozen=True)
class InspectResult:
    scores: np.ndarray
    scale: float
    scaled: np.ndarray  #: scores / scale: what the softmax sees
    weights: np.ndarray
    jacobian: np.ndarray  #: diag(p) - p p^T (n x n); (0, 0) when n > JACOBIAN_FULL_MAX
    jacobian_fro: float
    log10_jacobian_fro: float
    jacobian_max_abs: float
    entropy: float
    entropy_norm: float  #: entropy / log(n)
    p_one_minus_p: np.ndarray  #: diagonal of the Jacobian, p_i (1 - p_i)
    ssmax_s: float | None = None  #: SSMax: the scaled scores were multiplied by s ln(n)

    @property
    def has_full_jacobian(self) -> bool:
        return self.jacobian.shape[0] == self.scores.size

    def to_dict(self) -> dict[str, object]:
        return {
            "scores": self.scores.tolist(), "scale": self.scale, "scaled": self.scaled.tolist(),
            "weights": self.weights.tolist(), "jacobian": self.jacobian.tolist(),
            "jacobian_fro": self.jacobian_fro, "log10_jacobian_fro": self.log10_jacobian_fro,
            "jacobian_max_abs": self.jacobian_max_abs, "entropy": self.entropy,
            "entropy_norm": self.entropy_norm, "p_one_minus_p": self.p_one_minus_p.tolist(),
        }


def inspect_scores(scores: Sequence[float], scale: float = 1.0,
                   ssmax_s: float | None = None) -> InspectResult:
    """Validate and analyse ``softmax(scores / scale)`` (times s ln(n) with ``ssmax_s``, the
    ``ssmax`` rule); errors name ``scores``, ``scale`` or ``ssmax_s``."""
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
    factor = 1.0 / scale
    if ssmax_s is not None:
        if not (math.isfinite(ssmax_s) and ssmax_s > 0):
            raise ConfigError("ssmax_s", f"must be a positive finite number, got {ssmax_s}")
        factor = ssmax_s * math.log(s.size) / scale
    with np.errstate(over="ignore"):
        scaled = s / scale if ssmax_s is None else s * factor
    if not np.all(np.isfinite(scaled)):
        raise ConfigError("scale", "too small: scores / scale overflow")
    with np.errstate(over="ignore"):
        spread = float(scaled.max() - scaled.min())
    if not math.isfinite(spread):  # the softmax shifts by the max: the shift itself would overflow
        raise ConfigError("scores", "max - min of scores / scale must stay below 1.8e308")
    m = row_metrics(scaled)
    n = s.size
    jac = jacobian(m.weights) if n <= JACOBIAN_FULL_MAX else np.zeros((0, 0))
    diag = np.diag(jac).copy() if n <= JACOBIAN_FULL_MAX else jacobian_diagonal(m.weights)
    return InspectResult(
        scores=s, scale=scale, scaled=scaled, weights=m.weights, jacobian=jac,
        jacobian_fro=float(m.jacobian_fro), log10_jacobian_fro=float(m.log10_jacobian_fro),
        jacobian_max_abs=float(m.jacobian_max_abs), entropy=float(m.entropy),
        entropy_norm=float(m.entropy) / math.log(n), p_one_minus_p=diag, ssmax_s=ssmax_s,
    )
