"""What ONNX Runtime returned for one site, turned into the fit's record: hand-made arrays (q,
k^T, the Softmax's weights computed here at a chosen scale, masks and biases with their signs),
so the record's rows, mask, bias and features and the fitted scale are known in advance. A fused
operator's site is fitted from hand-made operands too (a stand-in for ``fused_ops.unpack``: no
ONNX Runtime run), its output computed here head by head."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.probe.port import fused_ops
from engine.probe.port.fused_ops import FusedData
from engine.probe.port.onnx_graph import OnnxSite
from engine.probe.port.onnx_sites import (
    _broadcast,
    _features,
    _heads,
    _mask,
    _projection_outputs,
    fit_fused,
    fit_unfused,
    unfused_record,
)
from engine.probe.sites import MASKED_BELOW, MAX_FIT_ROWS

H, D = 2, 8


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _arrays(nq=6, nk=6, scale=D**-0.5, seed=0, bias=None):
    """q (1, H, nq, D), k^T (1, H, D, nk) and softmax(scale q.k + bias) in float64."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(1, H, nq, D))
    kt = rng.normal(size=(1, H, D, nk))
    z = scale * (q @ kt) + (0 if bias is None else bias)
    return {"q": q, "kt": kt, "p": _softmax(z)}


def _site(**kw):
    return OnnxSite(0, "unfused", "sm", None, q="q", k="kt", probs="p", **kw)


def test_heads_drop_the_batch_and_refuse_other_shapes() -> None:
    x = np.arange(24.0).reshape(1, 2, 3, 4)
    assert _heads(x).shape == (2, 3, 4) and _heads(x).dtype == np.float64
    assert _heads(x[0]).shape == (2, 3, 4)
    assert _heads(x.astype(np.float32)).dtype == np.float64  # ONNX Runtime's float32 too
    with pytest.raises(ConfigError) as err:
        _heads(x[0, 0])
    assert "an attention tensor has shape (3, 4), not (batch, heads, tokens, width)" in \
        str(err.value)
    assert err.value.field == "onnx"


def test_projection_outputs_of_one_batch() -> None:
    a, b, c, d = np.ones((1, 3, 4)), np.ones((3, 4)), np.ones((2, 3, 4)), np.ones(4)
    got = _projection_outputs({"a": a, "b": b, "c": c, "d": d}, ["a", "b", "c", "d"])
    assert [x.shape for x in got] == [(3, 4), (3, 4)]


@pytest.mark.parametrize(("args", "want"), [
    ((True, None, np.ones(2), False, False, None), ("causal",)),
    ((True, 4, np.ones(2), False, False, None), ("sliding window 4",)),
    ((False, None, np.ones(2), True, True, 30.0), ("bidirectional", "RoPE", "additive bias",
                                                   "soft-cap 30")),
    ((False, None, None, False, False, 0.5), ("bidirectional", "q/k not a projection's output",
                                              "soft-cap 0.5"))])
def test_features_in_words(args, want) -> None:
    assert _features(*args) == want


def test_broadcast_drops_batches_of_one_only() -> None:
    assert _broadcast(np.ones((1, 1, 1, 3)), (2, 3, 3)).shape == (2, 3, 3)
    assert _broadcast(np.ones((1, 1, 1, 1, 3)), (2, 3, 3)).shape == (2, 3, 3)
    with pytest.raises(ConfigError) as err:
        _broadcast(np.ones((2, 1, 3, 3)), (2, 3, 3))
    assert "a mask of shape (2, 1, 3, 3) has a batch larger than one" in str(err.value)
    assert err.value.field == "onnx"


def test_the_mask_from_terms_and_wheres() -> None:
    """Terms added with their signs; a pair is hidden where any head's total is -inf, at or
    below MASKED_BELOW, or a Where drops it; the bias is the visible total (None when 0)."""
    shape = (2, 2, 3)
    big = np.zeros(shape)
    big[0, 0, 2] = MASKED_BELOW  # exactly at the limit (the 0.25 below is lost in it): hidden
    big[1, 1, 0] = -np.inf
    big[1, 0, 1] = MASKED_BELOW * 0.5  # above it: a (huge) bias, kept
    pos = np.full((1, 3), 0.25)
    cond = np.array([[True, True, True], [True, False, True]])
    site = _site(terms=[("big", 1.0), ("pos", -1.0)], where=[("cond", True)])
    visible, bias = _mask(site, {"big": big, "pos": pos, "cond": cond}, shape)
    assert visible.tolist() == [[True, True, False], [False, False, True]]
    want = np.where([[[True, True, False], [True, False, True]],
                     [[True, True, True], [False, False, True]]], big - 0.25, 0.0)
    np.testing.assert_array_equal(bias, want)
    # the same condition dropped where false
    site = _site(where=[("cond", False)])
    visible, bias = _mask(site, {"cond": cond}, shape)
    assert visible.tolist() == [[False, False, False], [False, True, False]]
    assert bias is None
    # two conditions: a pair is kept only where both keep it
    other = np.array([[False, True, True], [True, True, True]])
    site = _site(where=[("cond", True), ("other", True)])
    visible, _ = _mask(site, {"cond": cond, "other": other}, shape)
    assert visible.tolist() == [[False, True, True], [True, False, True]]


def test_a_record_of_the_softmax_weights() -> None:
    arrays = _arrays()
    rec = unfused_record(_site(), arrays)
    np.testing.assert_array_equal(rec.q, arrays["q"][0].astype(np.float32))
    np.testing.assert_array_equal(rec.k, np.swapaxes(arrays["kt"][0], -1, -2).astype(np.float32))
    assert rec.rows.tolist() == list(range(6)) and rec.kv_head.tolist() == [0, 1]
    assert rec.probs.dtype == np.float32 and rec.visible.all() and rec.bias is None
    assert rec.q_ratio is None and rec.k_ratio is None and not rec.rotated
    assert rec.softcap is None and rec.sinks is None and rec.scaling is None
    assert rec.features == ("bidirectional", "q/k not a projection's output")
    assert not rec.causal and rec.window is None


def test_a_long_text_keeps_max_fit_rows_spread_over_it() -> None:
    n = MAX_FIT_ROWS + 72
    rec = unfused_record(_site(), _arrays(nq=n, nk=n))
    assert len(rec.rows) == MAX_FIT_ROWS and rec.rows[0] == 0 and rec.rows[-1] == n - 1
    assert rec.probs.shape == (H, MAX_FIT_ROWS, n)
    assert rec.visible.shape == (MAX_FIT_ROWS, n)


def test_cross_attention_is_neither_causal_nor_windowed() -> None:
    """4 queries over 6 keys, a lower-triangle-like mask notwithstanding: no pattern."""
    tri = np.where(np.tril(np.ones((4, 6), bool)), 0.0, -np.inf)
    arrays = {**_arrays(nq=4, nk=6, bias=tri), "m": tri}
    rec = unfused_record(_site(terms=[("m", 1.0)]), arrays)
    assert not rec.causal and rec.window is None
    assert rec.features[0] == "bidirectional"
    causal = np.where(np.tril(np.ones((6, 6), bool)), 0.0, -np.inf)
    rec = unfused_record(_site(terms=[("m", 1.0)]), {**_arrays(bias=causal), "m": causal})
    assert rec.causal and rec.features[0] == "causal"


def test_shapes_that_are_not_q_by_k_transposed_are_refused() -> None:
    arrays = _arrays()
    for kt in (arrays["kt"][:, :1], np.swapaxes(arrays["kt"], -1, -2)[:, :, :, :7]):
        with pytest.raises(ConfigError) as err:
            unfused_record(_site(), {**arrays, "kt": kt})
        assert "sm: the score MatMul multiplies" in str(err.value)
        assert err.value.field == "onnx"


@pytest.mark.parametrize(("axis", "ok"), [(-1, True), (3, True), (2, False), (1, False)])
def test_the_softmax_must_run_over_the_keys(axis, ok) -> None:
    site = _site(attrs={"axis": axis})
    if ok:
        assert unfused_record(site, _arrays()).n_heads == H
    else:
        with pytest.raises(ConfigError) as err:
            unfused_record(site, _arrays())
        assert str(err.value) == f"onnx: sm: the Softmax is not over the keys (axis {axis})"


@pytest.mark.parametrize("factor", [1.0, math.sqrt(2)])
def test_the_fitted_scale_and_the_declared_constants(factor) -> None:
    """Weights made at factor/sqrt(D): the fit reads it (x factor); the declared scale is the
    product of the graph's constants, whatever they are."""
    site = _site(scale_consts=[0.5, factor / math.sqrt(D) * 2])
    port = fit_unfused(site, _arrays(scale=factor / math.sqrt(D)), 0)
    assert float(port.fit.layer.scale[0]) * math.sqrt(D) == pytest.approx(factor, rel=1e-6)
    assert port.declared == pytest.approx(factor / math.sqrt(D), rel=1e-12)
    assert port.declared_source == ("graph constants on the scores (0.5, "
                                    f"{factor / math.sqrt(D) * 2:.4g})")
    assert (port.name, port.kind, port.n_heads, port.d_k) == ("sm", "unfused", H, D)
    assert not port.cross and not port.causal
    bare = fit_unfused(_site(), _arrays(), 0)
    assert bare.declared is None and bare.declared_source == "no constant on the scores"
    assert fit_unfused(_site(), _arrays(nq=4, nk=6), 0).cross


def test_d_model_decides_between_one_over_sqrt_d_model_and_other() -> None:
    """1/sqrt(128) on heads of 8 (2 heads: 16 wide): 1/sqrt(d_model) when d_model is 128; with
    d_model unknown (0) the heads' 16 are used, and it is another scale."""
    arrays = _arrays(scale=128**-0.5)
    assert fit_unfused(_site(), arrays, 128).fit.layer_verdict == "scaled by 1/sqrt(d_model)"
    assert fit_unfused(_site(), arrays, 0).fit.layer_verdict != "scaled by 1/sqrt(d_model)"
    arrays = _arrays(scale=1 / 4)  # 1/sqrt(16)
    assert fit_unfused(_site(), arrays, 0).fit.layer_verdict == "scaled by 1/sqrt(d_model)"


def test_an_unfused_site_needs_both_projections() -> None:
    """q twice its projection's output, k its own: both found, q is read relative to its
    projection (ratio 2); with only one of them found, neither is (q and k as the graph has
    them)."""
    arrays = _arrays()
    q, kt = arrays["q"], arrays["kt"]
    arrays |= {"pq": _flat(q[0] / 2.0), "pk": _flat(np.swapaxes(kt[0], -1, -2))}
    both = unfused_record(_site(proj_q=["pq"], proj_k=["pk"]), arrays)
    np.testing.assert_allclose(both.q_ratio, [2.0] * H)
    np.testing.assert_allclose(both.k_ratio, [1.0] * H)
    np.testing.assert_allclose(both.q, (q[0] / 2.0).astype(np.float32), rtol=1e-6)
    for proj in ({"proj_q": ["pq"]}, {"proj_k": ["pk"]}):
        one = unfused_record(_site(**proj), arrays)
        assert one.q_ratio is None and one.k_ratio is None
        np.testing.assert_array_equal(one.q, q[0].astype(np.float32))


def test_an_unfused_sliding_window_is_named() -> None:
    """Each query sees itself and the 2 keys before it: causal, window 3."""
    i, j = np.indices((6, 6))
    band = np.where((j <= i) & (j > i - 3), 0.0, -np.inf)
    rec = unfused_record(_site(terms=[("m", 1.0)]), {**_arrays(bias=band), "m": band})
    assert rec.causal and rec.window == 3
    assert rec.bias is None  # (0 where visible: no bias)
    assert rec.features == ("sliding window 3", "q/k not a projection's output")


def test_an_unfused_bias_is_kept_per_head_in_float32() -> None:
    """A per-head additive bias (ALiBi-like: -0.5 |i - j| and -0.25 |i - j|) on the rows."""
    i, j = np.indices((6, 6))
    alibi = -np.abs(i - j) * np.array([0.5, 0.25])[:, None, None]
    rec = unfused_record(_site(terms=[("b", 1.0)]), {**_arrays(bias=alibi), "b": alibi})
    assert rec.bias.dtype == np.float32
    np.testing.assert_array_equal(rec.bias, alibi.astype(np.float32))
    assert rec.features == ("bidirectional", "q/k not a projection's output", "additive bias")


@pytest.mark.parametrize("which", ["q", "kt"])
def test_an_unfused_q_or_k_rotated_from_its_projection_is_rope(which) -> None:
    """Only one of q and k turned from its projection's output (as RoPE does): "RoPE"."""
    arrays = _arrays()
    arrays |= {"pq": _flat(arrays["q"][0]), "pk": _flat(np.swapaxes(arrays["kt"][0], -1, -2))}
    if which == "q":
        arrays["q"] = _rotated(arrays["q"])
    else:
        arrays["kt"] = np.swapaxes(_rotated(np.swapaxes(arrays["kt"], -1, -2)), -1, -2)
    rec = unfused_record(_site(proj_q=["pq"], proj_k=["pk"]), arrays)
    assert rec.rotated is True and rec.site == 0
    assert rec.features == ("bidirectional", "RoPE")


# the fused operator's fit on hand-made operands: softmax(s q.k + bias) v, head by head

FH, FKV, FD, FDV, FS = 4, 2, 8, 4, 6


def _fused_data(factors=(1.0,) * FH, nq=FS, bias=None, softcap=None, q_times=1.0, seed=1,
                causal=False, kv=FKV):
    """q (H, nq, d) = q_times * a random q0 (its projection), k and v over FKV heads shared by
    pairs of query heads; out_h = softmax(factor_h / sqrt(d) * q_h.k + bias) v."""
    rng = np.random.default_rng(seed)
    q0 = rng.normal(size=(FH, nq, FD))
    k = rng.normal(size=(kv, FS, FD))
    v = rng.normal(size=(kv, FS, FDV))
    out = np.zeros((FH, nq, FDV))
    for h in range(FH):
        j = h // (FH // kv)
        for i in range(nq):
            z = factors[h] / math.sqrt(FD) * (q_times * q0[h, i] @ k[j].T)
            if softcap:
                z = softcap * np.tanh(z / softcap)
            if bias is not None:
                z = z + bias[0, i]
            w = np.exp(z - z.max())
            out[h, i] = (w / w.sum()) @ v[j]
    return FusedData(q=q_times * q0, k=k, v=v, out=out, visible=np.ones((nq, FS), bool),
                     bias=bias, softcap=softcap, scale=0.25, scale_source="scale attribute 0.25",
                     causal=causal)


def _fit_fused(monkeypatch, data, kind="com.microsoft.MultiHeadAttention", d_model=0,
               arrays=None, **site):
    monkeypatch.setattr(fused_ops, "unpack", lambda s, a, w: data)
    return fit_fused(OnnxSite(3, kind, "mha", None, **site), arrays or {}, d_model)


def test_a_fused_site_fits_every_head_and_the_layer(monkeypatch) -> None:
    port = _fit_fused(monkeypatch, _fused_data(causal=True))
    assert (port.name, port.kind, port.n_heads, port.d_k) == ("mha", "com.microsoft."
                                                             "MultiHeadAttention", FH, FD)
    assert port.declared == 0.25 and port.declared_source == "scale attribute 0.25"
    assert port.causal is True and port.cross is False
    assert port.features == ("causal", "q/k not a projection's output", "GQA 4q/2kv")
    np.testing.assert_allclose(port.fit.head.scale * math.sqrt(FD), 1.0, rtol=1e-5)
    assert port.fit.layer.scale.shape == (1,)
    assert float(port.fit.layer.scale[0]) * math.sqrt(FD) == pytest.approx(1.0, rel=1e-5)
    assert port.fit.head_verdicts == ["1/sqrt(d_k)"] * FH
    assert port.fit.layer_verdict == "1/sqrt(d_k)"


def test_one_fused_head_off_makes_the_layer_mixed(monkeypatch) -> None:
    port = _fit_fused(monkeypatch, _fused_data(factors=(1.0, 1.0, 1.0, math.sqrt(FD))))
    assert port.fit.head_verdicts == ["1/sqrt(d_k)"] * 3 + ["unscaled"]
    assert port.fit.layer_verdict == "mixed: 1/sqrt(d_k); unscaled"
    assert float(port.fit.head.scale[3]) == pytest.approx(1.0, rel=1e-5)


def test_a_fused_site_cross_attention_bias_and_soft_cap(monkeypatch) -> None:
    """4 queries over 6 keys, an additive bias and a soft-cap of 3: each named, and the scale
    read through them."""
    bias = np.random.default_rng(5).normal(size=(1, 4, FS))
    port = _fit_fused(monkeypatch, _fused_data(nq=4, bias=bias, softcap=3.0))
    assert port.cross is True and port.causal is False
    assert port.features == ("bidirectional", "q/k not a projection's output", "additive bias",
                             "soft-cap 3", "GQA 4q/2kv")
    np.testing.assert_allclose(port.fit.head.scale * math.sqrt(FD), 1.0, rtol=1e-5)
    assert float(port.fit.layer.scale[0]) * math.sqrt(FD) == pytest.approx(1.0, rel=1e-5)


def test_the_fused_verdicts_read_d_model_and_the_head_count(monkeypatch) -> None:
    """s = 1/sqrt(32) on 4 heads of 8: 1/sqrt(d_model) with d_model unknown (0: the heads' 32);
    s = 1/sqrt(16) with d_model 64 is 1/sqrt(d_model / heads) (64 / 4 = 16 is not d_k)."""
    port = _fit_fused(monkeypatch, _fused_data(factors=(0.5,) * FH))
    assert port.fit.head_verdicts == ["scaled by 1/sqrt(d_model)"] * FH
    assert port.fit.layer_verdict == "scaled by 1/sqrt(d_model)"
    port = _fit_fused(monkeypatch, _fused_data(factors=(math.sqrt(0.5),) * FH), d_model=64)
    assert port.fit.head_verdicts == ["scaled by 1/sqrt(d_model / heads)"] * FH
    assert port.fit.layer_verdict == "scaled by 1/sqrt(d_model / heads)"


def _flat(x):
    """(H, n, d) as the projection's (1, n, H * d) output."""
    return np.ascontiguousarray(np.swapaxes(x, 0, 1).reshape(1, x.shape[1], -1))


def test_a_fused_site_is_measured_against_its_projections(monkeypatch) -> None:
    """q = 2 x its projection's output at the operator: the operator's 0.5/sqrt(d) on q.k is
    1/sqrt(d) on the projections'; with only q's projection found, the operator's own q and
    k are used (0.5) and the feature says so."""
    data = _fused_data(factors=(0.5,) * FH, q_times=2.0)
    arrays = {"pq": _flat(data.q / 2.0), "pk": _flat(data.k)}
    both = _fit_fused(monkeypatch, data, arrays=arrays, proj_q=["pq"], proj_k=["pk"])
    np.testing.assert_allclose(both.fit.head.scale * math.sqrt(FD), 1.0, rtol=1e-5)
    assert both.features == ("bidirectional", "GQA 4q/2kv")
    for proj in ({"proj_q": ["pq"]}, {"proj_k": ["pk"]}):
        one = _fit_fused(monkeypatch, data, arrays=arrays, **proj)
        np.testing.assert_allclose(one.fit.head.scale * math.sqrt(FD), 0.5, rtol=1e-5)
        assert "q/k not a projection's output" in one.features


def test_the_packed_operator_projects_inside(monkeypatch) -> None:
    """com.microsoft.Attention computes q and k from its own weights: they are projections."""
    port = _fit_fused(monkeypatch, _fused_data(), kind="com.microsoft.Attention")
    assert port.features == ("bidirectional", "GQA 4q/2kv")
    # as many key heads as query heads: no GQA
    port = _fit_fused(monkeypatch, _fused_data(kv=FH), kind="com.microsoft.Attention")
    assert port.features == ("bidirectional",)
    assert port.fit.head_verdicts == ["1/sqrt(d_k)"] * FH


def _rotated(x, seed=2):
    """Each token's (d) vector turned by its own angle in each pair of columns: the norms stay."""
    theta = np.random.default_rng(seed).uniform(0.3, 2.0, size=(x.shape[-2], x.shape[-1] // 2))
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * np.cos(theta) - b * np.sin(theta)
    out[..., 1::2] = a * np.sin(theta) + b * np.cos(theta)
    return out


@pytest.mark.parametrize("which", ["q", "k"])
def test_q_or_k_rotated_from_its_projection_is_rope(monkeypatch, which) -> None:
    """Only one of q and k turned from its projection's output (as RoPE does): "RoPE"."""
    data = _fused_data()
    arrays = {"pq": _flat(data.q), "pk": _flat(data.k)}
    if which == "q":
        data.q = _rotated(data.q)
    else:
        data.k = _rotated(data.k)
    port = _fit_fused(monkeypatch, data, arrays=arrays, proj_q=["pq"], proj_k=["pk"])
    assert port.features == ("bidirectional", "RoPE", "GQA 4q/2kv")
