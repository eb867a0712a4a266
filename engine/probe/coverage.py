"""Which attention layers of a model the audit sees, and why it does not see the others.

The audit sees an attention layer when its call reaches transformers' attention interface (or an
adapter). Some modules compute attention inline instead: LongT5's local attention does so in
its encoder while its decoder uses the interface, so a model can be seen in part. To say so,
every attention module of the model is listed: a module that owns a query and a key projection
(or one fused q/k/v projection) as its direct children, whatever the architecture calls them.
A listed module the tap never saw is reported with why: it ran but never called the interface
(inline attention, no adapter), or it did not run on a text-only forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: names of a query projection, of a key projection, and of a fused q/k/v projection, as the
#: children of an attention module (lower case)
QUERY_NAMES = frozenset({"q", "query", "q_proj", "q_lin", "wq", "query_proj", "q_a_proj",
                         "q_b_proj", "to_q", "q_attn"})
KEY_NAMES = frozenset({"k", "key", "k_proj", "k_lin", "wk", "key_proj", "kv_proj",
                       "kv_a_proj_with_mqa", "kv_b_proj", "to_k", "to_kv"})
FUSED_NAMES = frozenset({"qkv", "qkv_proj", "c_attn", "query_key_value", "wqkv", "in_proj",
                         "qkv_lin", "att_proj", "w_pack", "to_qkv"})


@dataclass(frozen=True)
class NotSeen:
    """An attention module whose calls the audit never saw."""

    name: str  #: its path in the model
    kind: str  #: its class
    why: str


#: what only a state-space mixer (Mamba's) owns: its ``in_proj`` is no attention projection
SSM_MARKERS = frozenset({"A_log", "dt_proj", "dt_bias"})


def attention_modules(net: Any) -> list[tuple[str, Any]]:
    """(path, module) of every module owning a query and a key projection, or a fused one (a
    state-space mixer is not one)."""
    from engine.probe.tap import _is_projection

    out = []
    for name, mod in net.named_modules():
        own = {n for n, _p in mod.named_parameters(recurse=False)}
        own |= {n for n, _m in mod.named_children()}
        if own & SSM_MARKERS:
            continue
        kids = {n.lower() for n, m in mod.named_children() if _is_projection(m)}
        if (kids & QUERY_NAMES and kids & KEY_NAMES) or kids & FUSED_NAMES:
            out.append((name, mod))
    return out


def not_seen(tap: Any, net: Any) -> tuple[NotSeen, ...]:
    """The model's attention modules the tap did not see in its discovery pass, with why."""
    seen = {id(m) for m in tap.unique_modules()}
    seen_names = [name for name, m in net.named_modules() if id(m) in seen]
    out = []
    for name, mod in attention_modules(net):
        if id(mod) in seen or any(name.startswith(s + ".") or s.startswith(name + ".")
                                  for s in seen_names if s):
            continue  # a site itself, or a module inside one (or around one)
        kind = type(mod).__name__
        if id(mod) in tap.ran:
            why = (f"{kind} computes attention inside its own forward, outside transformers' "
                   "attention interface, and the lab has no adapter for it")
        else:
            why = f"{kind} did not run in a forward pass on token ids"
        out.append(NotSeen(name, kind, why))
    return tuple(out)
