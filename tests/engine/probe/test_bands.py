"""Every band the audit decides with is derived, and tested from both sides at the margin its
derivation gives: just inside passes, just outside fails. The KLs, budgets and float32 errors
the tests compare with are computed here, independently of the code under test. These tests
(with the rest of tests/engine/probe) must pass under every CPU kernel: CI runs them with
ATEN_CPU_CAPABILITY=default as well as the machine's own."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from engine.probe.scale_fit import EPS32, KL_FLOOR, STANDARD, fit_scale, misfit_limit, verdict
from engine.probe.softcap_fit import fit_capped


def _softmax(x: np.ndarray, vis: np.ndarray) -> np.ndarray:
    x = np.where(vis, x, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _kl(p: np.ndarray, logits: np.ndarray, vis: np.ndarray) -> float:
    """Mean over rows (those seeing 2 keys or more) of KL(P || softmax(logits)), written out;
    P's rows normalized first (a float32 row sums to 1 only within n eps)."""
    keep = vis.sum(-1) >= 2
    p, logits, vis = p[keep], logits[keep], vis[keep]
    p = np.where(vis, p, 0.0).astype(np.float64)
    p = p / p.sum(-1, keepdims=True)
    q = _softmax(logits, vis)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(vis & (p > 0), p * (np.log(p) - np.log(q)), 0.0)
    return float(t.sum(-1).mean())


# -- the soft-cap -----------------------------------------------------------------------------------

def _capped(seed: int, s0: float = 0.8, c0: float = 50.0, n: int = 24, d_k: int = 8):
    """One head of float32 attention c0 tanh(s0 q.k / c0), computed by torch (this process's
    kernels) from float32 q and k: its logits bend near the cap."""
    import torch

    rng = np.random.default_rng(seed)
    q = rng.normal(0, 3.0, (1, n, d_k)).astype(np.float32)
    k = rng.normal(0, 3.0, (1, n, d_k)).astype(np.float32)
    vis = np.tril(np.ones((n, n), dtype=bool))
    tq, tk = torch.from_numpy(q), torch.from_numpy(k)
    w = (tq @ tk.transpose(-1, -2)) * s0
    w = torch.tanh(w / c0) * c0
    w = w.masked_fill(~torch.from_numpy(vis), float("-inf"))
    p = torch.softmax(w, dim=-1).numpy()
    z = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)
    return z, p, vis, d_k


def _profile(z, p, vis, c: float) -> float:
    """min over s of the KL with the cap at c (a fine scan and a parabola: independent of the
    fit's Newton)."""
    from scipy.optimize import minimize_scalar

    def f(log_s: float) -> float:
        return _kl(p[0], c * np.tanh(math.exp(log_s) * z[0] / c), vis)

    return float(minimize_scalar(f, bracket=(-1.0, 0.0), tol=1e-12).fun)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_declared_cap_reproduces_p_inside_its_band_and_not_beyond(seed: int) -> None:
    """The band on a declared cap: its profile KL (s re-fitted) above the best by no more than
    the budget max(misfit, eps^2/2, (sqrt(d_k) eps max|logit|)^2 / 2). At 0.5 of the band on
    log c the profile KL is a quarter of the budget, at 1.5 it is 2.25 budgets: consistent, then
    not. The budget and profile KLs are recomputed here."""
    z, p, vis, d_k = _capped(seed)
    _hf, cap = fit_capped(z, p, vis, None, d_k, None)
    assert cap.identifiable[0]
    c_hat, tol = float(cap.cap[0]), float(cap.tol_log[0])
    s_hat = float(_hf.scale[0])
    best = _kl(p[0], c_hat * np.tanh(s_hat * z[0] / c_hat), vis)
    rounding = 0.5 * (math.sqrt(d_k) * EPS32 * s_hat * np.abs(np.where(vis, z[0], 0)).max()) ** 2
    budget = max(best, EPS32**2 / 2, rounding)
    for sign in (-1, 1):
        inside, outside = c_hat * math.exp(sign * 0.5 * tol), c_hat * math.exp(sign * 1.5 * tol)
        assert _profile(z, p, vis, inside) - best <= budget
        assert _profile(z, p, vis, outside) - best > budget
        assert fit_capped(z, p, vis, None, d_k, inside)[1].declared_consistent[0]
        assert not fit_capped(z, p, vis, None, d_k, outside)[1].declared_consistent[0]


@pytest.mark.parametrize("kernel", ["torch", "numpy float32", "float64"])
def test_the_true_cap_is_as_declared_whatever_computes_the_tanh(kernel: str) -> None:
    """The same logits capped by three implementations (torch's float32 kernels, as this
    process selected them; numpy's float32 tanh; float64), 40 heads each: the true cap 50
    reproduces P within the band every time (main, whose band was the misfit alone, read heads
    24 and 25 as not capped at 50, as AVX2's tanh did to Gemma 2's intact layer)."""
    for seed in range(40):
        z, p, vis, d_k = _capped(seed)
        if kernel != "torch":
            dt = np.float32 if kernel == "numpy float32" else np.float64
            w = np.tanh(z.astype(dt) * dt(0.8) / dt(50.0)) * dt(50.0)
            p = _softmax(w.astype(np.float64), vis).astype(dt)
        _hf, cap = fit_capped(z, p, vis, None, d_k, 50.0)
        assert cap.declared_consistent.all(), (kernel, seed, cap.cap)
        assert abs(math.log(float(cap.cap[0]) / 50.0)) <= float(cap.tol_log[0]), seed


def test_a_cap_the_logits_pass_is_not_the_declared_one() -> None:
    """The outside side at full size: the same logits uncapped (llama.cpp #8156) are not a
    cap of 50, nor is a cap of 40."""
    z, p, vis, d_k = _capped(0, c0=1e9)
    assert not fit_capped(z, p, vis, None, d_k, 50.0)[1].declared_consistent.any()
    z, p, vis, d_k = _capped(0, c0=40.0)
    assert not fit_capped(z, p, vis, None, d_k, 50.0)[1].declared_consistent.any()


# -- after the softmax: the row sums ---------------------------------------------------------------

def test_float32_softmax_rows_sum_to_one_within_n_eps() -> None:
    """The after-softmax band n eps holds for torch's float32 softmax (these kernels) on rows
    of every length, with large and tiny logits."""
    import torch

    rng = np.random.default_rng(4)
    for n in (2, 7, 64, 513):
        x = torch.from_numpy(rng.normal(0, 30.0, (200, n)).astype(np.float32))
        sums = torch.softmax(x, dim=-1).double().sum(-1).numpy()
        assert np.abs(sums - 1).max() <= n * EPS32


def test_row_sums_read_as_a_softmax_inside_n_eps_and_after_softmax_beyond() -> None:
    d_k, n = 16, 12
    tol = n * EPS32
    for sign in (-1, 1):
        inside = verdict(d_k**-0.5, 1e-3, True, 1 + sign * 0.5 * tol, tol, d_k, 64)
        outside = verdict(d_k**-0.5, 1e-3, True, 1 + sign * 1.5 * tol, tol, d_k, 64)
        assert inside == STANDARD
        assert outside.startswith("scaled after softmax")


# -- the scale band, and the misfit a float32 softmax can leave --------------------------------------

def test_a_scale_matches_its_reference_inside_the_fits_band_and_not_beyond() -> None:
    """compare_declared: a head is as declared when |log(s / reference)| <= its band (plus the
    reference's own tolerance), not beyond."""
    from engine.probe.accounting import Reference
    from engine.probe.audit import SiteFit, compare_declared

    rng = np.random.default_rng(2)
    z = rng.normal(0, 4.0, (2, 16, 16))
    vis = np.ones((16, 16), dtype=bool)
    p = _softmax(0.25 * z, vis).astype(np.float32)
    hf = fit_scale(z, p, vis, d_k=16)
    fit = SiteFit(hf, hf, [STANDARD] * 2, STANDARD, None, None)
    for ref_tol in (0.0, 3e-4):
        for sign in (-1, 1):
            for frac, ok in ((0.5, True), (1.5, False)):
                value = hf.scale * np.exp(sign * frac * (hf.tol_log + ref_tol))
                got, why = compare_declared(fit, Reference(value, True, "x", tol=ref_tol))
                assert got is ok, (ref_tol, sign, frac, why)


def test_the_misfit_limit_covers_float32_rounding_and_not_twice_its_size() -> None:
    """The limit is the KL of logits each off by their worst-case float32 error E. Inside: a
    float32 softmax of float32 q.k (d_k 256, logits to ~60, 300 keys) leaves far less. Outside:
    logits perturbed by uniform noise of +-4E leave more (KL ~ Var/2 = 16 E^2 / 6 > E^2 / 2)."""
    import torch

    rng = np.random.default_rng(7)
    d_k, n = 256, 300
    q = rng.normal(0, 1.0, (1, n, d_k)).astype(np.float32)
    k = rng.normal(0, 1.0, (1, n, d_k)).astype(np.float32)
    s = 4.0 / math.sqrt(d_k)
    vis = np.ones((n, n), dtype=bool)
    w = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) * s
    p = torch.softmax(w, dim=-1).numpy()
    z = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)
    bound = s * np.linalg.norm(q, axis=-1).max() * np.linalg.norm(k, axis=-1).max()
    limit = misfit_limit(d_k, n, bound)
    err = (d_k / 2 + 4) * EPS32 * bound + (n / 2 + 2) * EPS32  # by hand
    assert limit == pytest.approx(0.5 * err**2 + KL_FLOOR, rel=1e-12)
    assert fit_scale(z, p, vis, d_k=d_k).misfit[0] < limit / 100
    noisy = _softmax(s * z + rng.uniform(-4 * err, 4 * err, z.shape), vis)
    assert fit_scale(z, noisy, vis, d_k=d_k).misfit[0] > limit


def test_a_site_whose_misfit_passes_its_limit_is_not_a_softmax_of_scaled_qk() -> None:
    from engine.probe.accounting import Reference
    from engine.probe.audit import SiteFit, compare_declared

    rng = np.random.default_rng(2)
    z = rng.normal(0, 4.0, (1, 16, 16))
    vis = np.ones((16, 16), dtype=bool)
    p = _softmax(0.25 * z + rng.normal(0, 0.01, z.shape), vis)
    hf = fit_scale(z, p, vis, d_k=16)
    ref = Reference(hf.scale.copy(), True, "x")
    m = float(hf.misfit[0])
    for limit, ok in ((m / 0.5, True), (m / 1.5, False)):
        fit = SiteFit(hf, hf, [STANDARD], STANDARD, None, None, misfit_limit=limit)
        assert compare_declared(fit, ref)[0] is ok


# -- identifiable heads ----------------------------------------------------------------------------

def test_a_head_is_identifiable_when_10_percent_off_fits_worse_than_the_budget() -> None:
    """Identifiable iff the KL at 0.9 s and at 1.1 s exceeds the minimum by more than
    max(misfit, eps^2/2). Exact (float64) attention whose logits are scaled so that the KL
    increase at +-10% is half, then twice that floor: not identifiable, then identifiable."""
    rng = np.random.default_rng(9)
    z0 = rng.normal(0, 1.0, (1, 12, 12))
    vis = np.ones((12, 12), dtype=bool)

    def worse(alpha: float) -> float:
        p = _softmax(alpha * z0[0], vis)
        return min(_kl(p, alpha * f * z0[0], vis) for f in (0.9, 1.1))

    alpha = 1e-3  # worse ~ alpha^2: solve worse(alpha) = KL_FLOOR by a few steps
    for _ in range(6):
        alpha *= math.sqrt(KL_FLOOR / worse(alpha))
    for factor, ident in ((math.sqrt(0.5), False), (math.sqrt(2.0), True)):
        a = alpha * factor
        p = _softmax(a * z0[0], vis)[None]
        assert worse(a) / KL_FLOOR == pytest.approx(factor**2, rel=0.05)
        assert bool(fit_scale(a * z0, p, vis).identifiable[0]) is ident


# -- heads of one layer -----------------------------------------------------------------------------

def test_heads_read_as_one_scale_within_twice_their_band_and_mixed_beyond() -> None:
    """Two heads each within its band of one value differ by at most twice the band: 'other'
    scales closer than that are one layer scale, farther apart a mixed layer."""
    from engine.probe.audit import _layer_verdict

    rng = np.random.default_rng(5)
    z = rng.normal(0, 3, (2, 16, 16))
    vis = np.ones((16, 16), dtype=bool)
    d_k = 16
    base = 0.6 / math.sqrt(d_k)
    p = np.stack([_softmax(base * z[i], vis) for i in range(2)]).astype(np.float32)
    hf = fit_scale(z, p, vis, d_k=d_k)
    tol = float(hf.tol_log.max())
    for gap, mixed in ((1.9, False), (2.1, True)):
        scale = np.array([base, base * math.exp(gap * tol)])
        fit = dataclasses.replace(hf, scale=scale, tol_log=np.full(2, tol))
        hv = [verdict(float(x), tol, True, 1.0, 1e-6, d_k, 64) for x in scale]
        lf = dataclasses.replace(fit, scale=scale[:1], tol_log=np.full(1, tol),
                                 identifiable=np.ones(1, bool), weight_sum=np.ones(1))
        lv = _layer_verdict(fit, lf, hv, d_k, 64, 2)
        assert lv.startswith("mixed") is mixed, (gap, lv, hv)


# -- pre-scales and the projections ------------------------------------------------------------------

def test_a_constant_norm_ratio_is_matched_inside_its_spread_band_and_not_beyond() -> None:
    """match_projection: per-token norm ratios constant within RATIO_SPREAD_TOL are one factor
    (a float32 RoPE rotation times YaRN's 1.139 leaves ~1e-7), a spread of 1.5 of it is not."""
    import torch

    from engine.probe.sites import RATIO_SPREAD_TOL, match_projection

    rng = np.random.default_rng(1)
    n, d = 20, 8
    block = rng.normal(0, 1, (n, d))
    wiggle = np.linspace(-1, 1, n)[:, None]
    for frac, matched in ((0.5, True), (1.5, False)):
        x = (0.7 * (1 + frac * RATIO_SPREAD_TOL * wiggle) * block)[None]
        r, _rot = match_projection(x, [block])
        assert (r is not None) is matched, frac
    angle = torch.arange(n)[:, None] * 10000.0 ** (-torch.arange(0, d, 2) / d)
    cos, sin = torch.cat([angle.cos()] * 2, -1) * 1.139, torch.cat([angle.sin()] * 2, -1) * 1.139
    b = torch.from_numpy(block.astype(np.float32))
    rot = torch.cat([-b[:, d // 2:], b[:, :d // 2]], -1)
    x = (b * cos + rot * sin).double().numpy()[None]
    r, rotated = match_projection(x, [block.astype(np.float32)])
    assert r is not None and rotated and r[0] == pytest.approx(1.139, rel=1e-6)


def test_a_measured_pre_scale_is_the_declared_one_inside_pre_tol_and_unknown_beyond() -> None:
    """The measured pre-scale is q's factor times k's, each accepted by match_projection within
    RATIO_SPREAD_TOL: their product is known to twice that, and no better is claimed."""
    from engine.probe.accounting import reference
    from engine.probe.declared import Declaration
    from engine.probe.sites import RATIO_SPREAD_TOL, SiteRecord

    margin = 2 * RATIO_SPREAD_TOL

    def record(r: float) -> SiteRecord:
        z = np.zeros((1, 2, 4), np.float32)
        return SiteRecord(0, z, z, np.zeros(1, int), np.arange(2), np.zeros((1, 2, 2), np.float32),
                          np.ones((2, 2), bool), None, None, None, 1.0, np.array([r]),
                          np.array([1.0]), False, False, None, None, ())

    decl = Declaration(1.0, 0.25, "q x 1/4")
    for sign in (-1, 1):
        assert reference(decl, record(0.25 * math.exp(sign * 0.5 * margin))).known
        assert not reference(decl, record(0.25 * math.exp(sign * 1.5 * margin))).known


def test_two_position_buckets_differ_beyond_their_bands_together_and_not_within() -> None:
    """A law differs when two buckets' scales (the law folded in) are farther apart than their
    two bands: each within its band of one value, they differ by at most the sum."""
    from engine.probe.audit import law_differs
    from engine.probe.position import PositionBucket

    a = PositionBucket(0, 3, 1.0, 1.0, 1.0, 2e-3)
    for frac, differs in ((0.9, False), (1.1, True)):
        b = PositionBucket(4, 7, 1.0, 1.0, math.exp(frac * (2e-3 + 3e-3)), 3e-3)
        assert law_differs((a, b)) is differs
    common = PositionBucket(4, 7, 1.0, 1.0, 1.0, 3e-3)  # both off by one factor: not a law's
    assert not law_differs((dataclasses.replace(a, ratio=2.0), dataclasses.replace(common,
                                                                                 ratio=2.0)))
