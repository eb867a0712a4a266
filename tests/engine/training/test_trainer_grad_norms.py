"""The per-head gradient norms of W_Q, W_K, W_V, W_O that the trainer reports, against torch
autograd run here on a copy of the same model and batch, with the head slices taken by hand."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.nn import functional as F  # noqa: E402

from engine.training.presets import preset  # noqa: E402
from engine.training.tasks import make_batch, stream_seed  # noqa: E402
from engine.training.trainer import Trainer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def test_grad_norms_per_head_match_autograd() -> None:
    cfg = preset("demo").config.replace(d_model=48, heads=3, layers=2, batch=16, steps=1,
                                        scalings=("none", "sqrt"), device="cpu", probe_size=8)
    trainer = Trainer(cfg)
    copies = [copy.deepcopy(run.model) for run in trainer.runs]  # the weights of batch 0
    batch = make_batch(cfg, cfg.batch, torch.Generator().manual_seed(stream_seed(cfg.seed, 1)))
    trainer.advance()
    snap = trainer.snapshot()
    d_k = cfg.head_dim
    checked = 0
    for r, model in enumerate(copies):
        model.train()
        loss = F.cross_entropy(model(batch.inputs, batch.readout, batch.mask), batch.targets)
        weights = {(layer, name): getattr(blk.attn, f"w_{name}").weight
                   for layer, blk in enumerate(model.blocks) for name in "qkvo"}
        grads = dict(zip(weights, torch.autograd.grad(loss, list(weights.values()))))
        for (layer, name), g in grads.items():
            g = g.double()
            for h in range(cfg.heads):
                block = g[:, h * d_k:(h + 1) * d_k] if name == "o" else g[h * d_k:(h + 1) * d_k]
                want = float(torch.sqrt((block * block).sum()))
                got = float(snap.heads[f"grad_norm_{name}"][0, r, layer, h])
                assert got == pytest.approx(want, rel=1e-5), (snap.rules[r], layer, name, h)
                checked += 1
    assert checked == 2 * 2 * 4 * 3
    # the test can tell a norm from its square: the values are far from 1
    norms = np.concatenate([snap.heads[f"grad_norm_{n}"][0].ravel() for n in "qkv"])
    assert np.all(np.abs(norms - 1.0) > 1e-3)
