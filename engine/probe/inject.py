"""Plant a scaling bug in chosen attention sites, or multiply their logits, at run time.

Both act through the tap (:mod:`engine.probe.tap`) as a bug in the model's code would: the query
that reaches the attention product is multiplied by a factor (so every logit q.k is, before any
soft-cap), the weights are multiplied after the softmax, or the soft-cap argument is dropped.
Nothing in the model is modified, so nothing needs restoring, and it works the same on every
architecture the tap sees (adapters included).

Bugs are defined against the factor s0 the site's code applies now (what it passes to the
attention function times its q/k pre-scales, as the load's survey measured it; the declared
scale wherever the two agree): "none" makes the factor on the projections' q.k 1 whatever s0 is
(OPT's pre-scaled q included), "twice" divides it by sqrt(d_k) once more, "after_softmax" removes
it before the softmax and divides the weights by sqrt(d_k) after it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

from engine.errors import ConfigError
from engine.probe.tap import Modifier

#: bug kind -> what it does (help texts, legends)
BUG_KINDS: dict[str, str] = {
    "twice": "q.k divided by sqrt(d_k) twice (= 1/d_k)",
    "none": "no scaling at all",
    "dmodel": "divided by sqrt(d_model) instead of sqrt(d_k)",
    "after_softmax": "softmax of the unscaled q.k, the weights then divided by sqrt(d_k)",
    "head_dim": "the scale taken from the other width: sqrt(d_model / heads) where the model "
                "uses sqrt(head_dim), or the other way round (models where they differ)",
    "softcap_off": "the attention logit soft-cap left out (models that cap)",
}


def check_layers(loaded: Any, layers: Mapping[int, str] | None, field: str) -> None:
    n = loaded.n_sites
    for layer, kind in (layers or {}).items():
        if not 0 <= int(layer) < n:
            raise ConfigError(field, f"layer {layer} is out of range; this model has layers 0..{n - 1}")
        if kind not in BUG_KINDS:
            raise ConfigError(field, f"unknown bug kind {kind!r}; one of {', '.join(BUG_KINDS)}")


def bug_scaling(kind: str, s0: float, d_k: int, d_model: int, n_heads: int | None = None) -> float:
    """The pre-softmax factor of a layer with bug ``kind`` whose correct factor is ``s0``
    (``after_softmax`` drops it here and applies it to the weights instead)."""
    if kind == "twice":
        return s0 / math.sqrt(d_k)
    if kind == "dmodel":
        return s0 * math.sqrt(d_k) / math.sqrt(d_model)
    if kind == "head_dim":
        if not n_heads:
            raise ConfigError("inject", "head_dim needs the number of heads")
        width = d_model / n_heads
        if abs(s0 * math.sqrt(width) - 1.0) < 1e-6:  # the model uses d_model / heads (Gemma 2
            return d_k**-0.5  # 27B's query_pre_attn_scalar): the bug takes head_dim
        return s0 * math.sqrt(d_k) / math.sqrt(width)
    if kind in ("none", "after_softmax"):
        return 1.0
    if kind == "softcap_off":
        return s0
    raise ConfigError("inject", f"unknown bug kind {kind!r}; one of {', '.join(BUG_KINDS)}")


def site_scale(loaded: Any, layer: int) -> float:
    """The factor site ``layer``'s code applies now (its declared scale for a model wrapped
    before the survey kept it)."""
    scales = getattr(loaded, "code_scale", None)
    return float(scales[layer]) if scales else float(loaded.declared[layer][0])


def bug_modifier(loaded: Any, layer: int, kind: str) -> Modifier:
    """The :class:`Modifier` that plants ``kind`` in site ``layer`` (refused where it would
    change nothing there)."""
    s0 = site_scale(loaded, layer)
    d_k, n_heads = loaded.site_d_k[layer], loaded.site_heads[layer]
    d_model = loaded.info.d_model
    if kind == "softcap_off":
        if loaded.site_softcap[layer] is None:
            raise ConfigError("inject", f"layer {layer} has no soft-cap to leave out")
        return Modifier(softcap_off=True)
    if kind == "head_dim" and abs(d_model / n_heads - d_k) < 1e-9:
        raise ConfigError("inject", f"layer {layer}: head_dim {d_k} equals d_model / heads "
                          f"({d_model}/{n_heads}); this bug changes nothing here")
    if kind == "dmodel" and d_model == d_k:
        raise ConfigError("inject", f"layer {layer}: d_model equals d_k; dmodel changes nothing")
    target = bug_scaling(kind, s0, d_k, d_model, n_heads)
    if kind == "none" and abs(target / s0 - 1.0) < 1e-12:
        raise ConfigError("inject", f"layer {layer} already applies no scale (declared "
                          f"{loaded.declared[layer][1]}); 'none' changes nothing here")
    w = d_k**-0.5 if kind == "after_softmax" else 1.0
    return Modifier(q_factor=target / s0, w_factor=w)


def bug_modifiers(loaded: Any, bugs: Mapping[int, str]) -> dict[int, Modifier]:
    check_layers(loaded, bugs, "inject")
    return {int(layer): bug_modifier(loaded, int(layer), kind) for layer, kind in bugs.items()}


@contextlib.contextmanager
def injected(loaded: Any, bugs: Mapping[int, str]) -> Iterator[dict[int, float]]:
    """Forward passes inside the block run with ``bugs`` ({layer: kind}) planted; yields
    {layer: the factor now applied to the projections' q.k (before the softmax, or after it for
    ``after_softmax``)}."""
    mods = bug_modifiers(loaded, bugs)
    applied = {layer: (site_scale(loaded, layer) * m.q_factor if bugs[layer] != "after_softmax"
                       else m.w_factor) for layer, m in mods.items()}
    with loaded.tap.active(modifiers=mods):
        yield applied


def multiplier_modifiers(loaded: Any, m: float, layer: int | None = None) -> dict[int, Modifier]:
    """Logits of every site (``layer`` None) or of one multiplied by ``m``."""
    n = loaded.n_sites
    if layer is not None and not 0 <= layer < n:
        raise ConfigError("whatif_layer", f"layer {layer} is out of range; this model has layers "
                          f"0..{n - 1}")
    return {i: Modifier(q_factor=m) for i in range(n) if layer is None or i == layer}


@contextlib.contextmanager
def multiplied(loaded: Any, m: float, layer: int | None = None) -> Iterator[None]:
    """Forward passes inside the block run with the logits of every layer (or one) times ``m``."""
    with loaded.tap.active(modifiers=multiplier_modifiers(loaded, m, layer)):
        yield
