"""The probe generator: load (once), tokenize, one forward pass, per-head statistics.

``analyze(cfg, loaded)`` yields :class:`ProbeSnapshot` objects (stage, fraction) and finally one
with ``result`` set. It checks ``cancelled()`` between stages and layers and starts no threads.
:func:`head_detail` gives what the detail view of one head shows, computed on demand.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from engine.errors import Cancelled
from engine.probe.capture import Capture, capture
from engine.probe.config import PROBE_RULES, ProbeConfig
from engine.probe.loader import LoadedModel, load_model, tokenize
from engine.probe.stats import (
    RowStats,
    ScoreStats,
    attention_weights,
    concat_layers,
    row_stats,
    score_stats,
)
from engine.rules import RULE_REGISTRY
from engine.snapshots import last_result
from engine.stats import Histogram


@dataclass(frozen=True)
class ProbeResult:
    """Plain data: feeds the grids, the detail view, heads.csv, scores.npz and the tests."""

    config: ProbeConfig
    model_name: str
    model_type: str
    model_path: str
    n_layers: int
    n_heads: int
    d_k: int
    causal: bool
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    truncated_from: int | None
    scale_model: np.ndarray  #: (L,) the model's own factor on q.k
    scores: np.ndarray  #: (L, H, n, n) float32 raw q.k
    q: np.ndarray  #: (L, H, n, d_k) float32
    k: np.ndarray  #: (L, H, n, d_k) float32
    pair_mask: np.ndarray  #: (n, n) bool, key visible to query (the first layer's)
    pair_masks: np.ndarray  #: (L, n, n) bool, per layer (encoder, decoder, cross differ)
    score_stats: ScoreStats
    rows: dict[str, RowStats]  #: per rule in PROBE_RULES
    attn_max_abs_diff: np.ndarray  #: (L, H) recomputed vs the model's own attention
    load_s: float
    forward_s: float
    stats_s: float

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def scale(self, rule: str, layer: int) -> float:
        """The factor rule ``rule`` multiplies q.k by in ``layer``."""
        if rule == "model":
            return float(self.scale_model[layer])
        return 1.0 / RULE_REGISTRY[rule].divisor(self.d_k, 1.0)

    def head_mean(self, rule: str, field: str) -> np.ndarray:
        """(L, H) mean over the counted rows of a per-row field of ``rows[rule]``."""
        rs = self.rows[rule]
        ok = rs.row_ok
        if not ok.any():
            return np.zeros((self.n_layers, self.n_heads))
        return getattr(rs, field)[:, :, ok].mean(axis=-1)

    def saturated_frac(self, rule: str) -> np.ndarray:
        rs = self.rows[rule]
        ok = rs.row_ok
        if not ok.any():
            return np.zeros((self.n_layers, self.n_heads))
        return (rs.top_weight[:, :, ok] > self.config.saturation_threshold).mean(axis=-1)


@dataclass(frozen=True)
class ProbeSnapshot:
    stage: str
    fraction: float
    done: bool = False
    result: ProbeResult | None = None


def analyze(
    cfg: ProbeConfig,
    loaded: LoadedModel | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[ProbeSnapshot]:
    """Analyze ``cfg.text``; loads ``cfg.model`` only when ``loaded`` is None (pass it to reuse)."""
    if loaded is None:
        yield ProbeSnapshot("loading model", 0.0)
        loaded = load_model(cfg.model)
    _check(cancelled)
    yield ProbeSnapshot("tokenizing", 0.2)
    tok = tokenize(loaded, cfg.text, cfg.max_tokens)
    _check(cancelled)
    yield ProbeSnapshot("forward pass", 0.3)
    cap = capture(loaded, tok.ids)
    _check(cancelled)
    gen = analyze_capture(cfg, loaded, cap, tok.ids, tok.tokens, tok.truncated_from, cancelled)
    yield from gen


def analyze_capture(
    cfg: ProbeConfig,
    loaded: LoadedModel,
    cap: Capture,
    token_ids: tuple[int, ...],
    tokens: tuple[str, ...] | None = None,
    truncated_from: int | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[ProbeSnapshot]:
    """Statistics of one capture (also the entry point for tests that feed token ids).

    ``token_ids``/``tokens`` describe the whole input given to :func:`capture`, padding included;
    the result keeps the valid tokens only.
    """
    t0 = time.perf_counter()
    keep = cap.valid_positions
    ids_kept = tuple(int(token_ids[i]) for i in keep)
    labels = tuple(tokens[i] for i in keep) if tokens is not None else tuple(map(str, ids_kept))
    n_layers = cap.q.shape[0]
    d_k = cap.q.shape[-1]  # (the calls' head width, never a config key the model ignores)
    scores = np.empty(cap.q.shape[:3] + (cap.q.shape[2],), dtype=np.float32)
    parts: list[ScoreStats] = []
    row_parts: dict[str, list[RowStats]] = {rule: [] for rule in PROBE_RULES}
    for layer in range(n_layers):  # one layer at a time: cache-friendly, cancellable, progress
        _check(cancelled)
        yield ProbeSnapshot(f"statistics, layer {layer + 1} of {n_layers}",
                            0.4 + 0.6 * layer / n_layers)
        sl = slice(layer, layer + 1)
        pm = cap.pair_masks[layer]
        q = cap.q[sl].astype(np.float64)
        k = cap.k[sl].astype(np.float64)
        s = q @ np.swapaxes(k, -1, -2)
        scores[sl] = s
        parts.append(score_stats(q, k, pm, cfg.bootstrap, cfg.seed + 7919 * layer, cancelled))
        for rule in PROBE_RULES:
            row_parts[rule].append(_model_rows(cap, layer, s) if rule == "model" else
                                   row_stats(s, 1.0 / RULE_REGISTRY[rule].divisor(d_k, 1.0), pm))
    sstats = concat_layers(parts)
    rows = {rule: concat_layers(row_parts[rule]) for rule in PROBE_RULES}
    diff = rows["model"].max_abs_diff
    assert diff is not None
    diff = np.maximum(diff, cap.masked_mass)
    info = loaded.info
    result = ProbeResult(
        config=cfg,
        model_name=info.name,
        model_type=info.model_type,
        model_path=str(info.path),
        n_layers=scores.shape[0],
        n_heads=scores.shape[1],
        d_k=d_k,
        causal=cap.causal,
        token_ids=ids_kept,
        tokens=labels,
        truncated_from=truncated_from,
        scale_model=cap.scale,
        scores=scores,
        q=cap.q,
        k=cap.k,
        pair_mask=cap.pair_mask,
        pair_masks=cap.pair_masks,
        score_stats=sstats,
        rows=rows,
        attn_max_abs_diff=diff,
        load_s=loaded.load_s,
        forward_s=cap.forward_s,
        stats_s=time.perf_counter() - t0,
    )
    yield ProbeSnapshot("done", 1.0, done=True, result=result)


def _model_rows(cap: Capture, layer: int, s: np.ndarray) -> RowStats:
    """The 'model' rule of one layer: the model's own logits (its scale, soft-cap and additive
    terms), compared with its own weights (with sinks, the rows' shapes: a sink's share is not
    on the keys)."""
    sl = slice(layer, layer + 1)
    pm = cap.pair_masks[layer]
    c = float(cap.softcap[layer])
    attn = cap.model_attn[sl]
    if cap.sinks:
        tot = np.where(pm, attn, 0.0).sum(-1, keepdims=True)
        attn = np.where(pm, attn / np.where(tot > 0, tot, 1.0), attn)
    return row_stats(s, cap.scale[sl], pm, attn, None if cap.bias is None else cap.bias[sl],
                     None if np.isnan(c) else c)


def run_to_result(gen: Iterator[ProbeSnapshot]) -> ProbeResult:
    """Drain a probe generator and return its result (CLI and tests)."""
    return last_result(gen, "the probe")


def _check(cancelled: Callable[[], bool]) -> None:
    if cancelled():
        raise Cancelled()


@dataclass(frozen=True)
class HeadDetail:
    """What the detail view of one head shows under one rule."""

    layer: int
    head: int
    rule: str
    scale: float
    raw_hist: Histogram  #: raw q.k over the visible pairs
    scaled_hist: Histogram  #: scale * q.k
    raw_theory: tuple[float, float]  #: i.i.d. normal (mean, std) of q.k
    scaled_theory: tuple[float, float]  #: the same after scaling
    raw_overlay: tuple[np.ndarray, np.ndarray]  #: (x, pdf) of the i.i.d. normal over raw_hist
    scaled_overlay: tuple[np.ndarray, np.ndarray]
    weights: np.ndarray  #: (n, n) attention under the rule, 0 on masked keys
    jacobian_fro: np.ndarray  #: (n,) per query row (0 where a row sees < 2 keys)
    entropy_norm: np.ndarray  #: (n,)
    row_ok: np.ndarray  #: (n,) rows that count
    tokens: tuple[str, ...]


def head_detail(result: ProbeResult, layer: int, head: int, rule: str = "model",
                bins: int = 60) -> HeadDetail:
    """Histograms, attention matrix and per-row Jacobian size of one head under ``rule``."""
    if rule not in PROBE_RULES:
        raise ValueError(f"rule must be one of {PROBE_RULES}")
    s = result.scores[layer, head].astype(np.float64)
    pm = result.pair_masks[layer]
    vals = s[pm]
    scale = result.scale(rule, layer)
    mean = float(result.score_stats.iid_pred_mean[layer, head])
    std = float(result.score_stats.iid_pred_std[layer, head])
    rs = result.rows[rule]
    raw_hist = _hist(vals, bins, mean, std)
    scaled_hist = _hist(vals * scale, bins, mean * scale, std * scale)
    return HeadDetail(
        layer=layer,
        head=head,
        rule=rule,
        scale=scale,
        raw_hist=raw_hist,
        scaled_hist=scaled_hist,
        raw_theory=(mean, std),
        scaled_theory=(mean * scale, std * scale),
        raw_overlay=_normal_pdf(raw_hist.edges, mean, std),
        scaled_overlay=_normal_pdf(scaled_hist.edges, mean * scale, std * scale),
        weights=attention_weights(s, scale, pm),
        jacobian_fro=rs.jacobian_fro[layer, head].copy(),
        entropy_norm=rs.entropy_norm[layer, head].copy(),
        row_ok=rs.row_ok.copy(),
        tokens=result.tokens,
    )


def _hist(x: np.ndarray, bins: int, mean: float, std: float) -> Histogram:
    """Edges cover the data and +-4 predicted std, so the overlay and the bars share one range."""
    lo = min(float(x.min()), mean - 4 * std)
    hi = max(float(x.max()), mean + 4 * std)
    if not hi > lo or not math.isfinite(hi - lo):
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    counts, _ = np.histogram(x, edges)
    return Histogram(edges, counts.astype(np.int64))


def _normal_pdf(edges: np.ndarray, mean: float, std: float, points: int = 300) -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(edges[0], edges[-1], points)
    if not std > 0:
        return x, np.zeros_like(x)
    z = (x - mean) / std
    return x, np.exp(-0.5 * z * z) / (std * math.sqrt(2.0 * math.pi))
