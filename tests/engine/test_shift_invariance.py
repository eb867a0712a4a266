"""Shift invariance (docs/SCIENCE.md, "Shift invariance"): a key mean moves every score of a row
by the same amount, which the softmax ignores; the within-row spread the simulation reports sees
what the softmax sees, the pooled variance does not. A query mean does not cancel."""

from __future__ import annotations

import numpy as np
import pytest

from engine.config import SimulationConfig
from engine.simulate import row_variance, run_simulation
from engine.softmax import softmax
from engine.theory import row_var_theory

Z = 4.5


def within(est, expected: float) -> bool:
    return abs(est.mean - expected) <= Z * est.se + 1e-12 * max(1.0, abs(expected))


def _run(method: str = "exact", **kw):
    base = dict(d_k=64, n_keys=8, trials=3000, scalings=("none", "sqrt", "dk"), seed=5,
                method=method)
    return run_simulation(SimulationConfig(**{**base, **kw}))


@pytest.mark.parametrize("method", ["exact", "explicit"])
def test_a_key_mean_cancels_in_the_softmax_but_not_in_the_pooled_variance(method: str) -> None:
    plain, shifted = _run(method), _run(method, k_mean=1.0)
    for rule in ("none", "sqrt", "dk"):
        a, b = plain.rules[rule], shifted.rules[rule]
        # the same draws: each row moved by mk * sum(q); what the softmax sees is unchanged
        assert b.top_weight.mean == pytest.approx(a.top_weight.mean, rel=1e-9, abs=1e-12)
        assert b.jacobian_fro.mean == pytest.approx(a.jacobian_fro.mean, rel=1e-6)
        assert b.logit_row_var.mean == pytest.approx(a.logit_row_var.mean, rel=1e-6)
    # ... while the pooled variance doubles: d (sq^2 sk^2 + sq^2 mk^2) = 2 d
    assert within(shifted.raw_var, 2 * 64) and within(plain.raw_var, 64)
    assert within(shifted.raw_row_var, 64) and within(shifted.rules["sqrt"].logit_row_var, 1.0)


def test_a_query_mean_widens_the_rows_and_sharpens_the_softmax() -> None:
    plain, shifted = _run(), _run(q_mean=1.0)
    assert within(shifted.rules["sqrt"].logit_row_var, 2.0)  # d sk^2 (sq^2 + mq^2) / d
    assert shifted.rules["none"].top_weight.mean > plain.rules["none"].top_weight.mean + 0.02


@pytest.mark.parametrize(("kw", "rule"), [
    ({}, "sqrt"), ({"q_mean": 0.5, "k_mean": -2.0, "k_std": 0.5}, "none"),
    ({"q_std": 2.0, "k_mean": 1.0}, "dk"), ({"dist": "uniform", "q_mean": 1.0}, "sqrt"),
    ({"q_mean": 1.0, "k_mean": 1.0}, "qknorm"),
])
def test_the_row_variance_matches_its_formula(kw: dict, rule: str) -> None:
    snap = run_simulation(SimulationConfig(d_k=32, n_keys=6, trials=3000, seed=2,
                                           scalings=(rule,), **kw))
    r = snap.rules[rule]
    assert r.logit_row_var_theory == pytest.approx(row_var_theory(snap.config, rule))
    assert within(r.logit_row_var, r.logit_row_var_theory)


def test_no_formula_where_none_is_exact() -> None:
    cfg = SimulationConfig(d_k=32, correlation=0.5, scalings=("sqrt", "cosine"))
    assert row_var_theory(cfg, "sqrt") is None
    assert row_var_theory(cfg.replace(correlation=0.0), "cosine") is None
    row = run_simulation(cfg.replace(trials=50)).summary_rows()[0]
    assert row["logit_row_var_theory"] == ""  # blank in summary.csv, never NaN


def test_row_variance_is_unbiased_and_softmax_ignores_a_row_shift() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20_000, 5)) * 3.0
    assert row_variance(x).mean() == pytest.approx(9.0, rel=0.02)
    z = rng.normal(size=(4, 7)) * 10
    shift = rng.normal(size=(4, 1)) * 1e3
    np.testing.assert_allclose(softmax(z + shift), softmax(z), rtol=1e-9, atol=1e-300)
