"""The audit's "as declared" / MISMATCH decision and its words, at the edges of each band, on
fits and records written by hand (no transformers model): which check speaks first, what each
message says, the misfit limit and the scale band bracketed from both sides, the median of the
heads that differ, a layer's verdict from its heads (docs/testing.md, mutation testing)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from engine.errors import Cancelled, ConfigError
from engine.probe.accounting import Reference
from engine.probe.audit import (
    AuditConfig,
    AuditResult,
    SiteAudit,
    SiteFit,
    _joint_start,
    _layer_verdict,
    compare_declared,
    fit_layers,
    law_differs,
    position_text,
    site_arrays,
    site_misfit_limit,
)
from engine.probe.position import PositionBucket
from engine.probe.scale_fit import EPS32, STANDARD, ScaleFit, misfit_limit
from engine.probe.sites import SiteRecord
from engine.probe.softcap_fit import CapFit


def _fit(scale, tol=1e-3, ident=None, misfit=0.0, weight_sum=1.0) -> ScaleFit:
    """A ScaleFit of given per-head scales and bands (the other figures play no part here)."""
    scale = np.asarray(scale, dtype=float)
    h = scale.size
    return ScaleFit(scale=scale, misfit=np.full(h, misfit), curvature=np.ones(h),
                    tol_log=np.broadcast_to(np.asarray(tol, dtype=float), (h,)).copy(),
                    residual_max_abs=np.zeros(h), residual_probe=np.zeros((h, 2)),
                    worse_probe=np.ones((h, 2)),
                    identifiable=np.ones(h, bool) if ident is None else np.asarray(ident),
                    weight_sum=np.full(h, weight_sum), weight_sum_tol=1e-6, rows=4)


def _site(scale, tol=1e-3, ident=None, misfit=0.0, limit=math.inf, layer_verdict=STANDARD,
          head_verdicts=None, cap=None, position=()) -> SiteFit:
    hf = _fit(scale, tol, ident, misfit)
    lf = _fit([float(np.median(scale))], 1e-3, None, misfit)
    hv = head_verdicts or [STANDARD] * hf.scale.size
    return SiteFit(hf, lf, hv, layer_verdict, cap, None, misfit_limit=limit, position=position)


def _ref(value, known=True, tol=0.0) -> Reference:
    return Reference(np.asarray(value, dtype=float), known, "q x 1/4", tol=tol)


# -- the scale band ------------------------------------------------------------------------------------

def test_a_head_is_as_declared_within_its_band_plus_the_references_and_not_beyond() -> None:
    """|log(s / reference)| <= tol + ref.tol: at 0.95 of the sum as declared, at 1.05 not, on
    either side; a head that is not identifiable is never the one that differs."""
    for ref_tol in (0.0, 4e-4):
        for sign in (-1, 1):
            for frac, ok in ((0.95, True), (1.05, False)):
                s = 0.25 * math.exp(sign * frac * (1e-3 + ref_tol))
                got, why = compare_declared(_site([s, 0.25]), _ref([0.25, 0.25], tol=ref_tol))
                assert got is ok, (ref_tol, sign, frac, why)
                assert why == ("" if ok else f"measured {s / 0.25:.4g} x the declared scale "
                                             "(heads 0)")
    far = _site([0.5, 0.25], ident=[False, True])
    assert compare_declared(far, _ref([0.25, 0.25])) == (True, "")


def test_the_measured_factor_is_the_median_of_the_heads_that_differ() -> None:
    """Heads at 1.1, 1.2, 1.5 and 1 x the reference, the last within its band: the message
    names the median of the three (1.2, not their mean 1.267), and those heads; every
    identifiable head off reads 'all heads' even beside one that is not identifiable."""
    ref = _ref([0.25] * 4)
    got, why = compare_declared(_site(0.25 * np.array([1.1, 1.5, 1.2, 1.0])), ref)
    assert not got and why == "measured 1.2 x the declared scale (heads 0, 1, 2)"
    got, why = compare_declared(_site(0.25 * np.array([1.1, 1.5, 1.2, 3.0]),
                                      ident=[True, True, True, False]), ref)
    assert why == "measured 1.2 x the declared scale (all heads)"
    unknown = Reference(np.full(4, 0.25), False, "code")
    got, why = compare_declared(_site(0.25 * np.array([2.0] * 4)), unknown)
    assert why == "measured 2 x the factors the code applies (all heads)"
    # a plain number is a known declared factor for every head
    assert compare_declared(_site([0.5, 0.5]), 0.25) == (
        False, "measured 2 x the declared scale (all heads)")
    assert compare_declared(_site([0.25, 0.25]), 0.25) == (True, "")


# -- the misfit limit ----------------------------------------------------------------------------------

def test_a_misfit_above_its_limit_is_a_mismatch_and_one_at_it_is_not() -> None:
    m = 3.7e-9
    for limit, ok in ((m * (1 + 1e-9), True), (m, True), (m * (1 - 1e-9), False)):
        got, why = compare_declared(_site([0.25], misfit=m, limit=limit), _ref([0.25]))
        assert got is ok, limit / m
        assert why == ("" if ok else "the weights are not a softmax of scaled q.k and the "
                                     "model's own terms (misfit 3.7e-09)")
    # the misfit speaks before the scale
    assert compare_declared(_site([0.5], misfit=m, limit=m / 2), _ref([0.25]))[1].startswith(
        "the weights are not a softmax")


def _record(q, k, probs, vis, bias=None, sinks=None, softcap=None) -> SiteRecord:
    h = q.shape[0]
    return SiteRecord(0, q, k, np.zeros(h, int), np.arange(probs.shape[1]), probs, vis, bias,
                      sinks, softcap, None, None, None, False, False, None, None, ())


def test_a_sites_misfit_limit_bounds_its_logits_by_the_largest_scale_norms_and_terms() -> None:
    """bound = max s x max |q| x max |k| + max |visible additive term|, by hand: heads' scales
    0.5 and 0.25, |q| up to 5 (a 3-4 row), |k| up to 13 (5-12), terms 7 visible and 100 masked."""
    q = np.zeros((2, 2, 2), np.float32)
    q[0, 0] = (3, 4)
    q[1, 1] = (1, 1)
    k = np.zeros((1, 2, 2), np.float32)
    k[0, 0] = (5, 12)
    k[0, 1] = (1, 0)
    vis = np.array([[True, False], [True, True]])
    bias = np.array([[[-7.0, 100.0], [2.0, 1.0]]])
    rec = _record(q, k, np.full((2, 2, 2), 0.5, np.float32), vis, bias)
    hf = _fit([0.25, 0.5])
    want = misfit_limit(2, 2, 0.5 * 5 * 13 + 7)
    assert site_misfit_limit(rec, vis, bias, hf) == pytest.approx(want, rel=1e-12)
    err = (2 / 2 + 4) * EPS32 * 39.5 + (2 / 2 + 2) * EPS32
    assert want == pytest.approx(0.5 * err**2 + EPS32**2 / 2, rel=1e-12)
    assert site_misfit_limit(rec, vis, None, hf) == pytest.approx(misfit_limit(2, 2, 32.5))
    one_key = np.array([[True, False], [True, False]])
    assert site_misfit_limit(rec, one_key, None, hf) == pytest.approx(misfit_limit(2, 1, 32.5))


def test_a_sink_joins_each_row_as_a_key_with_its_logit_and_the_mass_the_row_left() -> None:
    q = np.ones((2, 2, 1), np.float32)
    k = np.array([[[2.0], [3.0]]], np.float32)
    vis = np.array([[True, False], [True, True]])
    probs = np.array([[[0.6, 0.9], [0.3, 0.5]], [[1.0, 0.0], [0.7, 0.4]]], np.float32)
    bias = np.array([[[0.5, 0.25], [1.0, -1.0]]], np.float32)
    z, p, v, b = site_arrays(_record(q, k, probs, vis, bias, sinks=np.array([-1.0, 2.0])))
    assert z.tolist() == [[[2, 3, 0], [2, 3, 0]]] * 2
    assert p[0] == pytest.approx(np.array([[0.6, 0.9, 0.4], [0.3, 0.5, 0.2]]))
    assert p[1] == pytest.approx(np.array([[1.0, 0.0, 0.0], [0.7, 0.4, 0.0]]))  # clipped at 0
    assert v.tolist() == [[True, False, True], [True, True, True]]
    assert b[0].tolist() == [[0.5, 0.25, -1.0], [1.0, -1.0, -1.0]]
    assert b[1].tolist() == [[0.5, 0.25, 2.0], [1.0, -1.0, 2.0]]
    z, p, v, b = site_arrays(_record(q, k, probs, vis, None, sinks=np.array([-1.0, 2.0])))
    assert b[1].tolist() == [[0.0, 0.0, 2.0], [0.0, 0.0, 2.0]]
    z, p, v, b = site_arrays(_record(q, k, probs, vis))
    assert b is None and z.shape == (2, 2, 2) and v is vis


# -- what speaks first: after the softmax, a position law, the misfit, the scale, the cap ----------------

def test_weights_scaled_after_the_softmax_are_reported_first() -> None:
    after = "scaled after softmax (weights sum to 0.5)"
    for site in (_site([0.5], layer_verdict=after),
                 _site([0.5, 0.25], head_verdicts=[STANDARD, after])):
        assert compare_declared(site, _ref([0.25] * site.head.scale.size)) == (
            False, "weights scaled after the softmax")


def test_a_position_law_that_differs_is_reported_with_its_buckets() -> None:
    a = PositionBucket(0, 3, 1.0, 1.0, 1.0, 1e-3)
    b = PositionBucket(4, 7, 1.25, 1.0, 1.25, 1e-3)
    text = "1 at 0-3 (declared 1), 1.25 at 4-7 (declared 1) (s x sqrt(d_k))"
    assert position_text((a, b)) == text
    for known, what in ((True, "the declared law"), (False, "the factors the code applies")):
        got, why = compare_declared(_site([0.5], misfit=1.0, limit=0.1, position=(a, b)),
                                    _ref([0.25], known=known))
        assert not got and why == f"the scale varies with the position otherwise than {what}: {text}"
    # a bucket that is not identifiable is no evidence
    assert not law_differs((a, dataclasses.replace(b, tol=math.inf)))
    assert not law_differs((a,)) and not law_differs(())


def _cap(caps, declared=50.0, consistent=(False,), reach=(80.123,)) -> CapFit:
    caps = np.asarray(caps, dtype=float)
    return CapFit(cap=caps, tol_log=np.full(caps.size, 1e-3), identifiable=np.isfinite(caps),
                  reach=np.asarray(reach, dtype=float), declared=declared,
                  declared_consistent=np.asarray(consistent))


def test_a_declared_cap_that_does_not_reproduce_the_weights_is_a_mismatch() -> None:
    ref = _ref([0.25] * 3)
    site = _site([0.25] * 3, cap=_cap([40.0, np.inf, 44.0], consistent=(True, False, True),
                                     reach=(30.0, 80.123, 20.0)))
    assert compare_declared(site, ref) == (
        False, "soft-cap 50 declared, fitted 42 (logits reach 80.1)")
    site = _site([0.25] * 3, cap=_cap([np.inf] * 3, consistent=(False, False, False),
                                     reach=(3.0, 2.0, 1.0)))
    assert compare_declared(site, ref)[1] == "soft-cap 50 declared, no cap found (logits reach 3)"
    ok = _site([0.25] * 3, cap=_cap([50.0] * 3, consistent=(True,) * 3, reach=(80.0,) * 3))
    assert compare_declared(ok, ref) == (True, "")
    undeclared = _site([0.25] * 3, cap=_cap([40.0] * 3, declared=None, consistent=(False,) * 3,
                                           reach=(80.0,) * 3))
    assert compare_declared(undeclared, ref) == (True, "")
    # the scale speaks before the cap
    off = _site([0.5] * 3, cap=_cap([40.0] * 3, consistent=(False,) * 3, reach=(80.0,) * 3))
    assert compare_declared(off, ref)[1].startswith("measured 2 x")


# -- a layer's verdict from its heads ----------------------------------------------------------------

def test_a_layer_is_mixed_when_its_identifiable_heads_disagree_in_kind() -> None:
    d_k = 16
    hf = _fit([0.25, 0.0625, 0.25])
    lf = _fit([0.25])
    hv = [STANDARD, "scaled twice", "cannot be audited (near-uniform logits)"]
    assert _layer_verdict(hf, lf, hv, d_k, 64, None) == "mixed: 1/sqrt(d_k); scaled twice"
    hv = [STANDARD, "cannot be audited (near-uniform logits)", STANDARD]
    assert _layer_verdict(hf, lf, hv, d_k, 64, None) == STANDARD
    hv = ["cannot be audited (near-uniform logits)"] * 3
    assert _layer_verdict(hf, lf, hv, d_k, 64, None) == STANDARD  # the joint fit's
    # "other" heads: one layer scale within twice the widest band of the identifiable heads
    tol = 0.01
    x = np.array([0.6, 0.6 * math.exp(1.9 * tol), 3.0])
    hf = _fit(x / 4, tol=[tol / 2, tol, 1.0], ident=[True, True, False])
    lf = _fit([0.6 / 4])
    hv = [f"other: s * sqrt(d_k) = {v:.3g}" for v in x]
    assert _layer_verdict(hf, lf, hv, d_k, 64, None) == "other: s * sqrt(d_k) = 0.6"
    hf = _fit(x / 4 * [1, math.exp(0.2 * tol), 1], tol=[tol / 2, tol, 1.0],
              ident=[True, True, False])
    assert _layer_verdict(hf, lf, hv, d_k, 64, None) == \
        "mixed: other, s * sqrt(d_k) from 0.6 to 0.613"
    one = _fit([0.15, 0.9], ident=[True, False])
    assert _layer_verdict(one, lf, hv[:1] + hv[2:], d_k, 64, None) == "other: s * sqrt(d_k) = 0.6"


def test_a_layers_verdict_uses_the_references_tolerance_and_label() -> None:
    """The joint fit's band plus the reference's: 0.95 of the sum as declared, 1.05 named."""
    d_k = 16
    ref = Reference(np.array([0.125]), True, "q x 1/2", tol=2e-3)
    for frac, want in ((0.95, "as declared (q x 1/2)"), (1.05, "other")):
        s = 0.125 * math.exp(frac * 3e-3)
        lf = _fit([s], tol=1e-3)
        lv = _layer_verdict(_fit([s]), lf, ["x"], d_k, 64, None, ref)
        assert lv.startswith(want), (frac, lv)
    unknown = Reference(np.array([0.125]), False, "code")
    assert _layer_verdict(_fit([0.125]), _fit([0.125]), ["x"], d_k, 64, None, unknown) == \
        "other: s * sqrt(d_k) = 0.5"


def test_the_joint_fit_starts_at_the_geometric_median_of_the_identifiable_heads() -> None:
    assert _joint_start(_fit([1.0, 2.0, 8.0, 100.0], ident=[True, True, True, False])) == \
        pytest.approx([2.0])
    assert _joint_start(_fit([1.0, 4.0], ident=[False, False])) == pytest.approx([2.0])


def test_fit_layers_reports_progress_per_layer_and_stops_when_cancelled() -> None:
    rng = np.random.default_rng(0)
    vis = np.ones((6, 6), bool)
    z = [rng.normal(0, 2, (2, 6, 6)) for _ in range(3)]
    e = [np.exp(0.25 * x) for x in z]
    p = [x / x.sum(-1, keepdims=True) for x in e]
    seen: list[int] = []
    _hf, lf, hv, lv = fit_layers(z, p, vis, 16, 64, progress=seen.append)
    assert seen == [0, 1, 2] and lv == [STANDARD] * 3 and hv == [[STANDARD] * 2] * 3
    assert [f.scale.size for f in lf] == [1, 1, 1]
    # the planted 0.25 lies inside each layer's own stated band (the float32 rounding of the
    # logits: ~1.5e-6 on log s here), not at a hand-picked float-rounding tolerance (1e-9 failed
    # on another machine's NumPy by 3.8e-9)
    for fit in lf:
        assert abs(math.log(float(fit.scale[0]) / 0.25)) <= float(fit.tol_log[0]) < 1e-4
    calls = iter([False, True])
    with pytest.raises(Cancelled):
        fit_layers(z, p, vis, 16, 64, cancelled=lambda: next(calls), progress=seen.append)
    assert seen == [0, 1, 2, 0]


# -- the result's words ---------------------------------------------------------------------------------

def _result(sites, verdicts, declared, d_k=(16, 16), heads=(2, 2), not_seen=()):
    fits = [_fit([0.25, 0.125][:h]) for h in heads]
    uniform = len(set(zip(heads, d_k))) == 1
    return AuditResult(
        "m", "bert", None, len(sites), max(heads), d_k[0], 64, False, 4, (), {},
        np.array(declared), fits, [_fit([0.25]) for _ in heads],
        [[STANDARD] * h for h in heads], verdicts, "", 0.0, 0.0, sites=tuple(sites),
        not_seen=not_seen, site_d_k=() if uniform else tuple(d_k),
        site_heads=() if uniform else tuple(heads))


def _site_audit(ok=True, why="", known=True, shares=None) -> SiteAudit:
    return SiteAudit("layer", "encoder", (), np.zeros(2, int), "q x 1/4", None, None, None,
                     ok, why, declared_known=known, shares_weights_with=shares)


def test_the_state_of_each_layer_in_words() -> None:
    sites = [_site_audit(), _site_audit(False, "measured 2 x the declared scale (all heads)"),
             _site_audit(known=False), _site_audit(False, "x", known=False)]
    r = _result(sites, [STANDARD, "scaled twice", STANDARD, "unscaled"],
                [0.25, 0.125, np.nan, np.nan], d_k=(16,) * 4, heads=(2,) * 4)
    assert [r.state_text(i) for i in range(4)] == [
        "as declared", "MISMATCH: measured 2 x the declared scale (all heads)",
        "as the code's own factors give", "MISMATCH: x"]
    assert r.mismatched_layers() == [1, 3] and r.unknown_layers() == [2, 3]
    assert r.flagged_layers() == [1, 3]
    assert r.declared_text(0) == "declared 1.000 x 1/sqrt(d_k) (q x 1/4)"
    assert r.declared_text(1, unicode=True) == "declared 0.5000 × 1/√d_k (q x 1/4)"
    assert r.declared_text(2) == "declared: unknown"


def test_layers_of_other_widths_and_shared_modules_in_words() -> None:
    sites = [_site_audit(), _site_audit(shares=0), _site_audit(shares=0)]
    r = _result(sites, [STANDARD] * 3, [0.25, 0.25, 0.125], d_k=(16, 16, 64), heads=(2, 2, 1),
                not_seen=("a", "b"))
    assert r.d_k_text() == "16 and 64" and r.d_k_at(2) == 64 and r.heads_at(2) == 1
    assert r.declared_text(2) == "declared 1.000 x 1/sqrt(d_k) (q x 1/4)"
    assert r.coverage_text() == ("3 of 5 attention layers audited (3 calls of 1 shared module: "
                                 "they share weights)")
    g = r.grid()
    assert g[2, 0] == pytest.approx(0.25 * 8) and np.isnan(g[2, 1])
    assert g[0].tolist() == pytest.approx([1.0, 0.5])
    assert r.grid("tol_log")[0].tolist() == pytest.approx([1e-3, 1e-3])
    r = _result(sites[:1], [STANDARD], [0.25], d_k=(16,), heads=(2,))
    assert r.coverage_text() == "1 of 1 attention layers audited" and r.d_k_text() == "16"


def test_the_config_refuses_bad_injections_naming_the_field() -> None:
    cfg = AuditConfig(text="x", inject=((3, "twice"), (1, "none")))
    assert cfg.inject == ((1, "none"), (3, "twice")) and cfg.bugs == {1: "none", 3: "twice"}
    for bad, msg in ((((1, "twice"), (1, "none")), "layer 1 is given twice"),
                     (((0, "thrice"),), "unknown bug kind 'thrice'"),
                     ((3,), "must be (layer, kind) pairs, got 3"),
                     (((1, 2, 3),), "must be (layer, kind) pairs")):
        with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)")) as e:
            AuditConfig(text="x", inject=bad)
        assert e.value.field == "inject"
    assert AuditConfig(text="x", max_tokens=2).max_tokens == 2
    with pytest.raises(ConfigError) as e:
        AuditConfig(text="x", max_tokens=1)
    assert e.value.field == "max_tokens"


def test_each_band_of_the_decision_holds_its_edge() -> None:
    """At the edge itself, inside (the bands are '<='): a head's gap equal to its band, two
    buckets apart by exactly their two bands, two 'other' heads apart by exactly twice the
    widest band; a declared cap that a non-identifiable head cannot reproduce still counts."""
    s, ref = np.array([0.3, 0.25]), np.array([0.25, 0.25])
    site = _site(s)
    fit = SiteFit(dataclasses.replace(site.head, tol_log=np.abs(np.log(s / ref))), site.layer,
                  site.head_verdicts, STANDARD, None, None)
    assert compare_declared(fit, _ref(ref)) == (True, "")
    a = PositionBucket(0, 3, 1.0, 1.0, 1.0, 0.0)
    b = PositionBucket(4, 7, 1.0, 1.0, 1.3, abs(math.log(1.0 / 1.3)))
    assert not law_differs((a, b))
    x = np.array([0.6, 0.9])
    hf = _fit(x / 4, tol=math.log(x.max() / x.min()) / 2)
    hv = [f"other: s * sqrt(d_k) = {v:.3g}" for v in x]
    assert _layer_verdict(hf, _fit([0.7 / 4]), hv, 16, 64, None) == "other: s * sqrt(d_k) = 0.7"
    cap = _cap([50.0, np.inf], consistent=(True, False), reach=(80.0, 3.0))
    half = _site([0.25, 0.25], ident=[True, False], cap=cap)
    assert compare_declared(half, _ref([0.25, 0.25]))[0] is False
