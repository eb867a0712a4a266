"""The scaling rules, defined once: how a query-key similarity becomes the logit the softmax sees.

One registry serves the simulation (NumPy arrays), the training model (torch tensors) and the UI
(labels, colours, tooltips). Each rule's math is one function ``scale(similarity, params)`` that
uses only arithmetic operators, so the same line computes NumPy arrays, torch tensors (gradients
included) and plain floats; ``params`` carries d_k, the temperature, ln(n) and the SSMax factor,
each a float or anything that broadcasts against the similarity (a per-row ln(n) under a mask, a
learned per-head temperature). ``needs`` names the similarity a rule starts from: ``dot`` = q.k,
``cos`` = q.k / (|q| |k|), ``ln`` = LayerNorm(q) . LayerNorm(k).

The length rules (README, "Sequence length"): ``logn`` multiplies the ``sqrt`` logits by
ln(n) / ln(n_ref), so it equals ``sqrt`` at the reference length; ``ssmax`` (Scalable-Softmax,
Nakanishi 2025) multiplies them by s * ln(n), with s a parameter (learned per head in training).
n is the number of keys the row attends to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the SSMax paper's example value of s (Nakanishi 2025, Figure 1); the simulation's default
SSMAX_S_DEFAULT = 0.43
#: reference length of the ``logn`` rule in the simulation (the default number of keys)
N_REF_DEFAULT = 8
_LOG_N_REF_DEFAULT = math.log(N_REF_DEFAULT)


@dataclass(frozen=True)
class RawScores:
    """Similarities of one chunk, each (trials, n_keys); ``cos``/``ln`` only when a rule needs them."""

    dot: np.ndarray
    cos: np.ndarray | None = None
    ln: np.ndarray | None = None


@dataclass(frozen=True)
class RuleParams:
    """What a rule's math may use besides the similarity. Scalars, arrays or tensors."""

    d_k: int
    temperature: Any = 1.0  #: T of ``temperature`` and ``cosine`` (a learned tensor in training)
    log_n: Any = _LOG_N_REF_DEFAULT  #: ln(keys the row attends to), per row under a mask
    log_n_ref: float = _LOG_N_REF_DEFAULT  #: ln(n_ref) of ``logn``
    ssmax_s: Any = SSMAX_S_DEFAULT  #: s of ``ssmax`` (a learned per-head tensor in training)


@dataclass(frozen=True)
class Rule:
    name: str
    label: str  #: legend text
    colour: str  #: hex colour, the same in every plot, legend, table and export
    description: str  #: one sentence for tooltips and help
    needs: str  #: "dot", "cos" or "ln"
    #: similarity -> logits, operators only (NumPy, torch and floats alike)
    scale: Callable[[Any, RuleParams], Any]
    #: training only (a bug the simulator has no place for)
    training_only: bool = False
    #: the weights are multiplied by this after the softmax (the scale_after_softmax bug)
    after_softmax: Callable[[RuleParams], float] | None = None

    def logits(self, raw: RawScores, d_k: int, temperature: float, **params: Any) -> np.ndarray:
        """The logits of one chunk of simulated similarities."""
        source = getattr(raw, self.needs)
        if source is None:
            raise ValueError(f"rule {self.name} needs {self.needs!r} similarities")
        return self.scale(source, RuleParams(d_k, temperature, **params))

    @property
    def linear_in_dot(self) -> bool:
        """Logits = q.k times a constant (given d_k, T, n): the exact moment overlay applies."""
        return self.needs == "dot"

    def divisor(self, d_k: int, temperature: float, **params: Any) -> float:
        """For a rule linear in q.k: the constant it divides q.k by."""
        if not self.linear_in_dot:
            raise ValueError(f"rule {self.name} is not a constant times q.k")
        return 1.0 / self.scale(1.0, RuleParams(d_k, temperature, **params))


def _sqrt(s: Any, p: RuleParams) -> Any:
    return s / math.sqrt(p.d_k)


_RULES = (
    Rule("none", "none: q·k", "#D55E00",
         "No scaling (the bug): logits are the raw dot products.",
         "dot", lambda s, p: s),
    Rule("sqrt", "sqrt: q·k/√d_k", "#0072B2",
         "Divide by sqrt(d_k) (the Transformer's rule): unit variance for independent zero-mean, "
         "unit-variance entries.", "dot", _sqrt),
    Rule("dk", "dk: q·k/d_k", "#009E73",
         "Divide by d_k (muP's attention scale, for hyperparameters that carry across width): "
         "flat attention at initialization; keeps aligned q and k from sharpening with width.",
         "dot", lambda s, p: s / p.d_k),
    Rule("temperature", "temperature: q·k/T", "#E69F00",
         "Divide by a fixed temperature T, whatever d_k is.",
         "dot", lambda s, p: s / p.temperature),
    Rule("cosine", "cosine: cos(q,k)/T", "#CC79A7",
         "Unit-normalize q and k, then divide by T: logits stay in [-1/T, 1/T] (in training T is "
         "learned per head).", "cos", lambda s, p: s / p.temperature),
    Rule("qknorm", "qknorm: LN(q)·LN(k)/√d_k", "#56B4E9",
         "Layer-normalize q and k (no affine), then divide by sqrt(d_k) (ViT-22B): fixes their "
         "lengths, not their alignment.",
         "ln", _sqrt),
    Rule("logn", "logn: q·k/√d_k·ln n/ln n_ref", "#999933",
         "Multiply the sqrt logits by ln(n)/ln(n_ref), n = keys the row attends to: equal to sqrt "
         "at n_ref, sharper for longer rows (Chiang & Cholak 2022; Qwen's logn attention).",
         "dot", lambda s, p: _sqrt(s, p) * (p.log_n / p.log_n_ref)),
    Rule("ssmax", "ssmax: s·ln n·q·k/√d_k", "#882255",
         "Scalable-Softmax: multiply the sqrt logits by s·ln(n) (Nakanishi 2025); in training s "
         "is learned per head, starting where it equals sqrt at the training length.",
         "dot", lambda s, p: _sqrt(s, p) * (p.ssmax_s * p.log_n)),
    Rule("sqrt_twice", "sqrt_twice (bug): q·k/d_k", "#7B3294",
         "The scaling-twice bug: q is divided by sqrt(d_k) and the scores once more, which is the "
         "dk rule in disguise.", "dot", lambda s, p: _sqrt(_sqrt(s, p), p), training_only=True),
    Rule("scale_after_softmax", "scale_after_softmax (bug)", "#8C6D31",
         "The bug of scaling after the softmax: softmax(q·k)/sqrt(d_k) saturates before the "
         "division and no longer sums to 1.", "dot", lambda s, p: s, training_only=True,
         after_softmax=lambda p: 1.0 / math.sqrt(p.d_k)),
)

#: every rule by name, in display order (the simulator's first, then the training-only bugs)
RULE_REGISTRY: dict[str, Rule] = {r.name: r for r in _RULES}
#: the rules the simulator runs (names are the same in engine, CLI, CSV, widgets and legends)
RULES: tuple[str, ...] = tuple(r.name for r in _RULES if not r.training_only)
#: the simulator's rules plus the two bugs, in display order
TRAINING_RULES: tuple[str, ...] = tuple(RULE_REGISTRY)
#: rules whose logits depend on the number of keys n
LENGTH_RULES = frozenset({"logn", "ssmax"})


def rule_label(rule: str) -> str:
    """Legend text of a rule (a name outside the registry is its own label)."""
    r = RULE_REGISTRY.get(rule)
    return r.label if r is not None else rule
