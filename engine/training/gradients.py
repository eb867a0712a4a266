"""The gradient on its way from the attention weights back to the query, link by link.

For one query row, with p = softmax(z), z = s / c and s_j = q . k_j (docs/SCIENCE.md, "The gradient,
link by link"):

    dL/dz = J g            (g = dL/dp, the upstream gradient; J = diag(p) - p p^T)
    dL/ds = (1/c) J g      (c the rule's divisor)
    dL/dq = (1/c) sum_j (J g)_j k_j

``GradTaps`` hooks the tensors p, z, s and q of every attention layer during one backward pass and
keeps, per layer and head, the Frobenius norm of each gradient over the batch (visible keys only:
a masked key has weight 0 and no Jacobian, but dL/dp of it is not 0). The ratio |dL/dz| / |dL/dp|
is the softmax's gain: per unit of upstream gradient, what reaches the logits. Reading the
gradients changes nothing in them, so a logged step trains exactly as an unlogged one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from engine.training.observe import CHAIN, GAIN

__all__ = ["CHAIN", "GAIN", "GradTaps"]


class GradTaps:
    """Per layer, the norms of dL/dp, dL/dz, dL/ds and dL/dq of one backward pass."""

    def __init__(self, layers: int, heads: int) -> None:
        self.norms = {name: np.zeros((layers, heads)) for name in CHAIN}
        self._layer = 0

    def next_layer(self) -> int:
        """The layer index of the attention about to register (layers run in order)."""
        self._layer += 1
        return self._layer - 1

    def watch(self, layer: int, q: torch.Tensor, scores: torch.Tensor, logits: torch.Tensor,
              weights: torch.Tensor, mask: torch.Tensor | None) -> None:
        """Hook q (B, H, T, d_k) and scores, logits, weights (B, H, T, S) of one layer."""
        if not weights.requires_grad:
            return
        for name, tensor, masked in (("grad_norm_query", q, False),
                                     ("grad_norm_scores", scores, True),
                                     ("grad_norm_logits", logits, True),
                                     ("grad_norm_attn", weights, True)):
            tensor.register_hook(self._keep(name, layer, mask if masked else None))

    def _keep(self, name: str, layer: int,
              mask: torch.Tensor | None) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            g = grad.detach()
            if mask is not None:
                g = g.masked_fill(~mask, 0.0)
            per_head = g.double().transpose(0, 1).reshape(g.shape[1], -1).norm(dim=1)
            self.norms[name][layer] = per_head.cpu().numpy()
        return hook

    def metrics(self) -> dict[str, np.ndarray]:
        """The four norms and the softmax gain, each (layers, heads)."""
        out = dict(self.norms)
        up = out["grad_norm_attn"]
        out[GAIN] = np.divide(out["grad_norm_logits"], up, out=np.zeros_like(up), where=up > 0)
        return out
