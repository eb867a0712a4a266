"""What if the model used another scale? Multiply the logits by m, rerun, measure what changes.

For each m on a log grid (1/8 .. 8 by default) the model runs again with every layer's (or one
layer's) logits multiplied by m (through the tap: the query times m at the attention product),
on the intact model or, when bugs are given, on the model with those bugs planted (the result
says which): the attention's mean entropy / log n and saturated fraction
(per head too, for the grids), the cosine similarity of the final hidden states to those of the
unmodified model (per token, averaged), of the mean-pooled sentence embedding (encoders: what
all-MiniLM-L6-v2 returns as its embedding), and for a causal LM the perplexity of the text
(next-token logits through the tied input embedding, as GPT-2's LM head does).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.errors import Cancelled, ConfigError
from engine.snapshots import last_result

#: the default multipliers: 2^k for k = -3, -2.5, ..., 3 (1/8 .. 8, with 1 = the model itself)
DEFAULT_MULTIPLIERS: tuple[float, ...] = tuple(2.0 ** (k / 2) for k in range(-6, 7))


@dataclass(frozen=True)
class WhatIfResult:
    multipliers: np.ndarray  #: (M,)
    layer: int | None  #: the one layer multiplied, None = all
    entropy_norm: np.ndarray  #: (M, L, H) mean over query rows of H / log(n visible)
    saturated: np.ndarray  #: (M, L, H) fraction of rows whose top weight exceeds the threshold
    output_cosine: np.ndarray  #: (M,) mean over tokens of cos(h_m, h_1), final hidden states
    pooled_cosine: np.ndarray | None  #: (M,) cosine of mean-pooled embeddings (encoders)
    perplexity: np.ndarray | None  #: (M,) of the text (causal LMs)
    threshold: float
    sweep_s: float
    #: the bugs planted in the model the sweep ran on ({} = the intact model)
    injected: dict[int, str] = field(default_factory=dict)

    @property
    def model_state(self) -> str:
        """Which model the sweep ran on, in words (the CLI, the plot's title, whatif.csv)."""
        if not self.injected:
            return "intact model"
        bugs = ", ".join(f"layer {k} {v}" for k, v in sorted(self.injected.items()))
        return f"model with injected bugs ({bugs})"

    def rows(self) -> list[dict[str, object]]:
        """whatif.csv: one row per multiplier."""
        out = []
        for i, m in enumerate(self.multipliers):
            row: dict[str, object] = {
                "multiplier": float(m),
                "layer": "all" if self.layer is None else self.layer,
                "model": self.model_state,
                "entropy_norm_mean": float(self.entropy_norm[i].mean()),
                "saturated_frac": float(self.saturated[i].mean()),
                "output_cosine": float(self.output_cosine[i]),
            }
            if self.pooled_cosine is not None:
                row["pooled_cosine"] = float(self.pooled_cosine[i])
            if self.perplexity is not None:
                row["perplexity"] = float(self.perplexity[i])
            out.append(row)
        return out

    def columns(self) -> list[str]:
        cols = ["multiplier", "layer", "model", "entropy_norm_mean", "saturated_frac", "output_cosine"]
        if self.pooled_cosine is not None:
            cols.append("pooled_cosine")
        if self.perplexity is not None:
            cols.append("perplexity")
        return cols


@dataclass(frozen=True)
class WhatIfSnapshot:
    stage: str
    fraction: float
    done: bool = False
    result: WhatIfResult | None = None


def _site_stats(call: Any, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(H,) mean over the rows that see 2+ keys of H / log(n visible), and the saturated
    fraction, of one site's weights."""
    from engine.probe.sites import split_mask

    a = call.weights[0].detach().double().cpu().numpy()  # (H, nq, nk)
    vis, _b = split_mask(call.mask, a.shape[1], a.shape[2])
    seen = vis.sum(axis=-1)
    rows = seen >= 2
    h = a.shape[0]
    if not rows.any():
        return np.zeros(h), np.zeros(h)
    a = a[:, rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(a > 0, a * np.log(a), 0.0).sum(-1)  # (H, R)
    ent_norm = ent / np.log(seen[rows])
    sat = a.max(-1) > threshold
    return ent_norm.mean(-1), sat.mean(-1)


def whatif(loaded, token_ids: Sequence[int], multipliers: Sequence[float] = DEFAULT_MULTIPLIERS,
           layer: int | None = None, threshold: float = 0.99,
           cancelled: Callable[[], bool] = lambda: False,
           bugs: Mapping[int, str] | None = None) -> Iterator[WhatIfSnapshot]:
    """Sweep ``multipliers``; yields progress and finally the result. With ``bugs`` the sweep
    runs on the model with those bugs planted (and the result says so), else on the intact one."""
    from engine.probe.capture import last_hidden, run_forward
    from engine.probe.inject import bug_modifiers, multiplier_modifiers
    from engine.probe.tap import IDENTITY, Modifier

    ms = np.asarray(sorted(float(m) for m in multipliers), dtype=np.float64)
    if ms.size == 0 or not np.all(ms > 0) or not np.all(np.isfinite(ms)):
        raise ConfigError("multipliers", "must be positive finite numbers")
    n_sites = loaded.n_sites
    if layer is not None and not 0 <= layer < n_sites:
        raise ConfigError("whatif_layer", f"layer {layer} is out of range; this model has layers "
                          f"0..{n_sites - 1}")
    planted = dict(bugs or {})
    base_mods = bug_modifiers(loaded, planted)
    t0 = time.perf_counter()
    causal = loaded.causal
    net = loaded.model
    heads = max(loaded.site_heads) if loaded.site_heads else loaded.info.n_heads
    ent = np.zeros((ms.size, n_sites, heads))
    sat = np.zeros_like(ent)
    slot: dict[str, Any] = {}

    def observe(call: Any) -> None:
        e, s = _site_stats(call, threshold)
        slot["ent"][call.site, :e.size] = e
        slot["sat"][call.site, :s.size] = s

    def run(extra: Mapping[int, Modifier], i: int | None) -> np.ndarray:
        slot["ent"] = ent[i] if i is not None else np.zeros((n_sites, heads))
        slot["sat"] = sat[i] if i is not None else np.zeros((n_sites, heads))
        mods = dict(base_mods)  # the planted bugs, then the multiplier on top
        for site, mod in extra.items():
            mods[site] = mods.get(site, IDENTITY).combined(mod)
        with loaded.tap.active(observe, mods, cancelled):
            out = run_forward(net, token_ids)
        return last_hidden(out)[0].double().cpu().numpy()

    base_h = run({}, None)
    cos = np.empty(ms.size)
    pooled = None if causal else np.empty(ms.size)
    ppl = np.empty(ms.size) if causal else None
    for i, m in enumerate(ms):
        if cancelled():
            raise Cancelled()
        yield WhatIfSnapshot(f"what-if, m = {m:.3g}", i / ms.size)
        h = run(multiplier_modifiers(loaded, float(m), layer), i)
        cos[i] = float(np.mean(_cosine(h, base_h)))
        if pooled is not None:
            pooled[i] = float(_cosine(h.mean(0, keepdims=True), base_h.mean(0, keepdims=True))[0])
        if ppl is not None:
            ppl[i] = _perplexity(net, h, token_ids)
    result = WhatIfResult(ms, layer, ent, sat, cos, pooled, ppl, threshold,
                          time.perf_counter() - t0, injected=planted)
    yield WhatIfSnapshot("done", 1.0, done=True, result=result)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na = np.linalg.norm(a, axis=-1)
    nb = np.linalg.norm(b, axis=-1)
    den = np.where((na > 0) & (nb > 0), na * nb, 1.0)
    return np.clip((a * b).sum(-1) / den, -1.0, 1.0)


def _perplexity(net, h: np.ndarray, token_ids: Sequence[int]) -> float:
    """exp(mean next-token cross entropy) with logits h @ W_emb^T (GPT-2 ties its LM head)."""
    emb = net.get_input_embeddings().weight.detach().double().cpu().numpy()
    logits = h[:-1] @ emb.T
    logits -= logits.max(-1, keepdims=True)
    logz = np.log(np.exp(logits).sum(-1))
    nxt = np.asarray(token_ids[1:])
    nll = logz - logits[np.arange(len(nxt)), nxt]
    val = float(np.exp(np.mean(nll)))
    return val if math.isfinite(val) else float(np.finfo(np.float64).max)


def run_whatif(gen: Iterator[WhatIfSnapshot]) -> WhatIfResult:
    return last_result(gen, "the what-if sweep")
