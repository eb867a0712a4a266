"""The simulation against theory, with tolerances from its own standard errors."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from engine.config import SimulationConfig, SweepConfig
from engine.errors import Cancelled
from engine.rules import RULE_REGISTRY
from engine.sampling import ROW_BUDGET, VECTOR_BUDGET, ScoreSampler, cuda_available, plan_chunks
from engine.simulate import run_simulation, simulate, sweep
from engine.theory import raw_score_moments

Z = 4.5  # |estimate - theory| < Z * SE: fails by chance with probability ~7e-6 per check


def within(est, expected: float, z: float = Z) -> bool:
    return abs(est.mean - expected) <= z * est.se + 1e-12 * max(1.0, abs(expected))


@pytest.mark.parametrize("method", ["exact", "explicit"])
@pytest.mark.parametrize("d_k", [4, 64, 512])
def test_variance_of_raw_and_scaled_scores(method: str, d_k: int) -> None:
    """Reference experiment 1: Var(q.k) = d_k; /sqrt(d_k) -> 1; /d_k -> 1/d_k."""
    cfg = SimulationConfig(d_k=d_k, n_keys=8, trials=2500, scalings=("none", "sqrt", "dk"),
                           method=method, seed=11)
    snap = run_simulation(cfg)
    assert snap.done and snap.trials_done == cfg.trials
    assert within(snap.raw_var, d_k)
    assert within(snap.raw_mean, 0.0)
    assert within(snap.rules["none"].logit_var, d_k)
    assert within(snap.rules["sqrt"].logit_var, 1.0)
    assert within(snap.rules["dk"].logit_var, 1.0 / d_k)
    # one set of draws: the rules are exact rescalings of each other (paired comparison)
    assert snap.rules["sqrt"].logit_var.mean == pytest.approx(snap.raw_var.mean / d_k, rel=1e-10)


@pytest.mark.parametrize("dist", ["gaussian", "uniform", "rademacher"])
def test_general_variance_formula_with_means(dist: str) -> None:
    """Var(q.k) = d [(sq^2+mq^2)(sk^2+mk^2) - mq^2 mk^2], E = d mq mk, for any entry law."""
    cfg = SimulationConfig(d_k=16, n_keys=6, trials=3000, dist=dist, q_mean=0.5, q_std=1.5,
                           k_mean=-1.0, k_std=0.7, method="explicit", seed=3)
    snap = run_simulation(cfg)
    mean, var = raw_score_moments(cfg)
    assert mean == pytest.approx(16 * 0.5 * -1.0)
    assert var == pytest.approx(16 * ((1.5**2 + 0.25) * (0.49 + 1.0) - 0.25 * 1.0))
    assert within(snap.raw_mean, mean)
    assert within(snap.raw_var, var)


@pytest.mark.parametrize(("dist", "method"), [("gaussian", "exact"), ("gaussian", "explicit"),
                                              ("uniform", "explicit"), ("rademacher", "explicit")])
def test_correlated_target_key_grows_like_d_k(dist: str, method: str) -> None:
    rho, d = 0.6, 32
    cfg = SimulationConfig(d_k=d, n_keys=4, trials=3000, dist=dist, correlation=rho,
                           q_mean=0.3, k_mean=0.2, method=method, seed=5, scalings=("none",))
    sampler = ScoreSampler(cfg, "numpy", "cpu", method)
    target = np.concatenate([sampler.draw(1000).dot[:, 0] for _ in range(3)])
    m, v = raw_score_moments(cfg, target=True)
    assert m == pytest.approx(d * (0.3 * 0.2 + rho))
    se_mean = target.std(ddof=1) / np.sqrt(target.size)
    assert abs(target.mean() - m) < Z * se_mean
    se_var = np.sqrt(((target - target.mean()) ** 2).var(ddof=1) / target.size)
    assert abs(target.var(ddof=1) - v) < Z * se_var


def test_reference_saturation_experiment_shape() -> None:
    """Reference experiment 2: raw saturation grows with d_k; scaled stays flat; mild at d_k=4."""
    pts = {p.d_k: p.snapshot for p in sweep(SweepConfig(
        SimulationConfig(n_keys=8, trials=4000, scalings=("none", "sqrt"), seed=0), d_ks=(4, 64, 512)))}
    none = [pts[d].rules["none"] for d in (4, 64, 512)]
    sqrt = [pts[d].rules["sqrt"] for d in (4, 64, 512)]
    tops = [r.top_weight.mean for r in none]
    sats = [r.saturated_frac.mean for r in none]
    jacs = [r.jacobian_fro.mean for r in none]
    assert tops[0] < tops[1] < tops[2] and sats[0] < sats[1] < sats[2]
    assert jacs[0] > jacs[1] > jacs[2]  # gradients vanish as the softmax saturates
    for a, b in pairwise(none):
        assert b.top_weight.mean - a.top_weight.mean > Z * np.hypot(a.top_weight.se, b.top_weight.se)
    # scaled: unit variance at every d_k, and the softmax barely moves (the per-row spread
    # |q|/sqrt(d_k) still fluctuates at small d_k, so flat means "far less than raw", not equal)
    for a, b in pairwise(sqrt):
        assert abs(a.logit_var.mean - b.logit_var.mean) < Z * np.hypot(a.logit_var.se, b.logit_var.se)
    assert abs(sqrt[2].top_weight.mean - sqrt[0].top_weight.mean) < 0.1 * (tops[2] - tops[0])
    assert abs(sqrt[2].jacobian_fro.mean - sqrt[0].jacobian_fro.mean) < 0.1 * (jacs[0] - jacs[2])
    # the gap opens with d_k and is mild at d_k = 4
    gaps = [n.top_weight.mean - s.top_weight.mean for n, s in zip(none, sqrt)]
    assert gaps[0] < gaps[1] < gaps[2] and gaps[0] < 0.5 * gaps[2]
    assert sats[0] < 0.05 and all(s.saturated_frac.mean < 0.01 for s in sqrt)


def test_exact_and_explicit_agree_in_distribution() -> None:
    base = dict(d_k=64, n_keys=4, trials=3000, correlation=0.4, q_mean=0.2, k_mean=-0.1, scalings=("none",))
    a = ScoreSampler(SimulationConfig(**base, method="exact", seed=1), "numpy", "cpu", "exact").draw(3000).dot
    b = ScoreSampler(SimulationConfig(**base, method="explicit", seed=2), "numpy", "cpu", "explicit").draw(3000).dot
    for col in (0, 1):  # target key and an ordinary key
        assert sps.ks_2samp(a[:, col], b[:, col]).pvalue > 1e-4
    # and a test that would notice a wrong spread: exact vs explicit at another d_k differ
    c = ScoreSampler(SimulationConfig(**{**base, "d_k": 128}, method="explicit", seed=3), "numpy", "cpu", "explicit").draw(3000).dot
    assert sps.ks_2samp(a[:, 1], c[:, 1]).pvalue < 1e-4


def test_numpy_and_torch_backends_agree() -> None:
    cfg = dict(d_k=32, n_keys=8, trials=3000, scalings=("none", "sqrt", "cosine", "qknorm"),
               dist="uniform", correlation=0.3, seed=4)
    a = run_simulation(SimulationConfig(**cfg, backend="numpy"))
    b = run_simulation(SimulationConfig(**cfg, backend="torch", device="cpu"))
    assert a.backend == "numpy" and b.backend == "torch"
    for rule in cfg["scalings"]:
        ra, rb = a.rules[rule], b.rules[rule]
        for f in ("logit_var", "top_weight", "entropy_norm", "jacobian_fro"):
            ea, eb = getattr(ra, f), getattr(rb, f)
            assert abs(ea.mean - eb.mean) < Z * np.hypot(ea.se, eb.se), (rule, f)


def test_cosine_and_qknorm_match_their_definitions() -> None:
    """Rules computed from blocks equal the definition on the explicit vectors (torch layer_norm)."""
    import torch

    cfg = SimulationConfig(d_k=24, n_keys=5, trials=7, scalings=("cosine", "qknorm"), q_mean=1.0,
                           k_std=2.0, temperature=0.5, method="explicit", seed=9)
    # redraw the same vectors the sampler draws: same seed, same order of draws
    sampler = ScoreSampler(cfg, "numpy", "cpu", "explicit")
    raw = sampler.draw(7)
    from engine.sampling import _NumpyOps, seed_sequence

    ops = _NumpyOps(seed_sequence(cfg).spawn(2)[1], "float64")
    q = ops.standardized("gaussian", (7, 24)) * 1.0 + 1.0
    k = ops.standardized("gaussian", (7, 5, 24)) * 2.0
    dot = np.einsum("td,tkd->tk", q, k)
    np.testing.assert_allclose(raw.dot, dot, rtol=1e-12)
    cos = dot / (np.linalg.norm(q, axis=-1)[:, None] * np.linalg.norm(k, axis=-1))
    cos_logits = RULE_REGISTRY["cosine"].logits(raw, 24, 0.5)
    np.testing.assert_allclose(cos_logits, cos / 0.5, rtol=1e-12)
    lnq = torch.nn.functional.layer_norm(torch.tensor(q), (24,)).numpy()
    lnk = torch.nn.functional.layer_norm(torch.tensor(k), (24,)).numpy()
    ref = np.einsum("td,tkd->tk", lnq, lnk) / np.sqrt(24)
    np.testing.assert_allclose(RULE_REGISTRY["qknorm"].logits(raw, 24, 0.5), ref, rtol=1e-9)


def test_snapshots_stream_and_refine() -> None:
    cfg = SimulationConfig(d_k=64, n_keys=64, trials=20_000, scalings=("none", "sqrt"))
    snaps = list(simulate(cfg))
    assert len(snaps) >= 3
    assert [s.trials_done for s in snaps] == sorted(s.trials_done for s in snaps)
    assert snaps[-1].done and not any(s.done for s in snaps[:-1])
    edges = snaps[0].rules["sqrt"].logit_hist.edges
    for s in snaps:
        np.testing.assert_array_equal(s.rules["sqrt"].logit_hist.edges, edges)  # stable bins
        assert s.rules["sqrt"].logit_hist.total == s.trials_done * cfg.n_keys
    assert snaps[-1].rules["sqrt"].top_weight.se < snaps[0].rules["sqrt"].top_weight.se


def test_cancel_stops_between_chunks() -> None:
    cfg = SimulationConfig(d_k=8, n_keys=64, trials=200_000)
    seen = []
    flag = {"stop": False}
    with pytest.raises(Cancelled):
        for snap in simulate(cfg, cancelled=lambda: flag["stop"]):
            seen.append(snap.trials_done)
            flag["stop"] = True
    assert len(seen) == 1 and seen[0] < cfg.trials


def test_same_seed_same_numbers_other_seed_other_numbers() -> None:
    cfg = SimulationConfig(d_k=16, trials=500, scalings=("sqrt",), method="explicit")
    a, b = run_simulation(cfg), run_simulation(cfg)
    c = run_simulation(cfg.replace(seed=1))
    assert a.summary_rows() == b.summary_rows()
    assert a.raw_var.mean != c.raw_var.mean
    # a sweep point is the single run at that d_k
    point = next(sweep(SweepConfig(cfg, d_ks=(16,)))).snapshot
    assert point.summary_rows() == a.summary_rows()


def test_memory_plan_is_bounded_for_any_parameters() -> None:
    for d_k, n in [(65_536, 65_536), (2048, 2048), (1, 65_536), (65_536, 2), (4, 8)]:
        for method in ("explicit", "exact"):
            plan = plan_chunks(SimulationConfig(d_k=d_k, n_keys=n, trials=10_000_000,
                                                scalings=("sqrt",), method=method), method)
            rows = plan.max_trials
            assert rows * n <= max(ROW_BUDGET, n)
            if method == "explicit":
                assert rows * plan.key_block * d_k <= max(VECTOR_BUDGET, d_k)


def test_extreme_parameters_give_finite_results() -> None:
    """Scores of size ~1e6 and wider: every output finite, nothing NaN."""
    cfg = SimulationConfig(d_k=4096, n_keys=16, trials=300, q_std=20, k_std=20, q_mean=5,
                           scalings=("none", "sqrt", "dk", "temperature", "cosine", "qknorm"),
                           temperature=1e-6, method="explicit")
    snap = run_simulation(cfg)
    assert snap.raw_std.mean > 1e4
    for row in snap.summary_rows():
        for key, value in row.items():
            if isinstance(value, float):
                assert np.isfinite(value), key
    for arr in snap.histogram_arrays().values():
        assert np.all(np.isfinite(arr))
    assert snap.rules["temperature"].saturated_frac.mean == 1.0


def test_float32_runs_and_agrees() -> None:
    cfg = SimulationConfig(d_k=64, trials=2000, scalings=("sqrt",), dtype="float32", method="explicit")
    snap = run_simulation(cfg)
    assert within(snap.rules["sqrt"].logit_var, 1.0)


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="no CUDA device here")
def test_cuda_path_runs_and_agrees_with_theory() -> None:  # pragma: no cover - needs a GPU
    for method in ("exact", "explicit"):
        cfg = SimulationConfig(d_k=256, n_keys=16, trials=4000, backend="torch", device="cuda",
                               method=method, scalings=("none", "sqrt", "qknorm") if method == "explicit" else ("none", "sqrt"))
        snap = run_simulation(cfg)
        assert snap.device == "cuda"
        assert within(snap.raw_var, 256)
        assert within(snap.rules["sqrt"].logit_var, 1.0)


@settings(max_examples=25)
@given(
    d_k=st.integers(1, 300), n=st.integers(2, 40), dist=st.sampled_from(["gaussian", "uniform", "rademacher"]),
    q_mean=st.floats(-50, 50), k_mean=st.floats(-50, 50), q_std=st.floats(1e-3, 100), k_std=st.floats(1e-3, 100),
    rho=st.floats(-1, 1), temperature=st.floats(1e-6, 1e3),
    rules=st.lists(st.sampled_from(["none", "sqrt", "dk", "temperature", "cosine", "qknorm"]), min_size=1, max_size=6, unique=True),
    backend=st.sampled_from(["numpy", "torch"]),
)
def test_property_any_valid_config_gives_finite_results(d_k, n, dist, q_mean, k_mean, q_std, k_std, rho,
                                                       temperature, rules, backend) -> None:
    cfg = SimulationConfig(d_k=d_k, n_keys=n, trials=40, dist=dist, q_mean=q_mean, k_mean=k_mean,
                           q_std=q_std, k_std=k_std, correlation=rho, temperature=temperature,
                           scalings=tuple(rules), backend=backend, device="cpu" if backend == "torch" else "auto")
    snap = run_simulation(cfg)
    for row in snap.summary_rows():
        for key, value in row.items():
            if isinstance(value, float):
                assert np.isfinite(value), key
        assert 1.0 / n - 1e-9 <= row["top_weight_mean"] <= 1.0 + 1e-12
        assert 0.0 <= row["entropy_norm_mean"] <= 1.0 + 1e-9
        assert 0.0 <= row["jacobian_max_abs_mean"] <= 0.25 + 1e-12
    for name, arr in snap.histogram_arrays().items():
        assert np.all(np.isfinite(arr)), name
    for r in snap.rules.values():
        np.testing.assert_allclose(r.sample_weights.sum(1), 1.0, atol=1e-9)
