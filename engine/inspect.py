"""Everything about a handful of scores: softmax, Jacobian, its size, entropy (the inspector)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.config import N_KEYS_MAX
from engine.errors import ConfigError, quote
from engine.rules import log_sech2, yarn_factor
from engine.rules import softcap as softcap_fn
from engine.softmax import (
    jacobian,
    jacobian_diagonal,
    log_sigmoid,
    row_metrics,
    sigmoid_row_metrics,
)

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
            raise ConfigError("scores", f"{quote(token)} is not a number") from None
        reps = 1
        if count:
            if not count.isdigit() or int(count) < 1:
                raise ConfigError("scores", f"{quote(token)}: the count after * must be a whole "
                                            "number >= 1")
            reps = int(count)
        if len(values) + reps > MAX_SCORES:
            raise ConfigError("scores", f"at most {MAX_SCORES} scores")
        values.extend([x] * reps)
    return values


@dataclass(frozen=True)
class InspectResult:
    scores: np.ndarray
    scale: float
    scaled: np.ndarray  #: the logits the weights are made of: scores / scale (x factor, capped)
    weights: np.ndarray  #: what the values see, per score (a sink's weight is not among them)
    jacobian: np.ndarray  #: d weights / d logits before any cap (n x n); (0, 0) when n > JACOBIAN_FULL_MAX
    jacobian_fro: float
    log10_jacobian_fro: float
    jacobian_max_abs: float
    entropy: float  #: of the weights normalized to sum 1
    entropy_norm: float  #: entropy / log(n)
    p_one_minus_p: np.ndarray  #: the Jacobian's diagonal, p_i (1 - p_i) (times the cap's slope)
    ssmax_s: float | None = None  #: SSMax: the scaled scores were multiplied by s ln(n)
    softcap: float | None = None  #: the logits are c tanh(z / c) of the scaled scores z
    sink: float | None = None  #: a sink logit joined the softmax
    sigmoid: bool = False  #: weights sigmoid(logit - ln n), no normalization
    yarn_n_ref: int | None = None  #: yarn_dynamic: the scaled scores were multiplied by (0.1 ln(n/n_ref)+1)^2
    key_mass: float = 1.0  #: sum of the weights
    sink_weight: float = 0.0  #: the sink's weight (0 without one)

    @property
    def has_full_jacobian(self) -> bool:
        return self.jacobian.shape[0] == self.scores.size

    @property
    def weights_name(self) -> str:
        """How the weights were made, for titles and the CLI."""
        if self.sigmoid:
            return "sigmoid weights"
        return "softmax weights with a sink" if self.sink is not None else "softmax weights"

    def to_dict(self) -> dict[str, object]:
        return {
            "scores": self.scores.tolist(), "scale": self.scale, "scaled": self.scaled.tolist(),
            "weights": self.weights.tolist(), "jacobian": self.jacobian.tolist(),
            "jacobian_fro": self.jacobian_fro, "log10_jacobian_fro": self.log10_jacobian_fro,
            "jacobian_max_abs": self.jacobian_max_abs, "entropy": self.entropy,
            "entropy_norm": self.entropy_norm, "p_one_minus_p": self.p_one_minus_p.tolist(),
            "ssmax_s": self.ssmax_s, "softcap": self.softcap, "sink": self.sink,
            "sigmoid": self.sigmoid, "yarn_n_ref": self.yarn_n_ref, "key_mass": self.key_mass,
            "sink_weight": self.sink_weight,
        }


def _positive(field: str, value: float | None) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, f"must be a positive number, got {quote(value)}") from None
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(field, f"must be a positive finite number, got {value}")
    return value


def _check_scores(scores: Sequence[float]) -> np.ndarray:
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
    return s


def _length_factor(n: int, ssmax_s: float | None, yarn_n_ref: int | None) -> float:
    """What the length rules multiply the scaled scores by at n scores (1 without them)."""
    if ssmax_s is not None and yarn_n_ref is not None:
        raise ConfigError("yarn_n_ref", "choose one length rule: ssmax or yarn")
    if ssmax_s is not None:
        return ssmax_s * math.log(n)
    if yarn_n_ref is not None:
        if isinstance(yarn_n_ref, bool) or not isinstance(yarn_n_ref, int) or yarn_n_ref < 1:
            raise ConfigError("yarn_n_ref", f"must be a whole number >= 1, got {quote(yarn_n_ref)}")
        return float(yarn_factor(math.log(n), math.log(yarn_n_ref)))
    return 1.0


def inspect_scores(scores: Sequence[float], scale: float = 1.0,
                   ssmax_s: float | None = None, *, sink: float | None = None,
                   softcap: float | None = None, sigmoid: bool = False,
                   yarn_n_ref: int | None = None) -> InspectResult:
    """Validate and analyse the weights of ``scores / scale``: times s ln(n) with ``ssmax_s``
    (the ``ssmax`` rule) or the ``yarn_dynamic`` factor with ``yarn_n_ref``; capped to c tanh(z / c) with
    ``softcap``; a softmax over the scores, plus a ``sink`` logit if given, or ``sigmoid``
    weights sigmoid(z - ln n). Figures as engine.softmax defines them where the weights do not
    sum to one. Errors name ``scores``, ``scale``, ``ssmax_s``, ``softcap``, ``sink`` or
    ``yarn_n_ref``."""
    s = _check_scores(scores)
    scale = _positive("scale", scale)
    ssmax_s = _positive("ssmax_s", ssmax_s)
    softcap = _positive("softcap", softcap)
    if sink is not None:
        try:
            sink = float(sink)
        except (TypeError, ValueError):
            raise ConfigError("sink", f"must be a number, got {quote(sink)}") from None
        if not math.isfinite(sink):
            raise ConfigError("sink", f"must be a finite number, got {sink}")
        if sigmoid:
            raise ConfigError("sink", "a sink joins a softmax: not with sigmoid weights")
    n = s.size
    length = _length_factor(n, ssmax_s, yarn_n_ref)
    with np.errstate(over="ignore", invalid="ignore"):
        z = s / scale if length == 1.0 else s * (length / scale)
    if not np.all(np.isfinite(z)):
        raise ConfigError("scale", "too small: scores / scale overflow")
    with np.errstate(over="ignore"):
        spread = float(z.max() - z.min())
    if not math.isfinite(spread):  # the softmax shifts by the max: the shift itself would overflow
        raise ConfigError("scores", "max - min of scores / scale must stay below 1.8e308")
    logits = softcap_fn(z, softcap) if softcap is not None else z
    log_slope = log_sech2(z / softcap) if softcap is not None else None
    if sigmoid:
        m = sigmoid_row_metrics(logits, -math.log(n), log_slope)
    else:
        m = row_metrics(logits, sink=sink, log_slope=log_slope)
    jac, diag = _jacobian(m.weights, logits, n, sigmoid, float(m.sink_weight), log_slope)
    return InspectResult(
        scores=s, scale=scale, scaled=logits, weights=m.weights, jacobian=jac,
        jacobian_fro=float(m.jacobian_fro), log10_jacobian_fro=float(m.log10_jacobian_fro),
        jacobian_max_abs=float(m.jacobian_max_abs), entropy=float(m.entropy),
        entropy_norm=float(m.entropy) / math.log(n), p_one_minus_p=diag, ssmax_s=ssmax_s,
        softcap=softcap, sink=sink, sigmoid=sigmoid, yarn_n_ref=yarn_n_ref,
        key_mass=float(m.key_mass), sink_weight=float(m.sink_weight),
    )


def _jacobian(p: np.ndarray, logits: np.ndarray, n: int, sigmoid: bool, rest: float,
              log_slope: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(the n x n Jacobian or a (0, 0) placeholder above JACOBIAN_FULL_MAX, its diagonal)."""
    if sigmoid:  # diag(p (1 - p)), 1 - p = sigmoid(-y) exactly
        y = logits - math.log(n)
        diag = np.exp(log_sigmoid(y) + log_sigmoid(-y))
        if log_slope is not None:
            diag = diag * np.exp(log_slope)
        return (np.diag(diag) if n <= JACOBIAN_FULL_MAX else np.zeros((0, 0))), diag
    if n <= JACOBIAN_FULL_MAX:
        jac = jacobian(p, rest, log_slope)
        return jac, np.diag(jac).copy()
    diag = jacobian_diagonal(p, rest)
    return np.zeros((0, 0)), diag if log_slope is None else diag * np.exp(log_slope)
