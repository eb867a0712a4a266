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
    assert got == pytest.approx([1e-6, KL_FLOOR, r, 1e-10], rel=1e-12, abs=0)
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
    # u = s z / c (s 1); at u = 1e-8 tanh u - u sech^2 u keeps no correct digit (8e-23 for 3e-23)
    z = np.array([[[1e-9, 1e-8, 1e-6, 0.5e-3, 0.9e-3, 1.1e-3, 0.3, -2.0, 40.0]]]) * 50.0
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
    assert dc[small] == pytest.approx(50.0 * 2.0 / 3.0 * u[small] ** 3, rel=1e-6, abs=0)


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


# -- a cap near the logits' size: s and c correlated, Fisher entries below 1 ----------------------

def test_both_bands_profile_the_other_parameter_out_where_s_and_c_are_correlated() -> None:
    """Cap 1, logits to ~2 (s 0.02): most logits sit in tanh's bend, where raising s and
    lowering c move them alike (correlation^2 ~ 0.35), and the Fisher entries are below 1. The
    band on log c (s re-fitted by scipy) and on log s (c re-fitted) hold at 0.95 and fail at
    1.05, on both sides: the curvature without the other parameter profiled out (or profiled
    with the wrong sign, or not below a Fisher entry of 1) misses by ~35 %."""
    z, p, vis = _head(seed=0, s0=0.02, c0=1.0, noise=1e-3)
    hf, cap = fit_capped(z, p, vis, None, 8, None)
    s, c = float(hf.scale[0]), float(cap.cap[0])
    assert s == pytest.approx(0.02, rel=0.05) and c == pytest.approx(1.0, rel=0.05)
    best = _capped_kl(p[0], z[0], vis, s, c)
    assert float(hf.misfit[0]) == pytest.approx(best, rel=1e-6)
    assert _budget(best, 8, s * np.abs(np.where(vis, z[0], 0)).max()) == best
    tol_c, tol_s = float(cap.tol_log[0]), float(hf.tol_log[0])
    for sign in (-1, 1):
        assert _profile_c(p[0], z[0], vis, c * math.exp(sign * 0.95 * tol_c), s) - best < best
        assert _profile_c(p[0], z[0], vis, c * math.exp(sign * 1.05 * tol_c), s) - best > best
        assert _profile_s(p[0], z[0], vis, s * math.exp(sign * 0.95 * tol_s), c) - best < best
        assert _profile_s(p[0], z[0], vis, s * math.exp(sign * 1.05 * tol_s), c) - best > best


# -- defaults, shapes, dtypes -----------------------------------------------------------------------

def test_the_defaults_are_d_k_1_no_bias_no_declared_cap_and_every_field_is_per_head() -> None:
    """d_k sets the logits' rounding term of the budget (exact data: the band is that term,
    ~sqrt(d_k)): the defaults give d_k 1's bands, not d_k 2's. Every field is one value per
    head (a one-head fit too), the verdicts bool."""
    z, p, vis = _head(seed=2)
    hf, cap = fit_capped(z, p, vis)
    one_hf, one = fit_capped(z, p, vis, None, 1, None)
    _two_hf, two = fit_capped(z, p, vis, None, 2, None)
    assert float(cap.tol_log[0]) == float(one.tol_log[0])
    assert float(hf.tol_log[0]) == float(one_hf.tol_log[0])
    assert float(two.tol_log[0]) == pytest.approx(math.sqrt(2) * float(one.tol_log[0]), rel=1e-3)
    assert cap.declared is None
    for name in ("cap", "tol_log", "identifiable", "reach", "declared_consistent"):
        assert getattr(cap, name).shape == (1,), name
    assert cap.identifiable.dtype == bool and cap.declared_consistent.dtype == bool
    assert cap.declared_consistent.tolist() == [True]  # nothing declared: nothing to contradict
    for name in ("scale", "misfit", "curvature", "tol_log", "identifiable"):
        assert getattr(hf, name).shape == (1,), name


# -- the iterations: clipped steps, accepted only when the KL falls -------------------------------

def _recording(monkeypatch) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every (log s, log c, KL) the fit's Levenberg-Marquardt loop evaluates, in order (the
    first: the start)."""
    import engine.probe.softcap_fit as sf

    calls: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    real = sf._fisher

    def fisher(log_s, log_c, *rest):
        out = real(log_s, log_c, *rest)
        calls.append((np.array(log_s, float), np.array(log_c, float), np.array(out[0])))
        return out

    real_profile = sf.profile_kl

    def profile(*args, **kw):  # the declared cap's profile KL comes after the loop
        n = len(calls)
        try:
            return real_profile(*args, **kw)
        finally:
            del calls[n:]

    monkeypatch.setattr(sf, "_fisher", fisher)
    monkeypatch.setattr(sf, "profile_kl", profile)
    return calls


def _steps(calls) -> list[tuple[float, float]]:
    """Each candidate's step from the point held then (one head): the last one with a lower
    KL than every point before it, as Levenberg-Marquardt keeps."""
    held, out = calls[0], []
    for cand in calls[1:]:
        out.append((float(cand[0][0] - held[0][0]), float(cand[1][0] - held[1][0])))
        if cand[2][0] < held[2][0]:
            held = cand
    return out


def test_the_fits_steps_are_clipped_to_e_in_s_and_e_squared_in_c(monkeypatch) -> None:
    """The iteration starts at the plain fit's s and the declared cap (else twice the plain
    fit's reach). From a declared cap 1000x too small (0.05 for 50) the first steps hit the clips: +1 in
    log s and +2 in log c, then -1 in log s; a cap of 5 read from a start at twice the reach
    steps -2 in log c. No step is larger, and the fit still ends at s 0.8, c 50 or 5."""
    calls = _recording(monkeypatch)
    seen: set[float] = set()
    for c0, declared in ((50.0, 0.05), (5.0, None), (3.0, None)):
        calls.clear()
        z, p, vis = _head(seed=2, c0=c0)
        hf, cap = fit_capped(z, p, vis, None, 8, declared)
        assert float(hf.scale[0]) == pytest.approx(0.8, rel=1e-7)
        assert float(cap.cap[0]) == pytest.approx(c0, rel=1e-7)
        steps = _steps(calls)
        assert max(abs(s) for s, _c in steps) <= 1.0 + 1e-12
        assert max(abs(c) for _s, c in steps) <= 2.0 + 1e-12
        seen |= {round(s, 9) for s, _c in steps} | {round(2 * c, 9) / 2 for _s, c in steps}
        # the start: the plain fit's s, the declared cap or twice the plain fit's reach
        plain = float(fit_scale(z, p, vis, d_k=8).scale[0])
        c_start = declared or 2 * plain * np.abs(np.where(vis, z[0], 0)).max()
        assert float(calls[0][0][0]) == pytest.approx(math.log(plain), abs=1e-12)
        assert float(calls[0][1][0]) == pytest.approx(math.log(c_start), abs=1e-12)
        if declared is not None:
            assert steps[0] == pytest.approx((1.0, 2.0), abs=1e-12)
            assert steps[1] == pytest.approx((-1.0, 2.0), abs=1e-12)
    assert {1.0, -1.0, 2.0, -2.0} <= seen


def test_profile_kl_steps_at_most_a_factor_e_and_stops_after_12_steps(monkeypatch) -> None:
    """Newton on log s from e^-20 below the best s: every step is the clip's +1 and the search
    stops after its 12 steps (13 evaluations); from e^4 above an uncapped head's s, -1 each
    until s itself (then no step lowers the KL by more than rounding)."""
    from engine.probe.softcap_fit import _prepare

    calls = _recording(monkeypatch)
    z, p, vis = _head(seed=2)
    zv, pp, v, b, plogp = _prepare(z, p, vis, None)
    profile_kl(np.array([math.log(0.8) - 20]), np.array([math.log(50.0)]), zv, pp, v, b, plogp)
    assert [float(c[0][0]) - math.log(0.8) for c in calls] == pytest.approx(
        [-20.0 + k for k in range(13)], abs=1e-9)
    calls.clear()
    z, p, vis = _head(seed=3, s0=0.08, c0=1e9)
    zv, pp, v, b, plogp = _prepare(z, p, vis, None)
    got = profile_kl(np.array([math.log(0.08) + 4]), np.array([math.log(1e9)]), zv, pp, v, b,
                     plogp)
    assert [float(c[0][0]) - math.log(0.08) for c in calls][:5] == pytest.approx(
        [4.0, 3.0, 2.0, 1.0, 0.0], abs=1e-6)
    assert float(got[0]) == pytest.approx(_kl(p[0], 0.08 * z[0], vis), abs=1e-15)


def test_profile_kl_from_a_far_start_reaches_the_least_kl_within_its_12_steps() -> None:
    """From e^1.5 above the best s (the first steps not clipped: Newton's own, each needing the
    curvature where it stands) and e^5 below, 12 steps reach scipy's minimum."""
    from engine.probe.softcap_fit import _prepare

    z, p, vis = _head(seed=2)
    zv, pp, v, b, plogp = _prepare(z, p, vis, None)
    want = _profile_c(p[0], z[0], vis, 50.0, 0.8)
    for d in (1.5, -5.0):
        got = profile_kl(np.array([math.log(0.8) + d]), np.array([math.log(50.0)]), zv, pp, v,
                         b, plogp)
        assert float(got[0]) == pytest.approx(want, abs=1e-12), d


# -- several heads, each its own; rows of any level and mass ---------------------------------------

def test_each_head_keeps_its_own_reach_probes_and_rows_of_any_level_or_mass() -> None:
    """Head 0: cap 50 from q.k up to ~100; head 1: the same attention from q.k / 100 (s 80):
    each head's reach is its s x its own largest visible |q.k| (below 1 for head 1's q.k: no
    masked key counts), its residuals its own. Adding 1000 to one row's logits (a bias), or
    or halving every weight changes no figure."""
    z0, p0, vis = _head(seed=2)
    z = np.concatenate([z0, z0 / 100.0])
    p = np.concatenate([p0, p0])
    hf, cap = fit_capped(z, p, vis, None, 8, None)
    zmax = np.abs(np.where(vis, z0[0], 0.0)).max()
    assert hf.scale == pytest.approx([0.8, 80.0], rel=1e-7)
    assert cap.cap == pytest.approx([50.0, 50.0], rel=1e-7)
    assert cap.reach == pytest.approx([0.8 * zmax, 0.8 * zmax], rel=1e-7)
    for k, probe in enumerate((0.9, 1.1)):
        q = _softmax(50.0 * np.tanh(probe * 0.8 * z0[0] / 50.0), vis)
        assert hf.residual_probe[:, k] == pytest.approx([np.abs(p0[0] - q).max()] * 2, rel=1e-6)
    assert hf.weight_sum == pytest.approx([1.0, 1.0], abs=1e-12)
    assert hf.tol_log[0] == pytest.approx(hf.tol_log[1], rel=1e-3)
    # a row of logits 1000 higher: the same P, the same fit
    bias = np.zeros_like(z0)
    bias[0, 5] = 1000.0
    shifted, shifted_cap = fit_capped(z0, p0, vis, bias, 8, None)
    assert float(shifted.scale[0]) == pytest.approx(0.8, rel=1e-7)
    assert float(shifted_cap.cap[0]) == pytest.approx(50.0, rel=1e-7)
    # weights that sum to 1/2 are normalized
    half, half_cap = fit_capped(z0, 0.5 * p0, vis, None, 8, None)
    assert float(half.scale[0]) == pytest.approx(0.8, rel=1e-7)
    assert float(half_cap.cap[0]) == pytest.approx(50.0, rel=1e-7)


def test_a_cap_above_1e4_over_the_reach_is_still_fitted() -> None:
    """Cap 400 from logits that reach ~600 (s 6.4): c x reach is 2.4e5, far above 1e4; the
    cap's search limit is 1e4 x the reach, so 400 is found."""
    z, p, vis = _head(seed=2, s0=6.4, c0=400.0)
    hf, cap = fit_capped(z, p, vis, None, 8, None)
    assert float(hf.scale[0]) == pytest.approx(6.4, rel=1e-7)
    assert float(cap.cap[0]) == pytest.approx(400.0, rel=1e-7)


def test_an_additive_term_on_a_head_that_never_reaches_its_cap() -> None:
    """Logits 0.08 q.k + b (cap 1e9, never reached): the head's scale is the plain fit's, which
    must be given the additive term too: 0.08 exactly; without b it is not."""
    z, _p, vis = _head(seed=3)
    b = np.random.default_rng(7).normal(0, 2.0, z.shape)
    p = _softmax(0.08 * z[0] + b[0], vis)[None]
    hf, cap = fit_capped(z, p, vis, b, 8, None)
    assert not cap.identifiable[0]
    assert float(hf.scale[0]) == pytest.approx(0.08, rel=1e-8)
    assert float(hf.misfit[0]) < 1e-12


def test_float32_inputs_are_fitted_in_float64_without_warnings() -> None:
    """float32 q.k, weights and bias give the fit of their float64 values to 1e-12 (the fit
    works in float64), and the zero weights of masked keys raise no log(0) warning; the
    budget of a float32 reach is a float64 figure."""
    import warnings

    z, _p, vis = _head(seed=5)
    b = np.random.default_rng(5).normal(0, 2.0, z.shape)
    z32, b32 = z.astype(np.float32), b.astype(np.float32)
    p32 = _softmax(50.0 * np.tanh(0.8 * z32[0].astype(float) / 50.0) + b32[0], vis)[None].astype(
        np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hf, cap = fit_capped(z32, p32, vis, b32, 8, None)
    h64, c64 = fit_capped(z32.astype(float), p32.astype(float), vis, b32.astype(float), 8, None)
    assert float(hf.scale[0]) == pytest.approx(float(h64.scale[0]), rel=1e-12)
    assert float(cap.cap[0]) == pytest.approx(float(c64.cap[0]), rel=1e-12)
    assert float(hf.misfit[0]) == pytest.approx(float(h64.misfit[0]), rel=1e-9)
    for name in ("tol_log", "curvature", "residual_max_abs"):
        assert float(getattr(hf, name)[0]) == pytest.approx(float(getattr(h64, name)[0]),
                                                            rel=1e-12), name
    for name in ("tol_log", "reach"):
        assert float(getattr(cap, name)[0]) == pytest.approx(float(getattr(c64, name)[0]),
                                                             rel=1e-12), name
    reach = np.array([100.1], np.float32)  # its square needs more than float32's 24 bits
    got = kl_budget(np.array([0.0]), 1, reach)
    assert got.dtype == np.float64
    want = 0.5 * (EPS32 * float(reach[0])) ** 2
    assert float(got[0]) == pytest.approx(want, rel=1e-15, abs=0)


def test_a_head_of_zero_logits_stops_after_one_step_without_warnings(monkeypatch) -> None:
    """q.k = 0 everywhere: the weights are uniform whatever s and c, the Fisher matrix and the
    gradient are 0, so the step is 0 (no division by a zero determinant) and the loop stops at
    once: one candidate, 2 evaluations; the cap is not identifiable and its reach is 0."""
    import warnings

    calls = _recording(monkeypatch)
    z0, _p, vis = _head(seed=2)
    z = np.zeros_like(z0)
    p = _softmax(z[0], vis)[None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _hf, cap = fit_capped(z, p, vis, None, 8, None)
    assert len(calls) == 2
    assert float(calls[1][0][0]) == float(calls[0][0][0])
    assert float(calls[1][1][0]) == float(calls[0][1][0])
    assert not cap.identifiable[0] and np.isinf(cap.cap[0]) and float(cap.reach[0]) == 0.0


def test_each_heads_scale_is_identifiable_on_its_own_probes_and_residuals() -> None:
    """Head 0 capped at 50 (logits to ~80); head 1 the same q.k / 1e8 (logits below 1e-6: 10 %
    off in s moves the KL by less than float32 rounding of P). Head 0's scale is identifiable,
    head 1's not, each by its own probes; each head's residuals are its own, computed here."""
    z0, p0, vis = _head(seed=2)
    z1, p1, _ = _head(seed=1, noise=1e-3)
    tiny = _softmax(0.8 * z0[0] / 1e8, vis)[None]
    hf, cap = fit_capped(np.concatenate([z0, z0 / 1e8]), np.concatenate([p0, tiny]), vis, None,
                         8, None)
    assert hf.identifiable.tolist() == [True, False]
    assert cap.identifiable.tolist() == [True, False]
    hf, cap = fit_capped(np.concatenate([z0, z1]), np.concatenate([p0, p1]), vis, None, 8, None)
    for h, (z, p) in enumerate(((z0, p0), (z1, p1))):
        s, c = float(hf.scale[h]), float(cap.cap[h])
        for k, probe in enumerate((0.9, 1.1)):
            q = _softmax(c * np.tanh(probe * s * z[0] / c), vis)
            assert float(hf.residual_probe[h, k]) == pytest.approx(np.abs(p[0] - q).max(),
                                                                   rel=1e-6)
    assert hf.residual_probe[0, 0] < 0.6 * hf.residual_probe[1, 0]  # the heads differ
