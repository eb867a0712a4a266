"""Adapters for architectures whose attention bypasses transformers' attention interface.

A few families still compute attention inline in their module's ``forward`` (GPT-Neo, Bloom,
MPT, XLNet, DeBERTa, ...). Each adapter here reports such a module's calls to the same
:class:`~engine.probe.tap.Tap` observer as the interface wrapper, with the same query/key/mask/
weights, and applies the same modifiers (a factor on q, a factor on the weights), without
changing what the model computes:

* GPT-Neo: its ``_attn(query, key, value, attention_mask)`` method is wrapped (no scale: GPT-Neo
  folds it into the initialisation, like T5); its local layers' band mask lives in a buffer.
* Bloom: forward hooks. The fused ``query_key_value`` output gives q and k (heads interleaved),
  the ``alibi`` argument is the additive ALiBi term (not scaled), ``inv_norm_factor`` the scale,
  and the ``attention_dropout`` module (identity in eval mode) sees the probabilities on their
  way to the values, where an after-softmax factor goes.
* MPT: :mod:`engine.probe.adapters_fused` (hooks on its fused q/k/v projection).
* the BERT family's inline attention: :mod:`engine.probe.adapters_bert`; DeBERTa:
  :mod:`engine.probe.adapters_deberta`.

Any other architecture whose attention never reaches the interface is refused by the loader with
its name (:data:`BYPASSING` says why for the families we know of).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.probe.adapters_bert import NO_SOFTMAX_BERT
from engine.probe.install import call_modified, install_sites, wrap_attn
from engine.probe.tap import SiteCall, Tap, active_for, active_tap

#: families known to compute attention outside the interface, and what they do instead
#: model types whose token mixing is no softmax over q.k at all (why, said in the refusal)
NO_SOFTMAX: dict[str, str] = {
    "rwkv": "mixes tokens by a linear recurrence (RWKV's time mixing: receptance, key, value)",
    **NO_SOFTMAX_BERT,
}

BYPASSING: dict[str, str] = {
    "openai-gpt": "computes attention inline in its own module",
    "xlnet": "uses two-stream relative attention of its own",
    "prophetnet": "uses n-gram (main and predict stream) self-attention of its own",
    "deberta": "uses disentangled (content/position) attention of its own",
    "deberta-v2": "uses disentangled (content/position) attention of its own",
    "funnel": "uses relative attention of its own with pooling",
    "reformer": "uses LSH attention",
    "longformer": "uses sliding-window plus global attention of its own",
    "big_bird": "uses block-sparse attention of its own",
    "xglm": "computes attention inline in its own module",
    "xlm": "computes attention inline in its own module",
    "flaubert": "computes attention inline in its own module",
}


def adapter_for(model_type: str) -> Callable[[Tap, Any], int] | None:
    """The installer of ``model_type``'s adapter (returns the number of modules adapted)."""
    from engine.probe.adapters_bert import bert_adapters
    from engine.probe.adapters_fused import install_mpt
    from engine.probe.adapters_seq import installers

    return {"gpt_neo": install_gpt_neo, "bloom": install_bloom,
            "mpt": install_mpt, **bert_adapters(), **installers()}.get(model_type)


# -- GPT-Neo -------------------------------------------------------------------------------------

def install_gpt_neo(tap: Tap, model: Any) -> int:
    """Wrap every GPT-Neo self-attention's ``_attn`` (an instance attribute shadows the method)."""
    return install_sites(tap, model, "GPTNeoSelfAttention", wrap_attn(_neo_attn), "gpt_neo")


def _neo_attn(module: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def attn(query: Any, key: Any, value: Any, attention_mask: Any = None) -> Any:
        tap = active_tap()
        if tap is None:
            return original(query, key, value, attention_mask)
        site, out, weights = call_modified(tap, module, original, query, key, value,
                                           attention_mask)
        nq, nk = query.shape[-2], key.shape[-2]
        band = module.bias[:, :, nk - nq:nk, :nk]  # causal, and for local layers a window
        low = torch.finfo(torch.float32).min
        mask = torch.where(band, 0.0, low).float()
        if attention_mask is not None:
            mask = torch.clamp(mask + attention_mask.float(), min=low)
        tap.observe(SiteCall(site, module, query, key, mask, None, weights, out,
                             {"scaling": 1.0}))
        return out, weights

    return attn


# -- Bloom ----------------------------------------------------------------------------------------

def install_bloom(tap: Tap, model: Any) -> int:
    return install_sites(tap, model, "BloomAttention", lambda mod: _BloomSite(tap, mod), "bloom")


class _BloomSite:
    """The hooks of one BloomAttention; ``state`` carries one call from hook to hook."""

    def __init__(self, tap: Tap, module: Any) -> None:
        self.tap, self.module = tap, module
        self.state: dict[str, Any] = {}
        module.register_forward_pre_hook(self.pre, with_kwargs=True)
        module.query_key_value.register_forward_hook(self.qkv)
        module.attention_dropout.register_forward_hook(self.probs)
        module.register_forward_hook(self.post)

    def _mine(self) -> Tap | None:
        return active_for(self.tap)

    def pre(self, _m: Any, args: Any, kwargs: dict[str, Any]) -> None:
        self.state = {}
        tap = self._mine()
        if tap is None:
            return
        self.state = {"site": tap.site_of(self.module), "alibi": kwargs.get("alibi"),
                      "mask": kwargs.get("attention_mask")}

    def qkv(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = self._mine()
        if tap is None or "site" not in self.state:
            return None
        b, n, _ = out.shape
        h = self.module.num_heads
        fused = out.view(b, n, h, 3, self.module.head_dim)
        self.state["q"] = fused[..., 0, :].transpose(1, 2).detach().clone()
        self.state["k"] = fused[..., 1, :].transpose(1, 2).detach().clone()
        f = tap.modifier(self.state["site"]).q_factor
        if f == 1.0:
            return None
        scaled = fused.clone()
        scaled[..., 0, :] *= f
        return scaled.view(b, n, -1)

    def probs(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = self._mine()
        if tap is None or "site" not in self.state:
            return None
        f = tap.modifier(self.state["site"]).w_factor
        if f != 1.0:
            out = out * f
        self.state["weights"] = out
        return out if f != 1.0 else None

    def post(self, _m: Any, _args: Any, out: Any) -> None:
        tap = self._mine()
        st, self.state = self.state, {}
        if tap is None or "weights" not in st:
            return
        q, k = st["q"], st["k"]
        b, h, nq, _ = q.shape
        nk = k.shape[2]
        alibi = st["alibi"]
        bias = None if alibi is None else (float(self.module.beta) * alibi).reshape(b, h, 1, nk).expand(
            b, h, nq, nk)
        tap.observe(SiteCall(st["site"], self.module, q, k, st["mask"], bias, st["weights"],
                             out[0], {"scaling": float(self.module.inv_norm_factor),
                                      "bias_kind": "ALiBi"}))
