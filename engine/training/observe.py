"""Per-layer/per-head diagnostics of one probe forward pass and of the gradients.

The softmax diagnostics (entropy, top weight, Jacobian size) come from ``engine.softmax.row_metrics``
on NumPy copies of the probe batch's logits: one implementation of the saturation-safe Jacobian
math for the simulator and for training. The probe batch is small, so the copy is cheap.

Rows and entries that count: a query row counts when its token is real (not padding) and it sees at
least two keys; a logit counts when its key is visible to its row. Entropy is normalised per row by
log(number of visible keys).

Rules whose weights do not sum to one (sink, sigmoid) and the soft-cap get their figures from the
rule (``engine.rules.Rule.row_metrics``), as the simulation does: top weight of a key, entropy of
the normalized key weights, the sink's weight and the key mass as their own figures, the Jacobian
with respect to the logits before the cap (engine.softmax).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.rules import RULE_REGISTRY, SOFTCAP_DEFAULT, Rule, RuleParams
from engine.softmax import softmax

#: the gradient chain's per-head norms and the softmax's gain (``engine.training.gradients``,
#: which needs torch; the names are repeated here so this module stays torch-free)
CHAIN = ("grad_norm_attn", "grad_norm_logits", "grad_norm_scores", "grad_norm_query")
GAIN = "softmax_gain"

#: scalar metrics per (log, run)
SCALARS = ("loss", "accuracy", "probe_loss", "probe_accuracy")
#: metrics per (log, run, layer, head)
HEAD_METRICS = ("entropy_norm", "logit_mean", "logit_std", "top_weight", "saturated_frac",
                "jacobian_fro", "grad_norm_q", "grad_norm_k", "grad_norm_v", "grad_norm_o",
                "temperature", "ssmax_s", "logit_max_abs", *CHAIN, GAIN, "key_mass",
                "sink_weight", "sink_logit", "clip_count")
#: columns of metrics.csv (per-head metrics are means over layers and heads; logit_max_abs is the
#: largest |logit| of any head; clipped_heads the mean number of heads qkclip clipped per update
#: since the previous log)
CSV_COLUMNS = ("scaling", "step", "loss", "accuracy", "probe_loss", "probe_accuracy",
               "entropy_norm_mean", "logit_std", "logit_mean", "top_weight_mean",
               "saturated_frac", "jacobian_fro_mean", "grad_norm_q", "grad_norm_k",
               "grad_norm_v", "grad_norm_o", "temperature", "ssmax_s", "logit_max_abs",
               *CHAIN, GAIN, "key_mass_mean", "sink_weight_mean", "sink_logit", "clipped_heads")
HEAD_CSV_COLUMNS = ("scaling", "step", "layer", "head", *HEAD_METRICS)
#: what is measured at each evaluation length (``engine.training.lengths``)
LENGTH_METRICS = ("accuracy", "entropy_norm")


def length_columns(eval_lengths: tuple[int, ...] | list[int]) -> tuple[str, ...]:
    """The metrics.csv columns of the evaluation lengths (``accuracy_len{N}``,
    ``entropy_norm_len{N}``), in order; torch-free, so the experiment summaries can name them."""
    return tuple(f"{what}_len{n}" for n in eval_lengths for what in LENGTH_METRICS)


#: percentiles drawn over the logit distribution (TensorBoard's distribution bands)
PERCENTILES = (0.0, 6.68, 15.87, 30.85, 50.0, 69.15, 84.13, 93.32, 100.0)
#: logits stand in this far below the row's real ones where keys are masked (finite: no 0 * inf)
_MASKED = -1e300
#: the logit bins are evenly spaced in asinh(x / (ASINH_CORE * R)): ~uniform within the core,
#: logarithmic beyond it, so one fixed set of edges resolves 1/d_k's logits (std ~0.06 at
#: d_k = 256) and no scaling's (std 16 to 130) alike, each with a few percent relative bin width
ASINH_CORE = 1e-3


def logit_edges(hist_range: float, bins: int) -> np.ndarray:
    """(bins + 1,) fixed, increasing, symmetric edges spanning [-hist_range, hist_range]."""
    a = float(np.arcsinh(1.0 / ASINH_CORE))
    edges = hist_range * ASINH_CORE * np.sinh(np.linspace(-a, a, bins + 1))
    edges[0], edges[-1] = -hist_range, hist_range
    if bins % 2 == 0:
        edges[bins // 2] = 0.0
    return edges


def _example_weights(logits: np.ndarray, mask: np.ndarray, n0: int, spec: Rule,
                     sink: np.ndarray | None, softcap: float) -> np.ndarray:
    """(H, n0, n0) weights of one example's real tokens under the rule, in float64."""
    lg, mk = logits[:, :n0, :n0], mask[:, :n0, :n0]  # (H, n0, n0)
    if spec.softmax_weights:
        return softmax(np.where(mk, lg, -np.inf))
    params = RuleParams(1, log_n=np.log(mk.sum(axis=-1, keepdims=True)), softcap=softcap,
                        sink=sink[:, None, None] if sink is not None else 0.0)
    return spec.row_metrics(np.where(mk, lg, _MASKED), params).weights


@dataclass(frozen=True)
class HeadStats:
    """Diagnostics of one layer's heads on the probe batch; arrays are (H,) unless noted."""

    entropy_norm: np.ndarray
    logit_mean: np.ndarray
    logit_std: np.ndarray
    logit_max_abs: np.ndarray  #: largest |logit| that counts (attention-logit growth)
    top_weight: np.ndarray
    saturated_frac: np.ndarray
    jacobian_fro: np.ndarray
    hist_counts: np.ndarray  #: (H, bins) logits inside the fixed edges
    hist_outside: np.ndarray  #: (H, 2) below / above the edges
    percentiles: np.ndarray  #: (H, len(PERCENTILES))
    probe_weights: np.ndarray  #: (H, n, n) softmax weights of probe example 0 (its real tokens)
    key_mass: np.ndarray | None = None  #: mean sum of the key weights (1 for a softmax)
    sink_weight: np.ndarray | None = None  #: mean weight on the sink (0 without one)


def head_stats(logits: np.ndarray, mask: np.ndarray, lengths: np.ndarray, edges: np.ndarray,
               saturation_threshold: float, rule: str = "sqrt", sink: np.ndarray | None = None,
               pre_logits: np.ndarray | None = None, softcap: float = SOFTCAP_DEFAULT
               ) -> HeadStats:
    """``logits`` (B, H, T, T) float64, ``mask`` (B, 1|H, T, T) bool, ``lengths`` (B,) ints;
    ``rule`` says how the logits become weights, with ``sink`` (H,) its sink logits and
    ``pre_logits`` (B, H, T, T) the logits before the cap of ``softcap`` c."""
    _b, h, t, _ = logits.shape
    mask = np.broadcast_to(mask, logits.shape)
    row_real = np.arange(t)[None, :] < lengths[:, None]  # (B, T)
    visible = mask.sum(axis=-1)  # (B, H, T)
    rows = row_real[:, None, :] & (visible >= 2)  # (B, H, T)
    cells = mask & row_real[:, None, :, None]  # logits that count
    # softmax diagnostics of the rows that count only (padding rows would cost a third more)
    sel = np.nonzero(rows)
    spec = RULE_REGISTRY[rule]
    params = RuleParams(1, log_n=np.log(visible[sel])[:, None], softcap=softcap,
                        sink=sink[sel[1]][:, None] if sink is not None else 0.0)
    z = np.where(mask[sel], pre_logits[sel], 0.0) if pre_logits is not None else None
    m = spec.row_metrics(np.where(mask[sel], logits[sel], _MASKED), params, z)  # (N, T) rows
    ent = m.entropy / np.log(visible[sel])
    sat = m.top_weight > saturation_threshold
    head_of = sel[1]
    per_head = np.maximum(np.bincount(head_of, minlength=h), 1)

    def row_mean(x: np.ndarray) -> np.ndarray:
        return np.bincount(head_of, weights=x, minlength=h) / per_head

    bins = len(edges) - 1
    counts = np.zeros((h, bins), dtype=np.int64)
    outside = np.zeros((h, 2), dtype=np.int64)
    pct = np.zeros((h, len(PERCENTILES)))
    mean = np.zeros(h)
    std = np.zeros(h)
    max_abs = np.zeros(h)
    lo, hi = edges[0], edges[-1]
    # the masks do not depend on the head: every head counts the same cells
    x = np.moveaxis(logits, 1, 0)[:, cells[:, 0]]  # (H, cells)
    if x.shape[1]:
        mean, std = x.mean(axis=1), x.std(axis=1)
        max_abs = np.abs(x).max(axis=1)
        pct = np.percentile(x, PERCENTILES, axis=1).T
        outside = np.stack([(x < lo).sum(axis=1), (x > hi).sum(axis=1)], axis=1)
        inside = (x >= lo) & (x <= hi)
        idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)  # any fixed edges
        flat = (idx + bins * np.arange(h)[:, None])[inside]
        counts = np.bincount(flat, minlength=h * bins).reshape(h, bins)
    probe_weights = _example_weights(logits[0], mask[0], int(lengths[0]), spec, sink, softcap)
    return HeadStats(
        entropy_norm=row_mean(ent), logit_mean=mean, logit_std=std, logit_max_abs=max_abs,
        top_weight=row_mean(m.top_weight), saturated_frac=row_mean(sat.astype(np.float64)),
        jacobian_fro=row_mean(m.jacobian_fro), hist_counts=counts, hist_outside=outside,
        percentiles=pct, probe_weights=probe_weights, key_mass=row_mean(m.key_mass),
        sink_weight=row_mean(m.sink_weight),
    )

