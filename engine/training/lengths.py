"""Evaluation at other lengths (no gradient): does a rule trained short still find the right
item in a longer input? For each N in ``eval_lengths`` the model sees a fixed evaluation set (same
seed at every evaluation) of ``eval_size`` examples, and we record its accuracy and the mean
normalized entropy H / ln(n) of the readout row's attention (mean over examples, layers and heads):

* retrieval: sets of exactly N items; the query row attends to n = N + 1 keys;
* recall: N key-value pairs (k1 v1 ... kN vN kq, causal mask); the last row attends to all
  n = 2N + 1 tokens, row i to i + 1 (the length rules use that per-row n).

Long inputs are streamed (``AttentionModel.forward_streamed``): chunks of examples and, inside an
example, chunks of query rows (the causal mask too is built per chunk), so at most
``EVAL_CELLS_MAX`` attention weights exist at once and memory grows like T, not T^2.
``cfg.eval_every`` says at which logs the trainer calls this.
"""

from __future__ import annotations

import math

import torch

from engine.training.config import TrainingConfig
from engine.training.model import AttentionModel
from engine.training.observe import length_columns as _columns
from engine.training.tasks import Batch, recall_batch, retrieval_batch, stream_seed

#: attention weights (examples x heads x query rows x keys) held at once during evaluation
#: (64 MB of float32 per copy; the same example chunks as before row streaming, so the same sets)
EVAL_CELLS_MAX = 1 << 24
#: the seed stream of evaluation set k (0..2 are weights, data, probe)
EVAL_STREAM = 16


def length_columns(cfg: TrainingConfig) -> tuple[str, ...]:
    """The metrics.csv columns of the evaluation lengths, in order."""
    return _columns(cfg.eval_lengths)


def eval_tokens(cfg: TrainingConfig, n: int) -> int:
    """Tokens of an evaluation example of length n (items or pairs)."""
    return n + 1 if cfg.task == "retrieval" else 2 * n + 1


def eval_chunks(cfg: TrainingConfig, t: int, cells: int = EVAL_CELLS_MAX) -> tuple[int, int]:
    """(examples, query rows) per chunk so that examples x heads x rows x t <= ``cells`` (at least
    one example and one row)."""
    examples = max(1, min(cfg.eval_size, cells // (cfg.heads * t * t)))
    rows = max(1, min(t, cells // (examples * cfg.heads * t)))
    return examples, rows


def _batch(cfg: TrainingConfig, size: int, gen: torch.Generator, n: int) -> Batch:
    if cfg.task == "retrieval":
        return retrieval_batch(cfg, size, gen, n)
    return recall_batch(cfg, size, gen, n, causal_in_mask=False)  # causal: per row chunk


def evaluate_lengths(model: AttentionModel, cfg: TrainingConfig, device: str | torch.device,
                     cells: int = EVAL_CELLS_MAX, rows: int | None = None) -> dict[str, float]:
    """``accuracy_len{N}`` and ``entropy_norm_len{N}`` for every N in ``cfg.eval_lengths``;
    ``rows`` overrides the query rows per chunk (the examples drawn depend only on ``cells``).
    No gradient (``torch.no_grad`` inside, not as a decorator: mutmut leaves decorated
    functions out of its mutants)."""
    with torch.no_grad():
        out: dict[str, float] = {}
        was_training = model.training
        model.eval()
        for k, n in enumerate(cfg.eval_lengths):
            gen = torch.Generator().manual_seed(stream_seed(cfg.seed, EVAL_STREAM + k))
            t = eval_tokens(cfg, n)
            examples, chunk_rows = eval_chunks(cfg, t, cells)
            chunk_rows = rows or chunk_rows
            correct, ent_sum, ent_count = 0, 0.0, 0
            for start in range(0, cfg.eval_size, examples):
                batch = _batch(cfg, min(examples, cfg.eval_size - start), gen, n).to(device)
                logits, readout_w = model.forward_streamed(
                    batch.inputs, batch.readout, batch.mask, chunk_rows, causal=cfg.task == "recall")
                correct += int((logits.argmax(dim=1) == batch.targets).sum())
                for w in readout_w:  # (B, H, t): the readout row attends to all t tokens
                    w = w.double()
                    ent = -(w * torch.log(torch.where(w > 0, w, torch.ones_like(w)))).sum(-1)
                    ent_sum += float(ent.sum()) / math.log(t)
                    ent_count += ent.numel()
            out[f"accuracy_len{n}"] = correct / cfg.eval_size
            out[f"entropy_norm_len{n}"] = ent_sum / max(ent_count, 1)
        model.train(was_training)
        return out
