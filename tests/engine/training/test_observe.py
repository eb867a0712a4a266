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
