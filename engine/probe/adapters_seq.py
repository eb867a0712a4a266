"""Adapters for decoder and sequence-to-sequence families that compute attention inline.

Three shapes of inline attention cover them, each read with hooks or a wrapped helper, never a
copy of the model's code in the computation:

* **separate projections, weights returned** (XGLM, MVP, TrOCR, LED's decoder, FSMT): the module
  multiplies ``q_proj``'s output by its ``scaling`` (1/sqrt(head_dim)) and returns the
  probabilities when asked (``output_attentions``: the pre-hook asks; the post-hook hands back
  what the caller asked for). Hooks on the q and k projections keep their outputs; the query the
  product receives is ``q_proj(x) * scaling``, so the call reads as OPT's (pre-scaled q, product
  factor 1) and the declaration accounts for the module's ``scaling`` on q. A factor on q goes
  into ``q_proj``'s output, one on the weights into ``v_proj``'s (the same output). FSMT keeps
  its tensors time-first and masks padding with a boolean ``key_padding_mask``.
* **a helper taking (q, k, v, mask)** (OpenAI GPT, GPT-NeoX-Japanese): the ``_attn`` method is
  wrapped like GPT-Neo's; OpenAI GPT divides by sqrt(head_dim) when its ``scale`` flag is set and
  masks the future with ``-1e4`` through a buffer; GPT-NeoX-Japanese multiplies by
  ``1/norm_factor`` = 1/sqrt(head_size).
* **a softmax module** (CPM-Ant): ``q.k / sqrt(dim_head) + position_bias``, masked, then
  ``self.softmax``; a hook on that module sees the probabilities (an after-softmax factor goes
  there), the call's ``position_bias`` is the additive term.

LED's encoder uses Longformer's sliding-chunk attention (no adapter: its layers read "not seen").
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from engine.probe.install import call_modified, install_sites, wrap_attn
from engine.probe.tap import SiteCall, Tap, active_for, active_tap

#: model type -> (attention class names, layout: "batch" or "time" first)
PROJECTION_TYPES: dict[str, tuple[tuple[str, ...], str]] = {
    "xglm": (("XGLMAttention",), "batch"),
    "mvp": (("MvpAttention",), "batch"),
    "trocr": (("TrOCRAttention",), "batch"),
    "led": (("LEDDecoderAttention",), "batch"),
    "fsmt": (("Attention",), "time"),
}
#: model type -> the class whose ``_attn(q, k, v, mask, ...)`` is wrapped
HELPER_TYPES: dict[str, str] = {"openai-gpt": "Attention", "gpt_neox_japanese": "GPTNeoXJapaneseAttention"}
LOW = -3.4028234663852886e38  # float32's minimum: what transformers fills a hidden key with


def installers() -> dict[str, Callable[[Tap, Any], int]]:
    """{model type: installer} of this module's adapters."""
    out: dict[str, Callable[[Tap, Any], int]] = {}
    for mt in PROJECTION_TYPES:
        out[mt] = lambda tap, net, mt=mt: _install_projection(tap, net, mt)
    for mt in HELPER_TYPES:
        out[mt] = lambda tap, net, mt=mt: _install_helper(tap, net, mt)
    out["cpmant"] = _install_cpmant
    return out


def declared(adapter: str, module: Any, d_k: int) -> tuple[float, str] | None:
    """(product factor, source) of an adapter of this module whose convention is not the
    module's ``scaling`` attribute; None to fall through to the generic rules."""
    if adapter == "openai-gpt":
        return ((d_k**-0.5, "1/sqrt(head_dim) (OpenAI GPT's scale flag)") if module.scale
                else (1.0, "none (OpenAI GPT's scale flag off)"))
    if adapter == "gpt_neox_japanese":
        return 1.0 / float(module.norm_factor), "1/norm_factor (GPT-NeoX-Japanese)"
    if adapter == "cpmant":
        return d_k**-0.5, "1/sqrt(dim_head) (CPM-Ant)"
    return None


class _QKSite:
    """The hooks of one module with separate q and k projections; ``state`` carries one call
    from hook to hook. Both projections' outputs are kept as (batch, heads, tokens, head_dim)
    (a subclass's ``_heads``); a factor on q goes into q's output. The subclass hooks the rest
    (where the weights are) and the module's end (``post``)."""

    def __init__(self, tap: Tap, module: Any, q_proj: Any, k_proj: Any) -> None:
        self.tap, self.module = tap, module
        self.state: dict[str, Any] = {}
        self.signature = inspect.signature(module.forward)
        module.register_forward_pre_hook(self.pre, with_kwargs=True)
        q_proj.register_forward_hook(self.q_out)
        k_proj.register_forward_hook(self.k_out)

    def pre(self, _m: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        """Number the call's site and bind its arguments (a new ``state``)."""
        tap = active_for(self.tap)
        self.state = {}
        if tap is not None:
            bound = self.signature.bind_partial(*args, **kwargs).arguments
            self.state = {"site": tap.site_of(self.module), "bound": bound}
        return None

    def _heads(self, x: Any) -> Any:
        """(batch, heads, tokens, head_dim) of a projection's output."""
        raise NotImplementedError

    def q_out(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = active_for(self.tap)
        if tap is None or "site" not in self.state:
            return None
        self.state["q"] = self._heads(out.detach().clone())
        f = tap.modifier(self.state["site"]).q_factor
        return None if f == 1.0 else out * f

    def k_out(self, _m: Any, _args: Any, out: Any) -> None:
        if active_for(self.tap) is not None and "site" in self.state:
            self.state["k"] = self._heads(out.detach().clone())


# -- separate projections ------------------------------------------------------------------------

def _install_projection(tap: Tap, model: Any, model_type: str) -> int:
    names, layout = PROJECTION_TYPES[model_type]
    return install_sites(tap, model, names, lambda mod: _ProjectionSite(tap, mod, layout),
                         model_type, accept=lambda mod: hasattr(mod, "q_proj"))


class _ProjectionSite(_QKSite):
    """Hooks of one module with q/k/v projections that returns (output, weights, ...)."""

    def __init__(self, tap: Tap, module: Any, layout: str) -> None:
        self.layout = layout
        super().__init__(tap, module, module.q_proj, module.k_proj)
        module.v_proj.register_forward_hook(self.v_out)
        module.register_forward_hook(self.post)

    def pre(self, _m: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        super().pre(_m, args, kwargs)
        if not self.state:
            return None
        bound = self.state["bound"]
        self.state["asked"] = bool(bound.get("output_attentions"))
        if "output_attentions" in self.signature.parameters:
            kwargs = dict(kwargs, output_attentions=True)
            if "output_attentions" in bound and len(args) > list(
                    self.signature.parameters).index("output_attentions"):
                return None  # (passed positionally: already what it is, kept)
            return args, kwargs
        return None

    def _heads(self, x: Any) -> Any:
        m = self.module
        if self.layout == "time":
            n, b = x.shape[:2]
            return x.reshape(n, b, m.num_heads, m.head_dim).permute(1, 2, 0, 3)
        b, n = x.shape[:2]
        return x.reshape(b, n, m.num_heads, m.head_dim).transpose(1, 2)

    def v_out(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = active_for(self.tap)
        if tap is None or "site" not in self.state:
            return None
        f = tap.modifier(self.state["site"]).w_factor
        return None if f == 1.0 else out * f

    def post(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = active_for(self.tap)
        st, self.state = self.state, {}
        if tap is None or "k" not in st or out[1] is None:
            return None
        weights = out[1]
        f = tap.modifier(st["site"]).w_factor
        if f != 1.0:  # (v carried it: the output is already scaled)
            weights = weights * f
        q = st["q"] * float(self.module.scaling)  # what the product receives
        mask = self._mask(st["bound"], q.shape[0], q.shape[2], st["k"].shape[2])
        tap.observe(SiteCall(st["site"], self.module, q, st["k"], mask, None, weights, out[0],
                             {"scaling": 1.0}))
        if not st["asked"]:
            return (out[0], None, *out[2:])
        return None

    def _mask(self, bound: dict[str, Any], b: int, nq: int, nk: int) -> Any:
        import torch

        if self.layout == "batch":
            mask = bound.get("attention_mask")
            return None if mask is None else mask.float()
        mask = torch.zeros(b, 1, nq, nk)
        attn = bound.get("attn_mask")
        if attn is not None:
            mask = mask + attn.float()
        pad = bound.get("key_padding_mask")
        if pad is not None and pad.dim() == 2:
            mask = mask.masked_fill(pad.view(b, 1, 1, nk), LOW)
        return mask.clamp(min=LOW)


# -- a wrapped _attn helper -------------------------------------------------------------------

def _install_helper(tap: Tap, model: Any, model_type: str) -> int:
    wrap = _openai_attn if model_type == "openai-gpt" else _neox_jp_attn
    return install_sites(tap, model, HELPER_TYPES[model_type], wrap_attn(wrap), model_type,
                         accept=lambda mod: hasattr(mod, "_attn"))


def _openai_attn(module: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def attn(q: Any, k: Any, v: Any, attention_mask: Any = None,
             output_attentions: bool = False) -> Any:
        tap = active_tap()
        if tap is None:
            return original(q, k, v, attention_mask, output_attentions)
        site, out, weights = call_modified(tap, module, original, q, k, v, attention_mask, True)
        nq, nk = q.shape[-2], k.shape[-1]
        band = module.bias[:, :, :nq, :nk]  # w * b - 1e4 * (1 - b): a hidden key gets 0 weight
        mask = torch.where(band > 0, 0.0, LOW).float()
        if attention_mask is not None:
            mask = (mask + attention_mask.float()).clamp(min=LOW)
        scaling = 1.0 / math.sqrt(v.size(-1)) if module.scale else 1.0
        tap.observe(SiteCall(site, module, q, k.transpose(-1, -2), mask, None, weights, out,
                             {"scaling": scaling}))
        return [out, weights] if output_attentions else [out]

    return attn


def _neox_jp_attn(module: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    def attn(query: Any, key: Any, value: Any, attention_mask: Any = None) -> Any:
        tap = active_tap()
        if tap is None:
            return original(query, key, value, attention_mask)
        site, out, weights = call_modified(tap, module, original, query, key, value,
                                           attention_mask)
        mask = None if attention_mask is None else attention_mask.float()
        tap.observe(SiteCall(site, module, query, key, mask, None, weights, out,
                             {"scaling": 1.0 / float(module.norm_factor)}))
        return out, weights

    return attn


# -- CPM-Ant: a softmax module -----------------------------------------------------------------

def _install_cpmant(tap: Tap, model: Any) -> int:
    return install_sites(tap, model, "CpmAntAttention", lambda mod: _CpmAntSite(tap, mod),
                         "cpmant")


class _CpmAntSite(_QKSite):
    def __init__(self, tap: Tap, module: Any) -> None:
        super().__init__(tap, module, module.project_q, module.project_k)
        module.softmax.register_forward_hook(self.probs)
        module.register_forward_hook(self.post)

    def _heads(self, x: Any) -> Any:
        b, n = x.shape[:2]
        m = self.module
        return x.reshape(b, n, m.num_heads, m.dim_head).transpose(1, 2)

    def probs(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = active_for(self.tap)
        if tap is None or "site" not in self.state:
            return None
        f = tap.modifier(self.state["site"]).w_factor
        self.state["weights"] = out if f == 1.0 else out * f
        return None if f == 1.0 else self.state["weights"]

    def post(self, _m: Any, _args: Any, out: Any) -> None:
        import torch

        tap = active_for(self.tap)
        st, self.state = self.state, {}
        if tap is None or "weights" not in st:
            return
        q, k, bound = st["q"], st["k"], st["bound"]
        b, h, nq, _ = q.shape
        nk = k.shape[2]
        keep = bound["attention_mask"].view(b, 1, nq, nk).bool()
        mask = torch.where(keep, 0.0, LOW).float()
        bias = bound["position_bias"].float().expand(b, h, nq, nk)
        tap.observe(SiteCall(st["site"], self.module, q, k, mask, bias, st["weights"], out[0],
                             {"scaling": 1.0 / math.sqrt(self.module.dim_head),
                              "bias_kind": "relative position bias"}))
