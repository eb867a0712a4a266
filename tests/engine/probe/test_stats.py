"""Per-head statistics against exact oracles (no transformers needed)."""

from __future__ import annotations

import math

import numpy as np

from engine.probe.stats import attention_weights, iid_prediction, row_stats, score_stats
from engine.softmax import softmax


def _iid_qk(rng, heads: int, n: int, d: int):
    """Independent q and k, each coordinate with its own mean and std (i.i.d. across tokens)."""
    mq = rng.normal(0.0, 1.0, (heads, 1, d))
    sq = rng.uniform(0.3, 2.0, (heads, 1, d))
    mk = rng.normal(0.0, 1.0, (heads, 1, d))
    sk = rng.uniform(0.3, 2.0, (heads, 1, d))
    q = mq + sq * rng.standard_normal((heads, n, d))
    k = mk + sk * rng.standard_normal((heads, n, d))
    return q[None], k[None], (mq, sq, mk, sk)


def test_iid_prediction_is_the_general_formula_of_science_md() -> None:
    rng = np.random.default_rng(1)
    q, k, (mq, sq, mk, sk) = _iid_qk(rng, 3, 20_000, 8)
    mean, var = iid_prediction(q, k)
    exact_var = ((sq**2 + mq**2) * (sk**2 + mk**2) - mq**2 * mk**2).sum(axis=-1)[:, 0]
    exact_mean = (mq * mk).sum(axis=-1)[:, 0]
    # estimated moments of 20,000 tokens: a few per cent at most
    np.testing.assert_allclose(var[0], exact_var, rtol=0.05)
    assert np.all(np.abs(mean[0] - exact_mean) < 0.1 * np.sqrt(exact_var))
    # and the formula is the variance of q.k over independent pairs
    pair = (q[0] * k[0]).sum(axis=-1)
    np.testing.assert_allclose(pair.var(axis=-1), exact_var, rtol=0.05)


def test_iid_vectors_give_ratio_one_within_the_bootstrap_uncertainty() -> None:
    rng = np.random.default_rng(2)
    q, k, _ = _iid_qk(rng, 24, 160, 16)
    st = score_stats(q, k, np.ones((160, 160), dtype=bool), bootstrap=300, seed=3)
    z = (st.std_ratio - 1.0) / st.std_ratio_se
    assert np.all(np.abs(z) < 4.5), z
    # the bootstrap SE is an honest uncertainty: it matches the spread between independent heads
    spread = st.std_ratio.std(ddof=1)
    assert 0.6 < spread / st.std_ratio_se.mean() < 1.6
    np.testing.assert_allclose(st.raw_mean, st.iid_pred_mean, atol=1e-9)  # all pairs: exact


def test_aligned_queries_and_keys_give_ratio_above_one() -> None:
    """Trained heads share directions between q and k (low rank): coordinates co-vary, so the
    i.i.d. prediction, which adds coordinates as if independent, understates the spread."""
    rng = np.random.default_rng(4)
    n, d = 160, 16
    u = rng.standard_normal((1, 4, 1, d))  # one shared direction per head
    q = rng.standard_normal((1, 4, n, 1)) * u + 0.5 * rng.standard_normal((1, 4, n, d))
    k = rng.standard_normal((1, 4, n, 1)) * u + 0.5 * rng.standard_normal((1, 4, n, d))
    st = score_stats(q, k, np.ones((n, n), dtype=bool), bootstrap=200)
    assert np.all((st.std_ratio - 1.0) / st.std_ratio_se > 4.0), st.std_ratio


def test_causal_rows_use_only_visible_keys() -> None:
    rng = np.random.default_rng(5)
    n = 7
    scores = rng.normal(0, 3, (1, 2, n, n))
    pm = np.tril(np.ones((n, n), dtype=bool))
    rs = row_stats(scores, 0.5, pm)
    assert not rs.row_ok[0] and rs.row_ok[1:].all()  # one visible key: no softmax to speak of
    for i in range(1, n):
        p = softmax(0.5 * scores[0, 1, i, : i + 1])
        h = -(p * np.log(p)).sum()
        assert math.isclose(rs.entropy_norm[0, 1, i], h / math.log(i + 1), rel_tol=1e-12)
        assert math.isclose(rs.top_weight[0, 1, i], p.max(), rel_tol=1e-12)
        jac = np.diag(p) - np.outer(p, p)
        assert math.isclose(rs.jacobian_fro[0, 1, i], np.linalg.norm(jac), rel_tol=1e-9)


def test_uniform_scores_have_entropy_ceiling_of_each_row() -> None:
    """H / log(n_i) = 1 for flat rows: the ceiling uses the visible-key count of each row."""
    n = 6
    rs = row_stats(np.zeros((1, 1, n, n)), 1.0, np.tril(np.ones((n, n), dtype=bool)))
    np.testing.assert_allclose(rs.entropy_norm[0, 0, 1:], 1.0, rtol=1e-12)


def test_row_stats_compares_with_model_weights_on_all_keys() -> None:
    rng = np.random.default_rng(6)
    n = 5
    scores = rng.normal(0, 2, (1, 1, n, n))
    pm = np.tril(np.ones((n, n), dtype=bool))
    w = attention_weights(scores[0, 0], 0.3, pm)
    assert np.all(w[~pm] == 0.0)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-12)
    assert row_stats(scores, 0.3, pm, w[None, None]).max_abs_diff[0, 0] < 1e-15
    leaked = w.copy()
    leaked[1, 3] = 1e-3  # weight on a future key is caught
    assert row_stats(scores, 0.3, pm, leaked[None, None]).max_abs_diff[0, 0] >= 1e-3


def test_saturated_rows_stay_finite() -> None:
    scores = np.array([[[[1e6, 0.0, -1e6], [0.0, 0.0, 0.0], [5e5, 5e5, -3.0]]]])
    rs = row_stats(scores, 1.0, np.ones((3, 3), dtype=bool))
    for arr in (rs.entropy_norm, rs.top_weight, rs.jacobian_fro, rs.log10_jacobian_fro):
        assert np.all(np.isfinite(arr))
    assert rs.top_weight[0, 0, 0] == 1.0 and rs.jacobian_fro[0, 0, 0] == 0.0


def test_one_coordinate_over_all_pairs_is_exactly_the_formula() -> None:
    """d_k = 1, every (query, key) pair: the pooled variance of q*k over the product of the two
    token sets IS (sq^2+mq^2)(sk^2+mk^2) - mq^2 mk^2 with the tokens' moments (ddof 0)."""
    rng = np.random.default_rng(7)
    q = rng.normal(1.5, 0.7, (1, 2, 40, 1)) ** 3  # skewed, non-zero mean: no Gaussian shortcut
    k = rng.normal(-0.8, 1.3, (1, 2, 40, 1))
    st = score_stats(q, k, np.ones((40, 40), dtype=bool), bootstrap=0)
    np.testing.assert_allclose(st.std_ratio, 1.0, rtol=1e-12)
    mq, sq, mk, sk = q.mean(axis=2), q.std(axis=2), k.mean(axis=2), k.std(axis=2)
    var = ((sq**2 + mq**2) * (sk**2 + mk**2) - mq**2 * mk**2)[..., 0]
    np.testing.assert_allclose(st.iid_pred_std, np.sqrt(var), rtol=1e-12)
    np.testing.assert_allclose(st.iid_pred_mean, (mq * mk)[..., 0], rtol=1e-12)


def test_rows_with_a_single_visible_key_never_divide_by_log_1() -> None:
    """A causal first row sees one key: H / log(1) would be 0/0. It is left out of the per-head
    means, and nothing (no warning, no NaN) comes from it, down to a 2-token text."""
    rng = np.random.default_rng(8)
    for n in (2, 5):
        q, k = rng.normal(size=(1, 3, n, 4)), rng.normal(size=(1, 3, n, 4))
        pm = np.tril(np.ones((n, n), dtype=bool))
        with np.errstate(all="raise"):
            rs = row_stats(q @ np.swapaxes(k, -1, -2), 0.5, pm)
            st = score_stats(q, k, pm, bootstrap=20)
            w = attention_weights((q @ np.swapaxes(k, -1, -2))[0, 0], 0.5, pm)
        assert not rs.row_ok[0] and rs.row_ok[1:].all()
        for arr in (rs.entropy_norm, rs.top_weight, rs.jacobian_fro, rs.log10_jacobian_fro,
                    st.std_ratio, st.std_ratio_se, w):
            assert np.all(np.isfinite(arr))
        assert w[0, 0] == 1.0 and np.all(w[0, 1:] == 0.0)
