"""What ONNX Runtime returned for one site, turned into the fit's record: hand-made arrays (q,
k^T, the Softmax's weights computed here at a chosen scale, masks and biases with their signs),
so the record's rows, mask, bias and features and the fitted scale are known in advance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.probe.port.onnx_graph import OnnxSite
from engine.probe.port.onnx_sites import (
    _broadcast,
    _features,
    _heads,
    _mask,
    _projection_outputs,
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
