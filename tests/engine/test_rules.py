"""One rule registry: the same definition computes NumPy and torch logits; the length rules."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from engine.config import SimulationConfig
from engine.rules import (
    LENGTH_RULES,
    RULE_REGISTRY,
    RULES,
    TRAINING_RULES,
    RawScores,
    RuleParams,
    rule_label,
    yarn_constant,
)


def test_registry_has_one_entry_per_rule_with_label_colour_and_description():
    assert TRAINING_RULES[: len(RULES)] == RULES
    assert LENGTH_RULES <= set(RULES)
    colours = {r.colour.upper() for r in RULE_REGISTRY.values()}
    assert len(colours) == len(RULE_REGISTRY)
    for name, r in RULE_REGISTRY.items():
        assert r.label.startswith(name) and r.description and r.needs in ("dot", "cos", "ln")


@pytest.mark.parametrize("name", TRAINING_RULES)
def test_numpy_and_torch_give_the_same_logits_from_one_definition(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    sim = rng.standard_normal((5, 9))
    log_n = np.log(np.arange(1, 6, dtype=np.float64))[:, None]  # per-row n = 1..5
    p_np = RuleParams(16, 2.5, log_n, math.log(7), 0.3)
    p_t = RuleParams(16, 2.5, torch.from_numpy(log_n), math.log(7), 0.3)
    got_np = RULE_REGISTRY[name].scale(sim, p_np)
    got_t = RULE_REGISTRY[name].scale(torch.from_numpy(sim), p_t).numpy()
    np.testing.assert_allclose(got_np, got_t, rtol=1e-15, atol=0)


def test_length_rules_follow_their_formulas():
    dot = np.array([[2.0, -1.0, 0.5]])
    d, n, n_ref, s = 16, 1000, 10, 0.43
    raw = RawScores(dot=dot)
    p = {"log_n": math.log(n), "log_n_ref": math.log(n_ref), "ssmax_s": s}
    logn = RULE_REGISTRY["logn"].logits(raw, d, 1.0, **p)
    ssmax = RULE_REGISTRY["ssmax"].logits(raw, d, 1.0, **p)
    np.testing.assert_allclose(logn, dot / 4 * 3.0, rtol=1e-14)  # ln 1000 / ln 10 = 3
    np.testing.assert_allclose(ssmax, s * math.log(1000) * dot / 4, rtol=1e-14)
    # logn equals sqrt at the reference length and below it (Qwen clamps the factor at 1: a
    # row of 2 keys under n_ref 10 would otherwise be multiplied by ln 2 / ln 10 = 0.30)
    for short in (n_ref, 2, 1):
        at = {**p, "log_n": math.log(short)}
        assert np.array_equal(RULE_REGISTRY["logn"].logits(raw, d, 1.0, **at),
                              RULE_REGISTRY["sqrt"].logits(raw, d, 1.0, **at)), short


def test_logn_matches_qwens_clamped_table_row_by_row():
    """Qwen's modeling file: logn = [math.log(i, seq_length) if i > seq_length else 1 ...]."""
    n_ref = 8
    ns = np.arange(1, 40)
    expect = np.array([math.log(i, n_ref) if i > n_ref else 1.0 for i in ns])
    dot = np.full((ns.size, 1), 4.0)
    got = RULE_REGISTRY["logn"].scale(dot, RuleParams(16, 1.0, np.log(ns)[:, None], math.log(n_ref)))
    np.testing.assert_allclose(got[:, 0], expect, rtol=1e-14)


def test_simulation_config_gives_the_length_rules_ln_n_keys():
    cfg = SimulationConfig(n_keys=64, n_ref=8, ssmax_s=0.25)
    p = cfg.rule_params()
    assert p["log_n"] == pytest.approx(math.log(64)) and p["log_n_ref"] == pytest.approx(math.log(8))
    assert RULE_REGISTRY["logn"].divisor(16, 1.0, **p) == pytest.approx(4 / 2.0)
    assert RULE_REGISTRY["ssmax"].divisor(16, 1.0, **p) == pytest.approx(4 / (0.25 * math.log(64)))


def test_the_temperature_reaches_the_logits_and_the_divisor():
    """q.k / T for the temperature rule, by hand (T = 2.5, not the default 1): the temperature
    passed to ``logits``, ``pre_logits`` and ``divisor`` is the one the rule divides by."""
    dot = np.array([[5.0, -2.5, 1.0]])
    rule = RULE_REGISTRY["temperature"]
    expect = np.array([[2.0, -1.0, 0.4]])
    np.testing.assert_allclose(rule.logits(RawScores(dot=dot), 16, 2.5), expect, rtol=1e-15)
    np.testing.assert_allclose(rule.pre_logits(RawScores(dot=dot), 16, 2.5), expect, rtol=1e-15)
    assert rule.divisor(16, 2.5) == pytest.approx(2.5, rel=1e-15)
    assert RULE_REGISTRY["dk"].divisor(16, 2.5) == pytest.approx(16.0, rel=1e-15)


def test_a_missing_similarity_and_a_non_linear_rule_are_refused_by_name():
    with pytest.raises(ValueError, match=r"rule cosine needs 'cos' similarities"):
        RULE_REGISTRY["cosine"].pre_logits(RawScores(dot=np.ones((1, 2))), 16, 1.0)
    with pytest.raises(ValueError, match=r"rule softcap is not a constant times q\.k"):
        RULE_REGISTRY["softcap"].divisor(16, 1.0)


def test_rule_label_is_the_legend_text_and_an_unknown_name_is_its_own_label():
    assert rule_label("sqrt") == "sqrt: q·k/√d_k"
    assert rule_label("no_such_rule") == "no_such_rule"


def test_yarn_constant_applies_from_just_above_one():
    """(0.1 ln s + 1)^2 for every s > 1 (s = 1.5 and 2 by hand), 1 for s <= 1."""
    assert yarn_constant(1.5) == pytest.approx(1.0405465108108164 ** 2, rel=1e-14)
    assert yarn_constant(2.0) == pytest.approx(1.0693147180559945 ** 2, rel=1e-14)
    assert yarn_constant(1.0) == 1.0 and yarn_constant(0.5) == 1.0


def _fd_jacobian(weights_of, z: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d weight_i / d z_j of one row by central differences (brute force, no formula)."""
    jac = np.empty((z.size, z.size))
    for j in range(z.size):
        up, down = z.copy(), z.copy()
        up[j] += h
        down[j] -= h
        jac[:, j] = (weights_of(up) - weights_of(down)) / (2 * h)
    return jac


@pytest.mark.parametrize("weights", ["sink", "sigmoid"])
def test_a_cap_under_a_sink_or_sigmoid_enters_the_jacobian(weights):
    """A capped rule's Jacobian is taken before the cap (d weight / d z, tanh' included) for
    every weighting, not only the softmax; far-apart z make tanh'(z / c) range from 1 to 0.2."""
    c, sink, n = 3.0, 0.7, 4
    rule = dataclasses.replace(RULE_REGISTRY["softcap"], weights=weights)
    p = RuleParams(64, softcap=c, sink=sink, log_n=math.log(n))
    z = np.array([4.5, -1.0, 0.3, 2.0])

    def weights_of(x):
        e = np.exp(c * np.tanh(x / c))
        if weights == "sigmoid":
            return e / (e + n)  # sigmoid(l - ln n)
        return e / (math.exp(sink) + e.sum())

    jac = _fd_jacobian(weights_of, z)
    m = rule.row_metrics(rule.capped(z, p)[None], p, z[None])
    assert m.jacobian_fro[0] == pytest.approx(np.linalg.norm(jac), rel=1e-7)
    assert m.jacobian_max_abs[0] == pytest.approx(np.abs(jac).max(), rel=1e-7)
    np.testing.assert_allclose(m.weights[0], weights_of(z), rtol=1e-12)


def test_the_caps_slope_needs_the_cap_and_the_pre_cap_logits():
    """Without z a capped rule reports the Jacobian of its logits as given (no slope to apply),
    and z changes nothing for a rule without a cap: d softmax_i / d l_j = p_i (delta_ij - p_j)."""
    logits = np.array([[2.0, -1.0, 0.5]])
    p = np.exp(logits[0]) / np.exp(logits[0]).sum()
    jac = np.diag(p) - np.outer(p, p)
    params = RuleParams(64, softcap=1.5)
    for name, z in (("softcap", None), ("sqrt", np.array([[40.0, -30.0, 9.0]]))):
        m = RULE_REGISTRY[name].row_metrics(logits, params, z)
        assert m.jacobian_fro[0] == pytest.approx(np.linalg.norm(jac), rel=1e-12)
        assert m.jacobian_max_abs[0] == pytest.approx(np.abs(jac).max(), rel=1e-12)


def test_softcap_keeps_torch_gradients_and_the_slope_is_the_caps_alone():
    """The cap on a torch tensor stays in torch (the training model's gradients flow through it:
    d/dz c tanh(z / c) = 1 - tanh^2(z / c), by hand); a rule without a cap has no slope, and
    the slope's log at a float's extreme is -inf without an overflow warning."""
    import warnings

    import torch

    from engine.rules import log_sech2, softcap

    z = torch.tensor([0.5, -3.0, 40.0], dtype=torch.float64, requires_grad=True)
    out = softcap(z, 5.0)
    assert isinstance(out, torch.Tensor)
    out.sum().backward()
    want = [1.0 - math.tanh(v / 5.0) ** 2 for v in (0.5, -3.0, 40.0)]
    assert z.grad.tolist() == pytest.approx(want, rel=1e-12)

    p = RuleParams(d_k=16, softcap=5.0)
    zs = np.array([0.0, 5.0])
    assert RULE_REGISTRY["sqrt"].log_slope(zs, p) is None
    assert RULE_REGISTRY["softcap"].log_slope(zs, p) == pytest.approx(
        [0.0, math.log(1.0 - math.tanh(1.0) ** 2)], rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert log_sech2(np.array([1e308, -1e308])).tolist() == [-math.inf, -math.inf]
