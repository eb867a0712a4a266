"""A small, readable attention model in the style of nanoGPT's model.py.

The attention math is written out (not ``scaled_dot_product_attention``) so every quantity can be
observed: pass ``capture=[]`` to ``forward`` and each layer appends an :class:`AttentionCapture`
with the logits the softmax sees and the weights it returns.

Scaling rules: the math of each is in ``engine.rules.RULE_REGISTRY`` (one definition for the
simulation and this model). Here the model computes the similarity a rule needs (q.k, cosine or
layer-normed q.k), the per-row number of keys n (for ``logn``, ``ssmax``, ``yarn_dynamic`` and sigmoid's
b = -ln n) and the learned per-head parameters: the ``cosine`` rule's T = exp(log_t), starting at
``cosine_temperature``; the ``ssmax`` rule's s, starting at 1 / ln(training length) so it equals
``sqrt`` there; the ``sink`` rule's sink logit, starting at 0 (gpt-oss's ``sinks``). The rule's
``weights`` say how logits become weights: softmax, softmax with the sink's column dropped, or
sigmoid(z - ln n). ``softcap`` caps the logits to c tanh(z / c) (``cfg.softcap``); ``qkclip``
trains with ``sqrt``'s forward pass and is clipped by the trainer (engine.training.qk_clip).

Masks (padding, causal) go on the logits after scaling, before the softmax.

Recall positions (``cfg.positions``): ``learned`` adds one trained embedding per position (so only
the trained length exists), ``sinusoidal`` the fixed sin/cos code (any length), ``none`` nothing
(the causal mask alone tells a token where it is). ``forward_streamed`` is the evaluation pass at
long lengths: the same math, query rows in chunks, keeping only the readout row's weights, so
memory grows like T instead of T^2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from engine.rules import (
    LENGTH_RULES,
    N_REF_DEFAULT,
    RULE_REGISTRY,
    SINK_DEFAULT,
    SOFTCAP_DEFAULT,
    SSMAX_S_DEFAULT,
    Rule,
    RuleParams,
)
from engine.training.config import TrainingConfig
from engine.training.gradients import GradTaps

LN_EPS = 1e-5
#: names of the parameters a rule learns itself (not shared between the runs' initial weights)
RULE_PARAMETERS = ("log_t", "ssmax_s", "sink")


@dataclass
class AttentionCapture:
    """What one attention layer saw on one forward pass (detached tensors)."""

    logits: torch.Tensor  #: (B, H, T, T) scaled scores before masking (after a cap)
    weights: torch.Tensor  #: (B, H, T, T) softmax output (masked keys get 0)
    mask: torch.Tensor  #: (B, 1 or H, T, T) bool, True = key visible
    pre_logits: torch.Tensor | None = None  #: (B, H, T, T) before the cap (softcap only)
    sink: torch.Tensor | None = None  #: (H,) the sink logit of each head (sink only)


def similarity(q: torch.Tensor, k: torch.Tensor, needs: str) -> torch.Tensor:
    """(..., T, S) similarities of per-head q (..., T, d_k) and k (..., S, d_k): q.k, the
    cosine, or the dot product of the layer-normed (no affine) q and k."""
    if needs == "cos":
        q, k = F.normalize(q, dim=-1, eps=1e-12), F.normalize(k, dim=-1, eps=1e-12)
    elif needs == "ln":
        d_k = q.shape[-1]
        q, k = F.layer_norm(q, (d_k,), eps=LN_EPS), F.layer_norm(k, (d_k,), eps=LN_EPS)
    return q @ k.transpose(-1, -2)


def keys_per_row(mask: torch.Tensor | None, s: int, dtype: torch.dtype) -> torch.Tensor | float:
    """n of each row: the keys it attends to, (..., T, 1) under a mask (row i of a causal mask
    sees i + 1 keys; a padded example its length), else the S keys of every row."""
    if mask is None:
        return float(s)
    return mask.sum(-1, keepdim=True).to(dtype)


def scale_scores(q: torch.Tensor, k: torch.Tensor, rule: str, temperature: float | torch.Tensor = 1.0,
                 mask: torch.Tensor | None = None, n_ref: int = N_REF_DEFAULT,
                 ssmax_s: float | torch.Tensor = SSMAX_S_DEFAULT) -> torch.Tensor:
    """Logits of one scaling rule (``engine.rules``) from per-head q (..., T, d_k), k (..., S, d_k),
    before any cap; ``mask`` (True = visible) gives the length rules their per-row n."""
    spec = RULE_REGISTRY[rule]
    return scale_similarity(similarity(q, k, spec.needs), rule, q.shape[-1], temperature, mask,
                            n_ref, ssmax_s)


def scale_similarity(sim: torch.Tensor, rule: str, d_k: int,
                     temperature: float | torch.Tensor = 1.0, mask: torch.Tensor | None = None,
                     n_ref: int = N_REF_DEFAULT,
                     ssmax_s: float | torch.Tensor = SSMAX_S_DEFAULT) -> torch.Tensor:
    """The rule's logits from its similarity (..., T, S): q.k, the cosine or the layer-normed
    dot product (``similarity``), before any cap."""
    params = rule_params(sim, rule, d_k, temperature, mask, n_ref, ssmax_s)
    return RULE_REGISTRY[rule].scale(sim, params)


def rule_params(sim: torch.Tensor, rule: str, d_k: int, temperature: float | torch.Tensor = 1.0,
                mask: torch.Tensor | None = None, n_ref: int = N_REF_DEFAULT,
                ssmax_s: float | torch.Tensor = SSMAX_S_DEFAULT, softcap: float = SOFTCAP_DEFAULT,
                sink: float | torch.Tensor = SINK_DEFAULT) -> RuleParams:
    """What the rule's math reads: d_k, T, ln n (per row under a mask; length rules only), the
    SSMax s, the soft-cap c and the sink logit."""
    log_n: float | torch.Tensor = 0.0  # only the length rules read it
    if rule in LENGTH_RULES:
        n = keys_per_row(mask, sim.shape[-1], sim.dtype)
        log_n = math.log(n) if isinstance(n, float) else n.log()
    return RuleParams(d_k, temperature, log_n, math.log(n_ref), ssmax_s, softcap, sink)


def attention_weights(logits: torch.Tensor, spec: Rule, p: RuleParams,
                      mask: torch.Tensor | None) -> torch.Tensor:
    """(B, H, T, S) weights from (B, H, T, S) logits: a softmax over the visible keys, with the
    sink's logit joining it (its column dropped), or sigmoid(logit - ln n) per key."""
    masked = logits if mask is None else logits.masked_fill(~mask, float("-inf"))
    if spec.weights == "sigmoid":  # b = -ln n; a masked key's -inf gives weight 0
        return torch.sigmoid(masked - p.log_n)
    if spec.weights == "sink":  # (H, 1, 1) -> a (B, H, T, 1) column appended, then dropped
        sink = torch.as_tensor(p.sink, dtype=logits.dtype, device=logits.device)
        sink = sink.expand(*logits.shape[:-1], 1)
        return torch.softmax(torch.cat([masked, sink], dim=-1), dim=-1)[..., :-1]
    return torch.softmax(masked, dim=-1)  # rows sum to 1


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    rule: str = "sqrt",
    mask: torch.Tensor | None = None,
    temperature: float | torch.Tensor = 1.0,
    n_ref: int = N_REF_DEFAULT,
    ssmax_s: float | torch.Tensor = SSMAX_S_DEFAULT,
    tap: Callable[..., None] | None = None,
    softcap: float = SOFTCAP_DEFAULT,
    sink: float | torch.Tensor = SINK_DEFAULT,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """weights(cap(scale(q, k)) + mask) v written out; returns (output, logits, weights).

    ``mask`` is boolean, True = key visible, broadcast to (..., T, S); every row must see a key.
    ``tap(q, scores, logits, weights, mask)`` sees the tensors of the gradient chain
    (``engine.training.gradients``) before they are used; its logits are what the weights are
    made of (after a cap).
    """
    spec = RULE_REGISTRY[rule]
    sim = similarity(q, k, spec.needs)  # (B, H, T, S): q.k, cos or LN(q).LN(k)
    p = rule_params(sim, rule, q.shape[-1], temperature, mask, n_ref, ssmax_s, softcap, sink)
    logits = spec.capped(spec.scale(sim, p), p)  # softcap: c tanh(z / c); else z itself
    weights = attention_weights(logits, spec, p, mask)  # (B, H, T, S)
    if tap is not None:
        tap(q, sim, logits, weights, mask)
    used = weights
    if spec.after_softmax is not None:  # the scale_after_softmax bug
        used = weights * spec.after_softmax(RuleParams(q.shape[-1]))
    return used @ v, logits, weights  # (B, H, T, d_k)


def sinusoidal_positions(t: int, d: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, d) fixed position code (Vaswani et al. 2017): entry 2i is sin(pos / 10000^(2i/d)),
    entry 2i + 1 the cos at the same frequency; defined at any length."""
    pos = torch.arange(t, dtype=torch.float32, device=device)[:, None]
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32, device=device)
                     * (-math.log(10000.0) / d))
    pe = torch.zeros(t, d, device=device)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return pe


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
        #: the length rules' reference: the longest training sequence
        self.n_ref = max(2, cfg.seq_len)
        if rule == "cosine":
            start = math.log(cfg.cosine_temperature)
            self.log_t = nn.Parameter(torch.full((cfg.heads, 1, 1), start))
        else:
            self.register_parameter("log_t", None)
        if rule == "ssmax":  # s per head, equal to sqrt at the training length at init
            self.ssmax_s = nn.Parameter(torch.full((cfg.heads, 1, 1), 1.0 / math.log(self.n_ref)))
        else:
            self.register_parameter("ssmax_s", None)
        if RULE_REGISTRY[rule].weights == "sink":  # one sink logit per head, 0 at init
            self.sink = nn.Parameter(torch.full((cfg.heads, 1, 1), SINK_DEFAULT))
        else:
            self.register_parameter("sink", None)
        self.softcap = cfg.softcap

    def temperature(self) -> float | torch.Tensor:
        return self.log_t.exp() if self.log_t is not None else self.fixed_temperature

    def project_qk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, d_model) -> q, k each (B, H, T, d_k)."""
        b, t, _ = x.shape
        split = lambda y: y.view(b, t, self.heads, self.d_k).transpose(1, 2)  # noqa: E731
        return split(self.w_q(x)), split(self.w_k(x))

    def _ssmax_s(self) -> float | torch.Tensor:
        return self.ssmax_s if self.ssmax_s is not None else SSMAX_S_DEFAULT  # (H, 1, 1) if learned

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                tap: Callable[..., None] | None = None) -> tuple[torch.Tensor, ...]:
        """``attend`` with this layer's rule and its (learned) parameters."""
        sink = self.sink if self.sink is not None else SINK_DEFAULT  # (H, 1, 1) when learned
        return attend(q, k, v, self.rule, mask, self.temperature(), self.n_ref, self._ssmax_s(),
                      tap, self.softcap, sink)

    def _capture(self, q: torch.Tensor, k: torch.Tensor, logits: torch.Tensor,
                 weights: torch.Tensor, mask: torch.Tensor | None) -> AttentionCapture:
        """What this layer saw, detached; softcap also keeps its logits before the cap."""
        b, _, t, _ = logits.shape
        full = torch.ones(1, 1, t, t, dtype=torch.bool, device=q.device) if mask is None else mask
        pre = None
        if RULE_REGISTRY[self.rule].cap:  # (B, H, T, T) once more, only on a logged probe pass
            pre = scale_scores(q, k, self.rule, self.temperature(), mask, self.n_ref,
                               self._ssmax_s()).detach()
        return AttentionCapture(logits.detach(), weights.detach(),
                                full.expand(b, -1, t, t).detach(), pre,
                                self.sink.detach().view(-1) if self.sink is not None else None)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None,
                capture: list[AttentionCapture] | None = None,
                taps: GradTaps | None = None) -> torch.Tensor:
        b, t, _ = x.shape  # batch, sequence length, d_model
        # (B, T, H * d_k) -> (B, H, T, d_k): one slice per head
        split = lambda y: y.view(b, t, self.heads, self.d_k).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))  # each (B, H, T, d_k)
        tap = None
        if taps is not None:  # the gradient chain of this layer (a logged training step)
            layer = taps.next_layer()
            tap = lambda *tensors: taps.watch(layer, *tensors)  # noqa: E731
        # out (B, H, T, d_k); logits and weights (B, H, T, T); mask broadcasts to (B, H, T, T)
        out, logits, weights = self._attend(q, k, v, mask, tap)
        if capture is not None:
            capture.append(self._capture(q, k, logits, weights, mask))
        # re-assemble the heads side by side: (B, H, T, d_k) -> (B, T, H * d_k) -> (B, T, d_model)
        return self.w_o(out.transpose(1, 2).reshape(b, t, self.heads * self.d_k))

    def forward_streamed(self, x: torch.Tensor, mask: torch.Tensor | None, rows: int,
                         readout: torch.Tensor, sink: list[torch.Tensor],
                         causal: bool = False) -> torch.Tensor:
        """``forward`` with the query rows in chunks of ``rows`` (no gradient needed): appends
        the (B, H, T) weights of each example's ``readout`` row to ``sink``. Each chunk's rows
        keep their own mask rows, so the length rules see the same per-row n as ``forward``;
        ``causal`` builds the causal mask's rows chunk by chunk (no T x T mask held)."""
        b, t, _ = x.shape
        split = lambda y: y.view(b, t, self.heads, self.d_k).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))
        out = torch.empty_like(q)
        picked = torch.zeros(b, self.heads, t, dtype=q.dtype, device=x.device)
        for a in range(0, t, rows):
            e = min(t, a + rows)
            m = None if mask is None else (mask if mask.shape[-2] == 1 else mask[..., a:e, :])
            if causal:  # query i (a <= i < e) sees keys 0..i
                c = (torch.arange(a, e, device=x.device)[:, None]
                     >= torch.arange(t, device=x.device)[None, :]).view(1, 1, e - a, t)
                m = c if m is None else m & c
            out[:, :, a:e], _, w = self._attend(q[:, :, a:e], k, v, m)
            hit = torch.nonzero((readout >= a) & (readout < e)).view(-1)
            if hit.numel():  # (hits, H, T): the readout row of each example in this chunk
                picked[hit] = w[hit, :, readout[hit] - a, :]
        sink.append(picked)
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
                capture: list[AttentionCapture] | None = None,
                taps: GradTaps | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask, capture, taps)
        if self.mlp is not None:
            x = x + self.mlp(self.ln2(x))
        return x

    def forward_streamed(self, x: torch.Tensor, mask: torch.Tensor | None, rows: int,
                         readout: torch.Tensor, sink: list[torch.Tensor],
                         causal: bool = False) -> torch.Tensor:
        x = x + self.attn.forward_streamed(self.ln1(x), mask, rows, readout, sink, causal)
        if self.mlp is not None:
            x = x + self.mlp(self.ln2(x))
        return x


class AttentionModel(nn.Module):
    """Embedding -> layers of blocks -> (LayerNorm) -> linear classifier read at one position.

    Inputs: ``features`` (B, T, F) floats (retrieval) or ``tokens`` (B, T) ints (recall; the
    ``positions`` code is added). ``readout`` (B,) is the position whose output is classified.
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
            self.pos = nn.Embedding(cfg.seq_len, cfg.d_model) if cfg.positions == "learned" else None
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
            if self.pos is not None:
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

    def embed_inputs(self, inputs: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) token states before the first block."""
        if self.embed is not None:
            return self.embed(inputs)
        t = inputs.shape[1]
        x = self.tok(inputs)
        if self.cfg.positions == "learned":
            if t > self.pos.num_embeddings:
                raise ValueError(f"{t} tokens, but learned positions exist only for "
                                 f"{self.pos.num_embeddings}: use positions sinusoidal or none")
            x = x + self.pos(torch.arange(t, device=inputs.device))[None]
        elif self.cfg.positions == "sinusoidal":
            x = x + sinusoidal_positions(t, self.cfg.d_model, inputs.device)[None]
        return x

    def forward(self, inputs: torch.Tensor, readout: torch.Tensor, mask: torch.Tensor | None,
                capture: list[AttentionCapture] | None = None,
                taps: GradTaps | None = None) -> torch.Tensor:
        """Class logits read at ``readout``; ``capture`` collects each layer's attention,
        ``taps`` hooks its gradient chain for the next backward pass."""
        x = self.embed_inputs(inputs)
        for blk in self.blocks:
            x = blk(x, mask, capture, taps)
        x = self.ln_f(x)
        picked = x[torch.arange(x.shape[0], device=x.device), readout]
        return self.head(picked)

    def forward_streamed(self, inputs: torch.Tensor, readout: torch.Tensor,
                         mask: torch.Tensor | None, rows: int, causal: bool = False
                         ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The class logits as ``forward`` gives them, with every attention layer run ``rows``
        query rows at a time; also returns each layer's (B, H, T) readout-row weights.
        ``causal`` = a causal mask (and ``mask`` may then be None), built per chunk."""
        x = self.embed_inputs(inputs)
        sink: list[torch.Tensor] = []
        for blk in self.blocks:
            x = blk.forward_streamed(x, mask, rows, readout, sink, causal)
        x = self.ln_f(x)
        picked = x[torch.arange(x.shape[0], device=x.device), readout]
        return self.head(picked), sink
