"""The soft-cap fit's bands at their edges, from both sides, with every expected value computed
here: the KL by its definition, profile KLs by scipy's scalar search (not the fit's
Levenberg-Marquardt or Newton), the budget by its formula, derivatives by finite differences.
A band wrong by sqrt(2) or 11x, a min for a max in the cap's identifiability check, the plain
fit's values where the capped fit's belong all fail one of them (docs/testing.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.probe.scale_fit import EPS32, KL_FLOOR, fit_scale
from engine.probe.softcap_fit import _logits, fit_capped, kl_budget, profile_kl


def _softmax(x: np.ndarray, vis: np.ndarray) -> np.ndarray:
    x = np.where(vis, x, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _kl(p: np.ndarray, logits: np.ndarray, vis: np.ndarray) -> float:
    """Mean over the rows that see 2 keys or more of KL(P || softmax(logits)), written out."""
    keep = vis.sum(-1) >= 2
    q = _softmax(logits, vis)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(vis & (p > 0), p * (np.log(p) - np.log(q)), 0.0)
    return float(t.sum(-1)[keep].mean())


def _capped_kl(p, z, vis, s: float, c: float) -> float:
    return _kl(p, c * np.tanh(s * z / c), vis)


def _profile_c(p, z, vis, c: float, s_start: float) -> float:
    """min over s of the KL with the cap held at c (scipy's Brent search on log s)."""
    from scipy.optimize import minimize_scalar

    ls = math.log(s_start)
    r = minimize_scalar(lambda x: _capped_kl(p, z, vis, math.exp(x), c),
                        bracket=(ls - 0.05, ls + 0.05), tol=1e-12)
    return float(r.fun)


def _best_s(p, z, vis, c: float) -> float:
    """The s of that least KL."""
    from scipy.optimize import minimize_scalar

    r = minimize_scalar(lambda x: _capped_kl(p, z, vis, math.exp(x), c),
                        bracket=(math.log(0.75), math.log(0.85)), tol=1e-12)
    return math.exp(float(r.x))


def _profile_s(p, z, vis, s: float, c_start: float) -> float:
    """min over c of the KL with the scale held at s."""
    from scipy.optimize import minimize_scalar

    lc = math.log(c_start)
    r = minimize_scalar(lambda x: _capped_kl(p, z, vis, s, math.exp(x)),
                        bracket=(lc - 0.05, lc + 0.05), tol=1e-12)
    return float(r.fun)


def _head(seed: int = 0, s0: float = 0.8, c0: float = 50.0, n: int = 24, d_k: int = 8,
          noise: float = 0.0):
    """One causal head of exact (float64) attention c0 tanh(s0 q.k / c0) (+ noise on the
    logits): with q, k ~ N(0, 9) its logits reach ~80 before the cap, well into its bend."""
    rng = np.random.default_rng(seed)
    q = rng.normal(0, 3.0, (n, d_k))
    k = rng.normal(0, 3.0, (n, d_k))
    z = q @ k.T
    vis = np.tril(np.ones((n, n), dtype=bool))
    logits = c0 * np.tanh(s0 * z / c0) + noise * rng.normal(0, 1, (n, n))
    return z[None], _softmax(logits, vis)[None], vis


def _budget(misfit: float, d_k: int, logit_max: float) -> float:
    return max(misfit, EPS32**2 / 2, 0.5 * (math.sqrt(d_k) * EPS32 * logit_max) ** 2)


# -- the budget ---------------------------------------------------------------------------------------

def test_the_budget_is_the_largest_of_misfit_kl_floor_and_logit_rounding() -> None:
    r = 0.5 * (8 * EPS32 * 100.0) ** 2  # d_k 64, logits to 100: 4.5e-9
    got = kl_budget(np.array([1e-6, 1e-20, 1e-10, 1e-10]), 64, np.array([100.0, 1e-9, 100.0, 1.0]))
    assert got == pytest.approx([1e-6, KL_FLOOR, r, 1e-10], rel=1e-12)
    assert kl_budget(np.array([0.0]), 1, np.array([2.0]))[0] == pytest.approx(2 * EPS32**2)


# -- the cap's band: the fitted cap, a declared one --------------------------------------------------

def test_the_cap_band_is_where_the_profile_kl_rises_by_the_budget_within_5_percent() -> None:
    """A misfit of ~5e-8 sets the budget: at 0.95 of the band on log c the profile KL (s re-fitted
    here) is 0.90 budgets above the best, at 1.05 it is 1.10. A declared cap there is consistent,
    then not. A band shrunk by sqrt(2) or made 11x wider fails one side."""
    z, p, vis = _head(noise=1e-3)
    hf, cap = fit_capped(z, p, vis, None, 8, None)
    s, c, tol = float(hf.scale[0]), float(cap.cap[0]), float(cap.tol_log[0])
    best = _capped_kl(p[0], z[0], vis, s, c)
    assert float(hf.misfit[0]) == pytest.approx(best, rel=1e-6)
    assert _profile_c(p[0], z[0], vis, c, s) == pytest.approx(best, rel=1e-6)
    budget = _budget(best, 8, s * np.abs(np.where(vis, z[0], 0)).max())
    assert budget == best  # the misfit sets it
    for sign in (-1, 1):
        inside, outside = c * math.exp(sign * 0.95 * tol), c * math.exp(sign * 1.05 * tol)
        assert _profile_c(p[0], z[0], vis, inside, s) - best < budget
        assert _profile_c(p[0], z[0], vis, outside, s) - best > budget
        assert fit_capped(z, p, vis, None, 8, inside)[1].declared_consistent[0]
        assert not fit_capped(z, p, vis, None, 8, outside)[1].declared_consistent[0]


def test_the_scale_band_of_a_capped_head_is_where_the_profile_kl_rises_by_the_budget() -> None:
    """The band on log s, the cap re-fitted (here, by scipy): 0.95 inside, 1.05 outside; its
    residuals are those of c tanh(s z / c) at s and at 0.9 s and 1.1 s, c kept."""
    z, p, vis = _head(seed=1, noise=1e-3)
    hf, cap = fit_capped(z, p, vis, None, 8, None)
    s, c, tol = float(hf.scale[0]), float(cap.cap[0]), float(hf.tol_log[0])
    best = float(hf.misfit[0])
    assert best == pytest.approx(_capped_kl(p[0], z[0], vis, s, c), rel=1e-6)
    assert hf.identifiable[0]
    for sign in (-1, 1):
        assert _profile_s(p[0], z[0], vis, s * math.exp(sign * 0.95 * tol), c) - best < best
        assert _profile_s(p[0], z[0], vis, s * math.exp(sign * 1.05 * tol), c) - best > best
    q = _softmax(c * np.tanh(s * z[0] / c), vis)
    assert float(hf.residual_max_abs[0]) == pytest.approx(np.abs(p[0] - q).max(), rel=1e-6)
    for i, k in enumerate((0.9, 1.1)):
        qk = _softmax(c * np.tanh(k * s * z[0] / c), vis)
        assert float(hf.residual_probe[0, i]) == pytest.approx(np.abs(p[0] - qk).max(), rel=1e-6)
        worse = _capped_kl(p[0], z[0], vis, k * s, c) - best
        assert float(hf.worse_probe[0, i]) == pytest.approx(worse, rel=1e-5)
    assert float(hf.curvature[0]) > 0


def test_the_true_cap_and_scale_are_recovered_from_exact_attention() -> None:
    z, p, vis = _head(seed=2)
    hf, cap = fit_capped(z, p, vis, None, 8, 50.0)
    assert float(hf.scale[0]) == pytest.approx(0.8, rel=1e-8)
    assert float(cap.cap[0]) == pytest.approx(50.0, rel=1e-8)
    assert cap.declared == 50.0 and cap.declared_consistent[0] and cap.identifiable[0]
    assert float(cap.reach[0]) == pytest.approx(0.8 * np.abs(np.where(vis, z[0], 0)).max(),
                                                rel=1e-8)
    assert hf.rows == 23 and hf.weight_sum_tol == 24 * EPS32


# -- identifiable: both probes of the cap ----------------------------------------------------------------

def test_a_cap_and_a_scale_are_identifiable_only_when_both_probes_fit_worse_than_the_budget(
        ) -> None:
    """Probes at 0.9 and 1.1 of the cap (s kept) and of the scale (c kept): the KL at 0.9 c
    exceeds the best by ~1.6 times what it does at 1.1 c, at 0.9 s by ~1.4 times what it does at
    1.1 s, and the scale's rises are below the cap's. The budget (the misfit, placed by the noise
    on the logits) below both of a pair: identifiable; between them: not (a max for the min
    would say yes). The best fit and the probes' KLs are computed here."""

    def probes(noise: float) -> tuple[float, list[float], list[float], object, object]:
        from scipy.optimize import minimize_scalar

        z, p, vis = _head(noise=noise)
        r = minimize_scalar(lambda lc: _profile_c(p[0], z[0], vis, math.exp(lc), 0.8),
                            bracket=(math.log(45.0), math.log(55.0)), tol=1e-10)
        c = math.exp(float(r.x))
        s = _best_s(p[0], z[0], vis, c)
        best = _capped_kl(p[0], z[0], vis, s, c)
        cap_rise = [_capped_kl(p[0], z[0], vis, s, k * c) - best for k in (0.9, 1.1)]
        s_rise = [_capped_kl(p[0], z[0], vis, k * s, c) - best for k in (0.9, 1.1)]
        hf, cap = fit_capped(z, p, vis, None, 8, None)
        return best, cap_rise, s_rise, hf, cap

    _m, (c_lo, c_hi), (s_lo, s_hi), _hf, _cap = probes(0.01)
    assert c_lo > 1.5 * c_hi and s_lo > 1.2 * s_hi and c_hi > 1.5 * s_lo
    cases = ((0.7 * s_hi, True, True, None), (math.sqrt(s_lo * s_hi), True, False, "s"),
             (2 * s_lo, True, False, None), (math.sqrt(c_lo * c_hi), False, False, "cap"))
    for where, cap_ident, s_ident, between in cases:
        noise = 0.01 * math.sqrt(where / _m)
        for _ in range(2):  # the misfit grows as noise^2
            noise *= math.sqrt(where / probes(noise)[0])
        m, cap_rise, s_rise, hf, cap = probes(noise)
        assert m == pytest.approx(where, rel=0.1)
        assert (m < min(cap_rise)) is cap_ident and (m < min(s_rise)) is s_ident
        if between is not None:  # the case a max for the min gets wrong
            assert m < max(cap_rise if between == "cap" else s_rise)
        assert bool(cap.identifiable[0]) is cap_ident, where
        assert math.isfinite(float(cap.cap[0])) is cap_ident
        assert math.isfinite(float(cap.tol_log[0])) is cap_ident
        if cap_ident:  # the capped fit's own scale probes
            assert hf.worse_probe[0] == pytest.approx(s_rise, rel=1e-3)
            assert bool(hf.identifiable[0]) is s_ident, where
            assert math.isfinite(float(hf.tol_log[0])) is s_ident


# -- a cap the logits never reach ----------------------------------------------------------------------

def test_a_cap_never_reached_is_not_fitted_and_the_head_keeps_its_plain_fit() -> None:
    """Head 0 capped at 50 (logits to ~80), head 1 at 1e9 with small logits (to ~8): head 1's
    cap is inf, its reach s max|z|, its ScaleFit the plain fit's of that head alone; head 0's
    the capped one's."""
    z0, p0, vis = _head(seed=3)
    z1, p1, _ = _head(seed=3, s0=0.08, c0=1e9)
    z, p = np.concatenate([z0, z1]), np.concatenate([p0, p1])
    hf, cap = fit_capped(z, p, vis, None, 8, None)
    plain = fit_scale(z1, p1, vis, d_k=8)
    assert cap.identifiable.tolist() == [True, False]
    assert float(cap.cap[0]) == pytest.approx(50.0, rel=1e-7) and np.isinf(cap.cap[1])
    assert np.isinf(cap.tol_log[1]) and math.isfinite(float(cap.tol_log[0]))
    zmax = np.abs(np.where(vis, z1[0], 0)).max()
    assert float(cap.reach[1]) == pytest.approx(0.08 * zmax, rel=1e-6)
    assert float(hf.scale[0]) == pytest.approx(0.8, rel=1e-8)
    for name in ("scale", "misfit", "curvature", "tol_log", "residual_max_abs",
                 "residual_probe", "worse_probe", "identifiable"):
        assert getattr(hf, name)[1] == pytest.approx(getattr(plain, name)[0], rel=1e-9), name
    assert float(hf.residual_max_abs[0]) < 1e-9  # exact data: the capped fit's, not the plain's


def test_a_declared_cap_beyond_the_logits_is_consistent_up_to_where_its_bend_shows() -> None:
    """Uncapped logits reaching r ~ 8: a declared cap c bends them by ~r^3 / c^2; its profile
    KL (s re-fitted here) rises above the plain fit's misfit by the budget at some c*: the
    declared cap is consistent at 1.05 c*, not at c* / 1.05."""
    z, p, vis = _head(seed=3, s0=0.08, c0=1e9)
    hf, cap = fit_capped(z, p, vis, None, 8, None)
    assert not cap.identifiable[0]
    s = float(hf.scale[0])
    m = _kl(p[0], s * z[0], vis)
    budget = _budget(max(m, 0.0), 8, s * np.abs(np.where(vis, z[0], 0)).max())
    lo, hi = math.log(10.0), math.log(1e4)  # bisection on log c: rise(c) falls with c
    for _ in range(40):
        mid = (lo + hi) / 2
        if _profile_c(p[0], z[0], vis, math.exp(mid), s) - m > budget:
            lo = mid
        else:
            hi = mid
    c_star = math.exp((lo + hi) / 2)
    assert 15 < c_star < 5000
    assert fit_capped(z, p, vis, None, 8, 1.05 * c_star)[1].declared_consistent[0]
    assert not fit_capped(z, p, vis, None, 8, c_star / 1.05)[1].declared_consistent[0]


# -- the logits and their derivatives --------------------------------------------------------------

def test_the_capped_logits_and_their_derivatives_match_finite_differences() -> None:
    """c tanh(s z / c) and its derivatives in log s and log c, on both sides of the series'
    switch at |s z / c| = 1e-3 (and near 0, where the series is exact to float64)."""
    z = np.array([[[1e-6, 0.5e-3, 0.9e-3, 1.1e-3, 0.3, -2.0, 40.0]]]) * 50.0  # u = s z / c, s 1
    log_s, log_c = np.array([0.0]), np.array([math.log(50.0)])
    v, ds, dc = _logits(log_s, log_c, z)
    u = z / 50.0
    assert v == pytest.approx(50.0 * np.tanh(u), rel=1e-14)
    h = 1e-6
    fd_s = (_logits(log_s + h, log_c, z)[0] - _logits(log_s - h, log_c, z)[0]) / (2 * h)
    assert ds == pytest.approx(fd_s, rel=1e-6, abs=1e-12)
    exact_dc = 50.0 * (np.tanh(u) - u / np.cosh(u) ** 2)  # c (tanh u - u sech^2 u)
    small = np.abs(u) < 1e-3
    assert dc[~small] == pytest.approx(exact_dc[~small], rel=1e-9)
    assert dc[small] == pytest.approx(50.0 * 2.0 / 3.0 * u[small] ** 3, rel=1e-6)


def test_profile_kl_is_the_least_kl_over_s_at_a_fixed_cap() -> None:
    from engine.probe.softcap_fit import _prepare

    z, p, vis = _head(seed=4)
    zv, pp, v, b, plogp = _prepare(z, p, vis, None)
    for c in (40.0, 50.0, 70.0):
        got = profile_kl(np.array([math.log(0.7)]), np.array([math.log(c)]), zv, pp, v, b, plogp)
        assert float(got[0]) == pytest.approx(_profile_c(p[0], z[0], vis, c, 0.8), rel=1e-6,
                                              abs=1e-15)


def test_an_additive_term_is_added_after_the_cap_and_not_scaled() -> None:
    """P = softmax(50 tanh(0.8 z / 50) + b) with a position bias b: the fit given b finds 0.8
    and 50; without it, neither (the bias is read as part of the scale and cap)."""
    z, _p, vis = _head(seed=5)
    b = np.random.default_rng(5).normal(0, 2.0, z.shape)
    p = _softmax(50.0 * np.tanh(0.8 * z[0] / 50.0) + b[0], vis)[None]
    hf, cap = fit_capped(z, p, vis, b, 8, 50.0)
    assert float(hf.scale[0]) == pytest.approx(0.8, rel=1e-8)
    assert float(cap.cap[0]) == pytest.approx(50.0, rel=1e-8) and cap.declared_consistent[0]
    plain, _cap = fit_capped(z, p, vis, None, 8, 50.0)
    assert abs(float(plain.scale[0]) / 0.8 - 1) > 0.1 and float(plain.misfit[0]) > 0.1
