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


# -- the stream itself: the documented draws, in order, assembled by hand -------------------------
def test_a_retrieval_batch_is_its_draws_in_order_assembled_by_hand():
    """Set sizes, keys / sqrt(key_dim), labels, the picked item (uniform in 0..n-1), the query's
    noise x noise / sqrt(key_dim): drawn in that order from the generator, then laid out token by
    token here (every published training figure rests on this exact stream)."""
    cfg = TrainingConfig(task="retrieval", items_min=2, items_max=5, key_dim=16, classes=4,
                         noise=0.3)
    b, kd, c, t = 6, 16, 4, 6
    got = make_batch(cfg, b, torch.Generator().manual_seed(5))
    gen = torch.Generator().manual_seed(5)
    n = torch.randint(2, 6, (b,), generator=gen)
    keys = torch.randn(b, 5, kd, generator=gen) / 4.0
    labels = torch.randint(0, c, (b, 5), generator=gen)
    u = torch.rand(b, generator=gen)
    noise = torch.randn(b, kd, generator=gen) * (0.3 / 4.0)
    x = torch.zeros(b, t, kd + c + 1)
    mask = torch.zeros(b, 1, 1, t, dtype=torch.bool)
    targets = []
    for i in range(b):
        ni = int(n[i])
        pick = int((u[i] * ni).item())
        x[i, 0, :kd] = keys[i, pick] + noise[i]
        x[i, 0, -1] = 1.0
        for j in range(ni):
            x[i, 1 + j, :kd] = keys[i, j]
            x[i, 1 + j, kd + int(labels[i, j])] = 1.0
        mask[i, 0, 0, :ni + 1] = True
        targets.append(int(labels[i, pick]))
    assert torch.equal(got.inputs, x)
    assert got.targets.tolist() == targets and got.targets.dtype == torch.long
    assert torch.equal(got.mask, mask)
    assert got.lengths.tolist() == (n + 1).tolist()
    assert got.readout.tolist() == [0] * b and got.readout.dtype == torch.long
    assert len(set(n.tolist())) > 1  # (sets of several sizes in this batch)


def test_a_recall_batch_is_its_draws_in_order_assembled_by_hand():
    """Keys: the first P of a random permutation of the C key ids (argsort of C uniforms); values
    uniform in 0..C-1 (tokens C..2C-1); the queried pair uniform in 0..P-1."""
    cfg = TrainingConfig(task="recall", classes=6, pairs=3)
    b, c, p, t = 5, 6, 3, 7
    got = make_batch(cfg, b, torch.Generator().manual_seed(9))
    gen = torch.Generator().manual_seed(9)
    keys = torch.rand(b, c, generator=gen).argsort(dim=1)[:, :p]
    values = torch.randint(0, c, (b, p), generator=gen)
    pick = torch.randint(0, p, (b,), generator=gen)
    tokens = torch.zeros(b, t, dtype=torch.long)
    for i in range(b):
        for j in range(p):
            tokens[i, 2 * j] = keys[i, j]
            tokens[i, 2 * j + 1] = values[i, j] + c
        tokens[i, t - 1] = keys[i, pick[i]]
    assert torch.equal(got.inputs, tokens) and got.inputs.dtype == torch.long
    assert got.targets.tolist() == [int(values[i, pick[i]]) for i in range(b)]
    assert got.readout.tolist() == [t - 1] * b and got.readout.dtype == torch.long
    assert got.lengths.tolist() == [t] * b and got.lengths.dtype == torch.long


def test_every_value_of_each_draw_is_reached():
    """Both ends of every range (a draw that never gives 0, or never its top, is a bug no mean
    notices): set sizes 3..9, labels and values 0..C-1, picked positions 0..n-1 (retrieval, the
    query's nearest key; recall, the queried key's pair)."""
    cfg = TrainingConfig(task="retrieval", items_min=3, items_max=9, key_dim=16, classes=8,
                         noise=0.0)
    b = make_batch(cfg, 400, torch.Generator().manual_seed(1))
    assert set(b.lengths.tolist()) == set(range(4, 11))
    assert set(b.targets.tolist()) == set(range(8))
    q, keys = b.inputs[:, 0, :16], b.inputs[:, 1:, :16]
    picked = ((keys - q[:, None]) ** 2).sum(-1).argmin(1)  # no noise: the query is that key
    assert set(picked.tolist()) == set(range(9))
    assert bool((picked < b.lengths - 1).all())
    full = picked[b.lengths == 10]
    assert set(full.tolist()) == set(range(9))
    cfg = TrainingConfig(task="recall", classes=10, pairs=5)
    r = make_batch(cfg, 300, torch.Generator().manual_seed(1))
    keys, values = r.inputs[:, 0:10:2], r.inputs[:, 1:10:2] - 10
    assert set(values.flatten().tolist()) == set(range(10))
    assert set(keys.flatten().tolist()) == set(range(10))
    pos = (keys == r.inputs[:, -1:]).float().argmax(1)
    assert set(pos.tolist()) == set(range(5))


def test_the_draws_have_the_documented_scales():
    """Key entries ~ N(0, 1 / key_dim) and the query's noise ~ N(0, noise^2 / key_dim), each example
    its own: 400 x 9 x 16 entries give the variance to 1 % (SE sqrt(2 / N)), so a band of 10 %
    either side; the noise's 6,400 entries to 2 %, a band of 15 %."""
    cfg = TrainingConfig(task="retrieval", items_min=9, items_max=9, key_dim=16, classes=8,
                         noise=0.5)
    b = make_batch(cfg, 400, torch.Generator().manual_seed(2))
    keys = b.inputs[:, 1:, :16].double()
    assert 0.9 < float(keys.var()) * 16 < 1.1
    q = b.inputs[:, 0, :16].double()
    d = ((keys - q[:, None]) ** 2).sum(-1)
    noise = q - keys[torch.arange(400), d.argmin(1)]
    assert 0.85 < float(noise.var()) * 16 / 0.25 < 1.15
    assert float((noise[0] - noise[1]).abs().max()) > 0


def test_evaluation_batches_have_the_asked_size_and_mask():
    """retrieval_batch: every set exactly ``items`` items; recall_batch: ``pairs`` pairs, the
    causal mask by default, or a (1, 1, 1, T) all-visible one with the same examples."""
    from engine.training.tasks import Batch, recall_batch, retrieval_batch

    cfg = TrainingConfig(task="retrieval", items_min=2, items_max=4, key_dim=16, classes=4)
    r = retrieval_batch(cfg, 5, torch.Generator().manual_seed(0), 7)
    assert r.inputs.shape == (5, 8, 21) and r.lengths.tolist() == [8] * 5
    assert bool(r.mask.all())
    same = make_batch(cfg.replace(items_min=7, items_max=7), 5, torch.Generator().manual_seed(0))
    assert torch.equal(r.inputs, same.inputs)  # the generator's stream, not the global one
    one = retrieval_batch(cfg, 1, torch.Generator().manual_seed(0), 1)
    # one item whose label is 0: still 4 label columns (16 + 4 + 1 features)
    assert one.targets.tolist() == [0] and one.inputs.shape == (1, 2, 21)
    assert one.inputs[0, 1, 16:20].tolist() == [1.0, 0.0, 0.0, 0.0]
    cfg = TrainingConfig(task="recall", classes=12, pairs=2)
    causal = recall_batch(cfg, 4, torch.Generator().manual_seed(0), 6)
    assert causal.inputs.shape == (4, 13) and causal.readout.tolist() == [12] * 4
    assert torch.equal(causal.mask, torch.ones(13, 13, dtype=torch.bool).tril().view(1, 1, 13, 13))
    lazy = recall_batch(cfg, 4, torch.Generator().manual_seed(0), 6, causal_in_mask=False)
    assert torch.equal(lazy.inputs, causal.inputs) and torch.equal(lazy.targets, causal.targets)
    assert lazy.mask.shape == (1, 1, 1, 13) and lazy.mask.dtype == torch.bool
    assert bool(lazy.mask.all())
    moved = lazy.to("meta")
    assert isinstance(moved, Batch)
    for name in ("inputs", "readout", "targets", "mask", "lengths"):
        before, after = getattr(lazy, name), getattr(moved, name)
        assert after.device.type == "meta", name
        assert (after.shape, after.dtype) == (before.shape, before.dtype), name


def test_stream_seeds_are_the_first_64_bit_word_of_numpys_seed_sequence_halved():
    """The 64-bit word built from SeedSequence([seed, tag])'s first two 32-bit words, shifted
    right once (a nonnegative int64 for torch's manual_seed); tags give distinct streams."""
    import numpy as np

    from engine.training.tasks import stream_seed

    for seed, tag in ((0, 0), (7, 3), (123456, 16)):
        w = np.random.SeedSequence([seed, tag]).generate_state(2, dtype=np.uint32)
        assert stream_seed(seed, tag) == (int(w[0]) | int(w[1]) << 32) >> 1
        assert 0 <= stream_seed(seed, tag) < 2**63
    assert len({stream_seed(1, tag) for tag in range(20)}) == 20
    assert isinstance(stream_seed(1, 2), int)
