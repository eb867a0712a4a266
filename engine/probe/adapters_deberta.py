"""DeBERTa's disentangled attention (v1 and v2/v3) through forward hooks.

Both versions compute ``softmax(q.k / sqrt(d * f) + c2p + p2c + mask)`` with
``f = 1 + len(pos_att_type)``: the content-to-position and position-to-content terms carry the
same ``1/sqrt(d * f)``, so the factor on the projections' q.k is ``1/sqrt(3 d)`` with both terms
(the paper's section 3.1), ``1/sqrt(d)`` with none; :func:`declared` says so from the config.

The hooks keep q and k as the projections made them (v1: its fused ``in_proj`` plus ``q_bias``;
v2: ``query_proj`` / ``key_proj``, whose first output of the call is the tokens', later ones
DeBERTa-v2's shared position keys), read the probabilities at the attention dropout, and ask the
module's own ``disentangled_att_bias`` / ``disentangled_attention_bias`` for the two relative
terms, given the q and k the product used: that is the additive term the audit sees. A factor on
q (a planted bug, the what-if) is applied to k, which DeBERTa does not pre-scale; the p2c term,
k times the position queries, carries it as a bug in the code would. A factor on the weights
multiplies the values (v1: its ``v_bias`` too, added after ``in_proj``). Talking heads (v1's
``head_logits_proj`` mixes the heads' logits) are refused: no per-head softmax of q.k is left.
"""

from __future__ import annotations

import math
from typing import Any

from engine.errors import ConfigError
from engine.probe.install import install_sites
from engine.probe.tap import SiteCall, Tap, active_for


def install_deberta(tap: Tap, model: Any) -> int:
    return install_sites(tap, model, "DisentangledSelfAttention",
                         lambda mod: _DebertaSite(tap, mod), "deberta")


def scale_factor(config: Any) -> int:
    """1 + the relative terms the config names (the module counts c2p and p2c the same way)."""
    kinds = getattr(config, "pos_att_type", None) or []
    if isinstance(kinds, str):
        kinds = [x.strip() for x in kinds.lower().split("|")]
    return 1 + sum(1 for x in ("c2p", "p2c") if x in kinds)


def declared(config: Any, d_k: int) -> tuple[float, str]:
    f = scale_factor(config)
    return (d_k * f) ** -0.5, (f"1/sqrt({f} x head_dim) (DeBERTa: 1 + {f - 1} relative terms "
                               "in pos_att_type)" if f > 1 else "1/sqrt(head_dim) (DeBERTa)")


class _DebertaSite:
    """The hooks of one DisentangledSelfAttention; ``state`` carries one call."""

    def __init__(self, tap: Tap, module: Any) -> None:
        self.tap, self.module = tap, module
        self.v1 = hasattr(module, "in_proj")
        self.state: dict[str, Any] = {}
        module.register_forward_pre_hook(self.pre, with_kwargs=True)
        if self.v1:
            module.in_proj.register_forward_hook(self.fused)
        else:
            module.query_proj.register_forward_hook(self.part("q"))
            module.key_proj.register_forward_hook(self.part("k"))
            module.value_proj.register_forward_hook(self.values)
        module.dropout.register_forward_hook(self.probs)
        module.register_forward_hook(self.post)

    def pre(self, _m: Any, args: Any, kwargs: dict[str, Any]) -> None:
        tap = active_for(self.tap)
        self.state = {}
        if tap is None:
            return
        if getattr(self.module, "head_logits_proj", None) is not None:
            raise ConfigError("model", "this DeBERTa uses talking heads (head_logits_proj mixes "
                              "the heads' logits): no per-head softmax of q.k to audit")
        names = ("hidden_states", "attention_mask", "output_attentions", "query_states",
                 "relative_pos", "rel_embeddings")
        bound = {**dict(zip(names, args)), **kwargs}
        if bound.get("query_states") is not None and self.v1:
            raise ConfigError("model", "DeBERTa's query_states path (its enhanced mask decoder) "
                              "is not audited")
        self.state = {"site": tap.site_of(self.module), "args": bound}

    def _factor(self, which: str) -> float:
        tap = active_for(self.tap)
        mod = tap.modifier(self.state["site"])
        return mod.q_factor if which == "q" else mod.w_factor

    def fused(self, _m: Any, _args: Any, out: Any) -> Any:
        """v1: in_proj's output holds, per head, q, k and v side by side."""
        if active_for(self.tap) is None or "site" not in self.state:
            return None
        m = self.module
        b, n, _w = out.shape
        heads = out.view(b, n, m.num_attention_heads, -1).transpose(1, 2)
        q, k, _v = heads.chunk(3, dim=-1)
        qb = m.transpose_for_scores(m.q_bias[None, None, :])
        self.state["q"], self.state["k"] = (q + qb).detach().clone(), k.detach().clone()
        fq, fw = self._factor("q"), self._factor("w")
        if fq == 1.0 and fw == 1.0:
            return None
        import torch

        d = heads.shape[-1] // 3
        col = torch.ones(3 * d, dtype=out.dtype)
        col[d:2 * d], col[2 * d:] = fq, fw
        scaled = heads * col
        if fw != 1.0:  # (v1 adds v_bias after in_proj: the values must be fw (v + v_bias))
            vb = m.transpose_for_scores(m.v_bias[None, None, :])
            scaled[..., 2 * d:] = scaled[..., 2 * d:] + (fw - 1.0) * vb
        return scaled.transpose(1, 2).reshape(b, n, -1)

    def part(self, which: str) -> Any:
        def hook(_m: Any, _args: Any, out: Any) -> Any:
            if active_for(self.tap) is None or "site" not in self.state or which in self.state:
                return None  # (later calls: v2's shared position projections)
            self.state[which] = out.detach().clone()
            f = self._factor("q") if which == "k" else 1.0
            return None if f == 1.0 else out * f
        return hook

    def values(self, _m: Any, _args: Any, out: Any) -> Any:
        if active_for(self.tap) is None or "site" not in self.state or "v" in self.state:
            return None
        self.state["v"] = True
        f = self._factor("w")
        return None if f == 1.0 else out * f

    def probs(self, _m: Any, _args: Any, out: Any) -> None:
        if active_for(self.tap) is not None and "site" in self.state:
            self.state["weights"] = out.detach()

    def post(self, _m: Any, _args: Any, out: Any) -> None:
        tap = active_for(self.tap)
        st, self.state = self.state, {}
        if tap is None or "weights" not in st or "q" not in st:
            return
        import torch

        m, args = self.module, st["args"]
        h = m.num_attention_heads
        q, k = st["q"], st["k"]
        if not self.v1:  # (batch, tokens, width) -> (batch, heads, tokens, d)
            q = q.view(q.shape[0], q.shape[1], h, -1).transpose(1, 2)
            k = k.view(k.shape[0], k.shape[1], h, -1).transpose(1, 2)
        b, _h, n, d = q.shape
        f = scale_factor(m)
        mod = tap.modifier(st["site"])
        weights = st["weights"].view(b, h, n, -1)
        if mod.w_factor != 1.0:
            weights = weights * mod.w_factor
        bias = None
        if m.relative_attention and args.get("rel_embeddings") is not None and (
                args.get("relative_pos") is not None or not self.v1):
            k_used = k * mod.q_factor
            with torch.no_grad():
                if self.v1:
                    qs = q / math.sqrt(d * f)
                    bias = m.disentangled_att_bias(qs, k_used, args.get("relative_pos"),
                                                   args["rel_embeddings"], f)
                else:
                    bias = m.disentangled_attention_bias(
                        q.reshape(b * h, n, d), k_used.reshape(b * h, n, d),
                        args.get("relative_pos"), args["rel_embeddings"], f)
            bias = None if isinstance(bias, int) else bias.reshape(b, h, n, -1)
        mask = args.get("attention_mask")
        if mask is not None:
            mask = torch.where(mask.bool(), 0.0, torch.finfo(torch.float32).min)
            mask = mask if mask.dim() == 4 else mask[:, None]
        extra = {"scaling": 1.0 / math.sqrt(d * f), "bias_kind": "disentangled c2p/p2c terms"}
        tap.observe(SiteCall(st["site"], m, q, k, mask, bias, weights, out[0], extra))
