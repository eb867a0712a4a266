"""The adapter for MPT: attention computed inline from one fused q/k/v projection.

MPT's module returns its attention probabilities and takes q, k and v from one linear layer
(``Wqkv``), so forward hooks see everything without copying the model's code into the
computation:

* a pre-hook keeps the call's ALiBi term and mask;
* a hook on the fused projection keeps its output (q and k are read from it as the module does,
  with ``chunk``) and plants the modifiers: a factor on q multiplies q's columns, a factor on
  the weights multiplies v's columns (probabilities x f on their way to the values: the same
  output), each found by splitting a tensor of column indices the way the module splits its
  output;
* a hook after the module reads the probabilities it returns and reports the call.

MPT multiplies q.k by ``softmax_scale`` (``attn_config``'s, else ``1/sqrt(head_dim)``) and adds
ALiBi after it; its mask is boolean (True: hidden). (Falcon had an adapter of this kind until
transformers 5.25 sent its attention through the attention interface.)
"""

from __future__ import annotations

from typing import Any

from engine.probe.install import install_sites
from engine.probe.tap import SiteCall, Tap, active_for


def install_mpt(tap: Tap, model: Any) -> int:
    return install_sites(tap, model, "MptAttention", lambda mod: _MptSite(tap, mod), "mpt")


class _FusedSite:
    """The hooks of one fused-projection attention module; ``state`` carries one call from hook
    to hook."""

    def __init__(self, tap: Tap, module: Any, fused: Any) -> None:
        self.tap, self.module = tap, module
        self.state: dict[str, Any] = {}
        self._columns: dict[tuple[int, str], Any] = {}
        module.register_forward_pre_hook(self.pre, with_kwargs=True)
        fused.register_forward_hook(self.qkv)
        module.register_forward_hook(self.post)

    # what the subclasses say about their module
    def split(self, fused: Any) -> tuple[Any, Any, Any]:
        """(q, k, v) of the fused output, (batch, heads, tokens, head_dim), as the module does."""
        raise NotImplementedError

    def logits_terms(self, st: dict[str, Any], q: Any, k: Any
                     ) -> tuple[Any, Any, Any, dict[str, Any]]:
        """(q, k as they meet in the product, mask, additive bias, extra) of one call."""
        raise NotImplementedError

    def _mine(self) -> Tap | None:
        return active_for(self.tap)

    def pre(self, _m: Any, args: Any, kwargs: dict[str, Any]) -> None:
        tap = self._mine()
        self.state = ({} if tap is None else
                      {"site": tap.site_of(self.module), "args": args, "kwargs": kwargs})

    def column_factor(self, width: int, part: str, f: float) -> Any:
        """A (width,) factor: f on the columns of q (part "q") or v ("v"), 1 elsewhere."""
        import torch

        key = (width, part)
        if key not in self._columns:
            idx = torch.arange(width, dtype=torch.float64).view(1, 1, width)
            q, _k, v = self.split(idx)
            cols = (q if part == "q" else v).reshape(-1).long().unique()
            mask = torch.zeros(width, dtype=torch.bool)
            mask[cols] = True
            self._columns[key] = mask
        mask = self._columns[key]
        return torch.where(mask, torch.tensor(f), torch.tensor(1.0))

    def qkv(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = self._mine()
        if tap is None or "site" not in self.state:
            return None
        q, k, _v = self.split(out)
        self.state["q"], self.state["k"] = q.detach().clone(), k.detach().clone()
        mod = tap.modifier(self.state["site"])
        if mod.q_factor == 1.0 and mod.w_factor == 1.0:
            return None
        width = out.shape[-1]
        factor = (self.column_factor(width, "q", mod.q_factor)
                  * self.column_factor(width, "v", mod.w_factor))
        if mod.q_factor != 1.0:
            self.state["q"] = self.state["q"] * mod.q_factor
        return out * factor.to(out.dtype)

    def post(self, _m: Any, _args: Any, out: Any) -> None:
        tap = self._mine()
        st, self.state = self.state, {}
        if tap is None or "q" not in st or out[1] is None:
            return
        weights = out[1]
        f = tap.modifier(st["site"])
        if f.q_factor != 1.0:  # SiteCall's q and k: before any injected factor
            st["q"] = st["q"] / f.q_factor
        if f.w_factor != 1.0:  # (the values carried it: the output is already scaled)
            weights = weights * f.w_factor
        q, k, mask, bias, extra = self.logits_terms(st, st["q"], st["k"])
        tap.observe(SiteCall(st["site"], self.module, q, k, mask, bias, weights, out[0], extra))


class _MptSite(_FusedSite):
    def __init__(self, tap: Tap, module: Any) -> None:
        super().__init__(tap, module, module.Wqkv)

    def split(self, fused: Any) -> tuple[Any, Any, Any]:
        m = self.module
        b, n = fused.shape[:2]
        return tuple(x.reshape(b, n, m.n_heads, m.head_dim).transpose(1, 2)
                     for x in fused.chunk(3, dim=2))  # type: ignore[return-value]

    def logits_terms(self, st: dict[str, Any], q: Any, k: Any
                     ) -> tuple[Any, Any, Any, dict[str, Any]]:
        import torch

        kw, args, m = st["kwargs"], st["args"], self.module
        if m.clip_qkv:  # (the module clamps the fused output before splitting it)
            q, k = q.clamp(-m.clip_qkv, m.clip_qkv), k.clamp(-m.clip_qkv, m.clip_qkv)
        pb = kw.get("position_bias", args[1] if len(args) > 1 else None)
        mask = kw.get("attention_mask")
        b, h, nq, _ = q.shape
        nk = k.shape[2]
        bias = None
        if pb is not None:
            bias = pb[:, max(0, pb.size(1) - nq):, max(0, pb.size(2) - nk):]
            bias = bias.float().unsqueeze(0).expand(b, h, nq, nk)
        if mask is not None:  # True: hidden; the audit reads an additive mask
            mask = torch.where(mask, torch.finfo(torch.float32).min, 0.0).float()
        return q, k, mask, bias, {"scaling": float(m.softmax_scale), "bias_kind": "ALiBi"}
