"""The scale fit's bands and verdicts at their edges, from both sides, with every expected value
computed here: the KL by its definition, its minimum by scipy's scalar search (not the fit's
golden section and Newton), its curvature by finite differences, the verdict texts by hand.
A band wrong by sqrt(2) or 11x, a min for a max in the identifiability check, a count or a mean
for a max in the row-sum band all fail one of them (docs/testing.md, mutation testing)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.probe.scale_fit import (
    AFTER_SOFTMAX,
    DMODEL,
    EPS32,
    HEAD_DIM,
    KL_FLOOR,
    NOT_AUDITABLE,
    STANDARD,
    TWICE,
    UNSCALED,
    candidates,
    fit_scale,
    is_flagged,
    logit_resolution,
    verdict,
    verdict_kind,
)


def _softmax(x: np.ndarray, vis: np.ndarray | None = None) -> np.ndarray:
    if vis is not None:
        x = np.where(vis, x, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _kl(p: np.ndarray, logits: np.ndarray, vis: np.ndarray | None = None) -> float:
    """Mean over rows of KL(P || softmax(logits)), written out (every row sees >= 2 keys)."""
    q = _softmax(logits, vis)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where((p > 0) & (q > 0), p * (np.log(p) - np.log(q)), 0.0)
    return float(t.sum(-1).mean())


def _best(p: np.ndarray, z: np.ndarray, vis: np.ndarray | None = None) -> tuple[float, float]:
    """(s, KL at s) minimizing the KL over s: scipy's Brent search on log s."""
    from scipy.optimize import minimize_scalar

    r = minimize_scalar(lambda ls: _kl(p, math.exp(ls) * z, vis), bracket=(-3.0, 1.0),
                        tol=1e-12)
    return math.exp(float(r.x)), float(r.fun)


def _curvature(p: np.ndarray, z: np.ndarray, s: float) -> float:
    """d^2 KL / d(log s)^2 at s by a central difference."""
    h = 1e-3
    return (_kl(p, s * math.exp(h) * z) - 2 * _kl(p, s * z) + _kl(p, s * math.exp(-h) * z)) / h**2


# -- the band on log s ------------------------------------------------------------------------------

def _noisy(noise: float, seed: int = 5, s0: float = 0.3, shape=(30, 12)):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.0 / s0, size=(1, *shape))
    p = _softmax(s0 * z + rng.normal(0, noise, size=z.shape))
    return z, p, np.ones(shape, dtype=bool)


def test_the_band_on_log_s_is_where_the_kl_rises_by_the_misfit_within_5_percent() -> None:
    """A misfit of ~1e-7 (the cubic term of the KL in log s is then ~1e-3 of the quadratic):
    at 0.95 of the band the KL is 0.90 misfits above its minimum, at 1.05 it is 1.10. A band
    shrunk by sqrt(2) (1.05 / sqrt(2) of it: 0.55) or widened fails one side."""
    z, p, vis = _noisy(1e-3)
    fit = fit_scale(z, p, vis)
    s_ref, floor = _best(p[0], z[0])
    assert float(fit.scale[0]) == pytest.approx(s_ref, rel=1e-7)
    assert float(fit.misfit[0]) == pytest.approx(floor, rel=1e-5)
    assert 1e-8 < floor < 1e-6  # the misfit sets this band, not rounding (KL_FLOOR 7e-15)
    tol = float(fit.tol_log[0])
    for sign in (-1, 1):
        inside = _kl(p[0], s_ref * math.exp(sign * 0.95 * tol) * z[0]) - floor
        outside = _kl(p[0], s_ref * math.exp(sign * 1.05 * tol) * z[0]) - floor
        assert inside < floor < outside, (sign, inside / floor, outside / floor)


def test_tol_log_is_the_widest_of_the_misfit_kl_floor_and_logit_rounding_bands() -> None:
    """tol_log = max(sqrt(2 max(misfit, eps^2/2) / c), sqrt(d_k) eps max|z| / sqrt(Var_Q z)),
    with c = d^2 KL / d(log s)^2 = s^2 Var_Q z at the minimum; each term made the largest once."""
    vis = np.ones((30, 12), dtype=bool)
    # the misfit (noisy P, d_k 1)
    z, p, _ = _noisy(1e-3)
    fit = fit_scale(z, p, vis)
    s, m = _best(p[0], z[0])
    c = _curvature(p[0], z[0], s)
    assert float(fit.curvature[0]) == pytest.approx(c, rel=1e-4)
    assert float(fit.tol_log[0]) == pytest.approx(math.sqrt(2 * m / c), rel=1e-4)
    # eps^2 / 2: exact P of small logits (largest |logit| 0.04: rounding is 0.04 of it)
    rng = np.random.default_rng(1)
    z = rng.normal(0, 0.01, size=(1, 30, 12))
    p = _softmax(z)
    fit = fit_scale(z, p, vis)
    c = _curvature(p[0], z[0], 1.0)
    assert float(fit.misfit[0]) < KL_FLOOR
    assert float(fit.tol_log[0]) == pytest.approx(math.sqrt(2 * KL_FLOOR / c), rel=1e-3)
    # the logits' rounding: exact P, d_k 64, logits to ~4
    z = rng.normal(0, 1.0, size=(1, 30, 12))
    p = _softmax(z)
    fit = fit_scale(z, p, vis, d_k=64)
    q = _softmax(float(fit.scale[0]) * z[0])
    var_q = float(((q * z[0] ** 2).sum(-1) - (q * z[0]).sum(-1) ** 2).mean())
    rounding = 8 * EPS32 * float(np.abs(z).max()) / math.sqrt(var_q)
    assert float(fit.tol_log[0]) == pytest.approx(rounding, rel=1e-6)
    assert rounding > 3 * math.sqrt(2 * KL_FLOOR / _curvature(p[0], z[0], 1.0))


def test_the_misfit_limit_adds_the_kl_floor() -> None:
    """No logit error at all (bound 0): what is left is the probabilities' (n/2 + 2) eps, 3 eps
    for 2 keys, and the floor eps^2 / 2: 4.5 + 0.5 = 5 eps^2."""
    from engine.probe.scale_fit import misfit_limit

    assert misfit_limit(1, 2, 0.0) == pytest.approx(5 * EPS32**2, rel=1e-12)


def test_logit_resolution_is_sqrt_d_k_eps_and_eps_below_one_term() -> None:
    assert logit_resolution(64) == 8 * EPS32
    assert logit_resolution(2) == pytest.approx(math.sqrt(2) * 2.0**-23, rel=1e-15)
    assert logit_resolution(0) == EPS32
    assert logit_resolution(-5) == EPS32


# -- identifiable: both probes, not either ------------------------------------------------------------

def _skewed(noise: float):
    """Logits with one key far ahead (KL at 0.9 s and 1.1 s differ by ~19 %), P noisy."""
    rng = np.random.default_rng(3)
    z = rng.normal(0, 1, (1, 6, 5))
    z[..., 0] += 2.5
    w = rng.normal(0, 1, (1, 6, 5))
    return z, _softmax(1.5 * z + noise * w), np.ones((6, 5), dtype=bool)


def test_a_head_is_identifiable_only_when_both_probes_fit_worse_than_the_band() -> None:
    """The band (the misfit) put below both probes' KL increases: identifiable; between the
    smaller (1.1 s) and the larger (0.9 s): not (a max for the min would say yes); above both:
    not. The probes' KLs and the misfit are computed here; the noise is scaled to place the
    misfit (it grows as noise^2)."""

    def probes(noise: float) -> tuple[float, float, float]:
        z, p, _ = _skewed(noise)
        s, m = _best(p[0], z[0])
        return m, _kl(p[0], 0.9 * s * z[0]) - m, _kl(p[0], 1.1 * s * z[0]) - m

    m, lo_worse, hi_worse = probes(0.1)
    assert lo_worse > 1.1 * hi_worse  # asymmetric: the two probes disagree
    for where, ident in ((0.8 * hi_worse, True), (math.sqrt(lo_worse * hi_worse), False),
                         (1.25 * lo_worse, False)):
        noise = 0.1
        for _ in range(6):  # the misfit grows as noise^2
            noise *= math.sqrt(where / probes(noise)[0])
        m, lo_worse_n, hi_worse_n = probes(noise)
        assert m == pytest.approx(where, rel=1e-3)
        z, p, vis = _skewed(noise)
        fit = fit_scale(z, p, vis)
        assert fit.worse_probe[0] == pytest.approx([lo_worse_n, hi_worse_n], rel=1e-4)
        assert bool(fit.identifiable[0]) is ident, (where / hi_worse, where / lo_worse)
        assert math.isfinite(float(fit.tol_log[0])) is ident


def test_the_residuals_are_the_largest_probability_error_at_s_and_at_the_probes() -> None:
    z, p, vis = _skewed(0.1)
    fit = fit_scale(z, p, vis)
    s, _m = _best(p[0], z[0])
    assert float(fit.residual_max_abs[0]) == pytest.approx(
        np.abs(p[0] - _softmax(s * z[0])).max(), rel=1e-5)
    for i, k in enumerate((0.9, 1.1)):
        assert float(fit.residual_probe[0, i]) == pytest.approx(
            np.abs(p[0] - _softmax(k * s * z[0])).max(), rel=1e-5)


# -- rows, masks, row sums, additive terms, a start --------------------------------------------------

def test_rows_with_one_key_are_dropped_and_the_row_sum_band_is_the_longest_row() -> None:
    """A causal mask of 7 keys: the first row sees one key (dropped: its softmax is 1 at any s),
    the longest row has 7 (the band 7 eps, not the mean 4 nor the 6 rows counted); the row sums
    are their mean over the counted rows, each row's shape compared alone."""
    rng = np.random.default_rng(4)
    n = 7
    vis = np.tril(np.ones((n, n), dtype=bool))
    z = rng.normal(0, 2.0, (2, n, n))
    p = _softmax(0.7 * z, vis)
    mass = np.linspace(0.9, 1.2, n)  # row i summing to mass[i]
    p = p * mass[None, :, None]
    p[:, 0, 0] = 5.0  # the one-key row: whatever it holds is not counted
    p = np.where(vis, p, 0.3)  # nor what masked keys hold
    fit = fit_scale(z, p, vis)
    assert fit.rows == n - 1
    assert fit.weight_sum_tol == 7 * EPS32
    assert fit.weight_sum == pytest.approx([mass[1:].mean()] * 2, rel=1e-12)
    assert fit.scale == pytest.approx([0.7, 0.7], rel=1e-6)
    assert float(fit.misfit.max()) < 1e-15  # float64 rounding: each row is an exact softmax


def test_a_fit_with_no_row_of_two_keys_is_refused() -> None:
    vis = np.eye(3, dtype=bool)
    with pytest.raises(ValueError, match="no query row sees two or more keys"):
        fit_scale(np.ones((1, 3, 3)), np.ones((1, 3, 3)), vis)


def test_an_additive_term_is_not_scaled_and_a_start_reaches_the_same_minimum() -> None:
    """P = softmax(0.4 z + b): with b the fit finds 0.4 exactly; without it, another s and a
    misfit; from a start of 0.3 (no bracketing search) the same 0.4."""
    rng = np.random.default_rng(8)
    z = rng.normal(0, 2.0, (1, 10, 8))
    b = rng.normal(0, 1.5, (1, 10, 8))
    vis = np.ones((10, 8), dtype=bool)
    p = _softmax(0.4 * z + b)
    assert float(fit_scale(z, p, vis, bias=b).scale[0]) == pytest.approx(0.4, rel=1e-9)
    assert float(fit_scale(z, p, vis, bias=b, start=np.array([0.3])).scale[0]) == \
        pytest.approx(0.4, rel=1e-9)
    plain = fit_scale(z, p, vis)
    s, m = _best(p[0], z[0])
    assert float(plain.scale[0]) == pytest.approx(s, rel=1e-7)
    assert float(plain.misfit[0]) == pytest.approx(m, rel=1e-6) and m > 1e-2


# -- verdicts -----------------------------------------------------------------------------------------

def test_candidates_are_the_known_scales_relative_to_the_reference() -> None:
    """s sqrt(d_k) of each known scale, by hand, d_k 16, d_model 64, 8 heads (width 8)."""
    got = dict(candidates(16, 64, 8, reference=2.0))
    assert got == pytest.approx({STANDARD: 1.0, TWICE: 0.5, UNSCALED: 4.0, DMODEL: 1.0,
                                 HEAD_DIM: 2.0 * math.sqrt(2.0)})
    assert [n for n, _c in candidates(16, 16, 1)] == [STANDARD, TWICE, UNSCALED]
    assert [n for n, _c in candidates(16, 64, 4)] == [STANDARD, TWICE, UNSCALED, DMODEL]
    assert [n for n, _c in candidates(16, 64)] == [STANDARD, TWICE, UNSCALED, DMODEL]


def test_a_scale_near_its_reference_is_as_declared_within_the_band_and_named_beyond() -> None:
    """With a reference of 0.5 x the standard: within 0.95 of the band it is 'as declared'
    (or 'other' without a label), at 1.05 the nearest known scale or 'other'; the standard
    itself is named as such whatever the reference."""
    d_k, tol = 16, 0.01
    ref = 0.5 / math.sqrt(d_k)
    args = (tol, True, 1.0, 1e-6, d_k, 64)
    for sign in (-1, 1):
        inside = ref * math.exp(sign * 0.95 * tol)
        outside = ref * math.exp(sign * 1.05 * tol)
        assert verdict(inside, *args, reference=ref, declared_as="q x 1/2") == \
            "as declared (q x 1/2)"
        assert verdict(inside, *args, reference=ref) == f"other: s * sqrt(d_k) = {0.5 * math.exp(sign * 0.95 * tol):.3g}"
        assert verdict(outside, *args, reference=ref, declared_as="q x 1/2").startswith("other")
        # the standard, declared or not, is the standard
        std = math.exp(sign * 0.95 * tol) / math.sqrt(d_k)
        assert verdict(std, *args, reference=1 / math.sqrt(d_k), declared_as="x") == STANDARD
        assert verdict(std, *args, reference=1.001 / math.sqrt(d_k), declared_as="x") == STANDARD
    # twice relative to the reference: 0.5 / sqrt(16) = 1/8 of the standard
    assert verdict(0.125 / math.sqrt(d_k), *args, reference=ref) == TWICE
    assert verdict(0.125 / math.sqrt(d_k), *args) == "other: s * sqrt(d_k) = 0.125"
    # the head width, not head_dim (d_model / heads = 8 != 16)
    assert verdict(math.sqrt(2.0) / math.sqrt(d_k), tol, True, 1.0, 1e-6, d_k, 64, 8) == HEAD_DIM


def test_the_nearest_known_scale_wins_when_two_are_within_the_band() -> None:
    """d_model = 1.21 d_k: 1/sqrt(d_model) is 1/1.1 of the standard; with a band of 0.2 both are
    within it of 0.93 (gaps 0.073 and 0.023): the nearer, d_model; of 0.97, the standard."""
    args = (0.2, True, 1.0, 1e-6, 100, 121)
    assert verdict(0.93 / 10, *args) == DMODEL
    assert verdict(0.97 / 10, *args) == STANDARD


def test_row_sums_are_judged_before_anything_else_within_their_band() -> None:
    tol = 5 * EPS32
    for sign in (-1, 1):
        assert verdict(0.25, 0.01, False, 1 + sign * 0.95 * tol, tol, 16, 64) == NOT_AUDITABLE
        v = verdict(0.25, 0.01, False, 1 + sign * 1.05 * tol, tol, 16, 64)
        assert v == f"{AFTER_SOFTMAX} (weights sum to {1 + sign * 1.05 * tol:.3g})"


def test_an_other_scale_gets_digits_until_it_differs_from_a_known_one_up_to_nine() -> None:
    args = (1e-14, True, 1.0, 1e-6, 16, 64)
    assert verdict(0.61234 / 4, *args) == "other: s * sqrt(d_k) = 0.612"
    assert verdict(0.25012 / 4, *args) == "other: s * sqrt(d_k) = 0.2501"  # 0.250 reads as twice
    assert verdict(4.000012 / 4, *args) == "other: s * sqrt(d_k) = 4.00001"
    assert verdict((1 + 2e-9) / 4, *args) == "other: s * sqrt(d_k) = 1"  # nine digits at most


def test_verdict_kinds_and_flags() -> None:
    assert verdict_kind("as declared (q x 1/2)") == "as declared"
    assert verdict_kind("mixed: other, s * sqrt(d_k) from 0.6 to 1.7") == \
        "mixed: other, s * sqrt(d_k) from 0.6 to 1.7"
    assert is_flagged("as declared (q x 1/2)") and is_flagged(TWICE)
    assert not is_flagged(STANDARD) and not is_flagged(NOT_AUDITABLE)


def test_every_band_of_a_verdict_holds_its_edge() -> None:
    """At the edge itself (the gap equal to the band, the row sum 1 + its band exactly): inside,
    as docs/AUDIT's '|log(s_cand / s)| <= band' says."""
    d_k, args = 16, (True, 1.0, 1e-6, 16, 64)
    x = 1.3 / 4
    edge = abs(math.log(x * 4 / 1.0))
    assert verdict(x, edge, *args) == STANDARD
    assert verdict(x, abs(math.log(x * 4 / 1.3)), *args, reference=0.25 * 1.3,
                   declared_as="q x 1.3") == "as declared (q x 1.3)"
    assert verdict(0.25, abs(math.log(0.25 * 4)), *args, reference=0.25 * 1.3) == STANDARD
    assert verdict(0.5 / d_k**0.5, 0.01, True, 1.5, 0.5, d_k, 64) == DMODEL
    assert not verdict(0.25, 0.01, True, 1.5, 0.5, d_k, 64).startswith(AFTER_SOFTMAX)
    assert verdict(0.25, 0.01, True, 1.5, 0.49, d_k, 64).startswith(AFTER_SOFTMAX)


def test_a_scale_between_equally_near_known_scales_is_the_first_named() -> None:
    """d_model = d_k^2: 1/sqrt(d_model) is exactly 'scaled twice'; the first candidate wins a
    tie, as it does at the standard (d_model = d_k: no d_model candidate at all)."""
    assert verdict(1 / 16, 1e-3, True, 1.0, 1e-6, 16, 256) == TWICE
    assert verdict(0.25, 1e-3, True, 1.0, 1e-6, 16, 16) == STANDARD


def test_an_other_scale_beside_its_reference_gets_digits_past_the_standard() -> None:
    """1.0004 x the standard, declared so but not labelled, with a band of 1e-4: 'other', with
    the digits that tell it from 1 (the only known scale there)."""
    assert verdict(1.0004 / 4, 1e-4, True, 1.0, 1e-6, 16, 64, reference=1.0004 / 4) == \
        "other: s * sqrt(d_k) = 1.0004"


def test_the_head_width_is_a_candidate_one_off_head_dim_and_not_at_it() -> None:
    """d_model / heads = 17 for d_k 16: a candidate 1 away (the test is > 1e-9, not > 1)."""
    names = [n for n, _c in candidates(16, 68, 4)]
    assert HEAD_DIM in names
    assert dict(candidates(16, 68, 4))[HEAD_DIM] == pytest.approx(math.sqrt(16 / 17))
    assert HEAD_DIM not in [n for n, _c in candidates(16, 64, 4)]
    assert dict(candidates(16, 64, 8)) == pytest.approx(
        {STANDARD: 1.0, TWICE: 0.25, UNSCALED: 4.0, DMODEL: 0.5, HEAD_DIM: math.sqrt(2.0)})


def test_heads_are_fitted_and_judged_each_on_its_own() -> None:
    """Three heads of exact attention: near-uniform logits (not identifiable), s 1e-4 on logits
    to ~4 and s 2 on logits to ~12: each head's scale to 1e-9, its curvature (finite
    differences), its rounding band (its own largest |z|, d_k 64) and its probes' residuals,
    computed here head by head."""
    rng = np.random.default_rng(6)
    vis = np.tril(np.ones((10, 10), dtype=bool))
    z = np.stack([rng.normal(0, 1e-9, (10, 10)), rng.normal(0, 1.5e4, (10, 10)),
                  rng.normal(0, 2.0, (10, 10))])
    s_true = [1.0, 1e-4, 2.0]
    p = np.stack([_softmax(s * z[i], vis) for i, s in enumerate(s_true)])
    fit = fit_scale(z, p, vis, d_k=64)
    assert fit.identifiable.tolist() == [False, True, True]
    assert np.isinf(fit.tol_log[0])
    keep = vis.sum(-1) >= 2
    for h in (1, 2):
        zh, ph, vh = z[h][keep], p[h][keep], vis[keep]
        assert float(fit.scale[h]) == pytest.approx(s_true[h], rel=1e-9)
        q = _softmax(s_true[h] * zh, vh)
        zq = np.where(vh, zh, 0.0)
        var_q = float(((q * zq**2).sum(-1) - (q * zq).sum(-1) ** 2).mean())
        assert float(fit.curvature[h]) == pytest.approx(s_true[h] ** 2 * var_q, rel=1e-6)
        zmax = float(np.abs(zq).max())
        assert float(fit.tol_log[h]) == pytest.approx(8 * EPS32 * zmax / math.sqrt(var_q),
                                                      rel=1e-6)
        for i, k in enumerate((0.9, 1.1)):
            qk = _softmax(k * s_true[h] * zh, vh)
            assert float(fit.residual_probe[h, i]) == pytest.approx(np.abs(ph - qk).max(),
                                                                    rel=1e-6)
            assert float(fit.worse_probe[h, i]) == pytest.approx(_kl(ph, k * s_true[h] * zh, vh),
                                                                 rel=1e-6)


def test_the_rounding_band_reads_the_visible_logits_and_d_k_1_by_default() -> None:
    """Logits below 1 (|z| < 0.7) behind a causal mask, exact P at s 5: the band is
    sqrt(d_k) eps max|visible z| / sqrt(Var_Q z), with d_k 1 by default (masked keys hold 0,
    not 1, in the largest |z|)."""
    rng = np.random.default_rng(2)
    vis = np.tril(np.ones((12, 12), dtype=bool))
    z = np.clip(rng.normal(0, 0.2, (1, 12, 12)), -0.7, 0.7)
    p = _softmax(5.0 * z, vis)
    keep = vis.sum(-1) >= 2
    zq = np.where(vis, z[0], 0.0)[keep]
    q = _softmax(5.0 * z[0][keep], vis[keep])
    var_q = float(((q * zq**2).sum(-1) - (q * zq).sum(-1) ** 2).mean())
    zmax = float(np.abs(zq).max())
    assert zmax < 0.71
    for d_k, root in ((None, 1.0), (64, 8.0)):
        fit = fit_scale(z, p, vis) if d_k is None else fit_scale(z, p, vis, d_k=d_k)
        assert float(fit.tol_log[0]) == pytest.approx(root * EPS32 * zmax / math.sqrt(var_q),
                                                      rel=1e-6)


def test_float32_inputs_an_int_mask_and_an_empty_row_fit_as_float64_does() -> None:
    """The fit casts its inputs: float32 scores, probabilities, start and bias and a 0/1 mask
    give bit for bit what their float64 (and bool) copies give, without a warning; a visible row
    the model gave no weight at all is left out of the shapes, not a NaN."""
    import warnings

    rng = np.random.default_rng(7)
    vis = np.tril(np.ones((8, 8), dtype=bool))
    z = rng.normal(0, 2.0, (2, 8, 8)).astype(np.float32)
    b = rng.normal(0, 1.0, (2, 8, 8)).astype(np.float32)
    p = _softmax(0.5 * z.astype(np.float64) + b, vis).astype(np.float32)
    p[1, 5] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = fit_scale(z, p, vis.astype(np.int8), bias=b, start=np.float32(0.375), d_k=16)
        ref = fit_scale(z.astype(np.float64), p.astype(np.float64), vis,
                        bias=b.astype(np.float64), start=np.array([0.375, 0.375]), d_k=16)
        flat = fit_scale(np.zeros((1, 8, 8)), np.full((1, 8, 8), 0.125), vis)
    for name in ("scale", "misfit", "curvature", "tol_log", "worse_probe", "residual_probe"):
        assert np.array_equal(getattr(a, name), getattr(ref, name)), name
    assert np.isfinite(a.scale).all() and not flat.identifiable.any()
    assert float(a.scale[1]) == pytest.approx(0.5, rel=1e-6)


def test_a_row_the_model_gave_no_weight_does_not_pull_the_scale() -> None:
    """Exact attention softmax(0.5 z + b) with one visible row all zero: its KL is 0 at every s,
    so the minimum is still 0.5 exactly (Newton's gradient used to count the row: 0.49998)."""
    rng = np.random.default_rng(7)
    vis = np.tril(np.ones((8, 8), dtype=bool))
    z = rng.normal(0, 2.0, (2, 8, 8))
    b = rng.normal(0, 1.0, (2, 8, 8))
    p = _softmax(0.5 * z + b, vis)
    p[1, 5] = 0.0
    fit = fit_scale(z, p, vis, bias=b)
    assert fit.scale == pytest.approx([0.5, 0.5], rel=1e-9)
    assert fit.weight_sum[1] == pytest.approx(6 / 7)
