"""engine.probe.stats against brute force: the bootstrap resample by resample, odd masks (no key,
one key, keys that are not a prefix), per-layer scales, soft-caps and additive terms, dtypes,
and the coverage of the intervals the standard errors make. Every expected value is computed
here by expanding tokens, looping over rows or from the generator's own parameters, never by
the functions under test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.probe.stats import (
    RowStats,
    ScoreStats,
    _coord_moments,
    _PairMoments,
    _safe_ratio,
    attention_weights,
    concat_layers,
    iid_prediction,
    row_stats,
    score_stats,
)

# -- the bootstrap, resample by resample ------------------------------------------------------


def _counts(seed: int, n: int, b: int) -> np.ndarray:
    """The documented resamples: multinomial token counts drawn from default_rng(seed)."""
    return np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=b)


def _brute_resample(q: np.ndarray, k: np.ndarray, pm: np.ndarray, idx: np.ndarray):
    """(raw std, i.i.d. std) per head of the text made of the tokens ``idx`` (repeats kept): the
    pooled std of q.k over the visible pairs, and the predicted one as the sum over coordinates
    of the variance of q_c k_c over ALL pairs (which is the per-coordinate formula exactly)."""
    qq, kk = q[..., idx, :], k[..., idx, :]
    s = qq @ np.swapaxes(kk, -1, -2)
    vis = pm[np.ix_(idx, idx)]
    raw = s[..., vis].std(axis=-1)
    per_coord = qq[..., :, None, :] * kk[..., None, :, :]  # (..., n, n, d)
    pred = np.sqrt(per_coord.var(axis=(-3, -2)).sum(axis=-1))
    return raw, pred


def _brute_bootstrap(q, k, pm, seed: int, b: int):
    counts = _counts(seed, q.shape[-2], b)
    raws, preds = [], []
    for c in counts:
        raw, pred = _brute_resample(q, k, pm, np.repeat(np.arange(q.shape[-2]), c))
        raws.append(raw)
        preds.append(pred)
    raws, preds = np.stack(raws, -1), np.stack(preds, -1)
    return tuple(x.std(axis=-1, ddof=1) for x in (raws, preds, raws / preds))


def _small_qk(seed: int, shape: tuple[int, ...], n: int, d: int):
    """Projections at the scale 0.1 (score stds far below 1: a floor at 1 shows), heads with
    different spreads, coordinates with non-zero means."""
    rng = np.random.default_rng(seed)
    spread = rng.uniform(0.5, 2.0, shape + (1, 1))
    q = 0.1 * spread * (rng.standard_normal(shape + (n, d)) + rng.normal(0, 1, shape + (1, d)))
    k = 0.1 * (rng.standard_normal(shape + (n, d)) ** 3 + rng.normal(0, 1, shape + (1, d)))
    return q, k


def _causal_with_padding(n: int) -> np.ndarray:
    pm = np.tril(np.ones((n, n), dtype=bool))
    pm[:, 1] = False  # a padding token: no query sees it (keys are not a prefix then)
    pm[1, 1] = True
    return pm


def test_the_bootstrap_se_is_the_sd_of_the_statistics_over_the_documented_resamples() -> None:
    """100 resamples (more than one chunk of 64), causal mask with a padded key, (L, H) = (2, 3):
    each head's three SEs are the ddof-1 SDs of its own resampled statistics, recomputed from
    the expanded token lists. Fewer or more resamples, another ddof, an SE pooled over heads,
    a floor at 1 or a sign slip in the weighted moments all move them by far more than the
    float32 products of the bootstrap (measured 1e-7 relative)."""
    q, k = _small_qk(1, (2, 3), 11, 3)
    pm = _causal_with_padding(11)
    st = score_stats(q, k, pm, bootstrap=100, seed=4)
    raw_se, pred_se, ratio_se = _brute_bootstrap(q, k, pm, 4, 100)
    np.testing.assert_allclose(st.raw_std_se, raw_se, rtol=1e-4)
    np.testing.assert_allclose(st.iid_pred_std_se, pred_se, rtol=1e-4)
    np.testing.assert_allclose(st.std_ratio_se, ratio_se, rtol=1e-4)
    # the point figures, by hand: the pooled std over the visible pairs and the formula
    raw, pred = _brute_resample(q, k, pm, np.arange(11))
    s = q @ np.swapaxes(k, -1, -2)
    np.testing.assert_allclose(st.raw_mean, s[..., pm].mean(axis=-1), rtol=1e-12)
    np.testing.assert_allclose(st.raw_std, raw, rtol=1e-12)
    np.testing.assert_allclose(st.iid_pred_std, pred, rtol=1e-12)
    np.testing.assert_allclose(st.std_ratio, raw / pred, rtol=1e-12)
    np.testing.assert_allclose(st.iid_pred_mean, (q.mean(-2) * k.mean(-2)).sum(-1), rtol=1e-12)
    assert np.all(raw < 0.5)  # (the floor-at-1 mutants need stds below 1)


def test_the_defaults_are_200_resamples_of_seed_0_and_a_seed_is_reproducible() -> None:
    q, k = _small_qk(2, (1, 2), 8, 2)
    pm = np.ones((8, 8), dtype=bool)
    st = score_stats(q, k, pm)
    np.testing.assert_allclose(st.std_ratio_se, _brute_bootstrap(q, k, pm, 0, 200)[2], rtol=1e-4)
    again = score_stats(q, k, pm, bootstrap=200, seed=0)
    assert np.array_equal(st.std_ratio_se, again.std_ratio_se)
    other = score_stats(q, k, pm, bootstrap=200, seed=1)
    assert not np.allclose(st.std_ratio_se, other.std_ratio_se, rtol=1e-3)


def test_two_resamples_give_a_finite_se_and_fewer_give_zeros_of_the_heads_shape() -> None:
    """bootstrap = 2 is the smallest number with an SD (ddof 1): |x1 - x2| / sqrt(2). Below it
    the SEs are zeros of shape (L, H) beside the point figures."""
    q, k = _small_qk(3, (2, 2), 9, 3)
    pm = np.tril(np.ones((9, 9), dtype=bool))
    two = score_stats(q, k, pm, bootstrap=2, seed=6)
    raw_se, pred_se, ratio_se = _brute_bootstrap(q, k, pm, 6, 2)
    np.testing.assert_allclose(two.raw_std_se, raw_se, rtol=1e-4)
    np.testing.assert_allclose(two.iid_pred_std_se, pred_se, rtol=1e-4)
    np.testing.assert_allclose(two.std_ratio_se, ratio_se, rtol=1e-4)
    assert np.all(two.std_ratio_se > 0)
    raw, pred = _brute_resample(q, k, pm, np.arange(9))
    for b in (0, 1):
        st = score_stats(q, k, pm, bootstrap=b)
        for se in (st.raw_std_se, st.iid_pred_std_se, st.std_ratio_se):
            assert se.shape == (2, 2) and np.all(se == 0.0)
        np.testing.assert_allclose(st.raw_std, raw, rtol=1e-12)
        np.testing.assert_allclose(st.iid_pred_std, pred, rtol=1e-12)
        np.testing.assert_allclose(st.std_ratio, raw / pred, rtol=1e-12)
        s = q @ np.swapaxes(k, -1, -2)
        np.testing.assert_allclose(st.raw_mean, s[..., pm].mean(axis=-1), rtol=1e-12)


def test_any_leading_axes_one_layer_of_heads_or_one_head() -> None:
    """q, k (..., n, d): (H, n, d) and (n, d) give what the (1, H, n, d) call gives."""
    q, k = _small_qk(4, (1, 3), 10, 2)
    pm = _causal_with_padding(10)
    four = score_stats(q, k, pm, bootstrap=70, seed=2)
    three = score_stats(q[0], k[0], pm, bootstrap=70, seed=2)
    two = score_stats(q[0, 1], k[0, 1], pm, bootstrap=70, seed=2)
    for name in ScoreStats.__dataclass_fields__:
        np.testing.assert_allclose(getattr(three, name), getattr(four, name)[0], rtol=1e-6)
        np.testing.assert_allclose(getattr(two, name), getattr(four, name)[0, 1], rtol=1e-6)
    raw_se, _, _ = _brute_bootstrap(q[0], k[0], pm, 2, 70)
    np.testing.assert_allclose(three.raw_std_se, raw_se, rtol=1e-4)


def test_float32_captures_are_computed_in_float64() -> None:
    """The captures arrive in float32: every figure is float64 and the same as from the float64
    values of the same numbers (a product left in float32 is 1e-7 off)."""
    q, k = _small_qk(5, (1, 2), 12, 4)
    q32, k32 = q.astype(np.float32), k.astype(np.float32)
    pm = np.tril(np.ones((12, 12), dtype=bool))
    a = score_stats(q32, k32, pm, bootstrap=0)
    b = score_stats(q32.astype(np.float64), k32.astype(np.float64), pm, bootstrap=0)
    for name in ("raw_mean", "raw_std", "iid_pred_mean", "iid_pred_std", "std_ratio"):
        assert getattr(a, name).dtype == np.float64
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-13, atol=0)
    mean, var = iid_prediction(q32, k32)
    assert mean.dtype == var.dtype == np.float64
    s = (q32 @ np.swapaxes(k32, -1, -2))
    rs32 = row_stats(s, 0.7, pm)
    rs64 = row_stats(s.astype(np.float64), 0.7, pm)
    np.testing.assert_allclose(rs32.entropy_norm, rs64.entropy_norm, rtol=1e-13)
    np.testing.assert_allclose(rs32.top_weight, rs64.top_weight, rtol=1e-13)
    w = attention_weights(s[0, 0], 0.7, pm)
    assert w.dtype == np.float64
    np.testing.assert_allclose(w, attention_weights(s[0, 0].astype(np.float64), 0.7, pm),
                               rtol=1e-13)


# -- the weighted moments behind it -----------------------------------------------------------


def test_weighted_coordinate_moments_are_those_of_the_repeated_tokens() -> None:
    """Weights (B, n) are token counts: each resample's per-coordinate mean and (ddof 0)
    variance are those of the token list with every token repeated its count, for inputs with
    one, two and no leading axes."""
    rng = np.random.default_rng(7)
    w = np.array([[2.0, 0, 1, 0, 3, 1], [0, 1, 1, 1, 1, 2], [1, 1, 1, 1, 1, 1]])
    for shape in ((), (3,), (2, 3)):
        x = rng.normal(2.0, 1.5, shape + (6, 4))
        m, v = _coord_moments(x, w)
        assert m.shape == v.shape == shape + (3, 4)
        for b, c in enumerate(w):
            rep = np.repeat(x, c.astype(int), axis=-2)
            np.testing.assert_allclose(m[..., b, :], rep.mean(axis=-2), rtol=1e-5)
            np.testing.assert_allclose(v[..., b, :], rep.var(axis=-2), rtol=1e-4)
        m0, v0 = _coord_moments(x, None)
        np.testing.assert_allclose(m0, x.mean(axis=-2), rtol=1e-12)
        np.testing.assert_allclose(v0, x.var(axis=-2), rtol=1e-12)


def test_pair_moments_are_those_of_the_expanded_pairs() -> None:
    """Weights pm_ij c_i c_j: mean and variance of s over the pairs of the repeated tokens,
    for (L, H), (H,) and no leading axes."""
    rng = np.random.default_rng(8)
    n = 7
    pm = _causal_with_padding(n)
    c = np.array([[1.0, 2, 0, 1, 3, 0, 0], [0, 0, 1, 2, 1, 1, 2]])
    for shape in ((), (3,), (2, 2)):
        s = rng.normal(1.5, 2.0, shape + (n, n))
        for dtype, rtol in ((np.float64, 1e-12), (np.float32, 1e-5)):
            mean, var = _PairMoments(s, pm, dtype)(c)
            assert mean.shape == var.shape == shape + (2,)
            for b, cb in enumerate(c):
                idx = np.repeat(np.arange(n), cb.astype(int))
                vals = s[..., idx, :][..., idx][..., pm[np.ix_(idx, idx)]]
                np.testing.assert_allclose(mean[..., b], vals.mean(axis=-1), rtol=rtol)
                np.testing.assert_allclose(var[..., b], vals.var(axis=-1), rtol=rtol)


def test_float32_bootstrap_moments_centre_each_head_on_its_own_mean() -> None:
    """Heads whose scores sit at 0 and at 10,000 with spread 1: centred on their own means the
    float32 products keep the variance to 1e-5; centred on a mean pooled over the heads (5,000
    off) E[s^2] - E[s]^2 cancels 7 digits and float32 keeps none."""
    rng = np.random.default_rng(9)
    n = 12
    s = rng.standard_normal((2, n, n)) + np.array([0.0, 1e4])[:, None, None]
    pm = np.ones((n, n), dtype=bool)
    c = rng.multinomial(n, np.full(n, 1.0 / n), size=4).astype(np.float64)
    mean, var = _PairMoments(s, pm, np.float32)(c)
    for b, cb in enumerate(c):
        idx = np.repeat(np.arange(n), cb.astype(int))
        vals = s[:, idx][:, :, idx].reshape(2, -1)
        np.testing.assert_allclose(var[:, b], vals.var(axis=-1), rtol=1e-5)
        np.testing.assert_allclose(mean[:, b], vals.mean(axis=-1), rtol=1e-7, atol=1e-4)


def test_safe_ratio_is_zero_only_where_the_denominator_is_zero() -> None:
    a = np.array([1.0, 2.0, 0.5, 0.0, 3.0])
    b = np.array([0.0, 0.5, 2.0, 0.0, 1.0])
    with np.errstate(all="raise"):
        r = _safe_ratio(a, b)
    assert r.tolist() == [0.0, 4.0, 0.25, 0.0, 3.0]


# -- interval coverage with known truth -------------------------------------------------------


def _iid_heads(rng, heads: int, n: int, d: int):
    """Independent q and k with per-coordinate means and stds drawn per head; returns the true
    std of q.k (the formula with the generator's moments) and the true ratio 1."""
    mq, mk = rng.normal(0.0, 1.0, (2, heads, 1, d))
    sq, sk = rng.uniform(0.3, 2.0, (2, heads, 1, d))
    q = mq + sq * rng.standard_normal((heads, n, d))
    k = mk + sk * rng.standard_normal((heads, n, d))
    true_std = np.sqrt(((sq**2 + mq**2) * (sk**2 + mk**2) - mq**2 * mk**2).sum(axis=-1))[:, 0]
    return q[None], k[None], true_std


def test_two_se_intervals_cover_the_truth_at_their_rate() -> None:
    """2,000 i.i.d. heads of 48 tokens: ratio +- 1.96 SE covers the true ratio 1 in 95 % of
    them (measured 0.950-0.956 over 3 data seeds; the binomial SD of a share of 2,000 is
    0.005, so [0.93, 0.97] is 4 SD either side). An SE 15 % too wide covers 97.6 %, one
    1/sqrt(2) too narrow 84 %: both fall outside. The raw and predicted stds' intervals around
    the generator's true std cover 92 % (measured 0.918-0.926): the bootstrap of a std at 48
    tokens undercovers by O(1/n) (0.93-0.95 at 128 tokens), so their band is [0.89, 0.96]."""
    rng = np.random.default_rng(1)
    q, k, true_std = _iid_heads(rng, 2000, 48, 8)
    st = score_stats(q, k, np.ones((48, 48), dtype=bool), bootstrap=100, seed=1)
    cover = np.mean(np.abs(st.std_ratio - 1.0) < 1.96 * st.std_ratio_se)
    assert 0.93 <= cover <= 0.97, cover
    for est, se in ((st.raw_std, st.raw_std_se), (st.iid_pred_std, st.iid_pred_std_se)):
        cover = np.mean(np.abs(est[0] - true_std) < 1.96 * se[0])
        assert 0.89 <= cover <= 0.96, cover


# -- rows: odd masks, per-layer scales, caps, additive terms ----------------------------------

#: rows of a 6-token mask: none, one key, {0, 2} (twice, rows 2 and 5), a window {1, 2, 3},
#: a window {2, 3, 4}: empty, single, non-contiguous and non-prefix key sets, and row groups
#: that are not contiguous
ODD_MASK = np.array([
    [0, 0, 0, 0, 0, 0],
    [0, 1, 0, 0, 0, 0],
    [1, 0, 1, 0, 0, 0],
    [0, 1, 1, 1, 0, 0],
    [0, 0, 1, 1, 1, 0],
    [1, 0, 1, 0, 0, 0],
], dtype=bool)


def _softmax_rows(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max())
    return e / e.sum()


def _brute_rows(scores, scale, pm, cap=None, bias=None):
    """Per (layer, head, row): weights on all keys (0 on hidden ones), entropy / ln n_i, top
    weight, ||diag(p) - p p^T||_F, by a loop."""
    L, H, n, _ = scores.shape
    scale = np.broadcast_to(np.asarray(scale, dtype=float).reshape(
        (L, 1) if np.ndim(scale) == 1 else np.shape(scale)), (L, H))
    w = np.zeros((L, H, n, n))
    ent, top, fro = np.zeros((L, H, n)), np.ones((L, H, n)), np.zeros((L, H, n))
    for li in range(L):
        for h in range(H):
            for i in range(n):
                keys = np.flatnonzero(pm[i])
                if keys.size == 0:
                    continue
                x = scores[li, h, i, keys] * scale[li, h]
                if cap is not None:
                    x = cap * np.tanh(x / cap)
                if bias is not None:
                    x = x + bias[li, h, i, keys]
                p = _softmax_rows(x)
                w[li, h, i, keys] = p
                if keys.size >= 2:
                    ent[li, h, i] = -(p * np.log(p)).sum() / math.log(keys.size)
                    top[li, h, i] = p.max()
                    fro[li, h, i] = np.linalg.norm(np.diag(p) - np.outer(p, p))
    return w, ent, top, fro


@pytest.mark.parametrize("scale", [np.array([0.5, 1.3]), np.array([[0.5, 1.0, 2.0],
                                                                     [0.2, 0.9, 1.7]])])
def test_rows_with_odd_masks_per_layer_scales_cap_and_bias(scale: np.ndarray) -> None:
    """(L, H) = (2, 3) with a scale per layer or per head, a soft-cap 2.5 (c tanh(x / c): the
    logits below reach 6, where tanh bends) and an additive bias: each row against a loop."""
    rng = np.random.default_rng(10)
    scores = rng.normal(0.0, 4.0, (2, 3, 6, 6))
    bias = rng.normal(0.0, 1.0, (2, 3, 6, 6))
    for cap, b in ((None, None), (2.5, None), (None, bias), (2.5, bias)):
        rs = row_stats(scores, scale, ODD_MASK, cap=cap, bias=b)
        _, ent, top, fro = _brute_rows(scores, scale, ODD_MASK, cap, b)
        assert rs.row_ok.dtype == bool
        assert rs.row_ok.tolist() == [False, False, True, True, True, True]
        np.testing.assert_allclose(rs.entropy_norm, ent, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(rs.top_weight, top, rtol=1e-12)
        np.testing.assert_allclose(rs.jacobian_fro, fro, rtol=1e-9, atol=1e-15)
        ok = rs.row_ok
        np.testing.assert_allclose(rs.log10_jacobian_fro[..., ok], np.log10(fro[..., ok]),
                                   rtol=1e-9)
        # rows without a softmax: entropy 0, top weight 1, Jacobian 0 and log10 -300 (finite)
        assert np.all(rs.entropy_norm[..., ~ok] == 0.0) and np.all(rs.top_weight[..., ~ok] == 1)
        assert np.all(rs.jacobian_fro[..., ~ok] == 0.0)
        assert np.all(rs.log10_jacobian_fro[..., ~ok] == -300.0)
        assert rs.max_abs_diff is None


def test_the_cap_bends_the_logits_where_they_are_large() -> None:
    """A row (8, 0) at cap 2: the capped logits are (2 tanh 4, 0) = (1.99866, 0), so the top
    weight is 1 / (1 + e^-1.99866) = 0.880656, not the uncapped 0.999665."""
    scores = np.array([[[[8.0, 0.0], [8.0, 0.0]]]])
    rs = row_stats(scores, 1.0, np.ones((2, 2), dtype=bool), cap=2.0)
    assert rs.top_weight[0, 0, 0] == pytest.approx(1 / (1 + math.exp(-2 * math.tanh(4))),
                                                   rel=1e-12)
    assert rs.top_weight[0, 0, 0] == pytest.approx(0.880656, abs=1e-6)


def test_model_weights_are_compared_per_head_on_every_row_with_a_key() -> None:
    """The largest |model - ours| is per (layer, head): an error in one head stays there. A
    single-key row is compared (ours is 1 on its key), and weight on a hidden key counts; a row
    with no visible key is not compared (a padded query's weights mean nothing)."""
    rng = np.random.default_rng(11)
    scores = rng.normal(0.0, 2.0, (2, 3, 6, 6))
    ours, _, _, _ = _brute_rows(scores, 0.8, ODD_MASK)
    model = ours.copy()
    model[:, :, 0] = 1.0 / 6  # the padded query: anything
    assert row_stats(scores, 0.8, ODD_MASK, model).max_abs_diff == pytest.approx(
        np.zeros((2, 3)), abs=1e-15)
    model[0, 0, 1, 1] = 0.7  # the single-key row puts 0.3 elsewhere
    model[0, 0, 1, 4] = 0.3
    model[1, 2, 3, 5] = 0.04  # weight on a hidden key
    model[1, 1, 5, 2] += 0.01  # a visible key 0.01 off
    diff = row_stats(scores, 0.8, ODD_MASK, model).max_abs_diff
    want = np.zeros((2, 3))
    want[0, 0], want[1, 2], want[1, 1] = 0.3, 0.04, 0.01
    np.testing.assert_allclose(diff, want, atol=1e-12)


def test_attention_weights_on_odd_masks() -> None:
    rng = np.random.default_rng(12)
    scores = rng.normal(0.0, 3.0, (6, 6))
    w = attention_weights(scores, 0.6, ODD_MASK)
    want, _, _, _ = _brute_rows(scores[None, None], 0.6, ODD_MASK)
    np.testing.assert_allclose(w, want[0, 0], rtol=1e-12, atol=0)
    assert np.all(w[0] == 0.0) and w[1, 1] == 1.0


def test_concat_layers_joins_the_layer_axis_and_keeps_row_ok_and_none() -> None:
    rng = np.random.default_rng(13)
    q, k = _small_qk(14, (1, 2), 6, 2)
    parts = [score_stats(q + i, k - i, ODD_MASK | np.eye(6, dtype=bool), bootstrap=5, seed=i)
             for i in range(3)]
    one = concat_layers(parts[:1])
    for name in ScoreStats.__dataclass_fields__:
        assert np.array_equal(getattr(one, name), getattr(parts[0], name))
    three = concat_layers(parts)
    assert isinstance(three, ScoreStats)
    for name in ScoreStats.__dataclass_fields__:
        got = getattr(three, name)
        assert got.shape == (3, 2)
        for i in range(3):
            assert np.array_equal(got[i], getattr(parts[i], name)[0])
    scores = rng.normal(0.0, 2.0, (2, 1, 2, 6, 6))
    rows = [row_stats(s, 0.5, ODD_MASK) for s in scores]
    joined = concat_layers(rows)
    assert isinstance(joined, RowStats) and joined.max_abs_diff is None
    assert joined.row_ok is rows[0].row_ok
    assert np.array_equal(joined.top_weight, np.concatenate([r.top_weight for r in rows]))
    model = [row_stats(s, 0.5, ODD_MASK, np.zeros((1, 2, 6, 6))) for s in scores]
    diff = concat_layers(model).max_abs_diff
    assert diff.shape == (2, 2)
    assert np.array_equal(diff, np.concatenate([m.max_abs_diff for m in model]))
