"""Training knobs (warmup, decay, weight decay, clipping) and the numerics policy of a step."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.training.config import TrainingConfig  # noqa: E402
from engine.training.numerics import (  # noqa: E402
    FLOAT32_TINY,
    flush_denormal_enabled,
    training_numerics,
)
from engine.training.presets import preset  # noqa: E402
from engine.training.trainer import HEAD_METRICS, SCALARS, Trainer  # noqa: E402

TINY = TrainingConfig(d_model=32, heads=2, items_max=6, scalings=("none", "sqrt"), steps=6,
                      log_every=3, batch=8, probe_size=4, device="cpu")


def _weight_norm(trainer: Trainer, rule: str) -> float:
    run = trainer.runs[trainer.cfg.scalings.index(rule)]
    return float(sum(p.detach().double().norm() ** 2 for p in run.model.parameters()) ** 0.5)


def _train(cfg: TrainingConfig, **kw) -> Trainer:
    t = Trainer(cfg, **kw)
    for _ in t.iterate():
        pass
    return t


def test_weight_decay_shrinks_the_weights():
    cfg = TINY.replace(scalings=("sqrt",), lr=1e-2, steps=20, log_every=10)
    plain = _weight_norm(_train(cfg), "sqrt")
    decayed = _weight_norm(_train(cfg.replace(weight_decay=5.0)), "sqrt")
    assert decayed < 0.9 * plain


def test_weight_decay_zero_keeps_plain_adam():
    t = Trainer(TINY)
    assert type(t.runs[0].opt) is torch.optim.Adam
    assert type(Trainer(TINY.replace(weight_decay=0.1)).runs[0].opt) is torch.optim.AdamW


@pytest.mark.parametrize("decay", [0.0, 0.1])
def test_the_grouped_adam_update_gives_the_per_tensor_loops_numbers(decay, monkeypatch):
    """The trainer's Adam runs one kernel per group (``foreach``, for speed); CPU's default is a
    loop over tensors. Both must give the same weights, bit for bit, over a run whose logits grow
    (lr 0.1, no scaling), so that no published figure moves with the choice."""
    cfg = TINY.replace(scalings=("none", "sqrt"), lr=0.1, steps=12, log_every=6,
                       weight_decay=decay)
    grouped = _train(cfg)
    assert all(run.opt.defaults["foreach"] for run in grouped.runs)
    for name in ("Adam", "AdamW"):
        cls = getattr(torch.optim, name)
        monkeypatch.setattr(torch.optim, name,
                            lambda *a, _cls=cls, **kw: _cls(*a, **{**kw, "foreach": False}))
    looped = _train(cfg)
    assert not any(run.opt.defaults["foreach"] for run in looped.runs)
    for a, b in zip(grouped.runs, looped.runs):
        for p, q in zip(a.model.parameters(), b.model.parameters()):
            assert torch.equal(p, q)


def test_grad_clip_bounds_the_update_norm():
    """With SGD the update is lr x gradient: clipped, its norm is at most lr x grad_clip."""
    cfg = TINY.replace(scalings=("none",), optimizer="sgd", lr=1.0, steps=1, grad_clip=1e-3)
    t = Trainer(cfg)
    before = [p.detach().clone() for p in t.runs[0].model.parameters()]
    t.advance()
    delta = sum(float((p.detach() - b).double().norm() ** 2)
                for p, b in zip(t.runs[0].model.parameters(), before)) ** 0.5
    assert 0 < delta <= 1e-3 * (1 + 1e-4)
    t_free = Trainer(cfg.replace(grad_clip=0.0))
    before = [p.detach().clone() for p in t_free.runs[0].model.parameters()]
    t_free.advance()
    free = sum(float((p.detach() - b).double().norm() ** 2)
               for p, b in zip(t_free.runs[0].model.parameters(), before)) ** 0.5
    assert free > 10 * delta


def test_warmup_sets_the_optimizer_lr_of_each_update():
    cfg = TINY.replace(steps=8, warmup=4, decay="cosine", lr_floor=0.0, lr=1e-2)
    t = Trainer(cfg)
    seen = []
    for _ in range(cfg.steps):
        t.advance()
        seen.append(t.runs[0].opt.param_groups[0]["lr"])
    assert seen == pytest.approx([cfg.lr * cfg.lr_factor(s) for s in range(cfg.steps)])
    assert seen[0] == pytest.approx(2.5e-3) and seen[3] == pytest.approx(1e-2)


def test_a_step_restores_the_previous_flush_and_thread_mode():
    before_threads = torch.get_num_threads()
    assert not flush_denormal_enabled()
    seen = {}

    def spy(*_a, **_k):
        seen["threads"] = torch.get_num_threads()
        seen["flush"] = flush_denormal_enabled()
        return {}

    t = Trainer(TINY)
    t._grad_norms = spy  # called inside the step
    t.advance()
    assert seen == {"threads": 1, "flush": True}
    assert torch.get_num_threads() == before_threads and not flush_denormal_enabled()
    torch.set_flush_denormal(True)
    try:
        with training_numerics(flush=False):
            assert not flush_denormal_enabled()
        assert flush_denormal_enabled()
    finally:
        torch.set_flush_denormal(False)


def test_flushing_subnormals_changes_only_values_below_float32_normal_range():
    """The demo's saturated `none` run at d_k = 256 on a few steps: every observed figure is the
    same with and without flushing, except where a value is below float32's normal range."""
    cfg = preset("demo").config.replace(steps=4, log_every=2, batch=16, probe_size=8,
                                        device="cpu")
    a = _train(cfg, flush_denormal=True).snapshot()
    b = _train(cfg, flush_denormal=False).snapshot()
    for name in SCALARS:
        np.testing.assert_allclose(a.scalars[name], b.scalars[name], rtol=1e-5, atol=FLOAT32_TINY)
    for name in HEAD_METRICS:
        np.testing.assert_allclose(a.heads[name], b.heads[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_array_equal(a.diverged_step, b.diverged_step)
