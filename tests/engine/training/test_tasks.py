"""The tasks are what their docstrings say, and the same seed gives the same stream."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.training.config import TrainingConfig  # noqa: E402
from engine.training.tasks import make_batch  # noqa: E402


def test_retrieval_batch_layout_and_oracle():
    cfg = TrainingConfig(task="retrieval", items_min=3, items_max=9, key_dim=16, classes=8,
                         noise=0.1)
    b = make_batch(cfg, 500, torch.Generator().manual_seed(0))
    assert b.inputs.shape == (500, 10, 16 + 8 + 1)
    assert int(b.lengths.min()) >= 4 and int(b.lengths.max()) <= 10
    pad = torch.arange(10)[None, :] >= b.lengths[:, None]
    assert torch.all(b.inputs[pad] == 0)
    assert torch.all(b.inputs[:, 0, -1] == 1) and torch.all(b.inputs[:, 1:, -1] == 0)
    assert b.mask.shape == (500, 1, 1, 10)
    # oracle: the nearest real item to the query carries the target label (noise is small)
    q = b.inputs[:, 0, :16]
    keys = b.inputs[:, 1:, :16]
    dist = ((keys - q[:, None]) ** 2).sum(-1)
    dist[pad[:, 1:]] = float("inf")
    near = dist.argmin(1)
    labels = b.inputs[:, 1:, 16:24].argmax(-1)
    hit = (labels[torch.arange(500), near] == b.targets).float().mean()
    assert hit > 0.97


def test_recall_batch_pairs():
    cfg = TrainingConfig(task="recall", classes=10, pairs=5)
    b = make_batch(cfg, 200, torch.Generator().manual_seed(0))
    t = b.inputs
    assert t.shape == (200, 11)
    keys, values = t[:, 0:10:2], t[:, 1:10:2] - 10
    assert torch.all((keys >= 0) & (keys < 10)) and torch.all((values >= 0) & (values < 10))
    for row in range(200):
        assert len(set(keys[row].tolist())) == 5  # distinct keys
        j = keys[row].tolist().index(int(t[row, -1]))
        assert int(values[row, j]) == int(b.targets[row])
    assert torch.all(b.readout == 10)
    assert torch.equal(b.mask[0, 0], torch.ones(11, 11, dtype=torch.bool).tril())


@pytest.mark.parametrize("task", ["retrieval", "recall"])
def test_same_seed_same_stream(task):
    cfg = TrainingConfig(task=task, classes=8, pairs=4)
    a = make_batch(cfg, 16, torch.Generator().manual_seed(3))
    b = make_batch(cfg, 16, torch.Generator().manual_seed(3))
    c = make_batch(cfg, 16, torch.Generator().manual_seed(4))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)
