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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.errors import Cancelled, ConfigError
from engine.probe.accounting import Reference, reference
from engine.probe.config import check_text_and_model
from engine.probe.position import PositionBucket, bucket_fits
from engine.probe.scale_fit import (
    AFTER_SOFTMAX,
    ScaleFit,
    fit_scale,
    is_flagged,
    misfit_limit,
    verdict,
    verdict_kind,
)
from engine.probe.sites import SiteRecord
from engine.probe.softcap_fit import CapFit, fit_capped
from engine.snapshots import last_result
from engine.validate import ConfigMethods, check_int

#: how the capture sees the model (audit.json, the page, the CLI)
CAPTURE_NOTE = ("captured at transformers' attention interface around the model's own eager "
                "attention; scale measured against the q and k projections' outputs")
#: the old name of the note (the Training lab audit has its own)
EAGER_NOTE = CAPTURE_NOTE


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
    declared_scale: np.ndarray  #: (L,) what the sites should apply as declared (NaN: unknown)
    head_fits: list[ScaleFit]  #: per layer, arrays over heads
    layer_fits: list[ScaleFit]  #: per layer, one joint fit of all its heads (arrays of length 1)
    head_verdicts: list[list[str]]
    layer_verdicts: list[str]
    note: str
    forward_s: float
    fit_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    #: per site (transformers models): block, features, declared source, soft-cap, mismatch
    sites: tuple[SiteAudit, ...] = ()
    #: attention modules of the model whose calls were never seen (engine.probe.coverage)
    not_seen: tuple[Any, ...] = ()
    #: how many of the model's tensors its folder held, in words ("" for a model in memory)
    weights_text: str = ""
    #: per layer, its head width and query heads, where they differ between layers (Gemma 4's
    #: full-attention layers are wider); empty: every layer has d_k and n_heads (n_heads is
    #: then the most heads of any layer)
    site_d_k: tuple[int, ...] = ()
    site_heads: tuple[int, ...] = ()

    def d_k_at(self, layer: int) -> int:
        return self.site_d_k[layer] if self.site_d_k else self.d_k

    def heads_at(self, layer: int) -> int:
        return self.site_heads[layer] if self.site_heads else self.n_heads

    def d_k_text(self) -> str:
        """"64", or "64 and 128" when the layers differ."""
        return " and ".join(str(d) for d in sorted(set(self.site_d_k) or {self.d_k}))

    def grid(self, name: str = "scale_x_sqrt_dk") -> np.ndarray:
        """(L, H) of a per-head figure: scale, scale_x_sqrt_dk, residual_max_abs, tol_log...
        (NaN past the heads of a layer that has fewer than n_heads)."""
        out = np.full((self.n_layers, self.n_heads), np.nan)
        for i, f in enumerate(self.head_fits):
            row = (f.scale * np.sqrt(self.d_k_at(i)) if name == "scale_x_sqrt_dk"
                   else getattr(f, name))
            out[i, :len(row)] = row
        return out

    def layer_scale_x_sqrt_dk(self) -> np.ndarray:
        return np.array([f.scale[0] * np.sqrt(self.d_k_at(i))
                         for i, f in enumerate(self.layer_fits)])

    def flagged_layers(self) -> list[int]:
        """Layers whose scale is not the standard 1/sqrt(d_k) (by design or by a bug)."""
        return [i for i, v in enumerate(self.layer_verdicts) if is_flagged(v)]

    @property
    def n_attention(self) -> int:
        """Attention layers of the model: the audited ones and the modules never seen."""
        return self.n_layers + len(self.not_seen)

    def coverage_text(self) -> str:
        """"N of M attention layers audited", and how many modules share their weights."""
        text = f"{self.n_layers} of {self.n_attention} attention layers audited"
        shared = [s for s in self.sites if s.shares_weights_with is not None]
        if shared:
            modules = len({s.shares_weights_with for s in shared})
            text += (f" ({len(shared) + modules} calls of {modules} shared "
                     f"module{'s' if modules > 1 else ''}: they share weights)")
        return text

    def mismatched_layers(self) -> list[int]:
        """Layers whose measured scale (or soft-cap) differs from what the model declares."""
        return [i for i, s in enumerate(self.sites) if not s.matches_declared]

    def unknown_layers(self) -> list[int]:
        """Layers whose code applies a factor their declaration does not account for."""
        return [i for i, s in enumerate(self.sites) if not s.declared_known]

    def declared_text(self, layer: int, unicode: bool = False) -> str:
        """"declared 1.000 x 1/sqrt(d_k) (source)", or "declared: unknown"."""
        site = self.sites[layer]
        if not site.declared_known:
            return "declared: unknown"
        times, standard = ("×", "1/√d_k") if unicode else ("x", "1/sqrt(d_k)")
        x = float(self.declared_scale[layer]) * math.sqrt(self.d_k_at(layer))
        return f"declared {x:#.4g} {times} {standard} ({site.declared_source})"

    def state_text(self, layer: int) -> str:
        """"as declared", "MISMATCH: what differs", or what an unknown declaration leaves."""
        site = self.sites[layer]
        if not site.matches_declared:
            return f"MISMATCH: {site.mismatch}"
        return "as declared" if site.declared_known else "as the code's own factors give"

    def scale_text(self, layer: int, unicode: bool = False) -> str:
        """The fitted scale of ``layer`` in words, as a multiple of the standard 1/sqrt(d_k):
        "fitted scale 1.000 × 1/√d_k, all 12 heads alike" or "... heads from 0.4998 to 1.003 ×"
        (what ``s*sqrt(d_k) = 1 (heads 1..1)`` said, readable)."""
        standard = "1/√d_k" if unicode else "1/sqrt(d_k)"
        times = "×" if unicode else "x"
        text = f"fitted scale {_multiple(self.layer_scale_x_sqrt_dk()[layer])} {times} {standard}"
        fit = self.head_fits[layer]
        heads = fit.scale[fit.identifiable] * math.sqrt(self.d_k_at(layer))
        if heads.size == 0:
            return text + ", no head identifiable alone"
        lo, hi = _multiple(heads.min()), _multiple(heads.max())
        n = self.heads_at(layer)
        if lo == hi:
            who = f"all {n} heads" if heads.size == n else f"{heads.size} of {n} heads"
            return text + f", {who} alike"
        who = "heads" if heads.size == n else f"{heads.size} of {n} heads"
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


def _layer_verdict(hf: ScaleFit, lf: ScaleFit, head_v: list[str], d_k: int, d_model: int,
                   n_heads: int | None, ref: Reference | None = None) -> str:
    """One layer's verdict: its joint fit's, unless its heads disagree ("mixed")."""
    lv = verdict(float(lf.scale[0]), float(lf.tol_log[0]) + (ref.tol if ref else 0.0),
                 bool(lf.identifiable[0]), float(lf.weight_sum[0]), lf.weight_sum_tol, d_k,
                 d_model, n_heads, reference=None if ref is None else ref.median,
                 declared_as=ref.source if ref is not None and ref.known else None)
    agreeing = [v for v in head_v if not v.startswith("cannot")]
    if agreeing and any(verdict_kind(v) != verdict_kind(agreeing[0]) for v in agreeing):
        kinds = sorted({verdict_kind(v) for v in agreeing})
        lv = f"mixed: {'; '.join(kinds)}"
    elif agreeing and verdict_kind(agreeing[0]) == "other: s * sqrt(d_k)":
        ok = hf.identifiable
        x = hf.scale[ok] * np.sqrt(d_k)
        # heads whose "other" scales differ by more than their tolerances: no one layer scale
        if x.size > 1 and math.log(x.max() / x.min()) > 2 * float(hf.tol_log[ok].max()):
            lv = f"mixed: other, s * sqrt(d_k) from {x.min():.3g} to {x.max():.3g}"
    return lv


def _joint_start(hf: ScaleFit) -> np.ndarray:
    ok = hf.identifiable
    return np.array([np.exp(np.median(np.log(hf.scale[ok] if ok.any() else hf.scale)))])


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
        lf = fit_scale(z.reshape(1, -1, z.shape[-1]), p.reshape(1, -1, p.shape[-1]),
                       np.tile(visible, (h, 1)), start=_joint_start(hf), d_k=d_k)
        head_fits.append(hf)
        layer_fits.append(lf)
        head_v.append([verdict(float(hf.scale[i]), float(hf.tol_log[i]), bool(hf.identifiable[i]),
                               float(hf.weight_sum[i]), hf.weight_sum_tol, d_k, d_model)
                       for i in range(h)])
        layer_v.append(_layer_verdict(hf, lf, head_v[-1], d_k, d_model, None))
    return head_fits, layer_fits, head_v, layer_v


@dataclass(frozen=True)
class SiteFit:
    """The fit of one attention site of a transformers model."""

    head: ScaleFit
    layer: ScaleFit
    head_verdicts: list[str]
    layer_verdict: str
    cap: CapFit | None  #: per head, for a site that soft-caps (or declares a cap)
    layer_cap: CapFit | None
    #: the most misfit float32 rounding can explain here (:func:`scale_fit.misfit_limit`)
    misfit_limit: float = math.inf
    #: s(position): one fit per bucket of query positions, where the scale may vary with it
    position: tuple[PositionBucket, ...] = ()


def site_arrays(rec: SiteRecord) -> tuple[np.ndarray, ...]:
    """(scores, probs, visible, bias) of a site for the fit; a sink joins each row as one more
    key with q.k = 0 and the sink's logit as its bias, holding the mass the row gave it."""
    z = rec.scores()
    p = rec.probs.astype(np.float64)
    vis = rec.visible
    bias = None if rec.bias is None else rec.bias.astype(np.float64)
    if rec.sinks is not None:
        h, r, _n = z.shape
        vis_row = vis.sum(axis=-1) >= 1
        sink_p = np.clip(1.0 - np.where(vis, p, 0.0).sum(axis=-1), 0.0, 1.0)  # (H, R)
        z = np.concatenate([z, np.zeros((h, r, 1))], axis=-1)
        p = np.concatenate([p, sink_p[..., None]], axis=-1)
        vis = np.concatenate([vis, vis_row[:, None]], axis=-1)
        b = np.zeros((h, r, z.shape[-1] - 1)) if bias is None else np.broadcast_to(
            bias, (h, r, z.shape[-1] - 1))
        bias = np.concatenate([b, np.broadcast_to(rec.sinks[:, None, None], (h, r, 1))], axis=-1)
    return z, p, vis, bias


def fit_site(rec: SiteRecord, d_model: int, ref: Reference | None = None) -> SiteFit:
    """Fit every head of one site and the site jointly (with its soft-cap when it declares one);
    verdicts name a scale relative to ``ref`` (what the site should apply), when given."""
    z, p, vis, bias = site_arrays(rec)
    d_k, h = rec.d_k, rec.n_heads
    row_factor = None if ref is None else ref.row_factor
    position = ()
    if row_factor is not None or rec.q_position is not None:
        rf = np.ones(rec.q.shape[1]) if row_factor is None else row_factor
        position = bucket_fits(z, p, vis, bias, rec.rows, rf[rec.rows],
                               ref.median if ref is not None else rec.d_k**-0.5, d_k)
    if row_factor is not None:  # the declared law (or the code's) folded into q.k
        z = z * row_factor[rec.rows][None, :, None]
    zj, pj = z.reshape(1, -1, z.shape[-1]), p.reshape(1, -1, p.shape[-1])
    visj = np.tile(vis, (h, 1))
    bj = None if bias is None else np.broadcast_to(bias, z.shape).reshape(1, -1, z.shape[-1])
    cap = layer_cap = None
    if rec.softcap is not None:
        hf, cap = fit_capped(z, p, vis, bias, d_k, rec.softcap)
        lf, layer_cap = fit_capped(zj, pj, visj, bj, d_k, rec.softcap)
    else:
        hf = fit_scale(z, p, vis, d_k=d_k, bias=bias)
        lf = fit_scale(zj, pj, visj, start=_joint_start(hf), d_k=d_k, bias=bj)
    refs = [None] * h if ref is None else [float(v) for v in ref.value]
    label = None if ref is None or not ref.known else ref.source
    hv = [verdict(float(hf.scale[i]), float(hf.tol_log[i]) + (ref.tol if ref else 0.0),
                  bool(hf.identifiable[i]), float(hf.weight_sum[i]), hf.weight_sum_tol, d_k,
                  d_model, h, reference=refs[i], declared_as=label) for i in range(h)]
    lv = _layer_verdict(hf, lf, hv, d_k, d_model, h, ref)
    return SiteFit(hf, lf, hv, lv, cap, layer_cap, site_misfit_limit(rec, vis, bias, hf),
                   position)


def site_misfit_limit(rec: SiteRecord, vis: np.ndarray, bias: np.ndarray | None,
                      hf: ScaleFit) -> float:
    """:func:`scale_fit.misfit_limit` of one site: its logits bounded by the largest fitted
    scale times the largest |q| |k| (sinks: their logit) plus the largest additive term."""
    qk = float(np.linalg.norm(rec.q, axis=-1).max() * np.linalg.norm(rec.k, axis=-1).max())
    terms = 0.0 if bias is None else float(np.abs(np.where(vis, bias, 0.0)).max())
    bound = float(hf.scale.max()) * qk + terms
    return misfit_limit(rec.d_k, int(vis.sum(axis=-1).max()), bound)


@dataclass(frozen=True)
class SiteAudit:
    """What the audit says about one site besides its fitted scale."""

    name: str  #: the module's path in the model
    block: str  #: encoder, decoder or cross
    features: tuple[str, ...]
    kv_head: np.ndarray  #: (H,) the key head each query head reads
    declared_source: str
    softcap_declared: float | None
    softcap: np.ndarray | None  #: (H,) fitted caps (inf: not reached or absent)
    softcap_reach: float | None  #: the largest |logit| below the cap
    matches_declared: bool
    mismatch: str  #: what differs from the declaration ("" when it matches)
    declared_known: bool = True  #: False: the declaration does not account for the code's factors
    #: why the declaration is unknown, or where a known one was checked when not against the
    #: projections ("" when there is nothing to add)
    declared_note: str = ""
    #: the first layer of the same module when this layer is a later call of it (ALBERT)
    shares_weights_with: int | None = None
    #: s(position) beside the declared law, where the scale may vary with the position
    position: tuple[PositionBucket, ...] = ()


def block_of(loaded: Any, site: Any, causal: bool) -> str:
    """encoder, decoder, cross, or causal encoder (causal self-attention in a model that
    transformers does not register as a language model: CLIP's text encoder)."""
    if site.cross:
        return "cross"
    if getattr(loaded.model.config, "is_encoder_decoder", False):
        return "decoder" if "decoder" in site.name.split(".")[:2] else "encoder"
    if not causal:
        return "encoder"
    return "decoder" if generates_text(loaded.info.model_type) else "causal encoder"


def generates_text(model_type: str) -> bool:
    """A model type transformers registers as a causal language model."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


def compare_declared(fit: SiteFit, ref: Reference | float, d_k: int | None = None
                     ) -> tuple[bool, str]:
    """Does the measured scale (and cap) agree with what the site should apply? (ok, what
    differs). ``ref``: its :class:`Reference` (a plain number: a known declared factor)."""
    if not isinstance(ref, Reference):
        ref = Reference(np.full(len(fit.head.scale), float(ref)), True, "")
    hf = fit.head
    if verdict_kind(fit.layer_verdict).startswith(AFTER_SOFTMAX) or any(
            verdict_kind(v) == AFTER_SOFTMAX for v in fit.head_verdicts):
        return False, "weights scaled after the softmax"
    if law_differs(fit.position):
        what = "the declared law" if ref.known else "the factors the code applies"
        return False, (f"the scale varies with the position otherwise than {what}: "
                       + position_text(fit.position))
    if float(fit.layer.misfit[0]) > fit.misfit_limit:
        return False, (f"the weights are not a softmax of scaled q.k and the model's own terms "
                       f"(misfit {float(fit.layer.misfit[0]):.2g})")
    ok = hf.identifiable
    gap = np.abs(np.log(hf.scale / ref.value))
    bad = ok & (gap > hf.tol_log + ref.tol)
    if bad.any():
        x = float(np.median(hf.scale[bad] / ref.value[bad]))
        heads = np.flatnonzero(bad)
        where = "all heads" if bad.sum() == ok.sum() else f"heads {', '.join(map(str, heads))}"
        what = "the declared scale" if ref.known else "the factors the code applies"
        return False, f"measured {x:.4g} x {what} ({where})"
    if fit.cap is not None and fit.cap.declared is not None and not fit.cap.declared_consistent[
            ok | ~ok].all():
        caps = fit.cap.cap[np.isfinite(fit.cap.cap)]
        found = f"fitted {np.median(caps):.4g}" if caps.size else "no cap found"
        return False, (f"soft-cap {fit.cap.declared:g} declared, {found} (logits reach "
                       f"{float(fit.cap.reach.max()):.3g})")
    return True, ""


def law_differs(position: Sequence[PositionBucket]) -> bool:
    """Do two buckets' scales, the reference's law folded in, differ by more than their bands
    together (each within its band of one value differ by at most the sum)? A factor common to
    every bucket is not a law's difference: the scale check reports it."""
    ok = [b for b in position if math.isfinite(b.tol)]
    return any(abs(math.log(a.ratio / b.ratio)) > a.tol + b.tol for a in ok for b in ok)


def position_text(position: Sequence[PositionBucket]) -> str:
    """"s x sqrt(d_k) 1.000 at positions 0-3 (declared 1.000), ..." of a site's buckets."""
    return ", ".join(f"{b.measured:.4g} at {b.first}-{b.last} (declared {b.declared:.4g})"
                     for b in position) + " (s x sqrt(d_k))"


def audit_ids(loaded: Any, ids: Sequence[int], bugs: Mapping[int, str] | None = None,
              tokens: tuple[str, ...] = (), cancelled: Callable[[], bool] = lambda: False
              ) -> AuditResult:
    """Audit one token sequence (tests and the CLI share the generator below)."""
    return run_audit(audit_tokens(loaded, ids, tokens, bugs or {}, cancelled))


def audit_tokens(loaded: Any, ids: Sequence[int], tokens: tuple[str, ...],
                 bugs: Mapping[int, str], cancelled: Callable[[], bool] = lambda: False
                 ) -> Iterator[AuditSnapshot]:
    from engine.probe.capture import capture_sites
    from engine.probe.inject import bug_modifiers

    mods = bug_modifiers(loaded, bugs)
    yield AuditSnapshot("forward pass", 0.1)
    records, forward_s, _out = capture_sites(loaded, ids, modifiers=mods, cancelled=cancelled)
    yield from audit_records(loaded, records, tokens, bugs, forward_s, cancelled)


def audit(cfg: AuditConfig, loaded: Any = None,
          cancelled: Callable[[], bool] = lambda: False) -> Iterator[AuditSnapshot]:
    """Audit ``cfg.text`` through a transformers model (loaded here when ``loaded`` is None)."""
    from engine.probe.inject import check_layers
    from engine.probe.loader import load_model, tokenize

    if loaded is None:
        yield AuditSnapshot("loading model", 0.0)
        loaded = load_model(cfg.model)
    check_layers(loaded, cfg.bugs, "inject")
    if cancelled():
        raise Cancelled()
    tok = tokenize(loaded, cfg.text, cfg.max_tokens)
    yield from audit_tokens(loaded, tok.ids, tok.tokens, cfg.bugs, cancelled)


def audit_records(loaded: Any, records: list[Any], tokens: tuple[str, ...],
                  bugs: Mapping[int, str], forward_s: float,
                  cancelled: Callable[[], bool] = lambda: False) -> Iterator[AuditSnapshot]:
    """The fit, verdicts and declared-vs-measured comparison of one capture's sites."""
    t0 = time.perf_counter()
    info = loaded.info
    n_sites = len(records)
    uniform = len({(r.n_heads, r.d_k) for r in records}) == 1  # (Gemma 4: not so)
    fits: list[SiteFit] = []
    refs: list[Reference] = []
    sites: list[SiteAudit] = []
    for i, rec in enumerate(records):  # one site at a time: progress and a cancel check each
        if cancelled():
            raise Cancelled()
        yield AuditSnapshot(f"fit, layer {i + 1} of {n_sites}", 0.2 + 0.8 * i / n_sites)
        ref = reference(loaded.declarations[i], rec)
        fit = fit_site(rec, info.d_model, ref)
        fits.append(fit)
        refs.append(ref)
        ok, why = compare_declared(fit, ref)
        site = loaded.sites[i]
        cap = fit.cap
        sites.append(SiteAudit(
            name=site.name, block=block_of(loaded, site, rec.causal), features=rec.features,
            kv_head=rec.kv_head.copy(), declared_source=ref.source, softcap_declared=rec.softcap,
            softcap=None if cap is None else cap.cap.copy(),
            softcap_reach=None if cap is None else float(cap.reach.max()),
            matches_declared=ok, mismatch=why, declared_known=ref.known,
            declared_note=ref.why_unknown or ref.note, shares_weights_with=site.shares_with,
            position=fit.position))
    rec0 = records[0]
    n_tok = rec0.q.shape[1]
    result = AuditResult(
        model_name=info.name, model_type=info.model_type, run=None, n_layers=n_sites,
        n_heads=max(r.n_heads for r in records), d_k=rec0.d_k, d_model=info.d_model,
        causal=loaded.causal,
        n_tokens=n_tok, tokens=tuple(tokens[:n_tok]) if tokens else (),
        inject=dict(bugs),
        declared_scale=np.array([r.median if r.known else np.nan for r in refs]),
        head_fits=[f.head for f in fits], layer_fits=[f.layer for f in fits],
        head_verdicts=[f.head_verdicts for f in fits],
        layer_verdicts=[f.layer_verdict for f in fits], note=CAPTURE_NOTE, forward_s=forward_s,
        fit_s=time.perf_counter() - t0, sites=tuple(sites),
        not_seen=tuple(getattr(loaded, "not_seen", ())),
        weights_text="" if getattr(loaded, "weights", None) is None else loaded.weights.text(),
        site_d_k=() if uniform else tuple(r.d_k for r in records),
        site_heads=() if uniform else tuple(r.n_heads for r in records))
    yield AuditSnapshot("done", 1.0, done=True, result=result)


def run_audit(gen: Iterator[AuditSnapshot]) -> AuditResult:
    """Drain an audit generator (CLI, tests, benchmark)."""
    return last_result(gen, "the audit")
