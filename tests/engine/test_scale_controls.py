"""The scale controls that shipped after QK-norm (softcap, sink, sigmoid, yarn): each formula
against an independent implementation (hand-written NumPy, and transformers' own Gemma 2 soft-cap,
gpt-oss sink and DeepSeek-V3 YaRN code where the models extra is installed), their Jacobians
against autograd, their entropies against a direct computation, and the simulation's paired draws."""

from __future__ import annotations

import math
from types import SimpleNamespace

import mpmath
import numpy as np
import pytest
import torch

from engine.config import SimulationConfig
from engine.inspect import inspect_scores
from engine.rules import (
    LENGTH_RULES,
    RULE_REGISTRY,
    TRAINING_RULES,
    RawScores,
    RuleParams,
    log_sech2,
    yarn_constant,
    yarn_factor,
)
from engine.simulate import run_simulation
from engine.softmax import row_metrics, sigmoid_row_metrics

RNG = np.random.default_rng(21)
DOT = RNG.standard_normal((6, 9)) * 12.0  # q.k of a d_k = 144 head: sqrt logits of std ~1
D_K = 144


def _params(**kw) -> RuleParams:
    return RuleParams(D_K, 1.0, **kw)


def _logits(rule: str, **kw) -> np.ndarray:
    return RULE_REGISTRY[rule].logits(RawScores(dot=DOT), D_K, 1.0, **kw)


# -- formulas against hand-written NumPy ----------------------------------------------------------
def test_softcap_is_c_tanh_of_the_sqrt_logit():
    for c in (50.0, 2.0, 0.5):
        np.testing.assert_allclose(_logits("softcap", softcap=c), c * np.tanh(DOT / 12.0 / c),
                                   rtol=1e-15)
    # nearly the identity far below c, never beyond c
    assert np.max(np.abs(_logits("softcap", softcap=1e6) - DOT / 12.0)) < 1e-9
    assert np.abs(_logits("softcap", softcap=0.5)).max() <= 0.5


def test_sink_and_sigmoid_keep_the_sqrt_logits_and_change_only_the_weights():
    sqrt = _logits("sqrt")
    assert np.array_equal(_logits("sink", sink=3.0), sqrt)
    assert np.array_equal(_logits("sigmoid"), sqrt)
    n = DOT.shape[1]
    m = RULE_REGISTRY["sigmoid"].row_metrics(sqrt, _params(log_n=math.log(n)))
    np.testing.assert_allclose(m.weights, 1.0 / (1.0 + np.exp(-(sqrt - math.log(n)))), rtol=1e-13)
    for s in (0.0, 2.5, -4.0):
        m = RULE_REGISTRY["sink"].row_metrics(sqrt, _params(sink=s))
        e = np.exp(sqrt)
        z = e.sum(axis=1, keepdims=True) + math.exp(s)
        np.testing.assert_allclose(m.weights, e / z, rtol=1e-13)
        np.testing.assert_allclose(m.sink_weight, math.exp(s) / z[:, 0], rtol=1e-13)
        np.testing.assert_allclose(m.key_mass + m.sink_weight, 1.0, rtol=1e-14)


def test_yarn_dynamic_is_sqrt_times_mscale_squared_beyond_n_ref_and_sqrt_below():
    for n, n_ref in ((4096, 8), (64, 8), (8, 8), (4, 8)):
        got = _logits("yarn_dynamic", log_n=math.log(n), log_n_ref=math.log(n_ref))
        s = n / n_ref
        expect = (0.1 * math.log(s) + 1.0) ** 2 if s > 1 else 1.0
        np.testing.assert_allclose(got, DOT / 12.0 * expect, rtol=1e-14)
    at_ref = {"log_n": math.log(8), "log_n_ref": math.log(8)}
    assert np.array_equal(_logits("yarn_dynamic", **at_ref), _logits("sqrt", **at_ref))


def test_yarn_as_shipped_is_one_constant_at_every_length():
    """YaRN with extension factor s = 40 (DeepSeek-V3): (0.1 ln 40 + 1)^2 = 1.3689^2 = 1.8739
    by hand, the same for a row of 2 keys as for one of 100,000, and sqrt where s = 1."""
    by_hand = 1.368887945 ** 2
    for n in (2, 8, 100_000):
        got = _logits("yarn", log_n=math.log(n), log_n_ref=math.log(8), yarn_s=40.0)
        np.testing.assert_allclose(got, DOT / 12.0 * by_hand, rtol=1e-9)
    assert np.array_equal(_logits("yarn", yarn_s=1.0), _logits("sqrt"))
    assert "yarn" not in LENGTH_RULES and "yarn_dynamic" in LENGTH_RULES


@pytest.mark.parametrize("name", ["softcap", "sink", "sigmoid", "yarn", "yarn_dynamic"])
def test_numpy_and_torch_give_the_same_capped_logits_from_one_definition(name):
    rule = RULE_REGISTRY[name]
    log_n = np.log(np.arange(2, 8, dtype=np.float64))[:, None]  # per-row n = 2..7
    p_np = RuleParams(D_K, 1.0, log_n, math.log(3), softcap=1.5)
    p_t = RuleParams(D_K, 1.0, torch.from_numpy(log_n), math.log(3), softcap=1.5)
    got_np = rule.capped(rule.scale(DOT, p_np), p_np)
    got_t = rule.capped(rule.scale(torch.from_numpy(DOT), p_t), p_t).numpy()
    np.testing.assert_allclose(got_np, got_t, rtol=1e-15, atol=0)


def test_the_rule_sets_and_qkclip_is_training_only():
    sim = [n for n, r in RULE_REGISTRY.items() if not r.training_only]
    assert {"softcap", "sink", "sigmoid", "yarn", "yarn_dynamic"} <= set(sim)
    assert RULE_REGISTRY["qkclip"].training_only and RULE_REGISTRY["qkclip"].qk_clip
    assert "qkclip" in TRAINING_RULES
    assert [RULE_REGISTRY[r].weights for r in ("sqrt", "sink", "sigmoid")] == \
        ["softmax", "sink", "sigmoid"]


# -- against transformers' own code ---------------------------------------------------------------
def _qkv(heads: int = 3, t: int = 7, d: int = 16):
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, heads, t, d, generator=g, dtype=torch.float64) * 3 for _ in range(3))
    return q, k, v


@pytest.mark.slow  # importing transformers' Gemma 2 module takes ~20 s on its own
def test_softcap_matches_transformers_gemma2_eager_attention():
    pytest.importorskip("transformers")
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

    q, k, v = _qkv()
    d = q.shape[-1]
    module = SimpleNamespace(num_key_value_groups=1, training=False, head_dim=d)
    c = 2.0  # small, so the cap bites (the logits reach ~10)
    _, theirs = eager_attention_forward(module, q, k, v, None, scaling=d**-0.5, softcap=c)
    rule = RULE_REGISTRY["softcap"]
    p = RuleParams(d, softcap=c)
    # (Gemma 2's softmax runs in float32 whatever the input: float32 agreement)
    mine = torch.softmax(rule.capped(rule.scale(q @ k.transpose(-1, -2), p), p), dim=-1)
    torch.testing.assert_close(mine, theirs, rtol=2e-6, atol=3e-7)
    ours = rule.row_metrics(rule.capped(rule.scale((q @ k.transpose(-1, -2)).numpy(), p), p), p)
    np.testing.assert_allclose(ours.weights, theirs.numpy(), rtol=2e-6, atol=3e-7)
    uncapped = torch.softmax(q @ k.transpose(-1, -2) * d**-0.5, dim=-1)
    assert (uncapped - theirs).abs().max() > 0.1  # the cap bites here


def test_sink_matches_transformers_gpt_oss_eager_attention():
    pytest.importorskip("transformers")
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    q, k, v = _qkv()
    d = q.shape[-1]
    sinks = torch.tensor([0.0, 2.0, -3.0], dtype=torch.float64)  # one learned logit per head
    module = SimpleNamespace(num_key_value_groups=1, training=False, sinks=sinks)
    _, theirs = eager_attention_forward(module, q, k, v, None, scaling=d**-0.5)
    rule = RULE_REGISTRY["sink"]
    logits = rule.scale((q @ k.transpose(-1, -2)).numpy(), RuleParams(d))
    per_row_sink = np.broadcast_to(sinks.numpy()[None, :, None, None], logits.shape[:-1] + (1,))
    m = rule.row_metrics(logits, RuleParams(d, sink=per_row_sink))
    np.testing.assert_allclose(m.weights, theirs.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m.key_mass, theirs.numpy().sum(-1), rtol=1e-12)


def test_yarn_matches_transformers_deepseek_v3_mscale():
    pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import yarn_get_mscale  # (DeepSeek-V3's, since 5.25)

    for n, n_ref in ((4096, 4), (40, 8), (8, 8), (3, 8)):
        expect = yarn_get_mscale(n / n_ref, 1.0) ** 2  # DeepSeek-V3: scaling * mscale * mscale
        assert yarn_factor(math.log(n), math.log(n_ref)) == pytest.approx(expect, rel=1e-14)
    for s in (40.0, 4.0, 1.0, 0.5):  # as shipped: the config's factor, not the row's length
        assert yarn_constant(s) == pytest.approx(yarn_get_mscale(s, 1.0) ** 2, rel=1e-14)


# -- Jacobians against autograd, entropies against a direct computation --------------------------
def _autograd_jacobian(weights_of, z: np.ndarray) -> np.ndarray:
    zt = torch.tensor(z, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(weights_of, zt)  # (rows, n, rows, n)
    return torch.stack([jac[i, :, i, :] for i in range(z.shape[0])]).numpy()


@pytest.mark.parametrize("sink", [0.0, 3.0, -2.0])
def test_sink_jacobian_against_autograd(sink):
    z = DOT / 12.0 * 2.0

    def weights_of(x):
        full = torch.cat([x, torch.full((x.shape[0], 1), sink, dtype=x.dtype)], dim=-1)
        return torch.softmax(full, dim=-1)[:, :-1]

    jac = _autograd_jacobian(weights_of, z)
    m = row_metrics(z, sink=sink)
    np.testing.assert_allclose(m.jacobian_fro, np.linalg.norm(jac, axis=(1, 2)), rtol=1e-12)
    np.testing.assert_allclose(m.jacobian_max_abs, np.abs(jac).max(axis=(1, 2)), rtol=1e-12)
    r = inspect_scores(z[0], sink=sink)
    np.testing.assert_allclose(r.jacobian, jac[0], rtol=1e-12, atol=1e-17)


def test_sigmoid_jacobian_against_autograd():
    z = DOT / 12.0 * 3.0
    n = z.shape[1]
    jac = _autograd_jacobian(lambda x: torch.sigmoid(x - math.log(n)), z)
    m = sigmoid_row_metrics(z, -math.log(n))
    np.testing.assert_allclose(m.jacobian_fro, np.linalg.norm(jac, axis=(1, 2)), rtol=1e-12)
    np.testing.assert_allclose(m.jacobian_max_abs, np.abs(jac).max(axis=(1, 2)), rtol=1e-12)
    np.testing.assert_allclose(inspect_scores(z[0], sigmoid=True).jacobian, jac[0], rtol=1e-12,
                               atol=1e-17)


@pytest.mark.parametrize("c", [0.5, 3.0])
def test_softcap_jacobian_is_taken_before_the_cap_and_matches_autograd(c):
    z = DOT / 12.0 * 4.0
    jac = _autograd_jacobian(lambda x: torch.softmax(c * torch.tanh(x / c), dim=-1), z)
    rule = RULE_REGISTRY["softcap"]
    p = RuleParams(D_K, softcap=c)
    m = rule.row_metrics(rule.capped(z, p), p, z)
    np.testing.assert_allclose(m.jacobian_fro, np.linalg.norm(jac, axis=(1, 2)), rtol=1e-12)
    np.testing.assert_allclose(m.jacobian_max_abs, np.abs(jac).max(axis=(1, 2)), rtol=1e-12)
    # with the cap's slope the Jacobian is smaller than the plain softmax Jacobian of the same
    # capped logits: tanh' <= 1 vanishes for capped logits too
    assert np.all(m.jacobian_fro < row_metrics(rule.capped(z, p)).jacobian_fro)
    r = inspect_scores(z[0] * 12.0, 12.0, softcap=c)
    np.testing.assert_allclose(r.jacobian, jac[0], rtol=1e-11, atol=1e-17)


def _direct_entropy(w: np.ndarray) -> np.ndarray:
    q = w / w.sum(axis=-1, keepdims=True)
    return -(q * np.log(q)).sum(axis=-1)


def test_entropies_of_sink_and_sigmoid_are_of_the_normalized_key_weights():
    z = DOT / 12.0 * 2.0
    n = z.shape[1]
    sink = row_metrics(z, sink=1.5)
    np.testing.assert_allclose(sink.entropy, _direct_entropy(sink.weights), rtol=1e-12)
    # the sink takes mass, not shape: the normalized keys are the plain softmax's
    np.testing.assert_allclose(sink.entropy, row_metrics(z).entropy, rtol=1e-12)
    sig = sigmoid_row_metrics(z, -math.log(n))
    np.testing.assert_allclose(sig.entropy, _direct_entropy(sig.weights), rtol=1e-12)
    np.testing.assert_allclose(sig.key_mass, sig.weights.sum(axis=-1), rtol=1e-14)
    assert np.all(sig.sink_weight == 0)


def test_sink_metrics_stay_exact_where_a_key_or_the_sink_takes_nearly_everything():
    # a key far above the sink and the rest: 1 - p_max ~ 1e-174; the sink far above all keys
    for scores, sink in (([400.0, 0.0, -3.0], 0.0), ([0.0, -1.0, -2.0], 900.0)):
        m = row_metrics(np.array(scores), sink=sink)
        with mpmath.workdps(450):
            s = [mpmath.mpf(x) for x in [*scores, sink]]
            top = max(s)
            e = [mpmath.exp(x - top) for x in s]
            p = [x / mpmath.fsum(e) for x in e][:-1]
            fro = mpmath.sqrt(mpmath.fsum(((p[i] if i == j else 0) - p[i] * p[j]) ** 2
                                          for i in range(3) for j in range(3)))
            expect = float(mpmath.log10(fro))
        assert np.isfinite(m.log10_jacobian_fro) and m.log10_jacobian_fro == pytest.approx(expect, rel=1e-12)


def test_extreme_inputs_stay_finite():
    big = np.array([[1e6, 0.0, -1e6], [0.0, 0.0, 0.0]])
    for m in (row_metrics(big, sink=1e6), row_metrics(big, sink=-1e6),
              sigmoid_row_metrics(big, -math.log(3)),
              row_metrics(2.0 * np.tanh(big / 2.0), log_slope=log_sech2(big / 2.0))):
        for name in ("weights", "top_weight", "entropy", "log10_jacobian_fro", "jacobian_max_abs",
                     "key_mass", "sink_weight"):
            assert np.all(np.isfinite(getattr(m, name))), name


# -- the simulation: every rule on the same draws -------------------------------------------------
def test_simulation_runs_the_new_rules_on_paired_draws():
    cfg = SimulationConfig(d_k=256, n_keys=16, trials=600, correlation=0.6, n_ref=4,
                           scalings=("sqrt", "softcap", "sink", "sigmoid", "yarn"), softcap=3.0,
                           sink=1.0, seed=3)
    snap = run_simulation(cfg)
    r = snap.rules
    # sink and sigmoid see sqrt's logits exactly (the same draws)
    assert r["sink"].logit_var.mean == r["sqrt"].logit_var.mean
    assert r["sigmoid"].logit_var.mean == r["sqrt"].logit_var.mean
    # the sink takes mass and leaves the shape: entropy of the normalized keys equals sqrt's
    assert r["sink"].entropy.mean == pytest.approx(r["sqrt"].entropy.mean, rel=1e-12)
    assert r["sink"].key_mass.mean + r["sink"].sink_weight.mean == pytest.approx(1.0, abs=1e-12)
    assert 0 < r["sink"].sink_weight.mean < 1 and r["sqrt"].sink_weight.mean == 0
    assert r["sqrt"].key_mass.mean == 1 and r["sigmoid"].key_mass.mean != 1
    # the cap bounds the logits (|logit| <= 3) and un-saturates the target key
    assert r["softcap"].logit_std.mean < r["sqrt"].logit_std.mean
    assert r["softcap"].saturated_frac.mean < r["sqrt"].saturated_frac.mean
    # yarn (default s = 4) at any n: sharper than sqrt by (0.1 ln 4 + 1)^2
    factor = (0.1 * math.log(4) + 1) ** 2
    assert r["yarn"].logit_var.mean == pytest.approx(r["sqrt"].logit_var.mean * factor**2, rel=1e-12)
    row = next(x for x in snap.summary_rows() if x["scaling"] == "sink")
    assert row["sink_weight_mean"] == r["sink"].sink_weight.mean and "key_mass_se" in row


def test_softcap_overlay_has_the_capped_moments():
    cfg = SimulationConfig(d_k=64, n_keys=8, trials=4000, scalings=("softcap",), softcap=1.0,
                           seed=1)
    r = run_simulation(cfg).rules["softcap"]
    theory = r.logit_theory
    assert not theory.exact_moments
    # Var(tanh(Z)) for Z ~ N(0, 1) (0.3943) within the Monte-Carlo error
    assert abs(r.logit_var.mean - theory.var) < 4.5 * r.logit_var.se
    assert theory.var == pytest.approx(0.3943, abs=5e-4)
