"""Recall at more pairs: the ``positions`` option, recall evaluation lengths in pairs, the per-row
n of the length rules under the causal mask at evaluation lengths, the row-streamed evaluation
(same numbers, bounded memory) and ``eval_every``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from engine.errors import ConfigError
from engine.training.config import TrainingConfig
from engine.training.model import AttentionModel
from engine.training.tasks import recall_batch, retrieval_batch
from engine.training.trainer import Trainer, run_training

RECALL = TrainingConfig(task="recall", d_model=16, heads=2, layers=2, classes=32, pairs=2,
                        positions="sinusoidal", scalings=("sqrt", "logn", "ssmax"), steps=6,
                        log_every=2, batch=8, probe_size=4, hist_bins=20, lr=0.01,
                        eval_lengths=(2, 8, 32), eval_size=12, device="cpu")


def _model(cfg: TrainingConfig, rule: str, seed: int = 0) -> AttentionModel:
    model = AttentionModel(cfg, rule, cfg.in_features, cfg.vocab)
    model.init_weights(torch.Generator().manual_seed(seed))
    if rule == "ssmax":  # a learned s away from its initial value, per head
        for blk in model.blocks:
            blk.attn.ssmax_s.data = torch.tensor([0.3, 0.7]).view(2, 1, 1)
    return model.eval()


def test_positions_and_recall_eval_lengths_are_validated():
    with pytest.raises(ConfigError) as exc:
        RECALL.replace(positions="rope")
    assert exc.value.field == "positions"
    with pytest.raises(ConfigError) as exc:  # learned positions end at the trained length
        RECALL.replace(positions="learned")
    assert exc.value.field == "positions" and "sinusoidal or none" in str(exc.value)
    with pytest.raises(ConfigError) as exc:  # 32 pairs need 32 distinct keys
        RECALL.replace(classes=16)
    assert exc.value.field == "eval_lengths" and "classes" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        RECALL.replace(eval_every=0)
    assert exc.value.field == "eval_every"
    # learned positions may be evaluated at the trained pairs or fewer
    assert RECALL.replace(positions="learned", eval_lengths=(1, 2)).eval_lengths == (1, 2)
    assert RECALL.replace(positions="none").positions == "none"
    assert TrainingConfig().positions == "learned" and TrainingConfig().eval_every == 1


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "none"])
def test_n_params_counts_the_position_embedding_only_when_learned(positions):
    cfg = RECALL.replace(positions=positions, eval_lengths=())
    model = AttentionModel(cfg, "sqrt", cfg.in_features, cfg.vocab)
    assert sum(p.numel() for p in model.parameters()) == cfg.n_params


def test_sinusoidal_and_none_run_at_any_length_learned_refuses():
    gen = torch.Generator().manual_seed(1)
    batch = recall_batch(RECALL, 3, gen, 32)  # 65 tokens, trained on 5
    assert batch.inputs.shape == (3, 65) and int(batch.readout[0]) == 64
    for positions in ("sinusoidal", "none"):
        logits = _model(RECALL.replace(positions=positions), "sqrt")(
            batch.inputs, batch.readout, batch.mask)
        assert logits.shape == (3, RECALL.classes) and bool(torch.isfinite(logits).all())
    learned = _model(RECALL.replace(positions="learned", eval_lengths=()), "sqrt")
    with pytest.raises(ValueError, match="sinusoidal or none"):
        learned(batch.inputs, batch.readout, batch.mask)


@pytest.mark.parametrize("rule", ["logn", "ssmax"])
def test_length_rules_use_the_per_row_n_of_the_causal_mask_at_an_eval_length(rule):
    """Trained on 2 pairs (n_ref = 5 tokens), run on 8 pairs (17 tokens): row i of the causal
    mask attends to i + 1 keys, and its logits are q.k / sqrt(d_k) times max(1, ln(i + 1) / ln 5)
    (logn, clamped as Qwen's: rows 0-3 keep the sqrt logits) or s ln(i + 1) (ssmax), computed here
    by hand."""
    model = _model(RECALL, rule)
    batch = recall_batch(RECALL, 2, torch.Generator().manual_seed(2), 8)
    t = 17
    capture = []
    model(batch.inputs, batch.readout, batch.mask, capture)
    attn = model.blocks[0].attn
    h = model.blocks[0].ln1(model.embed_inputs(batch.inputs))
    with torch.no_grad():
        q = attn.w_q(h).view(2, t, 2, attn.d_k).transpose(1, 2).double()
        k = attn.w_k(h).view(2, t, 2, attn.d_k).transpose(1, 2).double()
    dot = q @ k.transpose(-1, -2) / math.sqrt(attn.d_k)  # (B, H, T, T)
    n = torch.arange(1, t + 1, dtype=torch.float64).view(1, 1, t, 1)  # keys seen by row i
    if rule == "logn":
        assert attn.n_ref == 5
        factor = torch.clamp(n.log() / math.log(5), min=1.0)
        assert factor[0, 0, :5, 0].tolist() == [1.0] * 5 and factor[0, 0, 16, 0] > 1.7
    else:
        factor = attn.ssmax_s.detach().double().view(1, 2, 1, 1) * n.log()
    expected = dot * factor
    visible = torch.ones(t, t, dtype=torch.bool).tril()
    got = capture[0].logits.double()
    torch.testing.assert_close(got[..., visible], expected[..., visible], rtol=1e-4, atol=1e-5)
    # the readout row (all 17 keys) differs from what a constant n would give
    weights = torch.softmax(expected[:, :, -1, :], dim=-1)
    torch.testing.assert_close(capture[0].weights[:, :, -1, :].double(), weights, rtol=1e-4,
                               atol=1e-6)


@pytest.mark.parametrize("rule", ["sqrt", "logn", "ssmax"])
@pytest.mark.parametrize("rows", [1, 3, 7])
def test_the_row_streamed_forward_equals_the_full_forward(rule, rows):
    """Chunks of query rows keep their own mask rows (and so their own n): same class logits and
    the same readout-row weights as the full pass, under the causal and the padding mask."""
    cases = [(RECALL, recall_batch(RECALL, 3, torch.Generator().manual_seed(3), 8)),
             (TrainingConfig(d_model=16, heads=2, items_min=2, items_max=6, classes=4, key_dim=4,
                             scalings=(rule,)),
              None)]
    retrieval_cfg = cases[1][0]
    batch = retrieval_batch(retrieval_cfg, 3, torch.Generator().manual_seed(4), 6)
    batch.mask = batch.mask & (torch.arange(7) < torch.tensor([[4], [7], [5]])).view(3, 1, 1, 7)
    cases[1] = (retrieval_cfg, batch)
    for cfg, b in cases:
        model = _model(cfg, rule)
        with torch.no_grad():
            capture = []
            full = model(b.inputs, b.readout, b.mask, capture)
            streamed, readout_w = model.forward_streamed(b.inputs, b.readout, b.mask, rows)
        torch.testing.assert_close(streamed, full, rtol=1e-5, atol=1e-6)
        for cap, w in zip(capture, readout_w, strict=True):
            expected = cap.weights[torch.arange(3), :, b.readout, :]  # (B, H, T)
            torch.testing.assert_close(w, expected, rtol=1e-5, atol=1e-7)
    # recall as the evaluation runs it: no T x T mask, the causal rows built per chunk
    full_mask = recall_batch(RECALL, 3, torch.Generator().manual_seed(3), 8)
    lazy = recall_batch(RECALL, 3, torch.Generator().manual_seed(3), 8, causal_in_mask=False)
    assert lazy.mask.shape == (1, 1, 1, 17) and torch.equal(lazy.inputs, full_mask.inputs)
    model = _model(RECALL, rule)
    with torch.no_grad():
        full = model(full_mask.inputs, full_mask.readout, full_mask.mask)
        streamed, _ = model.forward_streamed(lazy.inputs, lazy.readout, lazy.mask, rows,
                                             causal=True)
    torch.testing.assert_close(streamed, full, rtol=1e-5, atol=1e-6)


def test_recall_evaluation_streams_rows_within_the_cell_budget(monkeypatch):
    """No attention map larger than ``cells`` weights exists during evaluation, and streaming
    by rows does not change the numbers."""
    import engine.training.model as model_mod
    from engine.training.lengths import eval_chunks, evaluate_lengths

    cfg = RECALL.replace(eval_lengths=(16,), eval_size=3)
    model = _model(cfg, "logn")
    cells = 1024
    t = 33
    examples, rows = eval_chunks(cfg, t, cells)
    assert examples == 1 and examples * cfg.heads * rows * t <= cells and rows < t
    sizes = []
    real = model_mod.attend

    def spy(q, k, *args, **kw):
        out = real(q, k, *args, **kw)
        sizes.append(out[2].numel())
        return out

    monkeypatch.setattr(model_mod, "attend", spy)
    small = evaluate_lengths(model, cfg, "cpu", cells=cells)
    assert sizes and max(sizes) <= cells
    one_row = evaluate_lengths(model, cfg, "cpu", cells=cells, rows=1)
    assert one_row["accuracy_len16"] == small["accuracy_len16"]
    assert one_row["entropy_norm_len16"] == pytest.approx(small["entropy_norm_len16"], rel=1e-6)
    assert 0.0 < small["entropy_norm_len16"] <= 1.0 + 1e-9


def test_recall_is_evaluated_at_more_pairs_every_k_logs_and_at_the_end():
    """eval_every = 2 with logs at steps 0, 2, 4, 6: evaluated at 0, 4 and 6 (the last), the
    columns empty at step 2; the training curves are those of the run without evaluation."""
    from engine.experiments.job import length_results

    cfg = RECALL.replace(eval_every=2)
    _, plain = run_training(cfg.replace(eval_lengths=()))
    _, snap = run_training(cfg)
    for name in ("loss", "accuracy", "probe_loss"):
        np.testing.assert_array_equal(snap.scalars[name], plain.scalars[name])
    assert snap.log_steps.tolist() == [0, 2, 4, 6]
    assert snap.length_evaluated.tolist() == [True, False, True, True]
    assert snap.length_logs(0).tolist() == [0, 2, 3]
    rows = snap.metrics_rows()
    for r in rows:
        for n in cfg.eval_lengths:
            if r["step"] == 2:
                assert r[f"accuracy_len{n}"] == "" and r[f"entropy_norm_len{n}"] == ""
            else:
                acc = r[f"accuracy_len{n}"]
                assert 0.0 <= acc <= 1.0 and acc * 12 == pytest.approx(round(acc * 12))
                assert 0.0 < r[f"entropy_norm_len{n}"] <= 1.0 + 1e-9
    ok = np.flatnonzero(snap.valid[:, 1])
    res = length_results(snap, 1, ok, -1)
    assert res["accuracy_len32"] == snap.scalars["accuracy_len32"][3, 1]
    # the logged value at the last step is the model's own evaluation, recomputed
    from engine.training.lengths import evaluate_lengths

    trainer = Trainer(cfg)
    for _ in trainer.iterate():
        pass
    again = evaluate_lengths(trainer.runs[2].model, cfg, "cpu")
    assert again["accuracy_len8"] == snap.scalars["accuracy_len8"][3, 2]
    assert "length_evaluated" in snap.histogram_arrays()


def test_eval_every_1_evaluates_at_every_log():
    cfg = RECALL.replace(eval_lengths=(8,), steps=4)
    assert [cfg.evaluates_lengths_at(s) for s in cfg.log_steps] == [True, True, True]
    cfg = RECALL.replace(eval_every=3, steps=7)  # logs 0, 2, 4, 6, 7
    assert [cfg.evaluates_lengths_at(s) for s in cfg.log_steps] == [True, False, False, True, True]
    assert not RECALL.replace(eval_lengths=()).evaluates_lengths_at(0)
