"""A toy attention model for the tap's and the capture's tests: three small torch modules that
call transformers' attention interface the way a modeling file does (this file's own
``eager_attention_forward``), one of them called twice per pass (shared weights, as ALBERT's) and
one a cross-attention. Building it takes milliseconds, and every q, k and weight a test expects is
recomputed from its Linear weights by hand."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

WIDTH, HEADS = 8, 2
D = WIDTH // HEADS


def eager_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                            softcap=None, position_bias=None, **kwargs):
    """softmax(scaling q.k (soft-capped) + bias + mask) v, batch first; (output, weights).
    Like transformers' own, it reads the module (dropout only while training)."""
    s = query.shape[-1] ** -0.5 if scaling is None else scaling
    z = query @ key.transpose(-1, -2) * s
    if softcap is not None:
        z = softcap * torch.tanh(z / softcap)
    if position_bias is not None:
        z = z + position_bias
    if attention_mask is not None:
        z = z + attention_mask
    w = torch.nn.functional.dropout(torch.softmax(z, dim=-1), p=dropout, training=module.training)
    return (w @ value).transpose(1, 2).contiguous(), w


class ToyAttention(nn.Module):
    """q, k, v projections; ``positional`` passes dropout and scaling positionally."""

    def __init__(self, scaling: float | None = None, positional: bool = False,
                 softcap: float | None = None) -> None:
        super().__init__()
        self.q_proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.k_proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.v_proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.q_norm = nn.Identity()  # a module inside that is no projection
        self.scaling, self.positional, self.softcap = scaling, positional, softcap
        self.impl = "eager"
        self.is_causal = False  # (SDPA's default is causal)
        self.position_bias = None  # passed as position_bias when set (T5's relative bias)

    def forward(self, hidden, key_value_states=None, attention_mask=None):
        src = hidden if key_value_states is None else key_value_states
        b, n, _ = hidden.shape
        q = self.q_norm(self.q_proj(hidden)).view(b, n, HEADS, D).transpose(1, 2)
        k = self.k_proj(src).view(b, src.shape[1], HEADS, D).transpose(1, 2)
        v = self.v_proj(src).view(b, src.shape[1], HEADS, D).transpose(1, 2)
        if self.impl == "eager":
            fn = eager_attention_forward
        else:
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

            fn = ALL_ATTENTION_FUNCTIONS[self.impl]
        kw = {} if self.softcap is None else {"softcap": self.softcap}
        if self.position_bias is not None:
            kw["position_bias"] = self.position_bias
        if self.positional:
            out, _w = fn(self, q, k, v, attention_mask, 0.0, self.scaling, **kw)
        else:
            out, _w = fn(self, q, k, v, attention_mask, scaling=self.scaling, **kw)
        return out.reshape(b, n, WIDTH)


class Toy(nn.Module):
    """embed -> a (positional args, causal mask) -> shared twice -> cross over the embeddings.
    (No main_input_name: the capture's default, token ids, applies.)"""

    def __init__(self, seed: int = 0, softcap: float | None = 3.0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.config = SimpleNamespace(_attn_implementation="eager", is_encoder_decoder=False)
        self.embed = nn.Embedding(32, WIDTH)
        self.a = ToyAttention(scaling=0.25, positional=True, softcap=softcap)
        self.shared = ToyAttention()
        self.cross = ToyAttention(scaling=0.5)
        with torch.no_grad():
            for p in self.parameters():
                p.mul_(1.5)  # attention far from uniform, not saturated
        self.requires_grad_(False)

    def set_attn_implementation(self, name: str) -> None:
        for m in (self.a, self.shared, self.cross):
            m.impl = name
        self.config._attn_implementation = name

    def forward(self, input_ids, attention_mask=None):
        self.seen = (input_ids, attention_mask)
        e = self.embed(input_ids)
        n = input_ids.shape[1]
        causal = torch.full((n, n), torch.finfo(torch.float32).min).triu(1)[None, None]
        h = e + self.a(e, attention_mask=causal)
        h = h + self.shared(h)
        h = h + self.shared(h)
        h = h + self.cross(h, key_value_states=e)
        return SimpleNamespace(last_hidden_state=h)
