"""record_call, split_mask, attention_pattern and match_projection on attention calls written by
hand (torch tensors, no transformers model): every expected q, k, head mapping, mask, row and
label comes from the projections the test made, recomputed with NumPy (docs/testing.md,
mutation testing)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.probe.sites import (  # noqa: E402
    MASKED_BELOW,
    RATIO_SPREAD_TOL,
    SINK_MASS_MIN,
    SiteRecord,
    _rows,
    attention_pattern,
    match_projection,
    position_feature,
    record_call,
    split_mask,
)
from engine.probe.tap import SiteCall  # noqa: E402

MIN = float(np.finfo(np.float32).min)  # transformers' masked entry


def _proj(n: int, heads: int, d: int, seed: int) -> np.ndarray:
    """(n, heads * d) projection output; head h's block scaled by (h + 1), so that every head
    has its own norms and a head read from another block cannot match."""
    rng = np.random.default_rng(seed)
    y = rng.normal(0, 1, (n, heads, d)) * np.arange(1, heads + 1)[None, :, None]
    return y.reshape(n, heads * d).astype(np.float32)


def _heads(y: np.ndarray, heads: int, d: int) -> np.ndarray:
    """(1, heads, n, d): the projection split per head the way attention modules do."""
    return y.reshape(y.shape[0], heads, d).transpose(1, 0, 2)[None]


def _softmax(z: np.ndarray, vis: np.ndarray) -> np.ndarray:
    z = np.where(vis, z, -np.inf)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _call(h=4, hkv=2, n=6, nk=None, d=4, q_factor=1.0, k_factor=1.0, mask="causal", bias=None,
          extra=None, weights=None, projections=None, site=3, q=None, k=None):
    """A SiteCall of a causal head group: q = q_factor x q_proj's blocks, k likewise; the
    weights the softmax of q.k / sqrt(d) (batch of one)."""
    nk = n if nk is None else nk
    yq, yk = _proj(n, h, d, 1), _proj(nk, hkv, d, 2)
    qh = _heads(yq, h, d) * np.float32(q_factor) if q is None else q
    kh = _heads(yk, hkv, d) * np.float32(k_factor) if k is None else k
    vis = np.tril(np.ones((n, nk), bool)) if mask == "causal" else np.ones((n, nk), bool)
    m = None
    if mask == "causal":
        m = torch.from_numpy(np.where(vis, 0.0, MIN).astype(np.float32))[None, None]
    elif mask is not None and not isinstance(mask, str):
        m = mask
    if weights is None:
        kv = np.arange(h) // (h // hkv)
        z = np.einsum("hid,hjd->hij", qh[0].astype(np.float64), kh[0, kv].astype(np.float64))
        weights = _softmax(z / np.sqrt(d), vis)[None]
    if projections is None:
        projections = [(torch.from_numpy(yq)[None], None), (torch.from_numpy(yk)[None], None)]
    return SiteCall(site, None, torch.from_numpy(np.ascontiguousarray(qh)),
                    torch.from_numpy(np.ascontiguousarray(kh)), m,
                    None if bias is None else torch.from_numpy(bias.astype(np.float32)),
                    torch.from_numpy(np.asarray(weights, np.float32)), None,
                    {"scaling": 0.5, **(extra or {})}, projections), yq, yk


def test_a_gqa_call_with_a_pre_scaled_query_is_read_back_as_its_projections() -> None:
    call, yq, yk = _call(q_factor=0.25)
    rec = record_call(call)
    assert isinstance(rec, SiteRecord) and rec.site == 3
    assert (rec.n_heads, rec.n_kv_heads, rec.d_k) == (4, 2, 4)
    np.testing.assert_array_equal(rec.kv_head, [0, 0, 1, 1])
    # q is q_proj's head blocks (the 0.25 divided out), in head order; k is k_proj's
    np.testing.assert_allclose(rec.q, _heads(yq, 4, 4)[0], rtol=1e-6)
    np.testing.assert_allclose(rec.k, _heads(yk, 2, 4)[0], rtol=1e-6)
    assert rec.q.dtype == np.float32 and rec.k.dtype == np.float32
    np.testing.assert_allclose(rec.q_ratio, [0.25] * 4, rtol=1e-6)
    np.testing.assert_allclose(rec.k_ratio, [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(rec.prescale(), [0.25] * 4, rtol=1e-6)
    # the projections' q.k, head by head, by a loop over query and key tokens
    want = np.zeros((4, 6, 6))
    for head in range(4):
        qb = yq[:, 4 * head:4 * head + 4].astype(np.float64)
        kb = yk[:, 4 * (head // 2):4 * (head // 2) + 4].astype(np.float64)
        for i in range(6):
            for j in range(6):
                want[head, i, j] = qb[i] @ kb[j]
    np.testing.assert_allclose(rec.scores(), want, rtol=1e-5, atol=1e-5)
    assert rec.scores().dtype == np.float64
    np.testing.assert_array_equal(rec.rows, np.arange(6))
    np.testing.assert_array_equal(rec.visible, np.tril(np.ones((6, 6), bool)))
    np.testing.assert_allclose(rec.probs, call.weights.numpy()[0])
    assert rec.probs.dtype == np.float32
    assert rec.bias is None and rec.sinks is None and rec.softcap is None
    assert rec.scaling == 0.5 and rec.sliding_window is None and rec.q_position is None
    assert rec.causal and rec.window is None and not rec.rotated
    assert rec.features == ("causal", "GQA 4q/2kv", "q pre-scaled x0.25")


def test_both_sides_scaled_keep_their_own_factors_and_labels() -> None:
    call, yq, yk = _call(h=2, hkv=2, q_factor=2.0, k_factor=0.5, mask=None)
    rec = record_call(call)
    np.testing.assert_allclose(rec.q, _heads(yq, 2, 4)[0], rtol=1e-6)
    np.testing.assert_allclose(rec.k, _heads(yk, 2, 4)[0], rtol=1e-6)
    assert rec.visible.dtype == bool
    np.testing.assert_allclose(rec.q_ratio, [2.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(rec.k_ratio, [0.5, 0.5], rtol=1e-6)
    np.testing.assert_allclose(rec.prescale(), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(rec.kv_head, [0, 1])
    assert not rec.causal and rec.visible.all() and rec.bias is None
    assert rec.features == ("bidirectional", "q pre-scaled x2", "k pre-scaled x0.5")


def test_kv_heads_per_query_head_for_mqa_and_an_uneven_grouping() -> None:
    rec = record_call(_call(h=3, hkv=1)[0])
    np.testing.assert_array_equal(rec.kv_head, [0, 0, 0])
    assert "MQA (1 key head)" in rec.features and not any("GQA" in f for f in rec.features)
    rec = record_call(_call(h=6, hkv=3)[0])
    np.testing.assert_array_equal(rec.kv_head, [0, 0, 1, 1, 2, 2])
    assert "GQA 6q/3kv" in rec.features
    # 3 query heads over 2 key heads is no grouping transformers makes: every head reads the first
    h, hkv, n, d = 3, 2, 5, 4
    yq, yk = _proj(n, h, d, 1), _proj(n, hkv, d, 2)
    w = np.full((1, h, n, n), 1.0 / n)
    call = SiteCall(0, None, torch.from_numpy(_heads(yq, h, d).copy()),
                    torch.from_numpy(_heads(yk, hkv, d).copy()), None, None,
                    torch.from_numpy(w.astype(np.float32)), None, {},
                    [(torch.from_numpy(yq)[None], None), (torch.from_numpy(yk)[None], None)])
    rec = record_call(call)
    np.testing.assert_array_equal(rec.kv_head, [0, 0, 0])
    assert rec.kv_head.dtype.kind == "i"


def test_one_query_head_per_key_head_reads_its_own() -> None:
    rec = record_call(_call(h=3, hkv=3)[0])
    np.testing.assert_array_equal(rec.kv_head, [0, 1, 2])
    assert rec.features == ("causal",)


def test_rows_are_evenly_spaced_and_cut_every_per_row_array() -> None:
    assert _rows(9, 4).tolist() == [0, 3, 5, 8]  # round(0, 2.67, 5.33, 8)
    assert _rows(5, 5).tolist() == [0, 1, 2, 3, 4]
    assert _rows(6, 5).tolist() == [0, 1, 2, 4, 5]  # round(1.25 ...) and a tie at 2.5 to even
    assert _rows(7, None).tolist() == list(range(7))
    assert _rows(3, 10).tolist() == [0, 1, 2]
    bias = np.random.default_rng(3).normal(0, 1, (1, 4, 9, 9))
    call, _yq, _yk = _call(n=9, bias=bias, extra={"bias_kind": "ALiBi"})
    rec = record_call(call, max_rows=4)
    np.testing.assert_array_equal(rec.rows, [0, 3, 5, 8])
    w = call.weights.numpy()[0]
    np.testing.assert_allclose(rec.probs, w[:, [0, 3, 5, 8]])
    np.testing.assert_array_equal(rec.visible, np.tril(np.ones((9, 9), bool))[[0, 3, 5, 8]])
    np.testing.assert_allclose(rec.bias, bias[0][:, [0, 3, 5, 8]], rtol=1e-6)
    assert rec.bias.dtype == np.float32
    assert rec.q.shape == (4, 9, 4)  # q and k keep every token
    assert "ALiBi" in rec.features
    # the default keeps MAX_FIT_ROWS = 128 rows
    rec = record_call(_call(n=130, h=2, hkv=2)[0])
    assert len(rec.rows) == 128 and rec.rows[0] == 0 and rec.rows[-1] == 129


def test_a_position_bias_adds_to_the_masks_finite_part() -> None:
    n = 5
    alibi = -0.5 * np.abs(np.arange(n)[:, None] - np.arange(n)[None])  # (n, n), one for all heads
    mask = np.where(np.tril(np.ones((n, n), bool)), alibi, MIN).astype(np.float32)
    pos = np.random.default_rng(4).normal(0, 1, (1, 2, n, n))
    call, _yq, _yk = _call(h=2, hkv=2, n=n, mask=torch.from_numpy(mask)[None, None], bias=pos)
    rec = record_call(call)
    want = np.where(np.tril(np.ones((n, n), bool)), alibi, 0.0)[None] + pos[0]
    np.testing.assert_allclose(rec.bias, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(rec.visible, np.tril(np.ones((n, n), bool)))
    assert rec.features[-2:] == ("relative position bias", "additive bias")
    # a bias of zeros is no bias
    call, _yq, _yk = _call(h=2, hkv=2, n=n, bias=np.zeros((1, 2, n, n)))
    rec = record_call(call)
    assert rec.bias is None and "relative position bias" not in rec.features
    # the position bias alone
    call, _yq, _yk = _call(h=2, hkv=2, n=n, bias=pos)
    rec = record_call(call)
    np.testing.assert_allclose(rec.bias, pos[0], rtol=1e-6)
    assert "relative position bias" in rec.features and "additive bias" not in rec.features


def test_split_mask_reads_boolean_additive_per_head_and_longer_masks() -> None:
    vis, add = split_mask(None, 3, 4)
    assert vis.shape == (3, 4) and vis.all() and add is None
    # boolean (True = visible), 4-D, cut to the last nq rows and nk keys
    full = np.tril(np.ones((5, 5), bool))
    vis, add = split_mask(torch.from_numpy(full)[None, None], 3, 4)
    np.testing.assert_array_equal(vis, full[-3:, -4:])
    assert add is None and vis.flags.writeable
    # additive 2-D: -inf and the float32 minimum are masked, a finite -1e29 is a bias
    a = np.array([[0.0, -np.inf, 1.5], [MIN, 0.0, -1e29]], np.float64)
    vis, add = split_mask(torch.from_numpy(a), 2, 3)
    np.testing.assert_array_equal(vis, [[True, False, True], [False, True, True]])
    np.testing.assert_array_equal(add, [[[0.0, 0.0, 1.5], [0.0, 0.0, -1e29]]])
    assert add.dtype == np.float64
    # the threshold itself
    assert MASKED_BELOW == -1e30
    vis, _ = split_mask(torch.tensor([[0.0, -1.001e30, -0.999e30]], dtype=torch.float64), 1, 3)
    np.testing.assert_array_equal(vis, [[True, False, True]])
    # per head: a key is visible only where every head sees it; the bias keeps its heads
    m = np.zeros((1, 2, 2, 2), np.float32)
    m[0, 0, 0, 1] = MIN
    m[0, 1, 1, 0] = MIN
    m[0, 1, 0, 0] = 0.25
    vis, add = split_mask(torch.from_numpy(m), 2, 2)
    np.testing.assert_array_equal(vis, [[True, False], [False, True]])
    assert add.shape == (2, 2, 2) and add[1, 0, 0] == 0.25 and add[0, 0, 1] == 0
    # a boolean mask per head
    b = np.ones((1, 2, 2, 2), bool)
    b[0, 1, 0, 1] = False
    vis, add = split_mask(torch.from_numpy(b), 2, 2)
    np.testing.assert_array_equal(vis, [[True, False], [True, True]])
    assert add is None
    # an additive mask of zeros and masked entries only has no bias
    vis, add = split_mask(torch.from_numpy(np.array([[[[0.0, MIN]]]], np.float32)), 1, 2)
    assert add is None and vis.tolist() == [[True, False]]
    # a (1, nq, nk) mask broadcasts over the rows; a 3-D mask is one head per row set
    vis, _ = split_mask(torch.from_numpy(np.array([[0.0, MIN]], np.float32))[None], 3, 2)
    np.testing.assert_array_equal(vis, [[True, False]] * 3)


def test_attention_pattern_tells_causal_windows_and_bidirectional() -> None:
    assert attention_pattern(np.ones((1, 1), bool)) == (False, None)
    assert attention_pattern(np.tril(np.ones((3, 4), bool))) == (False, None)
    assert attention_pattern(np.tril(np.ones((2, 2), bool))) == (True, None)
    assert attention_pattern(np.ones((4, 4), bool)) == (False, None)
    band = np.tril(np.ones((6, 6), bool)) & ~np.tril(np.ones((6, 6), bool), k=-3)
    assert band.sum(1).tolist() == [1, 2, 3, 3, 3, 3]
    causal, window = attention_pattern(band)
    assert causal is True and window == 3 and isinstance(window, int)
    # a padding row that sees nothing is not a window
    pad = np.tril(np.ones((4, 4), bool))
    pad[0] = False
    assert attention_pattern(pad) == (True, None)
    # one row one key short of its prefix is a window
    short = np.tril(np.ones((4, 4), bool))
    short[3, 0] = False
    assert attention_pattern(short) == (True, 3)
    # a window read from a hand-made call, and a declared window longer than the text
    n = 6
    mask = np.where(band, 0.0, MIN).astype(np.float32)
    call, _yq, _yk = _call(h=2, hkv=2, n=n, mask=torch.from_numpy(mask)[None, None],
                           extra={"sliding_window": 3})
    rec = record_call(call)
    assert rec.causal and rec.window == 3 and rec.sliding_window == 3
    assert rec.features == ("sliding window 3",)
    call, _yq, _yk = _call(h=2, hkv=2, n=n, extra={"sliding_window": np.int64(4096)})
    rec = record_call(call)
    assert rec.sliding_window == 4096 and type(rec.sliding_window) is int
    assert rec.features == ("causal", "sliding window 4096 (longer than the text)")
    for bad in (True, 3.0, "3"):
        assert record_call(_call(h=2, hkv=2, extra={"sliding_window": bad})[0]).sliding_window \
            is None
    # a declared window on a bidirectional site is not reported as longer than the text
    call, _yq, _yk = _call(h=2, hkv=2, n=n, mask=None, extra={"sliding_window": 4096})
    assert record_call(call).features == ("bidirectional",)


def test_cross_attention_is_neither_causal_nor_windowed() -> None:
    call, _yq, _yk = _call(h=2, hkv=2, n=4, nk=4)
    rec = record_call(call, cross=True)
    assert not rec.causal and rec.window is None
    assert rec.features[0] == "cross-attention (all source tokens)"
    call, _yq, _yk = _call(h=2, hkv=2, n=3, nk=5, mask=None)
    rec = record_call(call, cross=True)
    assert rec.visible.shape == (3, 5) and rec.k.shape == (2, 5, 4)


def test_an_unmatched_query_is_kept_as_it_reaches_the_product_and_named() -> None:
    """QK-norm: q is normalized per token, no constant factor of any projection block; both
    sides are then measured at the product (k's own match dropped)."""
    n, d = 6, 4
    yq = _proj(n, 2, d, 1)
    qh = _heads(yq, 2, d)
    qn = (qh / np.linalg.norm(qh, axis=-1, keepdims=True)).astype(np.float32)
    call, _yq, yk = _call(h=2, hkv=2, n=n, q=qn, k_factor=3.0)
    for kwargs, label in (({}, "q/k not a projection's output"), ({"has_norm": True}, "QK-norm"),
                          ({"has_norm": True, "unmatched": "MLA"}, "MLA")):
        rec = record_call(call, **kwargs)
        assert rec.q_ratio is None and rec.k_ratio is None
        np.testing.assert_allclose(rec.q, qn[0])
        np.testing.assert_allclose(rec.k, 3.0 * _heads(yk, 2, d)[0], rtol=1e-6)
        np.testing.assert_allclose(rec.prescale(), [1.0, 1.0])
        assert rec.features == ("causal", label), rec.features
    # the key unmatched and the query matched: both measured at the product too
    kn = (_heads(yk, 2, d) / np.linalg.norm(_heads(yk, 2, d), axis=-1, keepdims=True))
    call, yq, _yk = _call(h=2, hkv=2, n=n, k=kn.astype(np.float32), q_factor=0.5)
    rec = record_call(call)
    assert rec.q_ratio is None and rec.k_ratio is None
    np.testing.assert_allclose(rec.q, 0.5 * _heads(yq, 2, d)[0], rtol=1e-6)


def test_projections_of_another_batch_or_time_first_layout() -> None:
    n, h, d = 5, 2, 4
    call, yq, yk = _call(h=h, hkv=h, n=n, q_factor=0.5)
    # (n, 1, W): FSMT's time-first output is read too
    call.projections = [(torch.from_numpy(yq)[:, None], None), (torch.from_numpy(yk)[:, None], None)]
    rec = record_call(call)
    np.testing.assert_allclose(rec.q_ratio, [0.5, 0.5], rtol=1e-6)
    np.testing.assert_allclose(rec.q, _heads(yq, h, d)[0], rtol=1e-6)
    # a 2-D output and one of batch 2 are not this call's projections
    call.projections = [(torch.from_numpy(yq), None), (torch.from_numpy(np.stack([yq, yq])), None),
                        (torch.from_numpy(yk)[None], None)]
    rec = record_call(call)
    assert rec.q_ratio is None


def test_sinks_are_kept_only_when_the_rows_sum_below_one() -> None:
    n, h = 4, 2
    call, _yq, _yk = _call(h=h, hkv=h, n=n, mask=None)
    w = call.weights.numpy().astype(np.float64)
    for drop, kept in ((2 * SINK_MASS_MIN, True), (0.5 * SINK_MASS_MIN, False)):
        call.weights = torch.from_numpy(w * (1 - drop))
        call.extra = {"s_aux": torch.tensor([0.5, -1.25])}
        rec = record_call(call)
        if kept:
            np.testing.assert_array_equal(rec.sinks, [0.5, -1.25])
            assert rec.sinks.dtype == np.float64 and rec.features[-1] == "sinks"
        else:
            assert rec.sinks is None and "sinks" not in rec.features
    # every row must sum to 1 for the sinks to be dropped: one row below 1 keeps them
    w2 = w.copy()
    w2[:, 1, 2] *= 0.9
    call.weights = torch.from_numpy(w2)
    assert record_call(call).sinks is not None
    # rows that see no key are not counted (their sum is 0)
    call, _yq, _yk = _call(h=h, hkv=h, n=n, mask=None)
    w = call.weights.numpy().copy()
    w[:, :, 0] = 0.0
    m = np.zeros((1, 1, n, n), np.float32)
    m[..., 0, :] = MIN
    call.mask = torch.from_numpy(m)
    call.weights = torch.from_numpy(w)
    call.extra = {"s_aux": torch.tensor([[0.5], [1.0]])}
    assert record_call(call).sinks is None
    # a sink row (1, H) is flattened to (H,)
    call.weights = torch.from_numpy(w * 0.5)
    np.testing.assert_array_equal(record_call(call).sinks, [0.5, 1.0])


def test_the_soft_cap_and_scaling_are_read_when_they_are_finite_numbers() -> None:
    call, _yq, _yk = _call(h=2, hkv=2, mask=None, extra={"softcap": 30.0, "scaling": 0.125})
    rec = record_call(call)
    assert rec.softcap == 30.0 and rec.scaling == 0.125
    assert rec.features == ("bidirectional", "soft-cap 30")
    call.extra = {"softcap": torch.tensor(50.0), "scaling": np.float32(0.25)}
    rec = record_call(call)
    assert rec.softcap == 50.0 and rec.scaling == 0.25 and type(rec.softcap) is float
    for bad in (True, False, "x", float("inf"), float("nan"), [1.0]):
        call.extra = {"softcap": bad, "scaling": bad}
        rec = record_call(call)
        assert rec.softcap is None and rec.scaling is None, bad
    call.extra = {}
    assert record_call(call).scaling is None


def test_rope_is_told_from_a_rescaling_and_named() -> None:
    """A rotation of each (i, i + d/2) pair per token: the norms match the projection (a
    constant factor), the vectors do not."""
    n, h, d = 6, 2, 4
    yq, yk = _proj(n, h, d, 1), _proj(n, h, d, 2)

    def rope(x: np.ndarray, factor: float) -> np.ndarray:
        ang = np.arange(n)[:, None] * np.array([1.0, 0.1])[None]  # (n, d/2)
        c, s = np.cos(ang), np.sin(ang)
        a, b = x[..., :d // 2], x[..., d // 2:]
        return (factor * np.concatenate([a * c - b * s, a * s + b * c], -1)).astype(np.float32)

    for factor, label in ((1.0, ("RoPE",)), (1.2, ("RoPE, q and k x1.2 each",))):
        qr, kr = rope(_heads(yq, h, d), factor), rope(_heads(yk, h, d), factor)
        call, _yq, _yk = _call(h=h, hkv=h, n=n, q=qr, k=kr, mask=None)
        rec = record_call(call)
        assert rec.rotated
        assert rec.features == ("bidirectional",) + label, rec.features
        np.testing.assert_allclose(rec.q_ratio, [factor] * 2, rtol=1e-5)
        # the rotated q divided by the factor, not the projection itself
        np.testing.assert_allclose(rec.q, qr[0] / factor, rtol=1e-5, atol=1e-6)
    # rotated, q and k scaled differently: two pre-scales beside RoPE
    qr, kr = rope(_heads(yq, h, d), 2.0), rope(_heads(yk, h, d), 0.5)
    rec = record_call(_call(h=h, hkv=h, n=n, q=qr, k=kr, mask=None)[0])
    assert rec.features == ("bidirectional", "RoPE", "q pre-scaled x2", "k pre-scaled x0.5")
    # rotated with q scaled only
    qr, kr = rope(_heads(yq, h, d), 1.2), rope(_heads(yk, h, d), 1.0)
    rec = record_call(_call(h=h, hkv=h, n=n, q=qr, k=kr, mask=None)[0])
    assert rec.features == ("bidirectional", "RoPE", "q pre-scaled x1.2")
    # q and k scaled by factors 1e-3 apart are not "each": the ratio's limit
    qr, kr = rope(_heads(yq, h, d), 1.2), rope(_heads(yk, h, d), 1.2 * 1.002)
    rec = record_call(_call(h=h, hkv=h, n=n, q=qr, k=kr, mask=None)[0])
    assert rec.features == ("bidirectional", "RoPE", "q pre-scaled x1.2", "k pre-scaled x1.202")
    qr, kr = rope(_heads(yq, h, d), 1.2), rope(_heads(yk, h, d), 1.2 * 1.0005)
    rec = record_call(_call(h=h, hkv=h, n=n, q=qr, k=kr, mask=None)[0])
    assert rec.features == ("bidirectional", "RoPE, q and k x1.2 each")


def test_a_factor_within_its_spread_of_one_is_no_pre_scale() -> None:
    for factor, named in ((1 + 0.5 * RATIO_SPREAD_TOL, False), (1 + 3 * RATIO_SPREAD_TOL, True)):
        call, _yq, _yk = _call(h=2, hkv=2, q_factor=factor, mask=None)
        assert any("pre-scaled" in f for f in record_call(call).features) is named, factor
        call, _yq, _yk = _call(h=2, hkv=2, q_factor=1 / factor, mask=None)
        assert any("pre-scaled" in f for f in record_call(call).features) is named, factor


def test_a_query_factor_that_grows_with_the_position_is_divided_out() -> None:
    """Llama 4's attention temperature: q x f(t), f(0) = 1, shared by the heads; k plain."""
    n, h, d = 8, 2, 4
    yq, yk = _proj(n, h, d, 1), _proj(n, h, d, 2)
    f = 1 + 0.1 * np.log1p(np.arange(n))
    qh = (_heads(yq, h, d) * 0.5 * f[None, None, :, None]).astype(np.float32)
    call, _yq, _yk = _call(h=h, hkv=h, n=n, q=qh, mask=None)
    rec = record_call(call)
    np.testing.assert_allclose(rec.q_position, f, rtol=1e-5)
    np.testing.assert_allclose(rec.q_ratio, [0.5, 0.5], rtol=1e-5)
    np.testing.assert_allclose(rec.q, _heads(yq, h, d)[0], rtol=1e-5)
    assert rec.q.dtype == np.float32
    assert rec.features[-1] == f"q x1 to x{f[-1]:.4g} with the position"
    # a token whose q is 0 in every head has no factor (NaN), and its q stays 0
    qz = qh.copy()
    qz[:, :, 3] = 0.0
    call, _yq, _yk = _call(h=h, hkv=h, n=n, q=qz, mask=None)
    rec = record_call(call)
    assert np.isnan(rec.q_position[3]) and np.all(np.isfinite(np.delete(rec.q_position, 3)))
    assert np.all(rec.q[:, 3] == 0.0) and np.all(np.isfinite(rec.q))
    np.testing.assert_allclose(np.delete(rec.q, 3, axis=1), np.delete(_heads(yq, h, d)[0], 3, 1),
                               rtol=1e-5)
    # with the key unmatched too, nothing is divided
    kn = _heads(yk, h, d) / np.linalg.norm(_heads(yk, h, d), axis=-1, keepdims=True)
    call, _yq, _yk = _call(h=h, hkv=h, n=n, q=qh, k=kn.astype(np.float32), mask=None)
    rec = record_call(call)
    assert rec.q_position is None and rec.q_ratio is None
    np.testing.assert_allclose(rec.q, qh[0])
    assert position_feature(np.array([np.nan, 0.5, 2.25])) == "q x0.5 to x2.25 with the position"


def test_match_projection_picks_each_heads_own_block_among_outputs() -> None:
    rng = np.random.default_rng(5)
    n, d = 7, 4
    y = rng.normal(0, 1, (n, 3 * d))
    other = rng.normal(0, 1, (n, 2 * d))
    blocks = y.reshape(n, 3, d).transpose(1, 0, 2)
    # head 0 = 2 x block 2, head 1 = 0.5 x block 0; the other output first, a wrong-length one too
    x = np.stack([2 * blocks[2], 0.5 * blocks[0]])
    r, rot = match_projection(x, [y[:5], other, rng.normal(0, 1, (n, 6)), y])
    np.testing.assert_allclose(r, [2.0, 0.5], rtol=1e-12)
    assert rot is False
    # a head no block reproduces: None for all
    r, rot = match_projection(np.stack([2 * blocks[2], rng.normal(0, 1, (n, d))]), [y])
    assert r is None and rot is False
    # no outputs at all
    assert match_projection(x, []) == (None, False)
    # the best block wins when two fit: the exact copy over the one within the tolerance
    near = blocks[1] * (1 + 0.3 * RATIO_SPREAD_TOL * np.linspace(-1, 1, n))[:, None]
    y2 = np.concatenate([near, 3 * blocks[1]], axis=1)
    r, _rot = match_projection((3 * blocks[1])[None], [y2])
    np.testing.assert_allclose(r, [1.0], rtol=1e-12)
    r, _rot = match_projection((3 * blocks[1])[None], [near * 0 + y2[:, :d], y2[:, d:]])
    np.testing.assert_allclose(r, [1.0], rtol=1e-12)
    # the ratio is the mean over the tokens (not one token's)
    wig = 1 + 0.4 * RATIO_SPREAD_TOL * np.array([1, 1, 1, 1, 1, 1, -1.0])
    r, _rot = match_projection((0.5 * wig[:, None] * blocks[0])[None], [y])
    np.testing.assert_allclose(r, [0.5 * wig.mean()], rtol=1e-12)


def test_match_projection_skips_tokens_whose_query_is_zero() -> None:
    rng = np.random.default_rng(6)
    n, d = 6, 4
    y = rng.normal(0, 1, (n, d))
    x = 0.5 * y.copy()
    x[2] = 0.0  # (a padding token's query)
    r, _rot = match_projection(x[None], [y])
    np.testing.assert_allclose(r, [0.5], rtol=1e-12)
    # a token of a norm 1e-7 of the largest counts as zero too; 1e-5 of it is a real token
    x[2] = 1e-7 * y[2] * np.abs(x).max() / np.linalg.norm(y[2])
    assert match_projection(x[None], [y])[0] is not None
    x[2] = 1e-5 * 7 * y[2]
    assert match_projection(x[None], [y])[0] is None
    # one live token is not enough to call a ratio constant
    x = np.zeros((1, n, d))
    x[0, 1] = 0.5 * y[1]
    assert match_projection(x, [y])[0] is None
    # ... but a one-token text is matched by its one token
    r, _rot = match_projection(0.5 * y[:1][None], [y[:1]])
    np.testing.assert_allclose(r, [0.5], rtol=1e-12)
    # a token where the block is exactly 0 carries no ratio: it is left out, not divided by 1
    yz = y.copy()
    yz[4] = 0.0
    r, _rot = match_projection(0.5 * y[None], [yz])
    np.testing.assert_allclose(r, [0.5], rtol=1e-12)


def test_rotation_is_only_claimed_beyond_ten_times_the_spread() -> None:
    rng = np.random.default_rng(7)
    n, d = 6, 4
    y = rng.normal(0, 1, (n, d))
    # off the block at constant norm: a rotation by angle eps in the (0, 1) plane
    for eps, rotated in ((2 * RATIO_SPREAD_TOL, False), (40 * RATIO_SPREAD_TOL, True)):
        c, s = np.cos(eps), np.sin(eps)
        x = y.copy()
        x[:, 0], x[:, 1] = c * y[:, 0] - s * y[:, 1], s * y[:, 0] + c * y[:, 1]
        r, rot = match_projection(x[None], [y])
        np.testing.assert_allclose(r, [1.0], rtol=1e-12)
        assert rot is rotated, eps


def test_scores_and_prescale_use_each_heads_key_head() -> None:
    q = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    k = np.array([[[1, 0], [0, 1]], [[2, 0], [0, -1]]], np.float32)  # (2, 2, 2)
    rec = SiteRecord(0, q, k, np.array([1, 0]), np.array([2, 0]), np.zeros((2, 2, 2), np.float32),
                     np.ones((2, 2), bool), None, None, None, None, np.array([2.0, 3.0]),
                     np.array([5.0, 7.0]), False, False, None, None, ())
    s = rec.scores()
    # head 0 reads key head 1, rows 2 then 0
    np.testing.assert_array_equal(s[0], [[2 * 4, -5], [0, -1]])
    np.testing.assert_array_equal(s[1], [[10, 11], [6, 7]])
    np.testing.assert_array_equal(rec.prescale(), [2.0 * 7.0, 3.0 * 5.0])
    rec = SiteRecord(0, q, k, np.array([1, 0]), np.array([0]), np.zeros((2, 1, 2), np.float32),
                     np.ones((1, 2), bool), None, None, None, None, None, np.array([5.0, 7.0]),
                     False, False, None, None, ())
    np.testing.assert_array_equal(rec.prescale(), [7.0, 5.0])
    rec = SiteRecord(0, q, k, np.array([1, 0]), np.array([0]), np.zeros((2, 1, 2), np.float32),
                     np.ones((1, 2), bool), None, None, None, None, np.array([2.0, 3.0]), None,
                     False, False, None, None, ())
    np.testing.assert_array_equal(rec.prescale(), [2.0, 3.0])
    assert (rec.n_heads, rec.n_kv_heads, rec.d_k) == (2, 2, 2)


def test_a_head_count_of_one_or_two_labels_mqa_only_with_several_query_heads() -> None:
    rec = record_call(_call(h=1, hkv=1)[0])
    assert rec.features == ("causal",)
    rec = record_call(_call(h=2, hkv=1)[0])
    assert rec.features == ("causal", "MQA (1 key head)")


def test_a_row_that_sees_the_next_key_is_not_causal_and_a_window_of_one_is_a_window() -> None:
    nxt = np.tril(np.ones((4, 4), bool)) | np.eye(4, k=1, dtype=bool)
    assert attention_pattern(nxt) == (False, None)
    assert attention_pattern(np.eye(4, dtype=bool)) == (True, 1)


def test_match_projection_edges_at_its_thresholds_exactly() -> None:
    """A token whose norm is exactly 1e-6 of the largest is not live; a block token of norm
    exactly 1e-30 is not a block token; large and small scales do not move either edge."""
    rng = np.random.default_rng(8)
    n, d = 5, 4
    y = rng.normal(0, 1, (n, d))
    m = 1000.0
    x = 0.5 * y * m / np.linalg.norm(y, axis=-1).max()
    y = y * m / np.linalg.norm(y, axis=-1).max()
    big = np.argmax(np.linalg.norm(x, axis=-1))
    edge = 0 if big else 1
    x[big] = [np.linalg.norm(x[big]), 0, 0, 0]
    y[big] = 2 * x[big]
    top = x[big, 0]
    x[edge] = [1e-6 * top, 0, 0, 0]  # exactly the edge: left out, its ratio (1) ignored
    y[edge] = [1e-6 * top, 0, 0, 0]
    r, _rot = match_projection(x[None], [y])
    np.testing.assert_allclose(r, [0.5], rtol=1e-12)
    # 1e-7 of a norm of 1000: left out (it would count against 1e-6 / 1000)
    x[edge] = [1e-7 * top, 0, 0, 0]
    assert match_projection(x[None], [y])[0] is not None
    # a block token of norm exactly 1e-30 is no block token
    x[edge] = 0.5 * y[edge] if np.any(y[edge]) else x[edge]
    y[edge] = [1e-30, 0, 0, 0]
    x[edge] = [1.0, 0, 0, 0]
    r, _rot = match_projection(x[None], [y])
    np.testing.assert_allclose(r, [0.5], rtol=1e-12)
    # blocks of norm below 1 are blocks too
    small = rng.normal(0, 1, (n, d)) * 1e-3
    r, _rot = match_projection((0.5 * small)[None], [small])
    np.testing.assert_allclose(r, [0.5], rtol=1e-12)


def test_match_projection_warns_about_nothing_on_zero_blocks_and_tokens() -> None:
    """A block of zeros and a token of zeros are left out without a floating-point error or a
    mean of nothing (they are normal: padding, an unused head's output)."""
    import warnings

    rng = np.random.default_rng(9)
    n, d = 5, 4
    y = rng.normal(0, 1, (n, 2 * d))
    y[:, d:] = 0.0  # the second block is all zeros
    y[1, :d] = 0.0
    x = 0.5 * y[:, :d].copy()
    x[3] = 0.0
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="raise"):
        warnings.simplefilter("always")
        r, _rot = match_projection(x[None], [y])
    np.testing.assert_allclose(r, [0.5], rtol=1e-12)
    assert not [w for w in caught if "Mean of empty slice" in str(w.message)]


def test_outputs_that_are_not_tensors_are_not_projections() -> None:
    call, yq, _yk = _call(h=2, hkv=2, q_factor=0.5)
    call.projections = [((torch.from_numpy(yq)[None],), None)] + call.projections
    rec = record_call(call)
    np.testing.assert_allclose(rec.q_ratio, [0.5, 0.5], rtol=1e-6)


def test_a_mask_entry_of_exactly_minus_1e30_is_masked() -> None:
    vis, add = split_mask(torch.tensor([[0.0, -1e30, 2.0]], dtype=torch.float64), 1, 3)
    np.testing.assert_array_equal(vis, [[True, False, True]])
    np.testing.assert_array_equal(add, [[[0.0, 0.0, 2.0]]])


def test_a_two_token_time_first_projection_is_read() -> None:
    call, yq, yk = _call(h=2, hkv=2, n=2, q_factor=0.5, mask=None)
    call.projections = [(torch.from_numpy(yq)[:, None], None), (torch.from_numpy(yk)[:, None], None)]
    np.testing.assert_allclose(record_call(call).q_ratio, [0.5, 0.5], rtol=1e-6)


def test_a_constant_factor_within_its_spread_is_no_position_factor() -> None:
    """q x 0.5 (1 + 0.9e-4 w(t)), w shared by the heads: matched as one factor (within
    RATIO_SPREAD_TOL of its mean); its token-to-token ratio (up to 1.8e-4) is no position law."""
    n, h, d = 8, 2, 4
    yq = _proj(n, h, d, 1)
    wig = 1 + 0.9 * RATIO_SPREAD_TOL * np.array([-1, 1, -1, 1, -1, 1, -1, 1.0])
    qh = (_heads(yq, h, d) * 0.5 * wig[None, None, :, None]).astype(np.float32)
    rec = record_call(_call(h=h, hkv=h, n=n, q=qh, mask=None)[0])
    assert rec.q_position is None
    np.testing.assert_allclose(rec.q_ratio, [0.5, 0.5], rtol=2e-4)
    assert not any("position" in f for f in rec.features)


def test_rope_on_the_query_alone_is_rope() -> None:
    n, h, d = 6, 2, 4
    yq = _proj(n, h, d, 1)
    x = _heads(yq, h, d)
    ang = np.arange(n)[:, None] * np.array([1.0, 0.1])[None]
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., :d // 2], x[..., d // 2:]
    qr = np.concatenate([a * c - b * s, a * s + b * c], -1).astype(np.float32)
    rec = record_call(_call(h=h, hkv=h, n=n, q=qr, mask=None)[0])
    assert rec.rotated is True and rec.features == ("bidirectional", "RoPE")


def test_match_projection_needs_two_live_tokens_per_head_and_keeps_the_first_tie() -> None:
    rng = np.random.default_rng(10)
    n, d = 5, 4
    y = rng.normal(0, 1, (n, 2 * d))
    blocks = y.reshape(n, 2, d).transpose(1, 0, 2)
    x = np.stack([0.5 * blocks[0], 0.25 * blocks[1]])
    # head 1 has one live token: one token's ratio is no evidence of a constant factor
    x1 = x.copy()
    x1[1, 1:] = 0.0
    assert match_projection(x1, [y]) == (None, False)
    # two live tokens of five are enough
    x2 = x.copy()
    x2[1, 2:] = 0.0
    r, _rot = match_projection(x2, [y])
    np.testing.assert_allclose(r, [0.5, 0.25], rtol=1e-12)
    # the same spread in two outputs (one twice the other): the first output's ratio stays
    r, _rot = match_projection(x, [y, 2 * y])
    np.testing.assert_allclose(r, [0.5, 0.25], rtol=1e-12)
    r, _rot = match_projection(x, [2 * y, y])
    np.testing.assert_allclose(r, [0.25, 0.125], rtol=1e-12)


def test_one_rotated_head_makes_the_site_rotated() -> None:
    rng = np.random.default_rng(11)
    n, d = 6, 4
    y = rng.normal(0, 1, (n, 2 * d))
    b = y.reshape(n, 2, d).transpose(1, 0, 2)
    c, s = np.cos(0.3), np.sin(0.3)
    rot = b[0].copy()
    rot[:, 0], rot[:, 1] = c * b[0][:, 0] - s * b[0][:, 1], s * b[0][:, 0] + c * b[0][:, 1]
    assert match_projection(np.stack([rot, b[1]]), [y])[1] is True
    assert match_projection(np.stack([b[0], rot]), [y[:, [4, 5, 6, 7, 0, 1, 2, 3]]])[1] is True


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_rotation_is_claimed_beyond_ten_times_the_spread_of_the_largest_entry(scale) -> None:
    """One token moved off its block at constant norm (to first order) by delta: rotated when
    delta exceeds 10 x RATIO_SPREAD_TOL x the largest |x|, at any scale of x."""
    rng = np.random.default_rng(12)
    n, d = 6, 4
    y = rng.normal(0, 1, (n, d)) * scale
    for frac, rotated in ((0.95, False), (1.05, True)):
        x = y.copy()
        top = np.abs(y).max()
        t = int(np.argmin(np.abs(y).max(axis=1)))  # a token whose entries are all below top
        perp = np.zeros(d)
        perp[:2] = [-y[t, 1], y[t, 0]]
        perp /= np.abs(perp).max()
        delta = frac * 10 * RATIO_SPREAD_TOL * top
        x[t] = y[t] + delta * perp
        x[t] *= np.linalg.norm(y[t]) / np.linalg.norm(x[t])  # same norm: the ratio stays 1
        r, rot = match_projection(x[None], [y])
        assert r is not None and rot is rotated, (scale, frac)
