"""QK-clip (Kimi K2's MuonClip): after an optimizer step, a head whose largest attention logit on
the batch exceeds tau has its W_Q and W_K rows both multiplied by sqrt(tau / S_max), so that logit
comes back to tau. The forward pass stays ``sqrt``'s: this is a weight-space intervention.

S_max is measured here on the step's batch with the weights after the update, layer by layer (a
layer's input already comes from the clipped layers below it), so after the clip the largest
logit of every head on that batch is at most tau, exactly up to float rounding. Kimi K2 measures
S_max in the step's own forward pass, before the update; the two agree to first order in the
step size, and measuring after the update is what makes the bound hold on the batch. It costs one
extra forward pass per step of the ``qkclip`` run (without gradients).

Logits that count: those of a real query token (not padding) to a visible key, as in the
diagnostics (engine.training.observe). S_max is the largest logit, not the largest |logit|
(K2's definition: a large negative logit does not saturate the row towards its key).
"""

from __future__ import annotations

import torch

from engine.training.model import AttentionModel, scale_scores


def row_is_real(lengths: torch.Tensor, t: int) -> torch.Tensor:
    """(B, 1, T, 1) bool: query row i is a real token of its example."""
    return (torch.arange(t, device=lengths.device)[None, :] < lengths[:, None]).view(-1, 1, t, 1)


def head_max_logits(logits: torch.Tensor, mask: torch.Tensor | None,
                    lengths: torch.Tensor) -> torch.Tensor:
    """(H,) largest logit of each head over the logits that count in (B, H, T, S) ``logits``."""
    counts = row_is_real(lengths, logits.shape[-2])
    if mask is not None:
        counts = counts & mask
    masked = logits.masked_fill(~counts, float("-inf"))
    return masked.transpose(0, 1).reshape(logits.shape[1], -1).amax(dim=1)


@torch.no_grad()
def clip_heads(model: AttentionModel, inputs: torch.Tensor, mask: torch.Tensor | None,
               lengths: torch.Tensor, tau: float) -> torch.Tensor:
    """Clip every head of ``model`` whose largest logit on the batch exceeds ``tau``; returns the
    (layers, H) bool tensor of the heads that were clipped."""
    clipped = []
    x = model.embed_inputs(inputs)  # (B, T, d_model)
    for blk in model.blocks:
        a = blk.attn
        q, k = a.project_qk(blk.ln1(x))  # each (B, H, T, d_k)
        s_max = head_max_logits(scale_scores(q, k, a.rule), mask, lengths)  # (H,)
        over = s_max > tau
        if bool(over.any()):
            # W_Q and W_K are (H * d_k, d_model): head h owns rows h*d_k .. (h+1)*d_k - 1
            gamma = torch.where(over, (tau / s_max).sqrt(), torch.ones_like(s_max))
            rows = gamma.repeat_interleave(a.d_k)[:, None].to(a.w_q.weight.dtype)  # (H*d_k, 1)
            a.w_q.weight.mul_(rows)
            a.w_k.weight.mul_(rows)
        clipped.append(over)
        x = blk(x, mask)  # the next layer sees this layer's clipped output
    return torch.stack(clipped)
