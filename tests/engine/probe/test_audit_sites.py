"""fit_site, block_of and audit_records on records written by hand (no transformers forward
pass): each head's and the layer's fit from exact weights of a known scale, a soft-cap, an
additive term and a declared position law reaching the fits, the verdicts' reference, and every
figure of the result the audit writes (docs/testing.md, mutation testing)."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import pytest

from engine.errors import Cancelled
from engine.probe import audit as audit_mod
from engine.probe.accounting import Reference
from engine.probe.audit import (
    CAPTURE_NOTE,
    audit_records,
    block_of,
    fit_site,
    run_audit,
)
from engine.probe.scale_fit import AS_DECLARED, HEAD_DIM, STANDARD, fit_scale, misfit_limit
from engine.probe.sites import SiteRecord

N, D = 12, 4


def _softmax(x: np.ndarray, vis: np.ndarray) -> np.ndarray:
    x = np.where(vis, x, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _record(scales=(0.5, 0.5), cap=None, bias=None, row_factor=None, q_position=None, seed=0,
            site=0, features=("rope",), kv_head=None, first=0) -> SiteRecord:
    """Exact float64 attention of heads at ``scales`` (x the row factor, capped at ``cap``, plus
    ``bias``, (1, N, N)) over N causal tokens of width D, q and k ~ N(0, 4); the rows from
    ``first`` on kept (fewer rows than keys)."""
    rng = np.random.default_rng(seed)
    h = len(scales)
    q = rng.normal(0, 2.0, (h, N, D)).astype(np.float32)
    k = rng.normal(0, 2.0, (1, N, D)).astype(np.float32)
    z = np.einsum("hqd,hkd->hqk", q.astype(float), np.repeat(k.astype(float), h, 0))
    vis = np.tril(np.ones((N, N), bool))
    rf = np.ones(N) if row_factor is None else row_factor
    logits = np.asarray(scales, float)[:, None, None] * rf[None, :, None] * z
    if cap is not None:
        logits = cap * np.tanh(logits / cap)
    if bias is not None:
        logits = logits + bias
    probs = np.stack([_softmax(x, vis) for x in logits])
    kv = np.zeros(h, int) if kv_head is None else kv_head
    rows = np.arange(first, N)
    return SiteRecord(site, q, k, kv, rows, probs[:, rows], vis[rows],
                      None if bias is None else bias[:, rows], None, cap, None, None, None,
                      False, True, None, None, features, q_position)


def _ref(value, known=True, source="q x 1/2", tol=0.0, row_factor=None, why="", note=""):
    return Reference(np.asarray(value, float), known, source, why_unknown=why, tol=tol,
                     note=note, row_factor=row_factor)


# -- fit_site -------------------------------------------------------------------------------------

def test_a_sites_heads_and_layer_recover_their_scales_and_read_as_the_reference() -> None:
    """Heads at 0.4 and 0.25 (exact weights): each head's fit is its scale, the layer's joint
    fit is one scale between them (both rows sets at once: not either head's), no cap; the
    verdicts are relative to the reference (head 0 as declared, head 1 a bug) or, without one,
    the standard's name; the misfit limit bounds the logits by the largest scale x max |q| max |k|."""
    rec = _record((0.4, 0.25), first=3)
    fit = fit_site(rec, 16)
    assert fit.head.scale == pytest.approx([0.4, 0.25], rel=1e-7)
    assert fit.layer.scale.shape == (1,) and 0.26 < float(fit.layer.scale[0]) < 0.39
    assert float(fit.layer.misfit[0]) > 1e-3  # one scale cannot fit both heads
    assert fit.cap is None and fit.layer_cap is None and fit.position == ()
    # without a reference every scale is named among the known ones, with the fit's own band:
    # 0.4 x 2 = 0.8 is none of them (the nearest, d_model / heads = 8's 0.707, is 12 % off)
    assert fit.head_verdicts[0] == "other: s * sqrt(d_k) = 0.8"
    assert fit_site(_record((0.5, 0.5)), 16).head_verdicts == [STANDARD] * 2
    width = fit_site(_record((8**-0.5, 8**-0.5)), 16)  # 1/sqrt(d_model / heads), not head_dim's
    assert width.head_verdicts == [HEAD_DIM] * 2 and width.layer_verdict == HEAD_DIM
    qk = float(np.linalg.norm(rec.q, axis=-1).max() * np.linalg.norm(rec.k, axis=-1).max())
    assert fit.misfit_limit == pytest.approx(misfit_limit(D, N, float(fit.head.scale.max()) * qk),
                                             rel=1e-9)
    # the bands are d_k's (the logits' float32 rounding term): the head fits' and the joint
    # fit's over the 9 kept rows of both heads, each row of 12 keys
    z, p, vis = rec.scores(), rec.probs, rec.visible
    assert fit.head.tol_log == pytest.approx(fit_scale(z, p, vis, d_k=D).tol_log, rel=1e-6)
    joint = fit_scale(z.reshape(1, 18, N), p.reshape(1, 18, N), np.tile(vis, (2, 1)), d_k=D)
    assert fit.layer.scale == pytest.approx(joint.scale, rel=1e-9)
    assert fit.layer.tol_log == pytest.approx(joint.tol_log, rel=1e-6)
    assert fit.layer.rows == 18
    # one scale for both heads: the joint fit's band is the rounding term of d_k = 4 (twice d_k
    # 1's)
    same = _record((0.5, 0.5), first=3)
    z, p = same.scores(), same.probs
    zj, pj, vj = z.reshape(1, 18, N), p.reshape(1, 18, N), np.tile(vis, (2, 1))
    want, one = fit_scale(zj, pj, vj, d_k=D).tol_log, fit_scale(zj, pj, vj, d_k=1).tol_log
    assert fit_site(same, 16).layer.tol_log == pytest.approx(want, rel=1e-6)
    assert want == pytest.approx(2 * one, rel=1e-3)
    with_ref = fit_site(rec, 16, _ref([0.4, 0.4]))
    assert with_ref.head_verdicts[0] == f"{AS_DECLARED} (q x 1/2)"
    assert not with_ref.head_verdicts[1].startswith(AS_DECLARED)
    unknown = fit_site(rec, 16, _ref([0.4, 0.4], known=False))
    assert "q x 1/2" not in unknown.head_verdicts[0]


def test_the_references_own_tolerance_widens_each_heads_band() -> None:
    """A head 1.01 x its reference is a bug at the fit's own band (~1e-7 here, exact weights)
    and as declared once the reference's tolerance is 0.02."""
    rec = _record((0.404, 0.404))
    assert not fit_site(rec, 16, _ref([0.4, 0.4])).head_verdicts[0].startswith(AS_DECLARED)
    loose = fit_site(rec, 16, _ref([0.4, 0.4], tol=0.02))
    assert loose.head_verdicts == [f"{AS_DECLARED} (q x 1/2)"] * 2
    assert loose.layer_verdict == f"{AS_DECLARED} (q x 1/2)"


def test_a_site_that_declares_a_cap_is_fitted_with_it_per_head_and_jointly() -> None:
    """Cap 3 on 0.5 q.k plus an additive term: the heads' and the joint fit find 0.5 and 3."""
    b = np.random.default_rng(6).normal(0, 1.0, (1, N, N))
    rec = _record((0.5, 0.5), cap=3.0, bias=b, first=2)
    fit = fit_site(rec, 16)
    assert fit.cap is not None and fit.layer_cap is not None
    assert fit.cap.declared == 3.0 and fit.layer_cap.declared == 3.0
    assert fit.cap.cap == pytest.approx([3.0, 3.0], rel=1e-6)
    assert fit.layer_cap.cap == pytest.approx([3.0], rel=1e-6)
    assert fit.head.scale == pytest.approx([0.5, 0.5], rel=1e-6)
    assert fit.layer.scale == pytest.approx([0.5], rel=1e-6)
    assert fit.cap.declared_consistent.all() and fit.layer_cap.declared_consistent.all()


def test_an_additive_term_reaches_the_heads_and_the_joint_fit() -> None:
    """Logits 0.5 q.k + b (b per row and key, shared by the heads): both fits find 0.5 exactly
    (the joint one with b tiled over the heads' rows); without b in the record they do not."""
    b = np.random.default_rng(3).normal(0, 2.0, (1, N, N))
    rec = _record((0.5, 0.5), bias=b)
    fit = fit_site(rec, 16)
    assert fit.head.scale == pytest.approx([0.5, 0.5], rel=1e-7)
    assert fit.layer.scale == pytest.approx([0.5], rel=1e-7)
    assert float(fit.layer.misfit[0]) < 1e-12
    qk = float(np.linalg.norm(rec.q, axis=-1).max() * np.linalg.norm(rec.k, axis=-1).max())
    terms = float(np.abs(np.where(rec.visible, b[0], 0.0)).max())
    assert fit.misfit_limit == pytest.approx(misfit_limit(D, N, 0.5 * qk + terms), rel=1e-6)
    blind = fit_site(SiteRecord(**{**rec.__dict__, "bias": None}), 16)
    assert abs(float(blind.layer.scale[0]) / 0.5 - 1) > 1e-3


def test_a_declared_position_law_is_folded_into_q_k_and_fitted_per_bucket() -> None:
    """q carries 1 + t / 4 at position t (a declared law), an additive term beside: with the
    law in the reference each head's fit is the base scale 0.4 and the position buckets hold
    it (ratio 1 to the reference's 0.4); a record that carries such a factor (q_position) is
    bucketed against 1/sqrt(d_k) without one."""
    rf = 1.0 + np.arange(N) / 4.0
    b = np.random.default_rng(8).normal(0, 1.0, (1, N, N))
    rec = _record((0.4, 0.4), row_factor=rf, bias=b)
    fit = fit_site(rec, 16, _ref([0.4, 0.4], row_factor=rf))
    assert fit.head.scale == pytest.approx([0.4, 0.4], rel=1e-7)
    assert fit.layer.scale == pytest.approx([0.4], rel=1e-7)
    assert len(fit.position) >= 1
    for bucket in fit.position:
        assert bucket.ratio == pytest.approx(1.0, rel=1e-6)
        mean_rf = rf[bucket.first:bucket.last + 1].mean()
        assert bucket.declared == pytest.approx(0.4 * mean_rf * 2.0, rel=1e-9)
    plain = fit_site(rec, 16, _ref([0.4, 0.4]))
    assert plain.position == ()
    assert abs(float(plain.head.scale[0]) / 0.4 - 1) > 0.1  # the law is not in the fit
    qpos = SiteRecord(**{**_record((0.5, 0.5)).__dict__, "q_position": np.ones(N)})
    buckets = fit_site(qpos, 16).position
    assert len(buckets) >= 1
    for bucket in buckets:  # against 1/sqrt(d_k) = 0.5, the scale itself
        assert bucket.ratio == pytest.approx(1.0, rel=1e-6)
        assert bucket.declared == pytest.approx(1.0, rel=1e-12)


# -- block_of -------------------------------------------------------------------------------------

def _loaded(model_type="gpt2", enc_dec=False):
    config = SimpleNamespace(is_encoder_decoder=True) if enc_dec else SimpleNamespace()
    return SimpleNamespace(model=SimpleNamespace(config=config),
                           info=SimpleNamespace(model_type=model_type))


def test_block_of_names_cross_decoder_encoder_and_causal_encoder() -> None:
    pytest.importorskip("transformers")
    site = SimpleNamespace
    assert block_of(_loaded(), site(cross=True, name="h.0.attn"), True) == "cross"
    t5 = _loaded("t5", enc_dec=True)
    assert block_of(t5, site(cross=False, name="decoder.block.0.attn"), True) == "decoder"
    assert block_of(t5, site(cross=False, name="model.decoder.layers.0"), True) == "decoder"
    assert block_of(t5, site(cross=False, name="encoder.block.0.attn"), False) == "encoder"
    # "decoder" only among the first two parts of the path
    assert block_of(t5, site(cross=False, name="model.enc.decoder.x"), True) == "encoder"
    assert block_of(t5, site(cross=True, name="decoder.block.0"), True) == "cross"
    assert block_of(_loaded("bert"), site(cross=False, name="l.0"), False) == "encoder"
    assert block_of(_loaded("gpt2"), site(cross=False, name="h.0.attn"), True) == "decoder"
    clip = _loaded("clip_text_model")
    assert block_of(clip, site(cross=False, name="encoder.layers.0"), True) == "causal encoder"
    assert block_of(_loaded("gpt2", enc_dec=False), site(cross=False, name="decoder.0"),
                    False) == "encoder"


# -- audit_records ----------------------------------------------------------------------------------

def _stub_model(refs, names, shares=None, **extra):
    """A loaded model's stand-in: each site's declaration is {its site number: its Reference}
    (the reference() below reads it with the record it is given)."""
    sites = [SimpleNamespace(name=n, cross=False, shares_with=(shares or {}).get(i))
             for i, n in enumerate(names)]
    info = SimpleNamespace(name="stub-model", model_type="gpt2", d_model=16)
    return SimpleNamespace(info=info, declarations=[{i: r} for i, r in enumerate(refs)],
                           sites=sites, causal=True,
                           model=SimpleNamespace(config=SimpleNamespace()), **extra)


def _by_record(decl, rec):
    return decl[rec.site]


def test_audit_records_reports_each_site_and_the_whole_capture(monkeypatch) -> None:
    """Three sites: as declared, a bug (0.2 against 0.4) and a soft-capped one with a
    reference whose declaration is unknown: progress per site, then a result whose every
    field is the sites' (d_k and heads uniform: no per-site lists)."""
    pytest.importorskip("transformers")
    recs = [_record((0.4, 0.4), features=("a",), q_position=np.ones(N)),
            _record((0.2, 0.2), seed=1, site=1, features=("b",), kv_head=np.array([0, 0])),
            _record((0.5, 0.5), cap=3.0, seed=2, site=2)]
    refs = [_ref([0.4, 0.4]), _ref([0.4, 0.4], note="checked at the product"),
            _ref([0.5, 0.5], known=False, source="code", why="undeclared x2")]
    monkeypatch.setattr(audit_mod, "reference", _by_record)
    loaded = _stub_model(refs, ["h.0.attn", "h.1.attn", "h.2.attn"], shares={2: 0},
                         not_seen=("lost",), weights=SimpleNamespace(text=lambda: "3 of 3"))
    t0 = time.perf_counter()
    snaps = list(audit_records(loaded, recs, tuple("abcdefghijklmnop"), {1: "dmodel"}, 0.25))
    took = time.perf_counter() - t0
    assert [s.stage for s in snaps] == ["fit, layer 1 of 3", "fit, layer 2 of 3",
                                        "fit, layer 3 of 3", "done"]
    assert [s.fraction for s in snaps] == pytest.approx([0.2, 0.2 + 0.8 / 3, 0.2 + 1.6 / 3, 1.0])
    assert [s.done for s in snaps] == [False, False, False, True]
    r = snaps[-1].result
    assert r is not None and run_audit(iter(snaps)) is r
    assert (r.model_name, r.model_type, r.run, r.n_layers, r.n_heads, r.d_k, r.d_model) == (
        "stub-model", "gpt2", None, 3, 2, D, 16)
    assert r.causal is True and r.n_tokens == N and r.tokens == tuple("abcdefghijkl")
    assert r.inject == {1: "dmodel"} and r.note == CAPTURE_NOTE and r.forward_s == 0.25
    assert 0.0 <= r.fit_s <= took  # the fits' own time, within the call's
    assert r.not_seen == ("lost",) and r.weights_text == "3 of 3"
    assert r.site_d_k == () and r.site_heads == ()
    assert r.declared_scale[:2].tolist() == [0.4, 0.4] and math.isnan(r.declared_scale[2])
    assert r.head_fits[1].scale == pytest.approx([0.2, 0.2], rel=1e-7)
    assert r.layer_fits[2].scale == pytest.approx([0.5], rel=1e-6)
    assert r.head_verdicts[0] == [f"{AS_DECLARED} (q x 1/2)"] * 2
    assert r.layer_verdicts[0] == f"{AS_DECLARED} (q x 1/2)"
    s0, s1, s2 = r.sites
    assert (s0.name, s0.block, s0.features, s0.declared_source) == ("h.0.attn", "decoder",
                                                                    ("a",), "q x 1/2")
    assert s0.matches_declared and s0.mismatch == "" and s0.declared_known
    assert s0.softcap_declared is None and s0.softcap is None and s0.softcap_reach is None
    assert s0.declared_note == "" and s0.shares_weights_with is None
    assert len(s0.position) >= 1 and s0.position == r.sites[0].position  # q carries a factor
    assert [b.ratio for b in s0.position] == pytest.approx([1.0] * len(s0.position), rel=1e-6)
    assert [b.declared for b in s0.position] == pytest.approx([0.8] * len(s0.position))
    assert s1.position == ()
    assert not s1.matches_declared
    assert s1.mismatch == "measured 0.5 x the declared scale (all heads)"
    assert s1.features == ("b",) and s1.kv_head.tolist() == [0, 0]
    assert s1.kv_head is not recs[1].kv_head and s1.declared_note == "checked at the product"
    assert s2.softcap_declared == 3.0 and s2.softcap == pytest.approx([3.0, 3.0], rel=1e-6)
    reach = 0.5 * np.abs(np.where(recs[2].visible, recs[2].scores(), 0.0)).max()
    assert s2.softcap_reach == pytest.approx(reach, rel=1e-6)
    assert not s2.declared_known and s2.declared_note == "undeclared x2"
    assert s2.declared_source == "code" and s2.shares_weights_with == 0 and s2.matches_declared


def test_audit_records_of_layers_of_other_widths_lists_them_and_stops_when_cancelled(
        monkeypatch) -> None:
    """A 2-head layer of width 4 and a 3-head one of width 8: per-site widths and heads, the
    most heads; no tokens given: none kept; a cancel flag raised before the second site stops
    the audit with Cancelled."""
    rng = np.random.default_rng(4)
    wide = _record((0.5, 0.5, 0.5), seed=4, site=1)
    q8 = rng.normal(0, 1.0, (3, N, 8)).astype(np.float32)
    k8 = rng.normal(0, 1.0, (1, N, 8)).astype(np.float32)
    z = np.einsum("hqd,kd->hqk", q8.astype(float), k8[0].astype(float))
    probs = np.stack([_softmax(8**-0.5 * x, wide.visible) for x in z])
    wide = SiteRecord(**{**wide.__dict__, "q": q8, "k": k8, "probs": probs})
    recs = [_record((0.5, 0.5)), wide]
    refs = [_ref([0.5, 0.5]), _ref([8**-0.5] * 3)]
    monkeypatch.setattr(audit_mod, "reference", _by_record)
    loaded = _stub_model(refs, ["a", "b"])  # no not_seen, no weights: a model in memory
    r = run_audit(audit_records(loaded, recs, (), {}, 0.0))
    assert r.site_d_k == (4, 8) and r.site_heads == (2, 3) and r.n_heads == 3 and r.d_k == 4
    assert r.tokens == () and r.weights_text == "" and r.inject == {} and r.not_seen == ()
    assert [s.matches_declared for s in r.sites] == [True, True]
    calls = iter([False, True])
    with pytest.raises(Cancelled):
        list(audit_records(loaded, recs, (), {}, 0.0, cancelled=lambda: next(calls)))
