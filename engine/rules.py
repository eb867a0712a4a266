"""The scaling rules, defined once: how a query-key similarity becomes the logit the softmax sees.

One registry serves the simulation (NumPy arrays), the training model (torch tensors) and the UI
(labels, colours, tooltips). Each rule's math is one function ``scale(similarity, params)`` that
uses only arithmetic operators, so the same line computes NumPy arrays, torch tensors (gradients
included) and plain floats; ``params`` carries d_k, the temperature, ln(n) and the SSMax factor,
each a float or anything that broadcasts against the similarity (a per-row ln(n) under a mask, a
learned per-head temperature). ``needs`` names the similarity a rule starts from: ``dot`` = q.k,
``cos`` = q.k / (|q| |k|), ``ln`` = LayerNorm(q) . LayerNorm(k).

The length rules (docs/guide/simulation.md, "The length axis"): ``logn`` (Qwen's logn attention)
multiplies the ``sqrt`` logits by ln(n) / ln(n_ref) beyond n_ref and leaves them alone up to it
(Qwen clamps the factor at 1, so short rows are never flattened); ``ssmax`` (Scalable-Softmax,
Nakanishi 2025) multiplies them by s * ln(n), with s a parameter (learned per head in training);
``yarn_dynamic`` multiplies them by (0.1 ln(n / n_ref) + 1)^2 beyond n_ref and leaves them alone
below it, a per-row variant of YaRN's law that no shipped model uses. n is the number of keys the
row attends to. ``yarn`` is YaRN as shipped (DeepSeek-V3, Qwen, gpt-oss): every logit times the
constant (0.1 ln s + 1)^2, s the context-extension factor, at every length (not a length rule).

The scale controls that shipped after QK-norm (docs/scale_controls.md) act at three places, so a
rule has three stages: ``scale`` (similarity -> logit z, as above), ``cap`` (``softcap``, Gemma 2:
z -> c tanh(z / c)) and ``weights``, how logits become the weights the values see: ``softmax``;
``sink`` (one more logit joins the row's softmax and its column is dropped: gpt-oss, "softmax plus
one"); ``sigmoid`` (sigmoid(z + b) per key, b = -ln n, no normalization: Ramapuram et al. 2024).
``qkclip`` (Kimi K2's MuonClip) is a weight-space intervention of training only: its forward pass
is ``sqrt``'s, and after each optimizer step the trainer rescales W_Q and W_K of every head whose
largest logit exceeded tau (engine.training.qk_clip).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.softmax import RowMetrics, row_metrics, sigmoid_row_metrics

#: the SSMax paper's example value of s (Nakanishi 2025, Figure 1); the simulation's default
SSMAX_S_DEFAULT = 0.43
#: reference length of the ``logn`` and ``yarn_dynamic`` rules in the simulation (the default number of keys)
N_REF_DEFAULT = 8
_LOG_N_REF_DEFAULT = math.log(N_REF_DEFAULT)
#: s of ``yarn``, the context-extension factor (new context / trained context): Qwen2.5's documented
#: YaRN setting (``factor`` 4, 32k -> 128k tokens); DeepSeek-V3 uses 40, gpt-oss 32
YARN_S_DEFAULT = 4.0
#: c of ``softcap``: Gemma 2's ``attn_logit_softcapping``
SOFTCAP_DEFAULT = 50.0
#: the ``sink`` rule's logit in the simulation and the inspector (0 = "softmax plus one"); in
#: training each head learns its own, starting here
SINK_DEFAULT = 0.0
#: how logits become the weights the values see (see the module docstring)
WEIGHTS = ("softmax", "sink", "sigmoid")


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
    log_n_ref: float = _LOG_N_REF_DEFAULT  #: ln(n_ref) of ``logn`` and ``yarn_dynamic``
    ssmax_s: Any = SSMAX_S_DEFAULT  #: s of ``ssmax`` (a learned per-head tensor in training)
    softcap: float = SOFTCAP_DEFAULT  #: c of ``softcap``
    sink: Any = SINK_DEFAULT  #: the ``sink`` logit (a learned per-head tensor in training)
    yarn_s: float = YARN_S_DEFAULT  #: s of ``yarn``, the context-extension factor


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
    #: soft-capping: the scaled logit z becomes c tanh(z / c) (``softcap``)
    cap: bool = False
    #: how the logits become weights: one of WEIGHTS
    weights: str = "softmax"
    #: training: W_Q, W_K of a head whose largest logit exceeds tau are rescaled after each step
    qk_clip: bool = False

    def logits(self, raw: RawScores, d_k: int, temperature: float, **params: Any) -> np.ndarray:
        """The logits of one chunk of simulated similarities (what the softmax sees)."""
        return self.capped(self.pre_logits(raw, d_k, temperature, **params),
                           RuleParams(d_k, temperature, **params))

    def pre_logits(self, raw: RawScores, d_k: int, temperature: float, **params: Any) -> np.ndarray:
        """The scaled logits z before any cap (equal to ``logits`` for a rule without one)."""
        source = getattr(raw, self.needs)
        if source is None:
            raise ValueError(f"rule {self.name} needs {self.needs!r} similarities")
        return self.scale(source, RuleParams(d_k, temperature, **params))

    def capped(self, z: Any, p: RuleParams) -> Any:
        """z -> c tanh(z / c) for ``softcap``, else z (NumPy, torch and floats alike)."""
        return softcap(z, p.softcap) if self.cap else z

    def log_slope(self, z: np.ndarray, p: RuleParams) -> np.ndarray | None:
        """ln(d logit / d z) per entry (NumPy), or None where the logit is z itself: the cap's
        tanh'(z / c) = sech^2(z / c), which multiplies what flows back to W_Q and W_K."""
        return log_sech2(np.asarray(z) / p.softcap) if self.cap else None

    def row_metrics(self, logits: np.ndarray, p: RuleParams,
                    z: np.ndarray | None = None) -> RowMetrics:
        """The per-row diagnostics of these logits under this rule's weights (NumPy): the
        sink joins the softmax, sigmoid uses b = -ln n, and the cap's slope (from the pre-cap
        ``z``) enters the Jacobian. See engine.softmax for what each figure means."""
        slope = self.log_slope(z, p) if (self.cap and z is not None) else None
        if self.weights == "sigmoid":
            return sigmoid_row_metrics(logits, -np.asarray(p.log_n), slope)
        if self.weights == "sink":
            return row_metrics(logits, sink=p.sink, log_slope=slope)
        return row_metrics(logits, log_slope=slope)

    @property
    def linear_in_dot(self) -> bool:
        """Logits = q.k times a constant (given d_k, T, n): the exact moment overlay applies."""
        return self.needs == "dot" and not self.cap

    @property
    def softmax_weights(self) -> bool:
        """The weights are a softmax over the keys alone (no sink, no sigmoid): the asymptotic
        length theory (engine.theory) applies."""
        return self.weights == "softmax"

    def divisor(self, d_k: int, temperature: float, **params: Any) -> float:
        """For a rule linear in q.k: the constant it divides q.k by."""
        if not self.linear_in_dot:
            raise ValueError(f"rule {self.name} is not a constant times q.k")
        return 1.0 / self.scale(1.0, RuleParams(d_k, temperature, **params))


def _sqrt(s: Any, p: RuleParams) -> Any:
    return s / math.sqrt(p.d_k)


def _tanh(x: Any) -> Any:
    """tanh of a torch tensor (gradients kept), a NumPy array or a float."""
    return x.tanh() if hasattr(x, "tanh") else np.tanh(x)


def softcap(z: Any, c: Any) -> Any:
    """Gemma 2's soft-capping, c tanh(z / c): close to z for |z| << c, never beyond c."""
    return c * _tanh(z / c)


def log_sech2(u: np.ndarray) -> np.ndarray:
    """ln(1 - tanh^2 u) = ln sech^2 u, exact for any |u| (1 - tanh^2 would round to 0 beyond
    |u| ~ 19 in float64)."""
    a = np.abs(u)
    with np.errstate(over="ignore"):  # |u| near the float maximum: -2|u| is -inf, as is the log
        return 2.0 * (math.log(2.0) - a - np.log1p(np.exp(-2.0 * a)))


def _positive_part(x: Any) -> Any:
    """max(x, 0) with operators only (NumPy, torch and floats alike)."""
    return (x + abs(x)) * 0.5


def yarn_factor(log_n: Any, log_n_ref: Any) -> Any:
    """The ``yarn_dynamic`` factor: YaRN's law applied per row, (0.1 ln(n / n_ref) + 1)^2 for
    n > n_ref, 1 otherwise (the logits are multiplied by it)."""
    return (0.1 * _positive_part(log_n - log_n_ref) + 1.0) ** 2


def yarn_constant(s: float) -> float:
    """YaRN as shipped (transformers' ``yarn_get_mscale`` squared, DeepSeek-V3, Qwen, gpt-oss):
    (0.1 ln s + 1)^2 for a context-extension factor s > 1, else 1, the same for every row: q and
    k each carry 0.1 ln s + 1 through the rotary cos/sin, so their product carries its square."""
    return (0.1 * math.log(s) + 1.0) ** 2 if s > 1.0 else 1.0


def logn_factor(log_n: Any, log_n_ref: Any) -> Any:
    """Qwen's logn factor: ln(n) / ln(n_ref) beyond n_ref, clamped at 1 up to it (Qwen's
    ``math.log(i, seq_length) if i > seq_length else 1``), operators only."""
    return 1.0 + _positive_part(log_n - log_n_ref) / log_n_ref


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
    Rule("logn", "logn: q·k/√d_k·max(1,ln n/ln n_ref)", "#999933",
         "Multiply the sqrt logits by ln(n)/ln(n_ref) for rows longer than n_ref, n = keys the row "
         "attends to; equal to sqrt up to n_ref (clamped at 1, as Qwen's logn attention is; "
         "Chiang & Cholak 2022).",
         "dot", lambda s, p: _sqrt(s, p) * logn_factor(p.log_n, p.log_n_ref)),
    Rule("ssmax", "ssmax: s·ln n·q·k/√d_k", "#882255",
         "Scalable-Softmax: multiply the sqrt logits by s·ln(n) (Nakanishi 2025); in training s "
         "is learned per head, starting where it equals sqrt at the training length.",
         "dot", lambda s, p: _sqrt(s, p) * (p.ssmax_s * p.log_n)),
    Rule("softcap", "softcap: c·tanh(q·k/√d_k/c)", "#CC6677",
         "Soft-capping (Gemma 2): the sqrt logit z becomes c·tanh(z/c), bounded by c (default 50); "
         "a capped logit passes back tanh'(z/c) of its gradient.",
         "dot", _sqrt, cap=True),
    Rule("sink", "sink: softmax(q·k/√d_k, s)", "#44AA99",
         "Attention sink (gpt-oss; s = 0 is 'softmax plus one'): one more logit s joins each row's "
         "softmax and its weight is dropped, so a row may attend to nothing; learned per head in "
         "training.", "dot", _sqrt, weights="sink"),
    Rule("sigmoid", "sigmoid: σ(q·k/√d_k − ln n)", "#117733",
         "Sigmoid attention (Ramapuram et al. 2024): each key gets sigmoid(z + b), b = −ln n, with "
         "no normalization across keys, so keys do not compete.", "dot", _sqrt, weights="sigmoid"),
    Rule("yarn", "yarn: q·k/√d_k·(0.1 ln s+1)²", "#AA4499",
         "YaRN as shipped (DeepSeek-V3, Qwen, gpt-oss): every sqrt logit times the constant "
         "(0.1·ln s + 1)², s the context-extension factor, at every length: a fixed temperature.",
         "dot", lambda s, p: _sqrt(s, p) * yarn_constant(p.yarn_s)),
    Rule("yarn_dynamic", "yarn_dynamic: yarn, s = n/n_ref", "#661100",
         "YaRN's law applied per row (a dynamic variant, not what models ship): the sqrt logits "
         "times (0.1·ln(n/n_ref) + 1)² for rows longer than n_ref, unchanged up to it.",
         "dot", lambda s, p: _sqrt(s, p) * yarn_factor(p.log_n, p.log_n_ref)),
    Rule("sqrt_twice", "sqrt_twice (bug): q·k/d_k", "#7B3294",
         "The scaling-twice bug: q is divided by sqrt(d_k) and the scores once more, which is the "
         "dk rule in disguise.", "dot", lambda s, p: _sqrt(_sqrt(s, p), p), training_only=True),
    Rule("scale_after_softmax", "scale_after_softmax (bug)", "#8C6D31",
         "The bug of scaling after the softmax: softmax(q·k)/sqrt(d_k) saturates before the "
         "division and no longer sums to 1.", "dot", lambda s, p: s, training_only=True,
         after_softmax=lambda p: 1.0 / math.sqrt(p.d_k)),
    Rule("qkclip", "qkclip: q·k/√d_k, W_Q,W_K clipped", "#B2182B",
         "QK-clip (Kimi K2's MuonClip): sqrt logits; after each optimizer step W_Q and W_K of every "
         "head whose largest logit on the batch exceeds tau are both multiplied by sqrt(tau/max).",
         "dot", _sqrt, training_only=True, qk_clip=True),
)

#: every rule by name, in display order (the simulator's first, then the training-only bugs)
RULE_REGISTRY: dict[str, Rule] = {r.name: r for r in _RULES}
#: the rules the simulator runs (names are the same in engine, CLI, CSV, widgets and legends)
RULES: tuple[str, ...] = tuple(r.name for r in _RULES if not r.training_only)
#: the simulator's rules plus the two bugs, in display order
TRAINING_RULES: tuple[str, ...] = tuple(RULE_REGISTRY)
#: rules whose logits (or weights: sigmoid's b = -ln n) depend on the number of keys n
LENGTH_RULES = frozenset({"logn", "ssmax", "yarn_dynamic", "sigmoid"})


def rule_label(rule: str) -> str:
    """Legend text of a rule (a name outside the registry is its own label)."""
    r = RULE_REGISTRY.get(rule)
    return r.label if r is not None else rule
