"""The length axis: the simulation against the closed forms, sweeps over n, bounded memory."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from engine.config import N_KEYS_SWEEP, SimulationConfig, SweepConfig
from engine.errors import ConfigError
from engine.sampling import ScoreSampler
from engine.simulate import run_simulation, sweep
from engine.theory import entropy_asymptotic, length_theory, needle_weight, partition_mean

Z = 4.0  #: tolerance in standard errors (several comparisons per test)


def test_partition_function_mean_is_n_exp_half_sigma2():
    """E[sum exp z] = n exp(sigma^2/2): checked on the sampler's own draws (sqrt rule, sigma = 1;
    d_k large so the query's norm does not spread sigma)."""
    n = 512
    cfg = SimulationConfig(d_k=65_536, n_keys=n, trials=4000, method="exact", scalings=("sqrt",))
    dot = ScoreSampler(cfg, "numpy", "cpu", "exact").draw(cfg.trials).dot
    sums = np.exp(dot / math.sqrt(cfg.d_k)).sum(axis=1)
    se = sums.std(ddof=1) / math.sqrt(len(sums))
    assert abs(sums.mean() - partition_mean(n, 1.0)) < Z * se


@pytest.mark.parametrize("rule,temperature,sigma2", [("sqrt", 1.0, 1.0), ("temperature", 128.0, 4.0)])
def test_entropy_approaches_log_n_minus_half_sigma2(rule, temperature, sigma2):
    n = 16_384
    cfg = SimulationConfig(d_k=65_536, n_keys=n, trials=300, method="exact", scalings=(rule,),
                           temperature=temperature)
    th = length_theory(cfg, rule)
    assert th is not None and th.reliable and th.sigma2 == pytest.approx(sigma2)
    e = run_simulation(cfg).rules[rule].entropy
    # the asymptote's finite-n error is O((e^{sigma^2} - 1) / n), far below the SE here
    assert abs(e.mean - entropy_asymptotic(n, sigma2)) < Z * e.se + math.expm1(sigma2) / n


def test_needle_weight_follows_the_asymptotic_formula():
    """A target key with margin ~ rho sqrt(d_k) among n - 1 noise keys (sqrt rule)."""
    cfg = SimulationConfig(d_k=65_536, n_keys=4096, trials=1500, correlation=0.02,
                           method="exact", scalings=("sqrt",))
    th = length_theory(cfg, "sqrt")
    assert th is not None and th.reliable
    assert th.delta_mean == pytest.approx(0.02 * 256)
    snap = run_simulation(cfg)
    w = snap.rules["sqrt"].target_weight
    assert abs(w.mean - th.target_weight) < Z * w.se
    # the fixed-margin formula at the mean margin is the same picture (Jensen aside)
    assert needle_weight(4096, 1.0, th.delta_mean) == pytest.approx(th.target_weight, rel=0.5)
    row = snap.summary_rows()[0]
    assert row["target_weight_mean"] == w.mean and row["target_weight_se"] == w.se


def test_target_weight_columns_only_with_a_target():
    snap = run_simulation(SimulationConfig(trials=50))
    assert "target_weight_mean" not in snap.summary_rows()[0]


def test_attention_fades_with_n_at_fixed_d_k_and_logn_keeps_the_needle():
    """The length story in numbers: sqrt's needle weight falls with n; logn's does not."""
    base = SimulationConfig(d_k=256, n_keys=8, trials=400, correlation=0.3, n_ref=8,
                            scalings=("sqrt", "logn"))
    points = list(sweep(SweepConfig(base, axis="n_keys", n_keys_values=(8, 512, 8192))))
    assert [p.x for p in points] == [8, 512, 8192] and all(p.axis == "n_keys" for p in points)
    sqrt_w = [p.snapshot.rules["sqrt"].target_weight.mean for p in points]
    logn_w = [p.snapshot.rules["logn"].target_weight.mean for p in points]
    assert sqrt_w[0] > sqrt_w[1] > sqrt_w[2]
    assert logn_w[0] == pytest.approx(sqrt_w[0])  # equal at n = n_ref
    assert logn_w[2] > 0.5 > 0.05 > sqrt_w[2]  # measured 0.75 vs 0.015 at n = 8192


def test_length_sweep_config():
    assert N_KEYS_SWEEP[0] == 2 and N_KEYS_SWEEP[-1] == 65_536 and len(N_KEYS_SWEEP) == 16
    s = SweepConfig(axis="n_keys", n_keys_values=(2, 64))
    assert s.values == (2, 64) and s.point(64).n_keys == 64
    for bad, field in [({"axis": "width"}, "axis"), ({"n_keys_values": (1,)}, "n_keys"),
                       ({"n_keys_values": (8, 8)}, "n_keys"), ({"n_keys_values": ()}, "n_keys")]:
        with pytest.raises(ConfigError) as exc:
            SweepConfig(**bad)
        assert exc.value.field == field


@pytest.mark.slow
def test_memory_stays_bounded_at_65536_keys():
    """Explicit vectors at n = 65,536, d_k = 64: all keys of 16 trials would take 512 MiB; the
    chunked draw holds a few blocks of 32 MiB."""
    cfg = SimulationConfig(d_k=64, n_keys=65_536, trials=16, method="explicit", backend="numpy",
                           scalings=("sqrt", "ssmax"))
    tracemalloc.start()
    try:
        snap = run_simulation(cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert snap.trials_done == 16
    assert peak < 160 * 2**20, peak
