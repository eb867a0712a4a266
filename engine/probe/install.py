"""One walk that installs an adapter's hook sites on every matching module of a model.

Every adapter of inline attention does the same: find the modules of its attention class(es),
attach its hooks (or wrap a helper method) on each, tell the tap which adapter reads that module
(the audit reports it per site) and say how many it adapted (0: the loader refuses the model).
The adapters that wrap a ``_attn(q, k, v, mask, ...)`` helper also share how a wrapped call
plants the tap's modifiers (:func:`call_modified`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from engine.probe.tap import Tap


def install_sites(tap: Tap, model: Any, class_names: str | Collection[str],
                  make_site: Callable[[Any], object], name: str | None,
                  accept: Callable[[Any], bool] | None = None) -> int:
    """Call ``make_site(module)`` on each module of ``model`` whose class is named in
    ``class_names`` (and that ``accept`` takes, when given), mark it as read by adapter ``name``
    (None: not marked, the site marks what it reads later), and return how many it found."""
    names = (class_names,) if isinstance(class_names, str) else class_names
    count = 0
    for mod in model.modules():
        if type(mod).__name__ in names and (accept is None or accept(mod)):
            make_site(mod)
            if name is not None:
                tap.mark_adapter(mod, name)
            count += 1
    return count


def wrap_attn(wrap: Callable[[Any, Callable[..., Any]], Callable[..., Any]]
              ) -> Callable[[Any], None]:
    """A ``make_site`` that replaces a module's ``_attn`` method by ``wrap(module, _attn)`` (an
    instance attribute shadows the method; the model's code calls it unchanged)."""
    def make(mod: Any) -> None:
        mod._attn = wrap(mod, mod._attn)
    return make


def call_modified(tap: Tap, module: Any, original: Callable[..., Any], query: Any,
                  *rest: Any) -> tuple[int, Any, Any]:
    """(site, output, weights) of one call of a wrapped ``original(query, *rest)`` that returns
    (output, weights): a factor on q goes into the query, one on the weights onto both returned
    tensors (the probabilities times f on their way to the values: the same output)."""
    site = tap.site_of(module)
    mod = tap.modifier(site)
    q_in = query if mod.q_factor == 1.0 else query * mod.q_factor
    out, weights = original(q_in, *rest)
    if mod.w_factor != 1.0:
        out, weights = out * mod.w_factor, weights * mod.w_factor
    return site, out, weights
