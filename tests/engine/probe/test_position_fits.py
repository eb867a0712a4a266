"""engine.probe.position on arrays made here (no model): the position factor found from the
projections' blocks (plain, RoPE-rotated either way, heads that disagree, tokens without a q),
the equal-count buckets, and one fit per bucket against weights generated with a known scale
and law."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.probe.position import (
    BUCKET_ROWS,
    MAX_BUCKETS,
    PAIR_COS_TOL,
    bucket_fits,
    buckets,
    match_position_factor,
)
from engine.probe.scale_fit import fit_scale

H, N, D, J = 3, 6, 4, 4
BLOCK_OF = [2, 0, 3]  # the projection block each head's q comes from
C = np.array([0.5, 2.0, 3.0])
F = 1 + 0.1 * np.arange(N)  # q's factor with the position, 1 at the first


def _outputs(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(N, J * D)) + 0.1


def _q(y: np.ndarray, f=F, rotate: str | None = None) -> np.ndarray:
    blocks = y.reshape(N, J, D).transpose(1, 0, 2)
    x = np.stack([C[h] * f[:, None] * blocks[BLOCK_OF[h]] for h in range(H)])
    if rotate is None:
        return x
    angle = 0.7 * np.arange(N)[None, :, None] * np.array([1.0, 0.3])[None, None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    if rotate == "half":
        a, b = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


@pytest.mark.parametrize("rotate", [None, "half", "interleaved"])
def test_the_factor_per_head_and_position_is_found_rotated_or_not(rotate) -> None:
    y = _outputs()
    got = match_position_factor(_q(y, rotate=rotate), [y], 1e-4)
    assert got is not None
    c, f, rotated = got
    np.testing.assert_allclose(c, C, rtol=1e-12)
    np.testing.assert_allclose(f, F, rtol=1e-12)
    assert rotated is (rotate is not None)


def test_the_factor_is_relative_to_the_first_token_with_a_query() -> None:
    """Token 0 has no q in any head, token 3 none in one head: NaN there; f is 1 at token 1."""
    y = _outputs()
    x = _q(y)
    x[:, 0] = 0.0
    x[1, 3] = 0.0
    c, f, _r = match_position_factor(x, [y], 1e-4)
    np.testing.assert_allclose(c, C * F[1], rtol=1e-12)
    assert np.isnan(f[0]) and np.isnan(f[3])
    live = [1, 2, 4, 5]
    np.testing.assert_allclose(f[live], F[live] / F[1], rtol=1e-12)
    # a q of twice a millionth of the largest norm (in its smallest head) still counts; a fifth
    # of a millionth does not
    for small, nan in ((2e-6, False), (2e-7, True)):
        x = _q(y)
        norms = np.linalg.norm(x, axis=-1)
        x[:, 2] *= small * norms.max() / norms[:, 2].min()  # the same factor in every head
        got = match_position_factor(x, [y], 1e-4)
        assert got is not None and bool(np.isnan(got[1][2])) is nan


def test_outputs_of_another_shape_are_passed_over() -> None:
    y = _outputs()
    x = _q(y)
    wrong_tokens = np.ones((N + 1, J * D))
    wrong_width = np.ones((N, J * D + 2))
    unrelated = _outputs(seed=5)
    got = match_position_factor(x, [wrong_tokens, wrong_width, unrelated, y], 1e-4)
    assert got is not None
    np.testing.assert_allclose(got[0], C, rtol=1e-12)


def test_no_factor_without_a_law_that_every_head_shares() -> None:
    y = _outputs()
    assert match_position_factor(_q(y, f=np.ones(N)), [y], 1e-4) is None  # no dependence
    tol = 1e-3
    for k, found in ((0.9, False), (1.1, True)):  # f within tol of 1 everywhere: no law
        assert (match_position_factor(_q(y, f=1 + k * tol * np.r_[0, np.ones(N - 1)]), [y], tol)
                is not None) is found
    for k, found in ((0.9, True), (1.1, False)):  # one head's profile off by k x tol at token 5
        x = _q(y)
        x[2, 5] *= 1 + k * tol
        assert (match_position_factor(x, [y], tol) is not None) is found
    assert match_position_factor(_q(y), [_outputs(seed=5)], 1e-4) is None  # no such block


def test_a_block_is_matched_only_when_every_token_matches() -> None:
    """The pair norms of one token a little off: 1 - cos beyond PAIR_COS_TOL is no match."""
    y = _outputs()
    for eps, found in ((1e-5, True), (1e-3, False)):
        x = _q(y)
        x[1, 4, 0] *= 1 + eps
        x[1, 4, 2] /= 1 + eps
        gap = 1 - _cos_pairs(x[1, 4], y.reshape(N, J, D)[4, 0])
        assert (gap > PAIR_COS_TOL) is not found
        assert (match_position_factor(x, [y], 1e-2) is not None) is found


def _cos_pairs(a: np.ndarray, b: np.ndarray) -> float:
    u = np.hypot(a[:2], a[2:])
    v = np.hypot(b[:2], b[2:])
    return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))


def test_the_rotated_flag_is_a_deviation_beyond_ten_times_the_tolerance() -> None:
    """q turned by a small angle in every pair keeps its pair norms: still a match, rotated
    when the largest deviation from c f block is beyond 10 x rel_tol x max|q|, not below."""
    y = _outputs()
    x = _q(y)
    tol = 1e-4

    def turned(theta: float) -> np.ndarray:
        a, b = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([a * math.cos(theta) - b * math.sin(theta),
                               a * math.sin(theta) + b * math.cos(theta)], -1)

    def times_tol(xt: np.ndarray) -> float:  # the deviation in units of tol x max|q|
        return float(np.abs(xt - x).max() / (tol * np.abs(xt).max()))

    unit = times_tol(turned(1e-4))
    for target, rotated in ((9.5, False), (10.5, True), (0.5, False)):
        xt = turned(1e-4 * target / unit)
        assert target - 0.1 < times_tol(xt) < target + 0.1
        got = match_position_factor(xt, [y], tol)
        assert got is not None and got[2] is rotated


def test_two_tokens_are_enough() -> None:
    y = _outputs()
    x = _q(y)[:, :2]
    c, f, rotated = match_position_factor(x, [y[:2]], 1e-4)
    np.testing.assert_allclose(c, C, rtol=1e-12)
    np.testing.assert_allclose(f, F[:2], rtol=1e-12)
    assert rotated is False
    x = _q(y)[:, :3]
    x[:, 0] = 0.0  # three tokens, two with a query
    c, f, _r = match_position_factor(x, [y[:3]], 1e-4)
    assert np.isnan(f[0]) and f[1] == 1.0 and f[2] == pytest.approx(F[2] / F[1], rel=1e-12)


def test_shapes_that_cannot_carry_a_law() -> None:
    y = _outputs()
    x = _q(y)
    assert match_position_factor(x[..., :3], [y[:, :12]], 1e-4) is None  # d odd: no pairs
    # d odd although q is exactly c f times a 3-wide block: no pairs, no law
    y3 = y[:, :12]
    blocks = y3.reshape(N, 4, 3).transpose(1, 0, 2)
    x3 = np.stack([C[h] * F[:, None] * blocks[BLOCK_OF[h]] for h in range(H)])
    assert match_position_factor(x3, [y3], 1e-4) is None
    assert match_position_factor(x[:, :1], [y[:1]], 1e-4) is None  # one token
    x[:, 1:] = 0.0
    assert match_position_factor(x, [y], 1e-4) is None  # one token with a query


# -- buckets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, sizes", [(0, []), (3, [3]), (7, [7]), (8, [4, 4]), (9, [5, 4]),
                                      (24, [4] * 6), (27, [5, 5, 5, 4, 4, 4]),
                                      (100, [17, 17, 17, 17, 16, 16])])
def test_buckets_are_equal_counts_of_at_least_4_rows_and_at_most_6(n, sizes) -> None:
    assert (BUCKET_ROWS, MAX_BUCKETS) == (4, 6)
    got = buckets(np.arange(n) * 3)
    assert [len(b) for b in got] == sizes
    assert np.concatenate(got).tolist() == list(range(n)) if n else got == []


# -- one fit per bucket ---------------------------------------------------------------------------


def _softmax(logits: np.ndarray, vis: np.ndarray) -> np.ndarray:
    x = np.where(vis, logits, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _site(law: np.ndarray, s: float, bias: np.ndarray | None = None, heads: int = 2, n: int = 13):
    rng = np.random.default_rng(1)
    z = rng.normal(size=(heads, n, n)) * 3
    vis = np.tril(np.ones((n, n), bool))
    logits = s * law[None, :, None] * z + (0.0 if bias is None else bias)
    return z, _softmax(logits, vis[None]), vis


def test_one_scale_per_bucket_where_the_scale_is_one_scale() -> None:
    """Weights of s = 0.3 at d_k = 16: every bucket measures 0.3 x 4 against a reference of
    0.25 x 4; the causal first row (one key) is left out of the first bucket."""
    z, p, vis = _site(np.ones(13), 0.3)
    rows = np.arange(13) + 100
    out = bucket_fits(z, p, vis, None, rows, np.ones(13), 0.25, 16)
    assert [(b.first, b.last) for b in out] == [(101, 104), (105, 108), (109, 112)]
    for b in out:
        assert b.measured == pytest.approx(1.2, rel=1e-7)
        assert b.declared == pytest.approx(1.0, rel=1e-15)
        assert b.ratio == pytest.approx(1.2, rel=1e-7)
        assert 0 < b.tol < 0.1


def test_a_law_is_folded_into_the_bucket_fits() -> None:
    """Weights of 0.3 x law(t): the folded fit is 0.3 in every bucket (ratio 1.2 against 0.25);
    the plain scale grows with the law, and the declared scale is the law's mean over the rows
    fitted; the band is that of one joint fit of the heads' rows."""
    law = 1 + 0.05 * np.arange(13)
    z, p, vis = _site(law, 0.3)
    rows = np.arange(13)
    out = bucket_fits(z, p, vis, None, rows, law, 0.25, 16)
    for b, idx in zip(out, ([1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12])):
        assert (b.first, b.last) == (idx[0], idx[-1])
        assert b.ratio == pytest.approx(1.2, rel=1e-7)
        assert b.declared == pytest.approx(0.25 * law[idx].mean() * 4, rel=1e-12)
        assert 0.3 * law[idx[0]] * 4 < b.measured < 0.3 * law[idx[-1]] * 4
        joint = fit_scale(np.concatenate([z[h, idx] * law[idx, None] for h in range(2)])[None],
                          np.concatenate([p[h, idx] for h in range(2)])[None],
                          np.tile(vis[idx], (2, 1)), d_k=16)
        assert b.tol == pytest.approx(float(joint.tol_log[0]), rel=1e-6)
    assert out[0].measured < out[1].measured < out[2].measured


@pytest.mark.parametrize("heads_of_bias", [1, 2])
def test_an_additive_term_is_passed_to_every_bucket(heads_of_bias) -> None:
    n = 13
    t = np.arange(n)
    alibi = -0.4 * np.maximum(t[:, None] - t[None, :], 0)[None] * np.arange(1, heads_of_bias + 1)[
        :, None, None]
    z, p, vis = _site(np.ones(n), 0.3, bias=alibi)
    out = bucket_fits(z, p, vis, alibi, t, np.ones(n), 0.3, 16)
    assert len(out) == 3
    for b in out:
        assert b.ratio == pytest.approx(1.0, rel=1e-7)
        assert b.measured == pytest.approx(1.2, rel=1e-7)  # the plain fit has it too


def test_more_keys_than_kept_rows() -> None:
    """13 query rows after 3 cached keys (16 keys), with a bias: the arrays are (H, 13, 16)."""
    rng = np.random.default_rng(2)
    z = rng.normal(size=(2, 13, 16)) * 3
    vis = np.tril(np.ones((13, 16), bool), k=3)
    bias = -0.3 * np.abs(np.arange(13)[:, None] + 3 - np.arange(16)[None, :])[None]
    p = _softmax(0.3 * z + bias, vis[None])
    out = bucket_fits(z, p, vis, bias, np.arange(13), np.ones(13), 0.25, 16)
    assert [(b.first, b.last) for b in out] == [(0, 4), (5, 8), (9, 12)]  # every row sees 4+
    for b in out:
        assert b.ratio == pytest.approx(1.2, rel=1e-7) and b.measured == pytest.approx(1.2, rel=1e-7)


def test_a_bucket_whose_rows_see_one_key_is_left_out() -> None:
    z, p, vis = _site(np.ones(13), 0.3)
    vis = vis.copy()
    vis[:5] = False
    vis[:5, 0] = True  # rows 0-4 see one key each: the first bucket has nothing to fit
    p = _softmax(0.3 * z, vis[None])
    out = bucket_fits(z, p, vis, None, np.arange(13), np.ones(13), 0.25, 16)
    assert [(b.first, b.last) for b in out] == [(5, 8), (9, 12)]
    assert all(b.ratio == pytest.approx(1.2, rel=1e-7) for b in out)
    assert math.isfinite(out[0].tol)
