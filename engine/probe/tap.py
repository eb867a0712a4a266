"""Capture at transformers' attention-function interface: every attention call of any model.

transformers 5 sends most architectures' attention through one pluggable function chosen by
``config._attn_implementation`` (``AttentionInterface``): the module passes query, key, value, the
mask and its ``scaling`` (plus soft-cap, sinks, position bias where it has them) and gets the
output and the weights back. We register one implementation of our own, ``attention_lab``, that
calls the model's *own* eager function (the ``eager_attention_forward`` of the module's file)
unchanged, and shows each call to an observer. So the model computes exactly what it computes
under ``attn_implementation="eager"``; we only look (and, for the bug injection and the what-if,
multiply the query by a factor or drop the soft-cap, as a bug in the model's code would).

A :class:`Tap` belongs to one model. Its first pass (``discover``) numbers the attention sites in
call order (encoder layers, then decoder self- and cross-attention); afterwards forward hooks on
every linear layer inside each site keep that call's projection outputs, so the capture can
relate what reaches the product to what the projections produced (:mod:`engine.probe.sites`).
Architectures that compute attention inline, outside the interface, get an adapter
(:mod:`engine.probe.adapters`) that reports to the same observer, or a refusal.

Nothing here is imported by the GUI before a model is loaded: ``torch`` and ``transformers`` are
imported inside the functions.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from engine.errors import Cancelled, ConfigError

#: the name our capture is registered under in transformers' attention (and mask) interfaces
IMPLEMENTATION = "attention_lab"
#: keyword arguments of the attention function that are part of the logits (not the scale)
_EXTRA_KEYS = ("position_bias", "softcap", "s_aux", "sliding_window", "scaling")
#: the kwargs by which an attention module's forward receives the other sequence (cross-attention)
_CROSS_KWARGS = ("key_value_states", "encoder_hidden_states")

_ACTIVE: ContextVar[Tap | None] = ContextVar("attention_lab_tap", default=None)
_registered: set[str] = set()
_eager_cache: dict[type, Callable[..., Any]] = {}


@dataclass(frozen=True)
class Modifier:
    """What a planted bug or a what-if multiplier changes in one site's call.

    ``q_factor`` multiplies the query (so every logit q.k, before any soft-cap); ``w_factor``
    multiplies the weights after the softmax (and so the output); ``softcap_off`` drops the
    soft-cap argument.
    """

    q_factor: float = 1.0
    w_factor: float = 1.0
    softcap_off: bool = False

    def combined(self, other: Modifier) -> Modifier:
        return Modifier(self.q_factor * other.q_factor, self.w_factor * other.w_factor,
                        self.softcap_off or other.softcap_off)


IDENTITY = Modifier()


@dataclass(frozen=True)
class SiteInfo:
    """One attention site: one call of an attention module in a forward pass, numbered in call
    order by the discovery pass (a module called for several layers, as ALBERT's, is one site
    per call)."""

    index: int
    name: str  #: the module's path in the model ("encoder.layer.0.attention.self")
    cross: bool  #: its keys come from another sequence (encoder-decoder cross-attention)
    adapter: str | None = None  #: the adapter that reports it, None for the interface
    call: int = 0  #: which call of its module in a pass (0 for a module called once)
    #: the first site of the same module when this is a later call of it (shared weights)
    shares_with: int | None = None


@dataclass
class SiteCall:
    """What one attention call saw and produced (torch tensors, batch first).

    ``query``/``key`` are exactly what the attention product receives, before any injected
    factor; ``mask`` is the additive (or boolean) mask the call got; ``bias`` additive terms that
    are not masks (T5's relative position bias, ALiBi); ``weights`` the probabilities the values
    saw; ``projections`` the (output, input) of every linear layer inside the site's module in
    this call, in call order.
    """

    site: int
    module: Any
    query: Any
    key: Any
    mask: Any
    bias: Any
    weights: Any
    output: Any
    extra: dict[str, Any]
    projections: list[tuple[Any, Any]] = field(default_factory=list)


def register(name: str = IMPLEMENTATION, inner: str | None = None) -> str:
    """Register the capture under ``name`` in transformers' interfaces (once per process).

    ``inner`` None wraps each module's own eager function; otherwise the registered function
    ``inner`` (``"sdpa"``: the backend comparison), with that function's mask format.
    """
    if name in _registered:
        return name
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(name, _make_wrapper(inner))
    mask_fn = ALL_MASK_ATTENTION_FUNCTIONS["eager" if inner is None else inner]
    AttentionMaskInterface.register(name, mask_fn)
    _registered.add(name)
    return name


def eager_function(module: Any) -> Callable[..., Any]:
    """The ``eager_attention_forward`` of the module's own modeling file (or of a base class's)."""
    cls = type(module)
    fn = _eager_cache.get(cls)
    if fn is None:
        for base in cls.__mro__:
            fn = getattr(sys.modules.get(base.__module__), "eager_attention_forward", None)
            if callable(fn):
                break
        else:
            raise ConfigError("model", f"{cls.__name__} calls the attention interface but its "
                              "file has no eager_attention_forward to wrap")
        _eager_cache[cls] = fn
    return fn


def _make_wrapper(inner: str | None) -> Callable[..., Any]:
    def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                  *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if inner is None:
            fn = eager_function(module)
        else:
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

            fn = ALL_ATTENTION_FUNCTIONS[inner]
        if args:  # a model passing dropout/scaling positionally: name them
            bound = inspect.signature(fn).bind_partial(module, query, key, value, attention_mask,
                                                        *args)
            kwargs = {**{k: v for i, (k, v) in enumerate(bound.arguments.items()) if i >= 5},
                      **kwargs}
        tap = _ACTIVE.get()
        if tap is None:
            return fn(module, query, key, value, attention_mask, **kwargs)
        site = tap.site_of(module)
        mod = tap.modifier(site)
        q_in = query if mod.q_factor == 1.0 else query * mod.q_factor
        kw = {**kwargs, "softcap": None} if mod.softcap_off and "softcap" in kwargs else kwargs
        out, weights = fn(module, q_in, key, value, attention_mask, **kw)
        if mod.w_factor != 1.0:
            out = out * mod.w_factor
            weights = None if weights is None else weights * mod.w_factor
        extra = {k: kwargs.get(k) for k in _EXTRA_KEYS}
        tap.observe(SiteCall(site, module, query, key, attention_mask, extra.get("position_bias"),
                             weights, out, extra))
        return out, weights

    return attention


class Tap:
    """The attention sites of one model and what each forward pass does at them."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.sites: list[SiteInfo] = []
        self._index: dict[tuple[int, int], int] = {}  # (module id, its call in the pass)
        self._calls: dict[int, int] = {}  # module id -> calls so far in this pass
        self.ran: set[int] = set()  #: ids of the modules that ran in the discovery pass
        self._names = {id(m): name for name, m in model.named_modules()}
        self._frozen = False
        self._modifiers: dict[int, Modifier] = {}
        self._observer: Callable[[SiteCall], None] | None = None
        self._cancelled: Callable[[], bool] = lambda: False
        self._proj: dict[int, list[tuple[Any, Any]]] = {}
        self._cross: dict[int, bool] = {}
        self._adapters: dict[int, str] = {}
        self._hooks: list[Any] = [model.register_forward_pre_hook(self._new_pass)]

    def _new_pass(self, *_args: Any) -> None:
        """A forward pass of the whole model starts: calls are counted from 0 again."""
        self._calls = {}

    # -- sites ---------------------------------------------------------------------------------
    def site_of(self, module: Any) -> int:
        """The index of this call of ``module`` (its n-th in the pass); new sites are numbered
        only during discovery. Call it once per attention call."""
        mid = id(module)
        call = self._calls.get(mid, 0)
        self._calls[mid] = call + 1
        idx = self._index.get((mid, call))
        if idx is None:
            if self._frozen:
                raise ConfigError("model", f"an attention module ({type(module).__name__}) ran "
                                  "that the first pass did not see; this model's attention "
                                  "changes between passes and cannot be audited")
            idx = len(self.sites)
            self._index[(mid, call)] = idx
            first = self._index.get((mid, 0)) if call else None
            self.sites.append(SiteInfo(idx, self._names.get(mid, type(module).__name__),
                                       self._cross.get(mid, False), self._adapters.get(mid),
                                       call, first))
        return idx

    def mark_adapter(self, module: Any, adapter: str) -> None:
        self._adapters[id(module)] = adapter

    def modules(self) -> list[Any]:
        """The module of every site, in site order (a shared module once per call)."""
        by_id = {id(m): m for m in self.model.modules()}
        order = sorted(self._index.items(), key=lambda kv: kv[1])
        return [by_id[mid] for (mid, _call), _ in order]

    def unique_modules(self) -> list[Any]:
        """The site modules, each once, in order of their first call."""
        return list({id(m): m for m in self.modules()}.values())

    def discover(self, run: Callable[[], Any]) -> list[SiteInfo]:
        """Number the sites by running ``run`` once; then hook their projections."""
        self._install_site_hooks_pre()
        token = _ACTIVE.set(self)
        try:
            run()
        finally:
            _ACTIVE.reset(token)
        self._frozen = True
        self._install_projection_hooks()
        return list(self.sites)

    def _install_site_hooks_pre(self) -> None:
        """Before discovery: every module's forward pre-hook notes whether it got another
        sequence (cross-attention). Removed again after discovery."""
        def pre(mod: Any, args: Any, kwargs: Mapping[str, Any]) -> None:
            self.ran.add(id(mod))
            if any(kwargs.get(k) is not None for k in _CROSS_KWARGS):
                self._cross[id(mod)] = True

        handles = [m.register_forward_pre_hook(pre, with_kwargs=True)
                   for m in self.model.modules()]
        self._pre_discovery = handles

    def _install_projection_hooks(self) -> None:
        for h in getattr(self, "_pre_discovery", []):
            h.remove()
        self._pre_discovery = []
        for mod in self.unique_modules():
            mid = id(mod)

            def reset(_m: Any, _args: Any, mid: int = mid) -> None:
                if _ACTIVE.get() is self and self._observer is not None:
                    self._proj[mid] = []

            self._hooks.append(mod.register_forward_pre_hook(reset))
            for sub in mod.modules():
                if sub is mod or not _is_projection(sub):
                    continue

                def keep(_m: Any, args: Any, out: Any, mid: int = mid) -> None:
                    if _ACTIVE.get() is self and self._observer is not None and args:
                        self._proj.setdefault(mid, []).append((out, args[0]))

                # first of its hooks: it sees the projection's own output, before an adapter's
                # hook plants a factor in it
                self._hooks.append(sub.register_forward_hook(keep, prepend=True))

    # -- one pass --------------------------------------------------------------------------------
    def modifier(self, site: int) -> Modifier:
        return self._modifiers.get(site, IDENTITY)

    def observe(self, call: SiteCall) -> None:
        if self._cancelled():
            raise Cancelled()
        if self._observer is not None:
            call.projections = self._proj.pop(id(call.module), [])
            self._observer(call)

    @contextlib.contextmanager
    def active(self, observer: Callable[[SiteCall], None] | None = None,
               modifiers: Mapping[int, Modifier] | None = None,
               cancelled: Callable[[], bool] | None = None) -> Iterator[Tap]:
        """Within the block, forward passes of the model report to ``observer`` and apply
        ``modifiers`` ({site: Modifier}, on top of those of an enclosing block);
        ``cancelled()`` is checked at every site."""
        saved = (self._observer, self._modifiers, self._cancelled)
        self._observer = observer
        merged = dict(self._modifiers)  # an outer block's bugs stay planted inside
        for site, mod in (modifiers or {}).items():
            merged[site] = merged.get(site, IDENTITY).combined(mod)
        self._modifiers = merged
        self._cancelled = cancelled or (lambda: False)
        self._proj = {}
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)
            self._observer, self._modifiers, self._cancelled = saved
            self._proj = {}

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []


def active_tap() -> Tap | None:
    """The tap of the forward pass running in this thread (adapters report to it)."""
    return _ACTIVE.get()


def active_for(tap: Tap) -> Tap | None:
    """``tap`` when a forward pass is running under it (an adapter's hooks report only then)."""
    return tap if active_tap() is tap else None


def _is_projection(module: Any) -> bool:
    """A linear layer: torch's Linear, or the Conv1D of GPT-2's family (transposed weight)."""
    import torch

    if isinstance(module, torch.nn.Linear):
        return True
    w = getattr(module, "weight", None)
    return type(module).__name__ == "Conv1D" and isinstance(w, torch.Tensor) and w.ndim == 2
