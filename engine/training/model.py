"""A small, readable attention model in the style of nanoGPT's model.py.

The attention math is written out (not ``scaled_dot_product_attention``) so every quantity can be
observed: pass ``capture=[]`` to ``forward`` and each layer appends an :class:`AttentionCapture`
with the logits the softmax sees and the weights it returns.

Scaling rules (one name each, the same as the CLI, the CSV and the legends):

* ``none``: q.k;  ``sqrt``: q.k/sqrt(d_k);  ``dk``: q.k/d_k;  ``temperature``: q.k/T
* ``cosine``: cos(q, k)/T with T = exp(log_t) learned per head, starting at ``cosine_temperature``
* ``qknorm``: LN(q).LN(k)/sqrt(d_k) (layer norm without affine over each head's d_k entries)
* ``sqrt_twice`` (bug): q is divided by sqrt(d_k) and the scores once more: equals ``dk``
* ``scale_after_softmax`` (bug): softmax(q.k) / sqrt(d_k): the softmax saturates before the
  division, and the weights no longer sum to 1

Masks (padding, causal) go on the logits after scaling, before the softmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from engine.training.config import TrainingConfig

LN_EPS = 1e-5


@dataclass
class AttentionCapture:
    """What one attention layer saw on one forward pass (detached tensors)."""

    logits: torch.Tensor  #: (B, H, T, T) scaled scores before masking
    weights: torch.Tensor  #: (B, H, T, T) softmax output (masked keys get 0)
    mask: torch.Tensor  #: (B, 1 or H, T, T) bool, True = key visible


def scale_scores(q: torch.Tensor, k: torch.Tensor, rule: str, temperature: float | torch.Tensor = 1.0
                 ) -> torch.Tensor:
    """Logits of one scaling rule from per-head q (..., T, d_k) and k (..., S, d_k)."""
    d_k = q.shape[-1]
    if rule in ("none", "scale_after_softmax"):
        return q @ k.transpose(-1, -2)
    if rule == "sqrt":
        return (q @ k.transpose(-1, -2)) / math.sqrt(d_k)
    if rule == "dk":
        return (q @ k.transpose(-1, -2)) / d_k
    if rule == "temperature":
        return (q @ k.transpose(-1, -2)) / temperature
    if rule == "sqrt_twice":
        return ((q / math.sqrt(d_k)) @ k.transpose(-1, -2)) / math.sqrt(d_k)
    if rule == "cosine":
        qn = F.normalize(q, dim=-1, eps=1e-12)
        kn = F.normalize(k, dim=-1, eps=1e-12)
        return (qn @ kn.transpose(-1, -2)) / temperature
    if rule == "qknorm":
        qn = F.layer_norm(q, (d_k,), eps=LN_EPS)
        kn = F.layer_norm(k, (d_k,), eps=LN_EPS)
        return (qn @ kn.transpose(-1, -2)) / math.sqrt(d_k)
    raise ValueError(f"unknown scaling rule {rule!r}")


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    rule: str = "sqrt",
    mask: torch.Tensor | None = None,
    temperature: float | torch.Tensor = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """softmax(scale(q, k) + mask) v written out; returns (output, logits, weights).

    ``mask`` is boolean, True = key visible, broadcast to (..., T, S); every row must see a key.
    """
    logits = scale_scores(q, k, rule, temperature)
    masked = logits if mask is None else logits.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    used = weights / math.sqrt(q.shape[-1]) if rule == "scale_after_softmax" else weights
    return used @ v, logits, weights


def causal_mask(t: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(1, 1, T, T) bool: query i sees keys 0..i."""
    return torch.ones(t, t, dtype=torch.bool, device=device).tril().view(1, 1, t, t)


def padding_mask(lengths: torch.Tensor, t: int) -> torch.Tensor:
    """(B, 1, 1, T) bool: key j is visible when j < length of its example."""
    pos = torch.arange(t, device=lengths.device)
    return (pos[None, :] < lengths[:, None]).view(-1, 1, 1, t)


class SelfAttention(nn.Module):
    """Multi-head self-attention with separate W_Q, W_K, W_V (H*d_k x d_model) and W_O."""

    def __init__(self, cfg: TrainingConfig, rule: str) -> None:
        super().__init__()
        self.rule = rule
        self.heads = cfg.heads
        self.d_k = cfg.head_dim
        inner = cfg.heads * self.d_k
        self.w_q = nn.Linear(cfg.d_model, inner, bias=False)
        self.w_k = nn.Linear(cfg.d_model, inner, bias=False)
        self.w_v = nn.Linear(cfg.d_model, inner, bias=False)
        self.w_o = nn.Linear(inner, cfg.d_model, bias=False)
        self.fixed_temperature = cfg.temperature
        if rule == "cosine":
            start = math.log(cfg.cosine_temperature)
            self.log_t = nn.Parameter(torch.full((cfg.heads, 1, 1), start))
        else:
            self.register_parameter("log_t", None)

    def temperature(self) -> float | torch.Tensor:
        return self.log_t.exp() if self.log_t is not None else self.fixed_temperature

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None,
                capture: list[AttentionCapture] | None = None) -> torch.Tensor:
        b, t, _ = x.shape
        split = lambda y: y.view(b, t, self.heads, self.d_k).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))
        out, logits, weights = attend(q, k, v, self.rule, mask, self.temperature())
        if capture is not None:
            full = torch.ones(1, 1, t, t, dtype=torch.bool, device=x.device) if mask is None else mask
            capture.append(AttentionCapture(logits.detach(), weights.detach(),
                                            full.expand(b, -1, t, t).detach()))
        return self.w_o(out.transpose(1, 2).reshape(b, t, self.heads * self.d_k))


class MLP(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LN residual block: x + attn(ln(x)), then x + mlp(ln(x)) when the MLP is on."""

    def __init__(self, cfg: TrainingConfig, rule: str) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model) if cfg.layernorm else nn.Identity()
        self.attn = SelfAttention(cfg, rule)
        self.ln2 = nn.LayerNorm(cfg.d_model) if cfg.layernorm and cfg.mlp else nn.Identity()
        self.mlp = MLP(cfg.d_model) if cfg.mlp else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None,
                capture: list[AttentionCapture] | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask, capture)
        if self.mlp is not None:
            x = x + self.mlp(self.ln2(x))
        return x


class AttentionModel(nn.Module):
    """Embedding -> layers of blocks -> (LayerNorm) -> linear classifier read at one position.

    Inputs: ``features`` (B, T, F) floats (retrieval) or ``tokens`` (B, T) ints (recall; learned
    position embeddings are added). ``readout`` (B,) is the position whose output is classified.
    """

    def __init__(self, cfg: TrainingConfig, rule: str, in_features: int, vocab: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.rule = rule
        if cfg.task == "retrieval":
            self.embed = nn.Linear(in_features, cfg.d_model)
            self.tok = self.pos = None
        else:
            self.embed = None
            self.tok = nn.Embedding(vocab, cfg.d_model)
            self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, rule) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d_model) if cfg.layernorm else nn.Identity()
        self.head = nn.Linear(cfg.d_model, cfg.classes)

    def init_weights(self, generator: torch.Generator) -> None:
        """Deterministic init from ``generator`` in a fixed order, independent of the rule, so
        every rule starts from the same weights. W_Q, W_K ~ N(0, qk_init^2 / d_model)."""
        cfg = self.cfg
        d = cfg.d_model

        def normal_(p: torch.Tensor, std: float) -> None:
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=generator) * std)

        if self.embed is not None:
            normal_(self.embed.weight, 1.0 / math.sqrt(self.embed.in_features))
            nn.init.zeros_(self.embed.bias)
        else:
            normal_(self.tok.weight, 1.0)
            normal_(self.pos.weight, 1.0)
        for blk in self.blocks:
            a = blk.attn
            normal_(a.w_q.weight, cfg.qk_init / math.sqrt(d))
            normal_(a.w_k.weight, cfg.qk_init / math.sqrt(d))
            normal_(a.w_v.weight, 1.0 / math.sqrt(d))
            normal_(a.w_o.weight, 1.0 / math.sqrt(a.heads * a.d_k))
            if blk.mlp is not None:
                normal_(blk.mlp.fc.weight, 1.0 / math.sqrt(d))
                nn.init.zeros_(blk.mlp.fc.bias)
                normal_(blk.mlp.proj.weight, 1.0 / math.sqrt(4 * d))
                nn.init.zeros_(blk.mlp.proj.bias)
        normal_(self.head.weight, 1.0 / math.sqrt(d))
        nn.init.zeros_(self.head.bias)

    def forward(self, inputs: torch.Tensor, readout: torch.Tensor, mask: torch.Tensor | None,
                capture: list[AttentionCapture] | None = None) -> torch.Tensor:
        if self.embed is not None:
            x = self.embed(inputs)
        else:
            t = inputs.shape[1]
            x = self.tok(inputs) + self.pos(torch.arange(t, device=inputs.device))[None]
        for blk in self.blocks:
            x = blk(x, mask, capture)
        x = self.ln_f(x)
        picked = x[torch.arange(x.shape[0], device=x.device), readout]
        return self.head(picked)
