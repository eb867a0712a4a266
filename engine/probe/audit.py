"""The scale audit: which factor does each layer and head of a real model apply to q.k?

From one forward pass (eager attention, whatever the model's config asks for) the capture gives
the raw q.k of every head and the model's own attention probabilities P; :mod:`scale_fit` finds
the s that reproduces P, and a verdict in words says what that s is (standard, scaled twice,
unscaled, 1/sqrt(d_model), after the softmax, or the number). Optionally a scaling bug is planted
in chosen layers first (:mod:`inject`), to see what each bug looks like.

``audit(cfg)`` is a generator of :class:`AuditSnapshot`; it checks ``cancelled()`` between layers
and starts no threads. Training lab weights (``weights.pt``) are audited by
:func:`audit_training` with the same fit and verdicts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.errors import Cancelled, ConfigError
from engine.probe.config import check_text_and_model
from engine.probe.scale_fit import ScaleFit, fit_scale, is_flagged, verdict, verdict_kind
from engine.snapshots import last_result
from engine.validate import ConfigMethods, check_int

EAGER_NOTE = "attention run eagerly (attn_implementation='eager') for the capture"


@dataclass(frozen=True)
class AuditConfig(ConfigMethods):
    """What to audit. ``inject`` is ((layer, kind), ...): bugs planted before the capture."""

    text: str
    model: str | None = None
    inject: tuple[tuple[int, str], ...] = ()
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        from engine.probe.inject import BUG_KINDS

        check_text_and_model(self.text, self.model)
        pairs = []
        seen = set()
        for item in self.inject:
            try:
                layer, kind = item
            except (TypeError, ValueError):
                raise ConfigError("inject", f"must be (layer, kind) pairs, got {item!r}") from None
            layer = check_int("inject", layer, 0, 100_000)
            if kind not in BUG_KINDS:
                raise ConfigError("inject", f"unknown bug kind {kind!r}; one of {', '.join(BUG_KINDS)}")
            if layer in seen:
                raise ConfigError("inject", f"layer {layer} is given twice")
            seen.add(layer)
            pairs.append((layer, str(kind)))
        object.__setattr__(self, "inject", tuple(sorted(pairs)))
        if self.max_tokens is not None:
            object.__setattr__(self, "max_tokens", check_int("max_tokens", self.max_tokens, 2, 1_000_000))

    @property
    def bugs(self) -> dict[int, str]:
        return dict(self.inject)


@dataclass(frozen=True)
class AuditResult:
    """Plain data: the grid, the verdicts, audit.csv and layers.csv."""

    model_name: str
    model_type: str
    run: str | None  #: the Training lab rule of this run, None for a transformers model
    n_layers: int
    n_heads: int
    d_k: int
    d_model: int
    causal: bool
    n_tokens: int
    tokens: tuple[str, ...]
    inject: dict[int, str]
    declared_scale: np.ndarray  #: (L,) what the attention modules say they apply (may be wrong)
    head_fits: list[ScaleFit]  #: per layer, arrays over heads
    layer_fits: list[ScaleFit]  #: per layer, one joint fit of all its heads (arrays of length 1)
    head_verdicts: list[list[str]]
    layer_verdicts: list[str]
    note: str
    forward_s: float
    fit_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def grid(self, name: str = "scale_x_sqrt_dk") -> np.ndarray:
        """(L, H) of a per-head figure: scale, scale_x_sqrt_dk, residual_max_abs, tol_log..."""
        if name == "scale_x_sqrt_dk":
            return np.stack([f.scale for f in self.head_fits]) * np.sqrt(self.d_k)
        return np.stack([getattr(f, name) for f in self.head_fits])

    def layer_scale_x_sqrt_dk(self) -> np.ndarray:
        return np.array([f.scale[0] for f in self.layer_fits]) * np.sqrt(self.d_k)

    def flagged_layers(self) -> list[int]:
        return [i for i, v in enumerate(self.layer_verdicts) if is_flagged(v)]

    def scale_text(self, layer: int, unicode: bool = False) -> str:
        """The fitted scale of ``layer`` in words, as a multiple of the standard 1/sqrt(d_k):
        "fitted scale 1.000 × 1/√d_k, all 12 heads alike" or "... heads from 0.4998 to 1.003 ×"
        (what ``s*sqrt(d_k) = 1 (heads 1..1)`` said, readable)."""
        standard = "1/√d_k" if unicode else "1/sqrt(d_k)"
        times = "×" if unicode else "x"
        text = f"fitted scale {_multiple(self.layer_scale_x_sqrt_dk()[layer])} {times} {standard}"
        fit = self.head_fits[layer]
        heads = fit.scale[fit.identifiable] * math.sqrt(self.d_k)
        if heads.size == 0:
            return text + ", no head identifiable alone"
        lo, hi = _multiple(heads.min()), _multiple(heads.max())
        if lo == hi:
            who = (f"all {self.n_heads} heads" if heads.size == self.n_heads
                   else f"{heads.size} of {self.n_heads} heads")
            return text + f", {who} alike"
        who = "heads" if heads.size == self.n_heads else f"{heads.size} of {self.n_heads} heads"
        return text + f", {who} from {lo} to {hi} {times}"


def _multiple(x: float) -> str:
    """4 significant digits, trailing zeros kept (1.000, 0.1250, 8.000)."""
    return f"{x:#.4g}"


@dataclass(frozen=True)
class AuditSnapshot:
    stage: str
    fraction: float
    done: bool = False
    result: AuditResult | None = None


def fit_layers(scores: list[np.ndarray], probs: list[np.ndarray], visible: np.ndarray,
               d_k: int, d_model: int, cancelled: Callable[[], bool] = lambda: False,
               progress: Callable[[int], None] | None = None
               ) -> tuple[list[ScaleFit], list[ScaleFit], list[list[str]], list[str]]:
    """Fit every head and every layer (jointly over its heads); verdicts in words.

    ``scores[l]``/``probs[l]`` are (H, R, n), ``visible`` (R, n)."""
    head_fits, layer_fits, head_v, layer_v = [], [], [], []
    for layer, (z, p) in enumerate(zip(scores, probs)):
        if cancelled():
            raise Cancelled()
        if progress is not None:
            progress(layer)
        hf = fit_scale(z, p, visible, d_k=d_k)
        h = z.shape[0]
        ok = hf.identifiable
        start = np.exp(np.median(np.log(hf.scale[ok] if ok.any() else hf.scale)))
        lf = fit_scale(z.reshape(1, -1, z.shape[-1]), p.reshape(1, -1, p.shape[-1]),
                       np.tile(visible, (h, 1)), start=np.array([start]), d_k=d_k)
        head_fits.append(hf)
        layer_fits.append(lf)
        head_v.append([verdict(float(hf.scale[i]), float(hf.tol_log[i]), bool(hf.identifiable[i]),
                               float(hf.weight_sum[i]), hf.weight_sum_tol, d_k, d_model)
                       for i in range(h)])
        lv = verdict(float(lf.scale[0]), float(lf.tol_log[0]), bool(lf.identifiable[0]),
                     float(lf.weight_sum[0]), lf.weight_sum_tol, d_k, d_model)
        agreeing = [v for v in head_v[-1] if not v.startswith("cannot")]
        if agreeing and any(verdict_kind(v) != verdict_kind(agreeing[0]) for v in agreeing):
            kinds = sorted({verdict_kind(v) for v in agreeing})
            lv = f"mixed: {'; '.join(kinds)}"
        elif agreeing and verdict_kind(agreeing[0]) == "other: s * sqrt(d_k)":
            ok = hf.identifiable
            x = hf.scale[ok] * np.sqrt(d_k)
            # heads whose "other" scales differ by more than their tolerances: no one layer scale
            if x.size > 1 and math.log(x.max() / x.min()) > 2 * float(hf.tol_log[ok].max()):
                lv = f"mixed: other, s * sqrt(d_k) from {x.min():.3g} to {x.max():.3g}"
        layer_v.append(lv)
    return head_fits, layer_fits, head_v, layer_v


def ensure_eager(loaded: Any) -> None:
    """Switch a transformers model to eager attention (the only one that returns P)."""
    cfg = loaded.model.config
    if getattr(cfg, "_attn_implementation", "eager") != "eager":
        setter = getattr(loaded.model, "set_attn_implementation", None)
        if setter is None:
            raise ConfigError("model", "cannot switch this model to eager attention")
        setter("eager")


def audit(cfg: AuditConfig, loaded: Any = None,
          cancelled: Callable[[], bool] = lambda: False) -> Iterator[AuditSnapshot]:
    """Audit ``cfg.text`` through a transformers model (loaded here when ``loaded`` is None)."""
    from engine.probe.capture import capture
    from engine.probe.inject import check_layers, injected
    from engine.probe.loader import load_model, tokenize

    if loaded is None:
        yield AuditSnapshot("loading model", 0.0)
        loaded = load_model(cfg.model)
    check_layers(loaded, cfg.bugs, "inject")
    ensure_eager(loaded)
    if cancelled():
        raise Cancelled()
    tok = tokenize(loaded, cfg.text, cfg.max_tokens)
    yield AuditSnapshot("forward pass", 0.1)
    with injected(loaded, cfg.bugs):
        cap = capture(loaded, tok.ids)
    yield from audit_capture(loaded, cap, tok.tokens, cfg.bugs, cancelled)


def audit_capture(loaded: Any, cap: Any, tokens: tuple[str, ...], bugs: Mapping[int, str],
                  cancelled: Callable[[], bool] = lambda: False) -> Iterator[AuditSnapshot]:
    """The fit and verdicts of one capture (tests feed captures of tiny models here)."""
    t0 = time.perf_counter()
    info = loaded.info
    q = cap.q.astype(np.float64)
    k = cap.k.astype(np.float64)
    n_layers = q.shape[0]
    scores = [q[i] @ np.swapaxes(k[i], -1, -2) for i in range(n_layers)]
    probs = [cap.model_attn[i].astype(np.float64) for i in range(n_layers)]
    head_fits, layer_fits, head_v, layer_v = [], [], [], []
    for layer in range(n_layers):  # one layer at a time: progress and a cancel check each
        yield AuditSnapshot(f"fit, layer {layer + 1} of {n_layers}", 0.2 + 0.8 * layer / n_layers)
        hf, lf, hv, lv = fit_layers(scores[layer:layer + 1], probs[layer:layer + 1],
                                    cap.pair_mask, info.d_k, info.d_model, cancelled)
        head_fits += hf
        layer_fits += lf
        head_v += hv
        layer_v += lv
    keep = cap.valid_positions
    result = AuditResult(
        model_name=info.name, model_type=info.model_type, run=None, n_layers=n_layers,
        n_heads=info.n_heads, d_k=info.d_k, d_model=info.d_model, causal=cap.causal,
        n_tokens=len(keep), tokens=tuple(tokens[i] for i in keep) if tokens else (),
        inject=dict(bugs), declared_scale=cap.scale, head_fits=head_fits, layer_fits=layer_fits,
        head_verdicts=head_v, layer_verdicts=layer_v, note=EAGER_NOTE, forward_s=cap.forward_s,
        fit_s=time.perf_counter() - t0)
    yield AuditSnapshot("done", 1.0, done=True, result=result)


def run_audit(gen: Iterator[AuditSnapshot]) -> AuditResult:
    """Drain an audit generator (CLI, tests, benchmark)."""
    return last_result(gen, "the audit")
