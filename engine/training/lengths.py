"""Evaluation at other lengths (no gradient): does a rule trained on short sets still find the
right item in a longer one? For each set size N in ``eval_lengths`` the model sees a fixed
evaluation set (same seed at every log) of ``eval_size`` retrieval examples with N items, and we
record its accuracy and the mean normalized entropy H / ln(n) of the query's attention row
(n = N + 1 keys; mean over examples, layers and heads).
"""

from __future__ import annotations

import math

import torch

from engine.training.config import TrainingConfig
from engine.training.model import AttentionCapture, AttentionModel
from engine.training.observe import length_columns as _columns
from engine.training.tasks import retrieval_batch, stream_seed

#: attention-map floats held at once during evaluation (chunks of examples)
EVAL_CELLS_MAX = 1 << 24
#: the seed stream of evaluation set k (0..2 are weights, data, probe)
EVAL_STREAM = 16


def length_columns(cfg: TrainingConfig) -> tuple[str, ...]:
    """The metrics.csv columns of the evaluation lengths, in order."""
    return _columns(cfg.eval_lengths)


@torch.no_grad()
def evaluate_lengths(model: AttentionModel, cfg: TrainingConfig, device: str | torch.device
                     ) -> dict[str, float]:
    """``accuracy_len{N}`` and ``entropy_norm_len{N}`` for every N in ``cfg.eval_lengths``."""
    out: dict[str, float] = {}
    was_training = model.training
    model.eval()
    for k, items in enumerate(cfg.eval_lengths):
        gen = torch.Generator().manual_seed(stream_seed(cfg.seed, EVAL_STREAM + k))
        t = items + 1
        chunk = max(1, EVAL_CELLS_MAX // (cfg.heads * t * t))
        correct, ent_sum, ent_count = 0, 0.0, 0
        for start in range(0, cfg.eval_size, chunk):
            batch = retrieval_batch(cfg, min(chunk, cfg.eval_size - start), gen, items).to(device)
            capture: list[AttentionCapture] = []
            logits = model(batch.inputs, batch.readout, batch.mask, capture)
            correct += int((logits.argmax(dim=1) == batch.targets).sum())
            for cap in capture:  # the query's row (position 0 attends to all t keys)
                w = cap.weights[:, :, 0, :].double()
                ent = -(w * torch.log(torch.where(w > 0, w, torch.ones_like(w)))).sum(-1)
                ent_sum += float(ent.sum()) / math.log(t)
                ent_count += ent.numel()
        out[f"accuracy_len{items}"] = correct / cfg.eval_size
        out[f"entropy_norm_len{items}"] = ent_sum / max(ent_count, 1)
    model.train(was_training)
    return out
