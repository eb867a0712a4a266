"""The fused operators' tensors read per head, on hand-made arrays and stand-in sites (no ONNX
graph): each layout's head split by index, the masks by hand, the scale's default, and each
refusal in one line."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.probe.port.fused_ops import FusedData, _causal, _mask_terms, _scale, _split, unpack

ONNX, MHA, GQA, MSA = ("Attention (ONNX opset 23)", "com.microsoft.MultiHeadAttention",
                       "com.microsoft.GroupQueryAttention", "com.microsoft.Attention")


def _site(kind, attrs=None, extra=None, k="k"):
    return SimpleNamespace(kind=kind, name="node7", attrs=attrs or {}, q="q", k=k, v="v",
                           out="o", extra=extra or {})


def _arr(*shape, start=0.0):
    return np.arange(start, start + math.prod(shape), dtype=np.float32).reshape(shape)


def test_split_reads_heads_by_index() -> None:
    x = _arr(1, 3, 2 * 4)  # (1, tokens 3, heads 2 x d 4)
    h = _split(x, 2, "query")
    assert h.shape == (2, 3, 4) and h.dtype == np.float64
    for head in range(2):
        for t in range(3):
            for j in range(4):
                assert h[head, t, j] == x[0, t, head * 4 + j]
    x4 = _arr(1, 2, 3, 4)
    np.testing.assert_array_equal(_split(x4, 0, "key"), x4[0])
    for bad, heads in ((_arr(2, 3, 8), 2), (_arr(1, 3, 8), 3), (_arr(1, 3, 8), 0), (_arr(3, 8), 2),
                       (_arr(2, 1, 3, 4), 1)):
        with pytest.raises(ConfigError) as err:
            _split(bad, heads, "value")
        assert err.value.field == "onnx"
        assert err.value.message == (f"the fused operator's value has shape {bad.shape}; the "
                                     "audit reads batch-of-one (1, tokens, heads*d) or "
                                     "(1, heads, tokens, d)")


def test_scale_attribute_and_its_default() -> None:
    assert _scale({}, 16) == (0.25, "scale attribute absent: 1/sqrt(d)")
    assert _scale({"scale": 0.0}, 64) == (0.125, "scale attribute absent: 1/sqrt(d)")
    assert _scale({"scale": 0.3}, 64) == (0.3, "scale attribute 0.3")
    assert _scale({"scale": 1 / 3}, 64)[1] == "scale attribute 0.333333"


def test_causal_rows_are_the_last_positions() -> None:
    np.testing.assert_array_equal(_causal(2, 4), [[1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(_causal(3, 3), np.tril(np.ones((3, 3))))
    np.testing.assert_array_equal(_causal(2, 4, 2), [[0, 1, 1, 0], [0, 0, 1, 1]])
    for none in (None, 0, -1):
        np.testing.assert_array_equal(_causal(2, 4, none), _causal(2, 4))


def test_masks_boolean_and_additive() -> None:
    vis, bias = _mask_terms(None, (2, 2, 3))
    assert vis.shape == (2, 3) and vis.all() and bias is None
    m = np.array([[True, False, True], [True, True, False]])
    vis, bias = _mask_terms(m[None, None], (2, 2, 3))
    np.testing.assert_array_equal(vis, m)
    assert bias is None
    # per head: a key any head masks is masked
    per = np.stack([m, np.ones_like(m)])
    per[1, 1, 0] = False
    vis, _ = _mask_terms(per, (2, 2, 3))
    np.testing.assert_array_equal(vis, [[True, False, True], [False, True, False]])
    add = np.array([[0.0, -2.0, -np.inf], [-1e31, -1e30, 1.5]], np.float32)
    vis, bias = _mask_terms(add[None, None], (2, 2, 3))
    np.testing.assert_array_equal(vis, [[True, True, False], [False, False, True]])
    assert bias.shape == (2, 2, 3)
    np.testing.assert_array_equal(bias[1], [[0.0, -2.0, 0.0], [0.0, 0.0, 1.5]])
    # exactly MASKED_BELOW (float64) is masked
    vis, _ = _mask_terms(np.array([[-1e30, 0.0, 0.0]]), (1, 1, 3))
    assert vis.tolist() == [[False, True, True]]
    vis, bias = _mask_terms(np.zeros((2, 3)), (2, 2, 3))
    assert vis.all() and bias is None  # only zeros: no additive term
    vis, bias = _mask_terms(np.array([[0.0, -np.inf, 0.0]]), (1, 2, 3))
    assert bias is None and vis.tolist() == [[True, False, True]] * 2


def test_key_heads_shared_by_query_heads() -> None:
    d = FusedData(np.zeros((4, 1, 2)), np.zeros((2, 1, 2)), np.zeros((2, 1, 2)),
                  np.zeros((4, 1, 2)), np.ones((1, 1), bool), None, None, 1.0, "", False)
    assert d.kv_heads == 2 and d.kv_head.tolist() == [0, 0, 1, 1]
    d.q = np.zeros((3, 1, 2))
    with pytest.raises(ConfigError) as err:
        d.kv_head  # noqa: B018
    assert (err.value.field, err.value.message) == ("onnx", "3 query heads cannot share 2 key "
                                                    "heads")


def test_onnx_attention() -> None:
    arrays = {"q": _arr(1, 3, 8), "k": _arr(1, 3, 4, start=100), "v": _arr(1, 3, 4, start=200),
              "o": _arr(1, 3, 8, start=300)}
    d = unpack(_site(ONNX, {"q_num_heads": 2, "kv_num_heads": 1, "is_causal": 1,
                            "softcap": 30.0}), arrays)
    assert (d.q.shape, d.k.shape, d.v.shape, d.out.shape) == ((2, 3, 4), (1, 3, 4), (1, 3, 4),
                                                              (2, 3, 4))
    assert d.q[1, 2, 0] == arrays["q"][0, 2, 4] and d.k[0, 1, 3] == arrays["k"][0, 1, 3]
    assert d.out[1, 0, 1] == arrays["o"][0, 0, 5] and d.v[0, 2, 2] == arrays["v"][0, 2, 2]
    np.testing.assert_array_equal(d.visible, np.tril(np.ones((3, 3))))
    assert (d.softcap, d.scale, d.scale_source, d.causal, d.bias) == (
        30.0, 0.5, "scale attribute absent: 1/sqrt(d)", True, None)
    # one query row over three keys, causal: top-left aligned (the row sees key 0 only)
    arrays1 = dict(arrays, q=_arr(1, 1, 8), o=_arr(1, 1, 8))
    d = unpack(_site(ONNX, {"q_num_heads": 2, "kv_num_heads": 1, "is_causal": 1}), arrays1)
    assert d.visible.tolist() == [[True, False, False]] and d.softcap is None
    mask = np.array([[[[0.0, -np.inf, -1.0]] * 3]])
    d = unpack(_site(ONNX, {"q_num_heads": 2, "kv_num_heads": 1, "scale": 0.2},
                     {"attn_mask": "m"}), dict(arrays, m=mask))
    assert d.visible.tolist() == [[True, False, True]] * 3 and not d.causal
    assert d.bias.shape == (2, 3, 3) and d.bias[1, 2, 2] == -1.0 and d.scale == 0.2


def test_multi_head_attention() -> None:
    arrays = {"q": _arr(1, 3, 4), "k": _arr(1, 3, 4, start=20), "v": _arr(1, 3, 6, start=40),
              "o": _arr(1, 3, 6), "b": np.arange(14, dtype=np.float32) * 1000,
              "kpm": np.array([[1, 0, 1]]), "ab": np.full((1, 1, 3, 3), -0.5)}
    d = unpack(_site(MHA, {"num_heads": 2, "unidirectional": 1},
                     {"bias": "b", "key_padding_mask": "kpm", "attention_bias": "ab"}), arrays)
    # bias q|k|v: 4 + 4 + 6
    assert d.q[1, 2, 1] == arrays["q"][0, 2, 3] + 3000
    assert d.k[0, 1, 0] == arrays["k"][0, 1, 0] + 4000
    assert d.v[1, 0, 2] == arrays["v"][0, 0, 5] + 13000
    assert d.out.shape == (2, 3, 3)
    np.testing.assert_array_equal(d.visible, [[1, 0, 0], [1, 0, 0], [1, 0, 1]])
    assert d.bias[0, 0, 0] == -0.5 and d.softcap is None and d.causal
    assert d.scale == pytest.approx(2**-0.5)
    d = unpack(_site(MHA, {"num_heads": 2, "scale": 0.1}), arrays)
    assert d.q[0, 0, 0] == arrays["q"][0, 0, 0] and d.visible.all() and not d.causal
    assert d.bias is None and d.scale == 0.1


def test_group_query_attention() -> None:
    arrays = {"q": _arr(1, 4, 8), "k": _arr(1, 4, 4), "v": _arr(1, 4, 4), "o": _arr(1, 4, 8)}
    d = unpack(_site(GQA, {"num_heads": 2, "kv_num_heads": 1, "local_window_size": 2,
                           "softcap": 20.0}), arrays)
    assert (d.q.shape, d.k.shape) == ((2, 4, 4), (1, 4, 4))
    np.testing.assert_array_equal(d.visible, [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0],
                                              [0, 0, 1, 1]])
    assert (d.softcap, d.scale, d.causal, d.bias) == (20.0, 0.5, True, None)
    d = unpack(_site(GQA, {"num_heads": 2, "kv_num_heads": 1}), arrays)
    np.testing.assert_array_equal(d.visible, np.tril(np.ones((4, 4))))
    assert d.softcap is None
    with pytest.raises(ConfigError) as err:
        unpack(_site(GQA, {"num_heads": 2}, k=""), arrays)
    assert (err.value.field, err.value.message) == (
        "onnx", "node7: GroupQueryAttention with packed q|k|v is not read by the audit")


def test_contrib_attention_projects_inside() -> None:
    x = _arr(1, 3, 2) / 10
    w = _arr(2, 10) / 7  # q 4, k 4, v 2
    b = np.arange(10.0)
    arrays = {"q": x, "o": _arr(1, 3, 2), "mi": np.array([[1, 1, 0]]),
              "ab": np.full((1, 1, 3, 3), 0.25)}
    d = unpack(_site(MSA, {"num_heads": 2, "qkv_hidden_sizes": [4, 4, 2], "unidirectional": 1},
                     {"mask_index": "mi", "attention_bias": "ab"}), arrays,
               {"weights": w, "bias": b})
    qkv = np.asarray(x[0], np.float64) @ np.asarray(w, np.float64) + b
    assert (d.q.shape, d.k.shape, d.v.shape) == ((2, 3, 2), (2, 3, 2), (2, 3, 1))
    assert d.q[1, 2, 0] == pytest.approx(qkv[2, 2]) and d.k[0, 1, 1] == pytest.approx(qkv[1, 5])
    assert d.v[1, 0, 0] == pytest.approx(qkv[0, 9])
    np.testing.assert_array_equal(d.visible, [[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    assert d.bias[1, 0, 0] == 0.25 and d.causal and d.scale == pytest.approx(2**-0.5)
    # no sizes: thirds; no bias
    d = unpack(_site(MSA, {"num_heads": 1}), {"q": x, "o": _arr(1, 3, 2)},
               {"weights": _arr(2, 6)})
    qkv = np.asarray(x[0], np.float64) @ _arr(2, 6)
    assert d.v[0, 1, 1] == pytest.approx(qkv[1, 5]) and d.visible.all() and not d.causal
    with pytest.raises(ConfigError) as err:
        unpack(_site(MSA, {"num_heads": 1}, {"mask_index": "mi"}),
               {"q": x, "o": _arr(1, 3, 2), "mi": np.array([1, 1, 0])}, {"weights": _arr(2, 6)})
    assert (err.value.field, err.value.message) == (
        "onnx", "node7: mask_index of shape (3,); the audit reads the (batch, tokens) 1/0 form")


def _cases():
    """(site, arrays, weights) of each operator, 2 query heads of width 2, 3 tokens."""
    gq = {"q": _arr(1, 3, 4), "k": _arr(1, 3, 2), "v": _arr(1, 3, 2), "o": _arr(1, 3, 4)}
    mh = {"q": _arr(1, 3, 4), "k": _arr(1, 3, 4), "v": _arr(1, 3, 4), "o": _arr(1, 3, 4)}
    return {ONNX: (_site(ONNX, {"q_num_heads": 2, "kv_num_heads": 1}), gq, None),
            GQA: (_site(GQA, {"num_heads": 2, "kv_num_heads": 1}), gq, None),
            MHA: (_site(MHA, {"num_heads": 2}), mh, None),
            MSA: (_site(MSA, {"num_heads": 2}), {"q": _arr(1, 3, 2), "o": _arr(1, 3, 4)},
                  {"weights": _arr(2, 12)})}


@pytest.mark.parametrize("kind", [ONNX, GQA, MHA, MSA])
def test_every_field_of_every_operator(kind) -> None:
    site, arrays, weights = _cases()[kind]
    d = unpack(site, arrays, weights)
    assert d.q.shape == (2, 3, 2) and d.out.shape == (2, 3, 2)
    assert d.v.shape[1:] == (3, 2) and d.k.shape[1:] == (3, 2)
    assert d.out[1, 2, 1] == arrays["o"][0, 2, 3]
    assert (d.scale, d.scale_source) == (pytest.approx(2**-0.5), "scale attribute absent: 1/sqrt(d)")
    if kind != MSA:
        assert d.v[-1, 2, 1] == arrays["v"][0, 2, arrays["v"].shape[-1] - 1]
    # each input of another batch is refused naming it
    names = {"q": "query", "k": "key", "v": "value", "o": "output"}
    for key in [k for k in names if k in arrays]:
        bad = dict(arrays, **{key: np.zeros((2, 3, arrays[key].shape[-1]), np.float32)})
        with pytest.raises(ConfigError) as err:
            unpack(site, bad, weights)
        assert err.value.message.startswith(f"the fused operator's {names[key]} has shape "
                                            "(2, 3, "), key
    # no head count for 3-D inputs: refused (a default of one head would misread them)
    with pytest.raises(ConfigError):
        unpack(_site(kind, {}), arrays, weights)


def test_gqa_reads_tokens_and_keys_from_their_axes_and_a_window_of_one() -> None:
    arrays = {"q": _arr(1, 2, 12), "k": _arr(1, 5, 6), "v": _arr(1, 5, 6), "o": _arr(1, 2, 12)}
    d = unpack(_site(GQA, {"num_heads": 2, "kv_num_heads": 1, "local_window_size": 1}), arrays)
    assert d.q.shape == (2, 2, 6) and d.visible.shape == (2, 5)
    np.testing.assert_array_equal(d.visible, [[0, 0, 0, 1, 0], [0, 0, 0, 0, 1]])
    assert d.out.shape == (2, 2, 6)


def test_contrib_attention_with_unequal_q_and_k_widths() -> None:
    x = _arr(1, 3, 2)
    w = _arr(2, 10) / 7
    d = unpack(_site(MSA, {"num_heads": 2, "qkv_hidden_sizes": [4, 2, 4]}),
               {"q": x, "o": _arr(1, 3, 4)}, {"weights": w})
    qkv = np.asarray(x[0], np.float64) @ np.asarray(w, np.float64)
    assert (d.q.shape, d.k.shape, d.v.shape) == ((2, 3, 2), (2, 3, 1), (2, 3, 2))
    assert d.k[1, 2, 0] == qkv[2, 5] and d.v[0, 1, 1] == qkv[1, 7]


@pytest.mark.parametrize("kind", [ONNX, GQA])
def test_a_missing_key_head_count_is_refused(kind) -> None:
    _, arrays, _ = _cases()[kind]
    heads = {"q_num_heads": 2} if kind == ONNX else {"num_heads": 2}
    with pytest.raises(ConfigError) as err:
        unpack(_site(kind, heads), arrays)
    assert err.value.message.startswith("the fused operator's key has shape")
    with pytest.raises(ConfigError) as err:
        unpack(_site(kind, {"kv_num_heads": 1}), arrays)
    assert err.value.message.startswith("the fused operator's query has shape")


def test_contrib_attention_names_its_key_and_value_widths() -> None:
    x = {"q": _arr(1, 3, 2), "o": _arr(1, 3, 4)}
    for sizes, name in (([4, 3, 4], "key"), ([4, 4, 3], "value")):
        with pytest.raises(ConfigError) as err:
            unpack(_site(MSA, {"num_heads": 2, "qkv_hidden_sizes": sizes}), x,
                   {"weights": _arr(2, 11)})
        assert err.value.message.startswith(f"the fused operator's {name} has shape (1, 3, 3)")
