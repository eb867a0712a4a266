"""Change the scale a loaded transformers model applies, at run time, layer by layer.

Both uses patch the eager attention modules' ``scaling`` (the factor their eager attention
multiplies q.k by) and put everything back on exit:

* :func:`injected` plants a scaling bug (``twice``, ``none``, ``dmodel``, ``after_softmax``) so a
  user sees what each bug looks like to the audit;
* :func:`multiplied` multiplies the logits of every layer (or one) by m for the what-if sweep.

``after_softmax`` needs more than the factor: the pre-softmax scale is removed and the weights are
multiplied by it after the softmax (forward hooks, run before transformers' own output recorder so
the returned attentions are the weights the values really see).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

from engine.errors import ConfigError
from engine.probe.loader import LoadedModel

#: bug kind -> what it does (help texts, legends)
BUG_KINDS: dict[str, str] = {
    "twice": "q.k divided by sqrt(d_k) twice (= 1/d_k)",
    "none": "no scaling at all",
    "dmodel": "divided by sqrt(d_model) instead of sqrt(d_k)",
    "after_softmax": "softmax of the unscaled q.k, the weights then divided by sqrt(d_k)",
}

#: the output projection inside the attention module (None: the module returns P @ V itself)
_OUT_PROJ = {"gpt2": "c_proj", "distilbert": "out_lin"}


def attention_modules(loaded: LoadedModel) -> list[Any]:
    """The self-attention modules in layer order (those the capture hooks)."""
    from engine.probe.capture import _attention_modules

    mods = _attention_modules(loaded)
    for m in mods:
        if not isinstance(getattr(m, "scaling", None), (int, float)):
            raise ConfigError("model", f"{type(m).__name__} keeps no 'scaling' factor; this "
                              f"transformers version of {loaded.info.model_type} cannot be patched")
    return mods


def check_layers(loaded: LoadedModel, layers: Mapping[int, str] | None, field: str) -> None:
    n = loaded.info.n_layers
    for layer, kind in (layers or {}).items():
        if not 0 <= int(layer) < n:
            raise ConfigError(field, f"layer {layer} is out of range; this model has layers 0..{n - 1}")
        if kind not in BUG_KINDS:
            raise ConfigError(field, f"unknown bug kind {kind!r}; one of {', '.join(BUG_KINDS)}")


def bug_scaling(kind: str, s0: float, d_k: int, d_model: int) -> float:
    """The pre-softmax factor of a layer with bug ``kind`` whose correct factor is ``s0``
    (``after_softmax`` drops it here and applies it to the weights instead)."""
    if kind == "twice":
        return s0 / math.sqrt(d_k)
    if kind == "dmodel":
        return s0 * math.sqrt(d_k) / math.sqrt(d_model)
    if kind in ("none", "after_softmax"):
        return 1.0
    raise ConfigError("inject", f"unknown bug kind {kind!r}; one of {', '.join(BUG_KINDS)}")


@contextlib.contextmanager
def injected(loaded: LoadedModel, bugs: Mapping[int, str]) -> Iterator[dict[int, float]]:
    """Plant ``bugs`` ({layer: kind}); yields {layer: the factor now applied to q.k (before the
    softmax, or after it for ``after_softmax``)}."""
    check_layers(loaded, bugs, "inject")
    if not bugs:  # nothing to plant: touch nothing (works on modules without 'scaling' too)
        yield {}
        return
    mods = attention_modules(loaded)
    d_k, d_model = loaded.info.d_k, loaded.info.d_model
    saved = [m.scaling for m in mods]
    handles: list[Any] = []
    applied: dict[int, float] = {}
    try:
        for layer, kind in sorted(bugs.items()):
            m = mods[layer]
            s0 = float(m.scaling)
            m.scaling = bug_scaling(kind, s0, d_k, d_model)
            if kind == "after_softmax":
                handles += _scale_after_softmax(loaded, m, s0)
            applied[layer] = float(m.scaling) if kind != "after_softmax" else s0
        yield applied
    finally:
        for h in handles:
            h.remove()
        for m, s in zip(mods, saved):
            m.scaling = s


def _scale_after_softmax(loaded: LoadedModel, module: Any, factor: float) -> list[Any]:
    """Hooks that multiply the attention weights (and so P @ V) by ``factor``."""
    out_proj = _OUT_PROJ.get(loaded.info.model_type)

    def weights_hook(_m: Any, _inp: Any, out: Any) -> Any:
        if not isinstance(out, tuple) or len(out) < 2 or out[1] is None:
            return out
        head = out[0] if out_proj is not None else out[0] * factor
        return (head, out[1] * factor, *out[2:])

    handles = [module.register_forward_hook(weights_hook, prepend=True)]
    if out_proj is not None:
        def pre(_m: Any, args: Any) -> Any:
            return (args[0] * factor, *args[1:])

        handles.append(getattr(module, out_proj).register_forward_pre_hook(pre))
    return handles


@contextlib.contextmanager
def multiplied(loaded: LoadedModel, m: float, layer: int | None = None) -> Iterator[None]:
    """Multiply the logits of every layer (``layer`` None) or of one layer by ``m``."""
    mods = attention_modules(loaded)
    if layer is not None and not 0 <= layer < len(mods):
        raise ConfigError("whatif_layer", f"layer {layer} is out of range; this model has layers "
                          f"0..{len(mods) - 1}")
    saved = [x.scaling for x in mods]
    try:
        for i, x in enumerate(mods):
            if layer is None or i == layer:
                x.scaling = float(x.scaling) * m
        yield
    finally:
        for x, s in zip(mods, saved):
            x.scaling = s
