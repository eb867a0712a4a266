"""The written-out attention equals PyTorch's reference, forward and backward; masks work."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from torch.nn import functional as F  # noqa: E402

from engine.training.config import TRAINING_RULES, TrainingConfig  # noqa: E402
from engine.training.model import (  # noqa: E402
    RULE_PARAMETERS,
    AttentionModel,
    attend,
    causal_mask,
    padding_mask,
    scale_scores,
)
from engine.training.tasks import input_features, make_batch, vocab_size  # noqa: E402


def _qkv(b=3, h=2, t=7, d=16, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, t, d, generator=g, dtype=dtype, requires_grad=True)
                 for _ in range(3))


@pytest.mark.parametrize("rule,scale", [("sqrt", None), ("dk", 1 / 16), ("none", 1.0),
                                        ("sqrt_twice", 1 / 16)])
@pytest.mark.parametrize("masking", ["none", "causal", "padding"])
def test_forward_and_gradients_equal_sdpa(rule, scale, masking):
    q, k, v = _qkv()
    mask = None
    if masking == "causal":
        mask = causal_mask(7)
    elif masking == "padding":
        mask = padding_mask(torch.tensor([7, 3, 5]), 7)
    out, _, _ = attend(q, k, v, rule, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(9), dtype=out.dtype)
    g_ours = torch.autograd.grad((out * w).sum(), (q, k, v))
    g_ref = torch.autograd.grad((ref * w).sum(), (q, k, v))
    for a, b in zip(g_ours, g_ref, strict=False):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def test_masked_keys_get_zero_weight_and_do_not_matter():
    q, k, v = _qkv(b=2, h=1, t=6, d=8)
    mask = padding_mask(torch.tensor([4, 6]), 6)
    out, _logits, w = attend(q, k, v, "sqrt", mask)
    assert torch.all(w[0, :, :, 4:] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
    k2, v2 = k.detach().clone(), v.detach().clone()
    k2[0, :, 4:] += 100.0
    v2[0, :, 4:] -= 50.0
    out2, _, _ = attend(q, k2, v2, "sqrt", mask)
    torch.testing.assert_close(out2[0], out[0])


def test_causal_mask_hides_the_future():
    q, k, v = _qkv(b=1, h=1, t=6, d=8)
    out, _, w = attend(q, k, v, "sqrt", causal_mask(6))
    assert torch.all(torch.triu(w[0, 0], diagonal=1) == 0)
    k2, v2, q2 = k.detach().clone(), v.detach().clone(), q.detach().clone()
    k2[..., 4:, :] += 3.0
    v2[..., 4:, :] += 3.0
    q2[..., 4:, :] += 3.0
    out2, _, _ = attend(q2, k2, v2, "sqrt", causal_mask(6))
    torch.testing.assert_close(out2[..., :4, :], out[..., :4, :])


def test_the_rules_scale_as_documented():
    q, k, _ = _qkv(d=64)
    raw = q @ k.transpose(-1, -2)
    torch.testing.assert_close(scale_scores(q, k, "sqrt"), raw / 8)
    torch.testing.assert_close(scale_scores(q, k, "dk"), raw / 64)
    torch.testing.assert_close(scale_scores(q, k, "sqrt_twice"), scale_scores(q, k, "dk"))
    torch.testing.assert_close(scale_scores(q, k, "temperature", 2.5), raw / 2.5)
    cos = scale_scores(q, k, "cosine", 0.1)
    assert cos.abs().max() <= 10.0 + 1e-9
    qk = scale_scores(q, k, "qknorm")  # layer-normed q, k: |q| = |k| = sqrt(d_k) -> |logit| <= sqrt(d_k)
    assert qk.abs().max() <= math.sqrt(64) + 1e-6


def test_scale_after_softmax_divides_the_weights():
    q, k, v = _qkv(d=16)
    out, logits, w = attend(q, k, v, "scale_after_softmax")
    torch.testing.assert_close(logits, q @ k.transpose(-1, -2))  # the softmax sees raw q.k
    torch.testing.assert_close(out, (w / 4) @ v)  # ... and its weights are divided by sqrt(16)


@pytest.mark.parametrize("task", ["retrieval", "recall"])
def test_every_rule_starts_from_the_same_weights(task):
    cfg = TrainingConfig(task=task, d_model=32, heads=2, layers=2, mlp=True, classes=8, pairs=4)
    states = []
    for rule in TRAINING_RULES:
        m = AttentionModel(cfg, rule, input_features(cfg), vocab_size(cfg))
        m.init_weights(torch.Generator().manual_seed(5))
        # a rule's own learned parameters (cosine's T, ssmax's s) are not shared weights
        states.append({k: v for k, v in m.state_dict().items()
                       if not any(p in k for p in RULE_PARAMETERS)})
    for s in states[1:]:
        assert s.keys() == states[0].keys()
        for name in s:
            assert torch.equal(s[name], states[0][name]), name


def test_unit_variance_q_and_k_at_init():
    """qk_init = 1 with the LayerNorm on: q and k entries have variance ~1 (documented default)."""
    cfg = TrainingConfig(d_model=256, heads=4)
    m = AttentionModel(cfg, "sqrt", input_features(cfg), vocab_size(cfg))
    m.init_weights(torch.Generator().manual_seed(0))
    batch = make_batch(cfg, 256, torch.Generator().manual_seed(1))
    with torch.no_grad():
        x = m.blocks[0].ln1(m.embed(batch.inputs))
        q = m.blocks[0].attn.w_q(x)
        k = m.blocks[0].attn.w_k(x)
    real = torch.arange(x.shape[1])[None, :] < batch.lengths[:, None]  # padding tokens are zeros
    q, k = q[real], k[real]
    assert 0.8 < q.var().item() < 1.25
    assert 0.8 < k.var().item() < 1.25


@pytest.mark.parametrize("changes", [
    {}, {"mlp": True, "layers": 3, "heads": 4, "d_k": 20},
    {"task": "recall", "layernorm": False, "mlp": True, "pairs": 5, "classes": 9, "d_model": 48,
     "heads": 3},
])
def test_the_config_counts_the_model_parameters(changes):
    """The memory guard's parameter count is the model's (cosine adds H temperatures a layer)."""
    cfg = TrainingConfig(**changes)
    for rule, extra in (("sqrt", 0), ("cosine", cfg.layers * cfg.heads)):
        m = AttentionModel(cfg, rule, input_features(cfg), vocab_size(cfg))
        assert sum(p.numel() for p in m.parameters()) == cfg.n_params + extra


@pytest.mark.parametrize("rule", ["logn", "ssmax"])
def test_length_rules_use_the_per_row_number_of_keys(rule):
    """Row i of a causal sequence attends to i + 1 keys; a padded example to its length."""
    from engine.rules import RULE_REGISTRY, RuleParams

    q, k, _ = _qkv(b=3, h=2, t=6, d=16)
    raw = q @ k.transpose(-1, -2)
    n_ref, s = 6, 0.7
    causal = scale_scores(q, k, rule, mask=causal_mask(6), n_ref=n_ref, ssmax_s=s)
    for i in range(6):
        p = RuleParams(16, 1.0, math.log(i + 1), math.log(n_ref), s)
        torch.testing.assert_close(causal[..., i, :], RULE_REGISTRY[rule].scale(raw[..., i, :], p))
    lengths = torch.tensor([6, 2, 4])
    padded = scale_scores(q, k, rule, mask=padding_mask(lengths, 6), n_ref=n_ref, ssmax_s=s)
    for b, n in enumerate(lengths.tolist()):
        p = RuleParams(16, 1.0, math.log(n), math.log(n_ref), s)
        torch.testing.assert_close(padded[b], RULE_REGISTRY[rule].scale(raw[b], p))
    # at the reference length logn is sqrt; ssmax with s = 1/ln(n) too
    full = scale_scores(q, k, rule, n_ref=n_ref, ssmax_s=1 / math.log(6))
    torch.testing.assert_close(full, scale_scores(q, k, "sqrt"))


def test_ssmax_learns_s_per_head_starting_at_sqrt_of_the_training_length():
    cfg = TrainingConfig(d_model=32, heads=4, items_max=15)
    m = AttentionModel(cfg, "ssmax", input_features(cfg), vocab_size(cfg))
    s = m.blocks[0].attn.ssmax_s
    assert s.shape == (4, 1, 1) and s.requires_grad
    torch.testing.assert_close(s.detach(), torch.full((4, 1, 1), 1 / math.log(16)))
    batch = make_batch(cfg, 8, torch.Generator().manual_seed(0))
    m(batch.inputs, batch.readout, batch.mask).sum().backward()
    assert s.grad is not None and torch.isfinite(s.grad).all() and s.grad.abs().sum() > 0
