"""Evaluation at other lengths (engine.training.lengths) against a stub model whose answers and
readout attention are set by hand: the accuracy and mean normalized entropy it must give, the
chunks it must ask for, the evaluation sets it must draw (seed stream 16 + k, the same at every
call), and the model's mode restored. No training, no real forward pass: milliseconds."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from engine.training.config import TrainingConfig  # noqa: E402
from engine.training.lengths import (  # noqa: E402
    eval_chunks,
    eval_tokens,
    evaluate_lengths,
    length_columns,
)
from engine.training.tasks import recall_batch, retrieval_batch, stream_seed  # noqa: E402

RECALL = TrainingConfig(task="recall", d_model=16, heads=2, layers=2, classes=16, pairs=2,
                        positions="sinusoidal", eval_lengths=(4, 8), eval_size=5, seed=7,
                        device="cpu")
RETRIEVAL = TrainingConfig(task="retrieval", d_model=16, heads=2, layers=2, classes=8,
                           items_min=2, items_max=4, noise=0.0, eval_lengths=(7,), eval_size=3,
                           device="cpu")
#: the readout row's weights per (layer, head) over the first keys (the rest 0): uniform over 8,
#: 2, 1 and 4 keys (exact in float32), entropies 3 ln 2, ln 2, 0, 2 ln 2: their mean 1.5 ln 2
SUPPORT = ((8, 2), (1, 4))


class _Stub(torch.nn.Module):
    """Answers examples 2, 5, 8, ... (counted over every call) wrong and the others right, and
    attends with the ``support`` weights; records what it is asked."""

    def __init__(self, cfg: TrainingConfig, support: tuple[tuple[int, ...], ...] = SUPPORT) -> None:
        super().__init__()
        self.cfg = cfg
        self.support = support
        self.calls: list[dict] = []
        self.seen = 0

    def _truth(self, inputs: torch.Tensor) -> torch.Tensor:
        c = self.cfg.classes
        if self.cfg.task == "recall":  # k1 v1 ... kP vP kq: the value after kq
            keys, values = inputs[:, 0:-1:2], inputs[:, 1::2] - c
            return values[keys == inputs[:, -1:]]
        kd = self.cfg.key_dim  # retrieval, no noise: the item whose key is the query
        dist = (inputs[:, 1:, :kd] - inputs[:, :1, :kd]).abs().sum(-1)
        return inputs[:, 1:, kd:kd + c].argmax(-1).gather(1, dist.argmin(1, keepdim=True))[:, 0]

    def forward_streamed(self, inputs, readout, mask, rows, causal):
        b, t = inputs.shape[:2]
        self.calls.append(dict(inputs=inputs.clone(), readout=readout.tolist(), rows=rows,
                               causal=causal,
                               mask=tuple(mask.shape), training=self.training,
                               grad=torch.is_grad_enabled()))
        truth = self._truth(inputs)
        right = torch.arange(self.seen, self.seen + b) % 3 != 2
        self.seen += b
        pred = torch.where(right, truth, (truth + 1) % self.cfg.classes)
        logits = torch.nn.functional.one_hot(pred, self.cfg.classes).float()
        weights = []
        for layer in self.support:
            w = torch.zeros(b, len(layer), t)
            for h, m in enumerate(layer):
                w[:, h, :m] = 1.0 / m
            weights.append(w)
        return logits, weights


def test_eval_tokens_and_columns():
    assert eval_tokens(RETRIEVAL, 7) == 8  # the query and 7 items
    assert eval_tokens(RECALL, 4) == 9  # 4 pairs and the query key
    assert length_columns(RECALL) == ("accuracy_len4", "entropy_norm_len4", "accuracy_len8",
                                      "entropy_norm_len8")


@pytest.mark.parametrize("cells,want", [
    (10**9, (5, 9)),  # everything at once: eval_size examples, all rows
    (324, (2, 9)),  # 2 examples x 2 heads x 9 x 9 = 324 exactly
    (323, (1, 9)),  # one cell short: 1 example (323 // 162 = 1), then 323 // 18 = 17 > 9 rows
    (72, (1, 4)),  # 1 x 2 x 4 rows x 9 = 72 exactly
    (71, (1, 3)),
    (10, (1, 1)),  # below one row: still one example and one row
])
def test_eval_chunks_fit_the_cell_budget_by_hand(cells, want):
    assert eval_chunks(RECALL, 9, cells) == want


def test_accuracy_and_entropy_are_those_set_by_hand():
    """Length 4 (9 tokens) in chunks of 2, 2, 1 examples, length 8 (17 tokens) one by one: the
    stub answers examples 0, 1, 3, 4 of the first length right (4/5: both of the first chunk,
    the second of the next) and 6, 7, 9 of the second (3/5); the entropy is 1.5 ln 2 / ln t at
    every length."""
    model = _Stub(RECALL).train()
    got = evaluate_lengths(model, RECALL, "cpu", cells=324)
    assert set(got) == set(length_columns(RECALL))
    assert got["accuracy_len4"] == 4 / 5 and got["accuracy_len8"] == 3 / 5
    assert got["entropy_norm_len4"] == pytest.approx(1.5 * math.log(2) / math.log(9), rel=1e-12)
    assert got["entropy_norm_len8"] == pytest.approx(1.5 * math.log(2) / math.log(17), rel=1e-12)
    assert [c["inputs"].shape[0] for c in model.calls] == [2, 2, 1, 1, 1, 1, 1, 1]
    assert [c["rows"] for c in model.calls] == [9] * 8  # 324 // (1 x 2 x 17) = 9 rows at t = 17
    assert all(c["causal"] and not c["training"] and not c["grad"] for c in model.calls)
    assert [c["mask"] for c in model.calls] == [(1, 1, 1, 9)] * 3 + [(1, 1, 1, 17)] * 5
    assert [c["readout"] for c in model.calls] == [[8, 8], [8, 8], [8]] + [[16]] * 5
    assert model.training  # its mode is given back


def test_the_evaluation_sets_come_from_stream_16_plus_k_every_time():
    """Length k draws its chunks in order from the seed stream 16 + k, anew at every call."""
    model = _Stub(RECALL).eval()
    first = evaluate_lengths(model, RECALL, "cpu", cells=324, rows=3)
    assert [c["rows"] for c in model.calls] == [3] * 8  # rows overrides, the chunks stay
    assert not model.training
    want = []
    for k, (n, sizes) in enumerate(((4, (2, 2, 1)), (8, (1,) * 5))):
        gen = torch.Generator().manual_seed(stream_seed(RECALL.seed, 16 + k))
        want += [recall_batch(RECALL, s, gen, n, causal_in_mask=False).inputs for s in sizes]
    assert len(model.calls) == len(want)
    for call, inputs in zip(model.calls, want, strict=True):
        assert torch.equal(call["inputs"], inputs)
    again = _Stub(RECALL)
    assert evaluate_lengths(again, RECALL, "cpu", cells=324, rows=3) == first
    for a, b in zip(model.calls, again.calls, strict=True):
        assert torch.equal(a["inputs"], b["inputs"])


def test_retrieval_sets_hold_exactly_n_items_and_are_not_causal():
    """Retrieval at 7 items (8 tokens, more than the trained 4): every set full, the query row
    attends to all 8 tokens without a causal mask; the stub is right on examples 0 and 1."""
    model = _Stub(RETRIEVAL)
    got = evaluate_lengths(model, RETRIEVAL, "cpu")
    assert got["accuracy_len7"] == 2 / 3
    assert got["entropy_norm_len7"] == pytest.approx(1.5 * math.log(2) / math.log(8), rel=1e-12)
    (call,) = model.calls
    assert not call["causal"] and call["rows"] == 8 and call["inputs"].shape[:2] == (3, 8)
    assert call["readout"] == [0, 0, 0]
    gen = torch.Generator().manual_seed(stream_seed(RETRIEVAL.seed, 16))
    assert torch.equal(call["inputs"], retrieval_batch(RETRIEVAL, 3, gen, 7).inputs)


def test_one_example_one_head_one_layer_is_its_own_mean():
    """The mean normalized entropy of a single readout row is that row's: ln 2 / ln 9."""
    cfg = RECALL.replace(heads=1, layers=1, eval_lengths=(4,), eval_size=1)
    got = evaluate_lengths(_Stub(cfg, support=((2,),)), cfg, "cpu")
    assert got == {"accuracy_len4": 1.0,
                   "entropy_norm_len4": pytest.approx(math.log(2) / math.log(9), rel=1e-12)}


def test_each_chunk_is_moved_to_the_device_asked(monkeypatch):
    """The evaluation sets are drawn on the CPU and moved to the model's device, chunk by chunk
    (here the move is recorded and kept on the CPU)."""
    from engine.training.tasks import Batch

    seen = []
    real = Batch.to

    def spy(self, device):
        seen.append(device)
        return real(self, "cpu")

    monkeypatch.setattr(Batch, "to", spy)
    evaluate_lengths(_Stub(RECALL), RECALL, "cuda:1", cells=324)
    assert seen == ["cuda:1"] * 8
