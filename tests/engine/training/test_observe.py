"""Per-head diagnostics count only real rows and visible keys, and reuse engine.softmax."""

from __future__ import annotations

import numpy as np

from engine.softmax import row_metrics
from engine.training.observe import PERCENTILES, head_stats

EDGES = np.linspace(-10, 10, 21)


def test_padding_rows_and_keys_are_left_out():
    b, h, t = 2, 2, 4
    logits = np.zeros((b, h, t, t))  # uniform over the visible keys
    logits[:, 1] = np.array([5.0, -5.0, 0.0, 0.0])  # head 1: peaked on key 0 (within 3 keys)
    logits[1, :, :, 3] = 1e6  # the padded key of example 1: must not count anywhere
    lengths = np.array([4, 3])
    mask = (np.arange(t)[None, :] < lengths[:, None])[:, None, None, :]
    st = head_stats(logits, mask, lengths, EDGES, 0.99)
    np.testing.assert_allclose(st.entropy_norm[0], 1.0)  # uniform over 4 and over 3 keys
    expect = [row_metrics(np.array([5.0, -5.0, 0.0, 0.0])), row_metrics(np.array([5.0, -5.0, 0.0]))]
    ent = [expect[0].entropy[()] / np.log(4), expect[1].entropy[()] / np.log(3)]
    # 4 real rows of example 0 and 3 of example 1
    np.testing.assert_allclose(st.entropy_norm[1], (4 * ent[0] + 3 * ent[1]) / 7)
    jac = (4 * expect[0].jacobian_fro[()] + 3 * expect[1].jacobian_fro[()]) / 7
    np.testing.assert_allclose(st.jacobian_fro[1], jac)
    assert st.logit_std[0] == 0.0 and np.all(st.hist_outside == 0)  # the 1e6 was never counted
    assert st.hist_counts[0].sum() == 4 * 4 + 3 * 3
    np.testing.assert_allclose(st.percentiles[0], np.zeros(len(PERCENTILES)))
    np.testing.assert_allclose(st.probe_weights[0], np.full((4, 4), 0.25))


def test_causal_first_row_is_left_out_and_saturation_counts():
    t = 3
    logits = np.zeros((1, 1, t, t))
    logits[0, 0, 2] = [0.0, 50.0, 0.0]  # row 2: saturated
    mask = np.tril(np.ones((t, t), dtype=bool))[None, None]
    st = head_stats(logits, mask, np.array([3]), EDGES, 0.99)
    assert st.saturated_frac[0] == 0.5  # rows 1 and 2 count; row 0 sees one key
    assert st.hist_outside[0].tolist() == [0, 1]  # the 50 lies above the edges
    np.testing.assert_allclose(st.probe_weights[0, 0], [1, 0, 0])


def test_logit_edges_resolve_small_and_large_logits_alike():
    from engine.training.observe import logit_edges

    e = logit_edges(100.0, 400)
    assert e[0] == -100.0 and e[-1] == 100.0 and e[200] == 0.0
    assert np.all(np.diff(e) > 0)
    np.testing.assert_allclose(e, -e[::-1])
    width = np.diff(e)
    mid = 0.5 * (e[1:] + e[:-1])
    far = np.abs(mid) > 0.5
    assert np.all(width[far] / np.abs(mid[far]) < 0.05)  # a few percent, from 0.5 to 100
    assert width.min() < 0.01  # 1/d_k's logits at d_k = 256 (std ~0.06) get many bins


def test_counts_follow_any_fixed_edges():
    from engine.training.observe import logit_edges

    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, size=(2, 3, 5, 5)) * np.array([0.01, 1, 30])[None, :, None, None]
    mask = np.ones((2, 1, 5, 5), dtype=bool)
    edges = logit_edges(50.0, 60)
    st = head_stats(logits, mask, np.array([5, 5]), edges, 0.99)
    for h in range(3):
        x = logits[:, h].ravel()
        np.testing.assert_array_equal(st.hist_counts[h], np.histogram(x, edges)[0])
        assert st.hist_outside[h].tolist() == [int((x < -50).sum()), int((x > 50).sum())]


# -- by hand: the other weightings, the aggregation per head, the histogram's edges ------------------
def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


CAUSAL3 = np.tril(np.ones((3, 3), dtype=bool))[None, None]  # rows see 1, 2 and 3 keys


def test_the_sink_rule_gives_key_mass_sink_weight_and_probe_weights_per_head():
    """Sink logits 0 and 2 for heads 0 and 1: key weights e^l / (e^s + sum e^l) over the visible
    keys, written out row by row; rows 1 and 2 count (row 0 sees one key)."""
    logits = np.array([[[1.0, 0.0, 0.0], [0.5, -1.0, 0.0], [2.0, 0.0, -1.0]]] * 2)[None]
    logits[0, 1] *= 2.0
    sink = np.array([0.0, 2.0])
    st = head_stats(logits, CAUSAL3, np.array([3]), EDGES, 0.99, rule="sink", sink=sink)
    for h in range(2):
        rows = []
        for r in range(3):
            e = np.exp(logits[0, h, r, :r + 1])
            w = e / (np.exp(sink[h]) + e.sum())
            rows.append(w)
            np.testing.assert_allclose(st.probe_weights[h, r, :r + 1], w, rtol=1e-12)
            np.testing.assert_allclose(st.probe_weights[h, r, r + 1:], 0.0)
        counted = rows[1:]
        np.testing.assert_allclose(st.key_mass[h], np.mean([w.sum() for w in counted]), rtol=1e-12)
        np.testing.assert_allclose(st.sink_weight[h], np.mean([1 - w.sum() for w in counted]),
                                   rtol=1e-12)
        np.testing.assert_allclose(st.top_weight[h], np.mean([w.max() for w in counted]),
                                   rtol=1e-12)
        ent = [-(w / w.sum() * np.log(w / w.sum())).sum() / np.log(len(w)) for w in counted]
        np.testing.assert_allclose(st.entropy_norm[h], np.mean(ent), rtol=1e-12)


def test_the_sigmoid_rule_subtracts_ln_n_of_each_row():
    """sigmoid(l - ln n) per key, n the keys the row sees (1, 2, 3 under the causal mask)."""
    logits = np.array([[[0.3, 0.0, 0.0], [1.0, -0.5, 0.0], [0.2, 0.4, -2.0]]])[None]
    st = head_stats(logits, CAUSAL3, np.array([3]), EDGES, 0.99, rule="sigmoid")
    rows = [_sig(logits[0, 0, r, :r + 1] - np.log(r + 1)) for r in range(3)]
    for r, w in enumerate(rows):
        np.testing.assert_allclose(st.probe_weights[0, r, :r + 1], w, rtol=1e-12)
    np.testing.assert_allclose(st.key_mass[0], (rows[1].sum() + rows[2].sum()) / 2, rtol=1e-12)
    np.testing.assert_allclose(st.top_weight[0], (rows[1].max() + rows[2].max()) / 2, rtol=1e-12)


def test_the_softcap_jacobian_is_taken_before_the_cap():
    """softcap c = 3: p = softmax(c tanh(z / c)); d p / d z = (diag p - p p^T) diag(1 - tanh^2),
    its Frobenius norm per row, by hand; the figures read the capped logits, the slope z."""
    c = 3.0
    z = np.array([[[4.0, -1.0, 0.5], [2.0, 2.5, -3.0], [0.0, 6.0, 1.0]]])[None]
    capped = c * np.tanh(z / c)
    full = np.ones((1, 1, 3, 3), dtype=bool)
    st = head_stats(capped, full, np.array([3]), EDGES, 0.99, rule="softcap", pre_logits=z,
                    softcap=c)
    fro = []
    for r in range(3):
        e = np.exp(capped[0, 0, r] - capped[0, 0, r].max())
        p = e / e.sum()
        jac = (np.diag(p) - np.outer(p, p)) * (1 - np.tanh(z[0, 0, r] / c) ** 2)[None, :]
        fro.append(np.sqrt((jac**2).sum()))
    np.testing.assert_allclose(st.jacobian_fro[0], np.mean(fro), rtol=1e-10)
    default = head_stats(capped, full, np.array([3]), EDGES, 0.99, rule="softcap", pre_logits=z)
    assert abs(default.jacobian_fro[0] - st.jacobian_fro[0]) > 1e-3  # c reaches the slope


def test_logit_figures_are_per_head():
    """Mean, std and largest |logit| of each head's counted cells, by hand; head 1's largest
    magnitude is a negative logit."""
    logits = np.zeros((1, 2, 2, 2))
    logits[0, 0] = [[1.0, 2.0], [3.0, 4.0]]
    logits[0, 1] = [[-7.0, 1.0], [2.0, 0.0]]
    st = head_stats(logits, np.ones((1, 1, 2, 2), dtype=bool), np.array([2]), EDGES, 0.99)
    np.testing.assert_allclose(st.logit_mean, [2.5, -1.0])
    np.testing.assert_allclose(st.logit_std, [np.sqrt(1.25), np.sqrt((36 + 4 + 9 + 1) / 4)])
    np.testing.assert_allclose(st.logit_max_abs, [4.0, 7.0])
    np.testing.assert_allclose(st.percentiles[:, 0], [1.0, -7.0])
    np.testing.assert_allclose(st.percentiles[:, -1], [4.0, 2.0])


def test_a_logit_on_an_edge_goes_to_the_bin_on_its_right_and_the_ends_are_inside():
    """Edges -1, 0, 1: -1 and 1 themselves are inside (the first and the last bin), 0 opens the
    second bin, -1.5 and 1.5 lie outside, one on each side."""
    edges = np.array([-1.0, 0.0, 1.0])
    logits = np.array([-1.0, 1.0, 0.0, -1.5, 1.5, 0.5, -0.5, 1.0, -1.0]).reshape(1, 1, 1, 9)
    logits = np.broadcast_to(logits, (1, 1, 9, 9)).copy()
    st = head_stats(logits, np.ones((1, 1, 9, 9), dtype=bool), np.array([9]), edges, 0.99)
    # per row: -1, -0.5, -1 in bin 0; 1, 0, 0.5, 1 in bin 1; -1.5 below, 1.5 above
    assert st.hist_counts[0].tolist() == [27, 36]
    assert st.hist_outside[0].tolist() == [9, 9]


def test_a_top_weight_at_the_threshold_is_not_saturated():
    """Two equal keys: top weight 0.5 exactly; saturated means above the threshold."""
    logits = np.zeros((1, 1, 2, 2))
    st = head_stats(logits, np.ones((1, 1, 2, 2), dtype=bool), np.array([2]), EDGES, 0.5)
    assert st.saturated_frac[0] == 0.0
    st = head_stats(logits, np.ones((1, 1, 2, 2), dtype=bool), np.array([2]), EDGES, 0.4999)
    assert st.saturated_frac[0] == 1.0


def test_one_counted_row_is_its_own_mean_and_none_gives_zeros():
    """Causal, 2 tokens: only row 1 counts (row 0 sees one key): its entropy, 1 for two equal
    keys, is the mean. One real token: no row counts, every figure 0 for each of the 3 heads."""
    causal = np.tril(np.ones((2, 2), dtype=bool))[None, None]
    st = head_stats(np.zeros((1, 3, 2, 2)), causal, np.array([2]), EDGES, 0.99)
    np.testing.assert_allclose(st.entropy_norm, [1.0, 1.0, 1.0])
    np.testing.assert_allclose(st.top_weight, [0.5, 0.5, 0.5])
    st = head_stats(np.zeros((1, 3, 2, 2)), causal, np.array([1]), EDGES, 0.99)
    for name in ("entropy_norm", "top_weight", "saturated_frac", "jacobian_fro", "key_mass",
                 "sink_weight"):
        assert getattr(st, name).tolist() == [0.0, 0.0, 0.0], name
    assert st.hist_counts.sum() == 3  # the query token's one logit, per head


def test_length_columns_and_odd_or_even_edges():
    from engine.training.observe import length_columns, logit_edges

    assert length_columns((8, 32)) == ("accuracy_len8", "entropy_norm_len8", "accuracy_len32",
                                       "entropy_norm_len32")
    e = logit_edges(10.0, 10)  # even: the middle edge is 0 exactly (sinh of linspace's is -9e-16)
    assert e[5] == 0.0 and e[0] == -10.0 and e[-1] == 10.0
    odd = logit_edges(10.0, 9)  # odd: no edge at 0, the two middle ones symmetric around it
    assert 0.0 not in odd.tolist() and np.isclose(odd[4], -odd[5], rtol=1e-12) and odd[4] < 0
    a = np.arcsinh(1000.0)
    np.testing.assert_allclose(odd[1:-1], 10.0 * 1e-3 * np.sinh(-a + 2 * a * np.arange(1, 9) / 9),
                               rtol=1e-12)


def test_the_sink_logit_defaults_to_zero_and_the_probe_shows_example_0s_real_tokens():
    """rule "sink" without sink logits: a sink logit of 0 for every head. The probe weights are
    example 0's real tokens only (2 of 4 here): softmax over its 2 keys per row."""
    logits = np.arange(32, dtype=float).reshape(1, 2, 4, 4) / 10
    mask = (np.arange(4) < 2)[None, None, None, :]
    base = head_stats(logits, mask, np.array([2]), EDGES, 0.99, rule="sink")
    zero = head_stats(logits, mask, np.array([2]), EDGES, 0.99, rule="sink", sink=np.zeros(2))
    np.testing.assert_array_equal(base.key_mass, zero.key_mass)
    np.testing.assert_array_equal(base.probe_weights, zero.probe_weights)
    e = np.exp(logits[0, 1, 1, :2])
    np.testing.assert_allclose(base.probe_weights[1, 1], e / (1.0 + e.sum()), rtol=1e-12)
    plain = head_stats(logits, mask, np.array([2]), EDGES, 0.99)
    assert plain.probe_weights.shape == (2, 2, 2)
    np.testing.assert_allclose(plain.probe_weights[0, 0], np.exp([0.0, 0.1]) / np.exp([0.0, 0.1]).sum(),
                               rtol=1e-12)
