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
