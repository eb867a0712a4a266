"""Does another attention backend compute what eager computes? Layer by layer.

The model runs once through its own eager attention and once per other implementation
transformers has registered (SDPA always; flex attention and the flash kernels on a CUDA device,
where the model supports them), switched by its real name so that every code path keyed on it
runs; forward hooks keep each attention module's input and output. A site is flagged when its
output differs from eager's by more than :data:`REL_TOL` (relative to the largest output) while
its input still agrees (:data:`REL_TOL`, or more where the logits are large:
:func:`site_tolerance`): that backend computes that layer differently (a scale ignored, a mask
misread; GPT-2's flags under SDPA, transformers #44380). Later sites inherit the difference; they
are reported with it but not flagged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.probe.scale_fit import EPS32
from engine.probe.tap import IMPLEMENTATION

#: relative disagreement above which a site's backend output differs from eager's (float32 sums
#: differ by ~1e-7 relative; a planted 10% scale change gives ~1e-1)
REL_TOL = 1e-4
#: model flags that say whether it supports an implementation
_SUPPORT_FLAG = {"sdpa": "_supports_sdpa", "flex_attention": "_supports_flex_attn"}


@dataclass(frozen=True)
class BackendSite:
    backend: str
    site: int
    output_rel_diff: float  #: max |out_b - out_eager| / max |out_eager|
    input_rel_diff: float  #: the same for the module's input (differences from upstream)
    tolerance: float  #: what float32 rounding allows here (see :func:`site_tolerance`)
    flagged: bool  #: the output differs beyond it while the input agrees


@dataclass(frozen=True)
class BackendReport:
    compared: tuple[str, ...]
    unavailable: dict[str, str]  #: backend -> why it was not compared
    sites: tuple[BackendSite, ...]
    tolerance: float = REL_TOL
    notes: list[str] = field(default_factory=list)

    def flagged(self) -> list[BackendSite]:
        return [s for s in self.sites if s.flagged]

    def rows(self, blocks: Sequence[str] = ()) -> list[dict[str, object]]:
        """backends.csv: one row per (backend, site)."""
        return [{"backend": s.backend, "layer": s.site,
                 "block": blocks[s.site] if s.site < len(blocks) else "",
                 "output_rel_diff": s.output_rel_diff, "input_rel_diff": s.input_rel_diff,
                 "tolerance_rel": s.tolerance, "flagged": s.flagged} for s in self.sites]


COLUMNS = ("backend", "layer", "block", "output_rel_diff", "input_rel_diff", "tolerance_rel",
           "flagged")


def candidate_backends() -> list[str]:
    """Every implementation transformers has registered besides eager (ours excluded)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return [k for k in ALL_ATTENTION_FUNCTIONS.valid_keys()
            if not k.startswith(IMPLEMENTATION) and not k.startswith("paged")]


def _why_unavailable(loaded: Any, backend: str) -> str | None:
    import torch

    if any(s.adapter for s in loaded.sites):
        return "this architecture computes attention outside the interface"
    flag = _SUPPORT_FLAG.get(backend)
    if flag is not None and getattr(loaded.model, flag, True) is False:
        return f"{loaded.info.model_type} does not support it ({flag} = False)"
    if (backend.startswith("flash") or backend == "flex_attention") and \
            not torch.cuda.is_available():
        return "compared on a CUDA device only (on the CPU it runs unfused, uncompiled)"
    return None


def _max_logits(loaded: Any, ids: Sequence[int]) -> list[float]:
    """Per site, the largest |scaling * q.k| of an eager pass (the float32 rounding of a logit,
    and so of the backends' difference, grows with it)."""
    from engine.probe.capture import run_forward

    got: dict[int, float] = {}

    def observe(call: Any) -> None:
        q, k = call.query.double(), call.key.double()
        if k.shape[1] != q.shape[1]:
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        s = call.extra.get("scaling")
        s = q.shape[-1] ** -0.5 if s is None else float(s)
        got[call.site] = float((q @ k.transpose(-1, -2)).abs().max()) * abs(s)

    with loaded.tap.active(observe):
        run_forward(loaded.model, ids)
    return [got.get(i, 0.0) for i in range(loaded.n_sites)]


def site_tolerance(max_logit: float) -> float:
    """Relative output difference two correct float32 backends may show at a site whose logits
    reach ``max_logit``: REL_TOL, or 64 eps per unit of logit when that is larger (a logit's
    rounding error moves its weight by that much relative)."""
    return max(REL_TOL, 64 * EPS32 * max_logit)


def _run(loaded: Any, ids: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every site's input hidden states and output, in site order, from one pass under the
    model's current implementation (forward hooks: the implementation runs as transformers
    dispatches it, by its own name, code paths keyed on that name included). A module called
    for several layers (shared weights) gives one pair per call."""
    from engine.probe.capture import run_forward

    calls: dict[int, list[list[np.ndarray]]] = {}  # module id -> [input, output] per call
    handles = []

    def arr(t: Any) -> np.ndarray:
        return t.detach().double().cpu().numpy()

    for mod in loaded.tap.unique_modules():
        def pre(m: Any, args: Any, kwargs: dict[str, Any]) -> None:
            x = args[0] if args else kwargs.get("hidden_states")
            calls.setdefault(id(m), []).append([arr(x)])

        def post(m: Any, _args: Any, out: Any) -> None:
            calls[id(m)][-1].append(arr(out[0] if isinstance(out, tuple) else out))

        handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mod.register_forward_hook(post))
    try:
        run_forward(loaded.model, ids)
    finally:
        for h in handles:
            h.remove()
    mods = loaded.tap.modules()
    return [tuple(calls[id(m)][site.call]) for m, site in zip(mods, loaded.sites)]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    scale = max(float(np.abs(a).max()), 1e-30)
    return float(np.abs(a - b).max()) / scale


def compare_backends(loaded: Any, ids: Sequence[int], backends: Sequence[str] | None = None
                     ) -> BackendReport:
    """Eager against each of ``backends`` (default: every candidate) on one token sequence."""
    wanted = list(candidate_backends() if backends is None else backends)
    eager = _run(loaded, ids)
    tols = ([site_tolerance(m) for m in _max_logits(loaded, ids)]
            if not any(s.adapter for s in loaded.sites) else [REL_TOL] * len(eager))
    unavailable: dict[str, str] = {}
    sites: list[BackendSite] = []
    compared: list[str] = []
    net = loaded.model
    for backend in wanted:
        why = _why_unavailable(loaded, backend)
        if why is not None:
            unavailable[backend] = why
            continue
        try:
            net.set_attn_implementation(backend)
            if net.config._attn_implementation != backend:
                raise ValueError(f"{loaded.info.model_type} cannot switch to {backend}")
            other = _run(loaded, ids)
        except Exception as exc:  # a backend transformers refuses for this model or machine
            text = str(exc).strip().splitlines()
            unavailable[backend] = text[0][:200] if text else type(exc).__name__
            continue
        finally:
            net.set_attn_implementation(IMPLEMENTATION)
        compared.append(backend)
        for i, ((x0, o0), (x1, o1)) in enumerate(zip(eager, other)):
            d_out = _rel(o0, o1)
            d_in = _rel(x0, x1)
            tol = tols[i]
            sites.append(BackendSite(backend, i, d_out, d_in, tol, d_out > tol >= d_in))
    return BackendReport(tuple(compared), unavailable, tuple(sites))
