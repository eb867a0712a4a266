"""The gradient chain the trainer logs (engine.training.gradients): each norm against autograd on a
copy of the model, the divisor link exactly 1/c, masked keys left out, and logging that changes
nothing in training."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.nn import functional as F  # noqa: E402

from engine.training.gradients import CHAIN, GAIN, GradTaps  # noqa: E402
from engine.training.presets import preset  # noqa: E402
from engine.training.tasks import make_batch, stream_seed  # noqa: E402
from engine.training.trainer import Trainer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _cfg(**kw):
    base = dict(d_model=48, heads=3, layers=2, batch=16, steps=1, scalings=("none", "sqrt", "dk"),
                device="cpu", probe_size=8)
    return preset("demo").config.replace(**{**base, **kw})


def test_the_chain_matches_autograd_link_by_link() -> None:
    """Per head: |dL/dp| over visible keys, |dL/dz|, |dL/d(q.k)| and |dL/dq| as autograd gives
    them on the same weights and batch, with the tensors rebuilt by hand."""
    cfg = _cfg()
    trainer = Trainer(cfg)
    copies = [copy.deepcopy(run.model) for run in trainer.runs]
    batch = make_batch(cfg, cfg.batch, torch.Generator().manual_seed(stream_seed(cfg.seed, 1)))
    trainer.advance()
    snap = trainer.snapshot()
    d_k, h = cfg.head_dim, cfg.heads
    for r, model in enumerate(copies):
        model.train()
        kept: list[dict[str, torch.Tensor]] = []
        hooks = []
        for blk in model.blocks:  # q of every layer, through a forward hook on W_Q
            hooks.append(blk.attn.w_q.register_forward_hook(
                lambda _m, _i, out, kept=kept: kept.append({"q_flat": out})))
        logits_out = model(batch.inputs, batch.readout, batch.mask)
        for hk in hooks:
            hk.remove()
        loss = F.cross_entropy(logits_out, batch.targets)
        qs = [k["q_flat"] for k in kept]
        grads_q = torch.autograd.grad(loss, qs)
        for layer, g in enumerate(grads_q):
            per_head = g.double().view(g.shape[0], g.shape[1], h, d_k).transpose(1, 2)
            want = per_head.transpose(0, 1).reshape(h, -1).norm(dim=1).numpy()
            got = snap.heads["grad_norm_query"][0, r, layer]
            np.testing.assert_allclose(got, want, rtol=1e-5)
        c = {"none": 1.0, "sqrt": math.sqrt(d_k), "dk": float(d_k)}[snap.rules[r]]
        np.testing.assert_allclose(snap.heads["grad_norm_scores"][0, r] * c,
                                   snap.heads["grad_norm_logits"][0, r], rtol=1e-9)
        np.testing.assert_allclose(
            snap.heads[GAIN][0, r],
            snap.heads["grad_norm_logits"][0, r] / snap.heads["grad_norm_attn"][0, r], rtol=1e-12)
    for name in (*CHAIN, GAIN):
        assert np.all(snap.heads[name][0] > 0), name


def test_taps_count_visible_keys_only_and_match_the_softmax_jacobian() -> None:
    """One layer by hand: dL/dz = J g row by row (g = dL/dp), masked keys excluded from |g|."""
    from engine.training.model import attend, padding_mask

    gen = torch.Generator().manual_seed(3)
    b, heads, t, d = 3, 2, 5, 4
    q, k, v = (torch.randn(b, heads, t, d, generator=gen, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    mask = padding_mask(torch.tensor([5, 3, 4]), t)
    taps = GradTaps(1, heads)
    out, _logits, weights = attend(q, k, v, "sqrt", mask,
                                   tap=lambda *x: taps.watch(0, *x))
    target = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    p = weights.detach().requires_grad_(True)
    g = torch.autograd.grad(((p @ v.detach()) * target).sum(), p)[0]  # dL/dp, every key
    (out * target).sum().backward()
    visible = g.masked_fill(~mask, 0.0)
    np.testing.assert_allclose(taps.norms["grad_norm_attn"][0],
                               visible.transpose(0, 1).reshape(heads, -1).norm(dim=1).numpy(),
                               rtol=1e-12)
    pw = weights.detach()
    jac = torch.diag_embed(pw) - pw[..., :, None] * pw[..., None, :]  # (B, H, T, T, T)
    jg = (jac @ g[..., None])[..., 0]
    np.testing.assert_allclose(taps.norms["grad_norm_logits"][0],
                               jg.transpose(0, 1).reshape(heads, -1).norm(dim=1).numpy(),
                               rtol=1e-10)
    assert not np.allclose(taps.norms["grad_norm_attn"][0],
                           g.transpose(0, 1).reshape(heads, -1).norm(dim=1).numpy())


def test_logging_the_chain_changes_nothing_in_training() -> None:
    """Hooks read gradients; a run logged at every step trains as one logged only at the end."""
    cfg = _cfg(steps=4)
    every = Trainer(cfg.replace(log_every=1))
    rarely = Trainer(cfg.replace(log_every=4))
    for _ in range(5):
        every.advance()
        rarely.advance()
    for a, b in zip(every.runs, rarely.runs, strict=True):
        for (name, x), (_, y) in zip(a.model.state_dict().items(), b.model.state_dict().items(),
                                     strict=True):
            assert torch.equal(x, y), name


def test_each_masked_link_counts_visible_keys_only() -> None:
    """GradTaps on its own: gradients that are not 0 at masked keys (here every entry's gradient
    is its target) count only where the key is visible, for p, z and s alike; q has no key axis
    and counts whole. Norms by hand: visible entries of a 1-batch, 1-head, 2 x 3 grid."""
    mask = torch.tensor([[True, True, False], [True, False, False]]).view(1, 1, 2, 3)
    grid = torch.tensor([[3.0, 4.0, 100.0], [12.0, 50.0, 60.0]], dtype=torch.float64)
    tensors = [torch.zeros(1, 1, 2, 3, dtype=torch.float64, requires_grad=True) for _ in range(4)]
    q, scores, logits, weights = tensors
    taps = GradTaps(2, 1)
    taps.watch(1, q, scores, logits, weights, mask)
    loss = sum((t * grid.view(1, 1, 2, 3) * (i + 1)).sum() for i, t in enumerate(tensors))
    loss.backward()
    visible = 13.0  # sqrt(3^2 + 4^2 + 12^2)
    whole = math.sqrt(3**2 + 4**2 + 100**2 + 12**2 + 50**2 + 60**2)
    assert taps.norms["grad_norm_query"][1, 0] == pytest.approx(1 * whole, rel=1e-12)
    assert taps.norms["grad_norm_scores"][1, 0] == pytest.approx(2 * visible, rel=1e-12)
    assert taps.norms["grad_norm_logits"][1, 0] == pytest.approx(3 * visible, rel=1e-12)
    assert taps.norms["grad_norm_attn"][1, 0] == pytest.approx(4 * visible, rel=1e-12)
    assert not taps.norms["grad_norm_attn"][0].any()  # layer 0 untouched


def test_the_gain_of_a_head_with_no_upstream_gradient_is_zero() -> None:
    """|dL/dz| / |dL/dp| with |dL/dp| = 0 (muP's zero readout passes no gradient back at its
    first step) is 0, not NaN or whatever memory held; elsewhere the plain ratio."""
    taps = GradTaps(2, 2)
    taps.norms["grad_norm_logits"][:] = [[3.0, 0.0], [1.0, 5.0]]
    taps.norms["grad_norm_attn"][:] = [[2.0, 0.0], [4.0, 0.0]]
    with np.errstate(all="raise"):
        gain = taps.metrics()[GAIN]
    np.testing.assert_array_equal(gain, [[1.5, 0.0], [0.25, 0.0]])
    cfg = _cfg(param="mup", base_width=24, layers=1, scalings=("sqrt",))
    trainer = Trainer(cfg)
    trainer.advance()
    snap = trainer.snapshot()
    assert not snap.heads["grad_norm_attn"][0].any()
    np.testing.assert_array_equal(snap.heads[GAIN][0], 0.0)
