"""Tasks generated on the fly from a seed: every rule sees the same stream of batches.

* ``retrieval``: a set of 4..16 items (variable size, so a padding mask), each a random key vector
  with a label; a query that is a noisy copy of one key; predict that item's label. Token 0 is the
  query, tokens 1..n the items; each token's features are [key vector, one-hot label, is-query].
* ``recall`` (associative recall): tokens k1 v1 k2 v2 ... kP vP kq with distinct keys and a causal
  mask; predict vq, the value paired with kq. Keys are ids 0..C-1, values C..2C-1. Solving it
  needs an induction-style circuit: with layers=1 a single head cannot see which key preceded a
  value, so the recall presets use two layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine.training.config import TrainingConfig
from engine.training.model import causal_mask, padding_mask


@dataclass
class Batch:
    inputs: torch.Tensor  #: (B, T, F) float features or (B, T) int tokens
    readout: torch.Tensor  #: (B,) position whose output is classified
    targets: torch.Tensor  #: (B,) class index
    mask: torch.Tensor  #: bool, broadcastable to (B, H, T, T); True = key visible
    lengths: torch.Tensor  #: (B,) valid tokens per example

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.inputs.to(device), self.readout.to(device), self.targets.to(device),
                     self.mask.to(device), self.lengths.to(device))


def input_features(cfg: TrainingConfig) -> int:
    """Width of a retrieval token's features."""
    return cfg.in_features


def vocab_size(cfg: TrainingConfig) -> int:
    return cfg.vocab


def stream_seed(seed: int, tag: int) -> int:
    """An independent 63-bit seed per purpose (0 = weights, 1 = training data, 2 = probe)."""
    return int(np.random.SeedSequence([seed, tag]).generate_state(1, dtype=np.uint64)[0] >> 1)


def make_batch(cfg: TrainingConfig, size: int, gen: torch.Generator) -> Batch:
    """One batch on the CPU, drawn from ``gen``."""
    if cfg.task == "retrieval":
        return _retrieval(cfg, size, gen)
    return _recall(cfg, size, gen)


def retrieval_batch(cfg: TrainingConfig, size: int, gen: torch.Generator, items: int) -> Batch:
    """A retrieval batch whose sets all hold ``items`` items (evaluation at other lengths)."""
    return _retrieval(cfg, size, gen, (items, items))


def _retrieval(cfg: TrainingConfig, b: int, gen: torch.Generator,
               items: tuple[int, int] | None = None) -> Batch:
    n_min, n_max = items if items is not None else (cfg.items_min, cfg.items_max)
    kd, c = cfg.key_dim, cfg.classes
    t = 1 + n_max
    n = torch.randint(n_min, n_max + 1, (b,), generator=gen)
    keys = torch.randn(b, n_max, kd, generator=gen) / kd**0.5
    labels = torch.randint(0, c, (b, n_max), generator=gen)
    pick = (torch.rand(b, generator=gen) * n).long()  # uniform in 0..n-1
    noise = torch.randn(b, kd, generator=gen) * (cfg.noise / kd**0.5)
    rows = torch.arange(b)
    x = torch.zeros(b, t, kd + c + 1)
    x[:, 0, :kd] = keys[rows, pick] + noise
    x[:, 0, -1] = 1.0
    x[:, 1:, :kd] = keys
    x[:, 1:, kd:kd + c] = torch.nn.functional.one_hot(labels, c).float()
    lengths = n + 1
    valid = torch.arange(t)[None, :] < lengths[:, None]
    x = x * valid[..., None]
    return Batch(x, torch.zeros(b, dtype=torch.long), labels[rows, pick],
                 padding_mask(lengths, t), lengths)


def recall_batch(cfg: TrainingConfig, size: int, gen: torch.Generator, pairs: int,
                 causal_in_mask: bool = True) -> Batch:
    """A recall batch of ``pairs`` key-value pairs (evaluation at other lengths; pairs <= classes).
    ``causal_in_mask=False`` leaves the causal part to the caller (a (1, 1, 1, T) all-visible
    mask instead of the T x T one: ``AttentionModel.forward_streamed(causal=True)`` builds it
    per row chunk); the examples are the same."""
    return _recall(cfg, size, gen, pairs, causal_in_mask)


def _recall(cfg: TrainingConfig, b: int, gen: torch.Generator, pairs: int | None = None,
            causal_in_mask: bool = True) -> Batch:
    p, c = pairs if pairs is not None else cfg.pairs, cfg.classes
    t = 2 * p + 1
    keys = torch.rand(b, c, generator=gen).argsort(dim=1)[:, :p]  # distinct keys per example
    values = torch.randint(0, c, (b, p), generator=gen)
    pick = torch.randint(0, p, (b,), generator=gen)
    rows = torch.arange(b)
    tokens = torch.empty(b, t, dtype=torch.long)
    tokens[:, 0:2 * p:2] = keys
    tokens[:, 1:2 * p:2] = values + c
    tokens[:, -1] = keys[rows, pick]
    return Batch(tokens, torch.full((b,), t - 1, dtype=torch.long), values[rows, pick],
                 causal_mask(t) if causal_in_mask else torch.ones(1, 1, 1, t, dtype=torch.bool),
                 torch.full((b,), t, dtype=torch.long))
