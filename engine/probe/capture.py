"""Run a loaded model once and keep what every attention site saw (:mod:`engine.probe.tap`).

:func:`prepare` puts a model in the tap's hands (our registered attention implementation, or an
adapter for an architecture that bypasses the interface) and numbers its sites;
:func:`capture_sites` runs one text and returns one :class:`~engine.probe.sites.SiteRecord` per
site (the audit); :func:`capture` packs them as the per-layer arrays the probe statistics use.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.probe.sites import MAX_FIT_ROWS, SiteRecord, record_call
from engine.probe.tap import IMPLEMENTATION, Modifier, SiteCall, Tap, register

#: tokens of the discovery pass (enough for every site to run once)
DISCOVERY_TOKENS = 4
#: what q and k of a multi-head latent attention site are (DeepSeek): assembled from compressed
#: latents (the norm inside is on the latent, not on q and k), not one projection's output
MLA = "MLA (q and k from compressed latents)"


def prepare(net: Any, model_type: str) -> Tap:
    """Route ``net``'s attention through the tap and number its sites; refuse, naming the
    architecture, when no attention call can be seen."""
    from engine.probe.adapters import BYPASSING, NO_SOFTMAX, adapter_for

    if model_type in NO_SOFTMAX:
        raise ConfigError("model", f"{model_type} has no softmax attention: it "
                          f"{NO_SOFTMAX[model_type]}; there is no attention scale to audit")
    reads = getattr(net, "main_input_name", "input_ids")
    if reads != "input_ids":
        raise ConfigError("model", f"{model_type} reads {reads} (audio or images), not token "
                          "ids; the audit runs text models")
    tap = Tap(net)
    install = adapter_for(model_type)
    if install is not None:
        install(tap, net)
    else:
        _use_interface(net, model_type)
    try:
        sites = tap.discover(lambda: run_forward(net, list(range(1, DISCOVERY_TOKENS + 1))))
    except ConfigError:
        raise
    except Exception as exc:  # a model whose forward needs more than token ids
        raise ConfigError("model", f"{model_type}: a forward pass on token ids failed "
                          f"({_one_line(exc)}); the audit runs text models") from None
    if not sites:
        if not has_attention(net):
            raise ConfigError("model", f"{model_type} has no attention (no attention module, "
                              "no query and key projections): there is no attention scale to "
                              "audit")
        why = BYPASSING.get(model_type, "computes attention inside its own modules")
        raise ConfigError("model", f"{model_type} {why}, outside transformers' attention "
                          "interface, and the lab has no adapter for it: its q.k cannot be seen")
    return tap


def has_attention(net: Any) -> bool:
    """Whether ``net`` has an attention module: one owning query and key projections
    (:func:`engine.probe.coverage.attention_modules`) or one whose class says attention (XLNet
    keeps its projections as bare parameters). A state-space model (Mamba) has none."""
    from engine.probe.coverage import attention_modules

    if attention_modules(net):
        return True
    return any(w in type(m).__name__.lower() for m in net.modules() for w in ("attention", "attn"))


def _use_interface(net: Any, model_type: str) -> None:
    register()
    setter = getattr(net, "set_attn_implementation", None)
    if setter is None:
        raise ConfigError("model", f"{model_type} cannot switch its attention implementation")
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "does not support setting ..." is our refusal below
    try:
        setter(IMPLEMENTATION)
    except Exception as exc:
        raise ConfigError("model", f"{model_type}: cannot route its attention through the "
                          f"lab's capture ({_one_line(exc)})") from None
    finally:
        hf_logging.set_verbosity(level)


def forward_kwargs(net: Any, ids: Sequence[int], mask: Sequence[int] | None = None
                   ) -> dict[str, Any]:
    """The keyword arguments of one forward pass on ``ids`` (an encoder-decoder model's decoder
    reads the same text shifted right by one, teacher-forced)."""
    import torch

    t = torch.as_tensor([list(ids)], dtype=torch.long)
    m = torch.ones_like(t) if mask is None else torch.as_tensor([list(mask)], dtype=torch.long)
    kw: dict[str, Any] = {"input_ids": t, "attention_mask": m}
    params = _params(net)
    if getattr(net.config, "is_encoder_decoder", False):
        start = next((v for v in (getattr(net.config, "decoder_start_token_id", None),
                                  getattr(net.config, "pad_token_id", None)) if
                      isinstance(v, int)), 0)
        kw["decoder_input_ids"] = torch.cat([torch.full((1, 1), start, dtype=torch.long),
                                             t[:, :-1]], dim=1)
    if "use_cache" in params:
        kw["use_cache"] = False
    return kw


def _params(net: Any) -> set[str]:
    cached = getattr(net, "_attention_lab_params", None)
    if cached is None:
        cached = set(inspect.signature(net.forward).parameters)
        try:
            net._attention_lab_params = cached
        except AttributeError:
            pass
    return cached


def run_forward(net: Any, ids: Sequence[int], mask: Sequence[int] | None = None) -> Any:
    import torch

    with torch.inference_mode():
        return net(**forward_kwargs(net, ids, mask))


def last_hidden(out: Any) -> Any:
    """The final hidden states of a model output (the decoder's for an encoder-decoder)."""
    h = getattr(out, "last_hidden_state", None)
    return out[0] if h is None else h


def capture_sites(loaded: Any, ids: Sequence[int], mask: Sequence[int] | None = None,
                  modifiers: Mapping[int, Modifier] | None = None,
                  max_rows: int | None = MAX_FIT_ROWS,
                  cancelled: Callable[[], bool] = lambda: False
                  ) -> tuple[list[SiteRecord], float, Any]:
    """One forward pass: (a record per site in site order, its wall time, the model output)."""
    records: list[SiteRecord | None] = [None] * len(loaded.sites)
    norms = loaded.qk_norm_sites
    mla = getattr(loaded, "mla_sites", frozenset())
    sites = loaded.sites

    def observe(call: SiteCall) -> None:
        records[call.site] = record_call(
            call, max_rows, call.site in norms, sites[call.site].cross,
            MLA if call.site in mla else None)

    t0 = time.perf_counter()
    with loaded.tap.active(observe, modifiers, cancelled):
        out = run_forward(loaded.model, ids, mask)
    elapsed = time.perf_counter() - t0
    missing = [i for i, r in enumerate(records) if r is None]
    if missing:
        raise ConfigError("model", f"attention site {missing[0]} did not run on this text; "
                          "the model's attention changes with the input and cannot be audited")
    return [r for r in records if r is not None], elapsed, out


@dataclass(frozen=True)
class Capture:
    """The probe's view of one pass: per-site arrays on the valid (non-padding) tokens."""

    q: np.ndarray  #: (L, H, n, d_k) float32 queries of the projections, per head
    k: np.ndarray  #: (L, H, n, d_k) float32 keys, expanded to the query heads (GQA)
    model_attn: np.ndarray  #: (L, H, n, n) float32 the model's own attention probabilities
    #: (L, H) largest model probability on a masked key of a valid query row (should be 0)
    masked_mass: np.ndarray
    scale: np.ndarray  #: (L,) factor the model multiplies the projections' q.k by
    pair_masks: np.ndarray  #: (L, n, n) bool key visible to query, per site
    bias: np.ndarray | None  #: (L, H, n, n) additive terms (position bias, ALiBi), or None
    softcap: np.ndarray  #: (L,) the soft-cap of each site, NaN without one
    sinks: bool  #: some site has attention sinks (its rows sum below 1)
    valid_positions: np.ndarray  #: (n,) positions of the valid tokens in the padded input
    causal: bool
    forward_s: float

    @property
    def pair_mask(self) -> np.ndarray:
        """(n, n): the first site's visibility (every site's, for a one-kind model)."""
        return self.pair_masks[0]


def capture(loaded: Any, input_ids: Sequence[int],
            attention_mask: Sequence[int] | None = None) -> Capture:
    """Run the model once on one sequence; q, k and attention of its valid tokens, per site.

    ``attention_mask`` (1 = token, 0 = padding) may mark padding anywhere; padding tokens are
    dropped from every returned array, and the model's weight on them is reported in
    ``masked_mass`` so a test can check that the model gave them none.
    """
    n_all = len(input_ids)
    if attention_mask is not None and len(attention_mask) != n_all:
        raise ValueError("attention_mask must have one entry per token")
    valid = (np.ones(n_all, dtype=bool) if attention_mask is None
             else np.asarray(attention_mask, dtype=bool))
    if valid.sum() < 1:
        raise ValueError("no valid token")
    records, forward_s, _out = capture_sites(loaded, input_ids, attention_mask, max_rows=None)
    pos = np.flatnonzero(valid)
    shapes = {(r.n_heads, r.d_k, r.q.shape[1], r.k.shape[1]) for r in records}
    if len(shapes) != 1:
        raise ConfigError("model", "its attention sites differ in heads, head width or length; "
                          "the probe's per-layer grids need one shape (the audit handles it)")
    q = np.stack([_with_position(r) for r in records])[:, :, pos]
    k = np.stack([r.k[r.kv_head] for r in records])[:, :, pos]
    attn = np.stack([r.probs for r in records])  # (L, H, N, N)
    vis = np.stack([r.visible for r in records])  # (L, N, N)
    hidden = ~vis & valid[None, :, None]
    masked_mass = np.where(hidden[:, None], attn, 0.0).max(axis=(2, 3))
    bias = None
    if any(r.bias is not None for r in records):
        h = records[0].n_heads
        bias = np.stack([np.zeros((h, n_all, n_all), np.float32) if r.bias is None else
                         np.broadcast_to(r.bias, (h, n_all, n_all)) for r in records])
        bias = bias[:, :, pos][:, :, :, pos]
    scale = np.array([_site_scale(r) for r in records])
    return Capture(
        q=q, k=k, model_attn=attn[:, :, pos][:, :, :, pos],
        masked_mass=np.asarray(masked_mass, dtype=np.float64),
        scale=scale, pair_masks=vis[:, pos][:, :, pos], bias=bias,
        softcap=np.array([np.nan if r.softcap is None else r.softcap for r in records]),
        sinks=any(r.sinks is not None for r in records), valid_positions=pos,
        causal=any(r.causal for r in records), forward_s=forward_s)


def _with_position(r: SiteRecord) -> np.ndarray:
    """q with its position-dependent factor put back (Llama 4, Ministral 3): the probe's
    recomputation of the model's attention applies one scale per site."""
    if r.q_position is None:
        return r.q
    f = np.where(np.isfinite(r.q_position), r.q_position, 1.0)
    return (r.q * f[None, :, None]).astype(np.float32)


def _site_scale(r: SiteRecord) -> float:
    """The factor on the projections' q.k the site's code applies: the scaling it passed (the
    eager default 1/sqrt(d) when it passed none) times the q/k pre-scale."""
    s = r.d_k**-0.5 if r.scaling is None else r.scaling
    return float(s * np.median(r.prescale()))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
