"""The probe generator and the detail view on a hand-made capture (2 layers, 1 head, 3 tokens,
d_k 4, no model): every figure against a softmax written out in the test, row by row."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import engine.probe.analyze as analyze_mod
from engine.errors import Cancelled
from engine.probe.analyze import analyze, analyze_capture, head_detail, run_to_result
from engine.probe.capture import Capture
from engine.probe.config import ProbeConfig

#: queries and keys of layer 0 (layer 1: the same times 2, queries reversed)
Q0 = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0]], dtype=np.float32)
K0 = np.array([[1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 0, 1]], dtype=np.float32)
CAUSAL = np.tril(np.ones((3, 3), dtype=bool))
FULL = np.ones((3, 3), dtype=bool)


def _softmax_rows(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row by row over the visible keys, 0 elsewhere (a plain loop: the test's own softmax)."""
    out = np.zeros_like(logits, dtype=np.float64)
    for i in range(logits.shape[0]):
        keys = np.flatnonzero(mask[i])
        e = np.exp(logits[i, keys] - logits[i, keys].max())
        out[i, keys] = e / e.sum()
    return out


def _qk(layer: int) -> tuple[np.ndarray, np.ndarray]:
    return (Q0, K0) if layer == 0 else (2 * Q0[::-1], 2 * K0)


def _model_logits(layer: int, scale=(0.5, 0.25), cap=(math.nan, 0.5)) -> np.ndarray:
    q, k = _qk(layer)
    z = scale[layer] * (q.astype(np.float64) @ k.T.astype(np.float64))
    return z if math.isnan(cap[layer]) else cap[layer] * np.tanh(z / cap[layer])


def capture_of(model_attn=None, sinks: bool = False, masked_mass=None, bias=None) -> Capture:
    masks = np.stack([CAUSAL, FULL])
    if model_attn is None:
        model_attn = np.stack([_softmax_rows(_model_logits(i), masks[i]) for i in range(2)])
    return Capture(
        q=np.stack([_qk(0)[0], _qk(1)[0]])[:, None], k=np.stack([_qk(0)[1], _qk(1)[1]])[:, None],
        model_attn=np.asarray(model_attn, dtype=np.float32)[:, None] if np.ndim(model_attn) == 3
        else np.asarray(model_attn, dtype=np.float32),
        masked_mass=np.zeros((2, 1)) if masked_mass is None else masked_mass,
        scale=np.array([0.5, 0.25]), pair_masks=masks, bias=bias,
        softcap=np.array([np.nan, 0.5]), sinks=sinks, valid_positions=np.array([0, 2, 3]),
        causal=True, forward_s=0.75)


def _loaded():
    info = SimpleNamespace(name="tiny", model_type="gpt2", path="/m/tiny")
    return SimpleNamespace(info=info, load_s=2.5)


def _run(cap: Capture | None = None, tokens=("a", "pad", "b", "c"), **cfg):
    config = ProbeConfig(text="a b c", **{"bootstrap": 0, **cfg})
    return run_to_result(analyze_capture(config, _loaded(), cap or capture_of(), (5, 0, 6, 7),
                                         tokens, 11))


def _entropy_norm(p: np.ndarray) -> float:
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum() / math.log(p.size))


def _jacobian_fro(p: np.ndarray) -> float:
    return float(np.linalg.norm(np.diag(p) - np.outer(p, p)))


def test_the_snapshots_name_each_layer_and_end_with_the_result() -> None:
    snaps = list(analyze_capture(ProbeConfig(text="x", bootstrap=0), _loaded(), capture_of(),
                                 (5, 0, 6, 7)))
    assert [(s.stage, s.fraction, s.done) for s in snaps] == [
        ("statistics, layer 1 of 2", 0.4, False), ("statistics, layer 2 of 2", 0.7, False),
        ("done", 1.0, True)]
    assert snaps[-1].result is not None and all(s.result is None for s in snaps[:-1])


def test_the_result_keeps_the_valid_tokens_and_the_models_facts() -> None:
    import time

    before = time.perf_counter()
    res = _run()
    after = time.perf_counter()
    assert 0 <= res.stats_s <= after - before  # an elapsed time inside the call
    assert res.config == ProbeConfig(text="a b c", bootstrap=0)
    np.testing.assert_array_equal(res.k, capture_of().k)
    np.testing.assert_array_equal(res.q, capture_of().q)
    assert (res.token_ids, res.tokens, res.n_tokens, res.truncated_from) == (
        (5, 6, 7), ("a", "b", "c"), 3, 11)
    assert all(type(i) is int for i in res.token_ids)
    assert (res.model_name, res.model_type, res.model_path) == ("tiny", "gpt2", "/m/tiny")
    assert (res.n_layers, res.n_heads, res.d_k, res.causal) == (2, 1, 4, True)
    assert (res.load_s, res.forward_s) == (2.5, 0.75) and res.stats_s >= 0
    np.testing.assert_array_equal(res.scale_model, [0.5, 0.25])
    np.testing.assert_array_equal(res.pair_mask, CAUSAL)
    np.testing.assert_array_equal(res.pair_masks[1], FULL)
    # without token texts, the labels are the kept ids
    res = run_to_result(analyze_capture(ProbeConfig(text="x", bootstrap=0), _loaded(),
                                        capture_of(), (5, 0, 6, 7)))
    assert res.tokens == ("5", "6", "7") and res.truncated_from is None


def test_the_scores_are_q_dot_k_of_each_layer() -> None:
    res = _run()
    assert res.scores.dtype == np.float32 and res.scores.shape == (2, 1, 3, 3)
    np.testing.assert_array_equal(res.scores[0, 0], [[1, 0, 0], [0, 2, 0], [1, 2, 0]])
    np.testing.assert_array_equal(res.scores[1, 0], [[4, 8, 0], [0, 8, 0], [4, 0, 0]])
    assert res.q is not None and res.q.shape == (2, 1, 3, 4)


@pytest.mark.parametrize(("rule", "scale"), [("none", (1.0, 1.0)), ("dk", (0.25, 0.25))])
def test_each_rules_rows_by_hand(rule: str, scale: tuple) -> None:
    res = _run()
    rs = res.rows[rule]
    np.testing.assert_array_equal(rs.row_ok, [False, True, True])  # layer 0's first row: 1 key
    for layer, mask in ((0, CAUSAL), (1, FULL)):
        q, k = _qk(layer)
        p = _softmax_rows(scale[layer] * (q.astype(float) @ k.T.astype(float)), mask)
        for i in range(3):
            if not (layer == 0 and i == 0):
                vis = p[i][mask[i]]
                assert rs.entropy_norm[layer, 0, i] == pytest.approx(_entropy_norm(vis), abs=1e-12)
                assert rs.top_weight[layer, 0, i] == pytest.approx(vis.max(), abs=1e-12)
                assert rs.jacobian_fro[layer, 0, i] == pytest.approx(_jacobian_fro(vis),
                                                                     abs=1e-12)
    assert res.scale(rule, 1) == scale[1]


def test_the_model_rule_applies_its_scale_and_soft_cap_and_matches_its_own_weights() -> None:
    res = _run()
    rs = res.rows["model"]
    for layer, mask in ((0, CAUSAL), (1, FULL)):
        p = _softmax_rows(_model_logits(layer), mask)
        assert rs.top_weight[layer, 0, 2] == pytest.approx(p[2][mask[2]].max(), abs=1e-12)
        assert rs.entropy_norm[layer, 0, 1] == pytest.approx(_entropy_norm(p[1][mask[1]]),
                                                             abs=1e-12)
    assert res.attn_max_abs_diff.shape == (2, 1) and res.attn_max_abs_diff.max() < 1e-7
    assert res.scale("model", 0) == 0.5 and res.scale("model", 1) == 0.25
    assert type(res.scale("model", 1)) is float


def test_the_model_difference_is_the_largest_of_the_weights_and_the_masked_mass() -> None:
    attn = np.stack([_softmax_rows(_model_logits(i), m) for i, m in ((0, CAUSAL), (1, FULL))])
    attn[1, 2, 0] += 0.01
    res = _run(capture_of(model_attn=attn, masked_mass=np.array([[0.02], [0.0]])))
    assert res.attn_max_abs_diff[0, 0] == pytest.approx(0.02, abs=1e-7)
    assert res.attn_max_abs_diff[1, 0] == pytest.approx(0.01, abs=1e-7)


def test_sinks_are_taken_out_of_the_models_rows_before_comparing() -> None:
    """A model with sinks puts 40 % of every row on the sink: its key weights are 0.6 p."""
    exact = np.stack([_softmax_rows(_model_logits(i), m) for i, m in ((0, CAUSAL), (1, FULL))])
    res = _run(capture_of(model_attn=0.6 * exact, sinks=True))
    assert res.attn_max_abs_diff.max() < 1e-6
    plain = _run(capture_of(model_attn=0.6 * exact, sinks=False))
    assert plain.attn_max_abs_diff[0, 0] == pytest.approx(0.4, abs=1e-6)  # row 0: one key, 1


def test_an_additive_bias_is_part_of_the_models_logits() -> None:
    bias = np.zeros((2, 1, 3, 3))
    bias[:, 0, :, 0] = 1.5  # every row favours key 0
    logits = [_model_logits(i) + bias[i, 0] for i in range(2)]
    attn = np.stack([_softmax_rows(logits[i], m) for i, m in ((0, CAUSAL), (1, FULL))])
    res = _run(capture_of(model_attn=attn, bias=bias))
    assert res.attn_max_abs_diff.max() < 1e-6
    p = _softmax_rows(logits[1], FULL)
    assert res.rows["model"].top_weight[1, 0, 1] == pytest.approx(p[1].max(), abs=1e-12)


def test_the_bootstrap_seed_differs_per_layer_and_follows_the_config() -> None:
    from engine.probe.stats import score_stats

    res = _run(bootstrap=20, seed=4)
    for layer, mask in ((0, CAUSAL), (1, FULL)):
        q, k = (a.astype(np.float64)[None, None] for a in _qk(layer))
        want = score_stats(q, k, mask, 20, 4 + 7919 * layer)
        assert res.score_stats.raw_std_se[layer, 0] == want.raw_std_se[0, 0]
        assert res.score_stats.std_ratio[layer, 0] == want.std_ratio[0, 0]
    assert res.score_stats.raw_std_se[0, 0] > 0
    assert _run(bootstrap=20, seed=5).score_stats.raw_std_se[0, 0] != \
        res.score_stats.raw_std_se[0, 0]


def test_a_cancel_stops_the_statistics_at_the_next_layer() -> None:
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 1

    gen = analyze_capture(ProbeConfig(text="x", bootstrap=0), _loaded(), capture_of(),
                          (5, 0, 6, 7), cancelled=cancelled)
    assert next(gen).stage == "statistics, layer 1 of 2"
    with pytest.raises(Cancelled):
        next(gen)


def test_analyze_loads_tokenizes_and_captures_in_order(monkeypatch) -> None:
    seen = []
    loaded = _loaded()
    monkeypatch.setattr(analyze_mod, "load_model", lambda model: seen.append(("load", model))
                        or loaded)
    monkeypatch.setattr(analyze_mod, "tokenize", lambda ld, text, n: seen.append(
        ("tokenize", ld is loaded, text, n)) or SimpleNamespace(
            ids=(5, 0, 6, 7), tokens=("a", "pad", "b", "c"), truncated_from=9))
    monkeypatch.setattr(analyze_mod, "capture", lambda ld, ids: seen.append(
        ("capture", ld is loaded, ids)) or capture_of())
    cfg = ProbeConfig(text="a b c", model="m/folder", bootstrap=0, max_tokens=12)
    snaps = list(analyze(cfg))
    assert seen == [("load", "m/folder"), ("tokenize", True, "a b c", 12),
                    ("capture", True, (5, 0, 6, 7))]
    assert [(s.stage, s.fraction) for s in snaps[:3]] == [
        ("loading model", 0.0), ("tokenizing", 0.2), ("forward pass", 0.3)]
    res = snaps[-1].result
    assert res.tokens == ("a", "b", "c") and res.truncated_from == 9
    seen.clear()
    snaps = list(analyze(cfg, loaded))  # a loaded model is reused, not loaded again
    assert seen[0][0] == "tokenize" and snaps[0].stage == "tokenizing"


@pytest.mark.parametrize("stop_after", [0, 1, 2, 3, 4])
def test_analyze_checks_the_cancel_flag_between_its_stages(monkeypatch, stop_after: int) -> None:
    monkeypatch.setattr(analyze_mod, "tokenize", lambda ld, text, n: SimpleNamespace(
        ids=(5, 0, 6, 7), tokens=None, truncated_from=None))
    monkeypatch.setattr(analyze_mod, "capture", lambda ld, ids: capture_of())
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > stop_after

    gen = analyze(ProbeConfig(text="x", bootstrap=0), _loaded(), cancelled)
    got = []
    with pytest.raises(Cancelled):
        for snap in gen:
            got.append(snap.stage)
    # the flag is read after loading, tokenizing and the pass, then before each layer
    assert got == {0: [], 1: ["tokenizing"], 2: ["tokenizing", "forward pass"],
                   3: ["tokenizing", "forward pass"],
                   4: ["tokenizing", "forward pass", "statistics, layer 1 of 2"]}[stop_after]


def test_a_generator_without_a_result_is_named() -> None:
    with pytest.raises(RuntimeError, match=r"^the probe ended without a result$"):
        run_to_result(iter([SimpleNamespace(result=None)]))


def test_head_detail_by_hand() -> None:
    res = _run()
    det = head_detail(res, 1, 0, "dk", bins=8)
    assert (det.layer, det.head, det.rule, det.scale) == (1, 0, "dk", 0.25)  # 1 / d_k
    mean = float(res.score_stats.iid_pred_mean[1, 0])
    std = float(res.score_stats.iid_pred_std[1, 0])
    assert det.raw_theory == (mean, std)
    assert det.scaled_theory == (pytest.approx(mean / 4), pytest.approx(std / 4))
    vals = np.array([4, 8, 0, 0, 8, 0, 4, 0, 0], dtype=float)  # layer 1 sees every key
    lo, hi = min(0.0, mean - 4 * std), max(8.0, mean + 4 * std)
    np.testing.assert_allclose(det.raw_hist.edges, np.linspace(lo, hi, 9))
    assert det.raw_hist.counts.dtype == np.int64
    np.testing.assert_array_equal(det.raw_hist.counts, np.histogram(vals, np.linspace(lo, hi, 9))[0])
    np.testing.assert_allclose(det.scaled_hist.edges, np.linspace(lo, hi, 9) / 4)
    x, pdf = det.raw_overlay
    assert x.size == 300 and (x[0], x[-1]) == (pytest.approx(lo), pytest.approx(hi))
    np.testing.assert_allclose(pdf, np.exp(-0.5 * ((x - mean) / std) ** 2)
                               / (std * math.sqrt(2 * math.pi)), rtol=1e-12)
    xs, pdfs = det.scaled_overlay
    np.testing.assert_allclose(pdfs, np.exp(-0.5 * ((xs - mean / 4) / (std / 4)) ** 2)
                               / (std / 4 * math.sqrt(2 * math.pi)), rtol=1e-12)
    np.testing.assert_allclose(det.weights, _softmax_rows(0.25 * res.scores[1, 0].astype(float),
                                                          FULL), atol=1e-12)
    np.testing.assert_array_equal(det.jacobian_fro, res.rows["dk"].jacobian_fro[1, 0])
    np.testing.assert_array_equal(det.entropy_norm, res.rows["dk"].entropy_norm[1, 0])
    np.testing.assert_array_equal(det.row_ok, [False, True, True])
    assert det.tokens == ("a", "b", "c")
    det.jacobian_fro[:] = -1  # a copy: the result is not changed through the detail
    assert res.rows["dk"].jacobian_fro.min() >= 0


def test_head_detail_of_a_causal_layer_counts_only_visible_pairs_and_defaults_to_model() -> None:
    res = _run()
    det = head_detail(res, 0, 0)
    assert (det.rule, det.scale) == ("model", 0.5)
    assert det.raw_hist.counts.sum() == 6  # 3 rows seeing 1, 2 and 3 keys
    assert len(det.raw_hist.edges) == 61
    np.testing.assert_array_equal(det.weights[0], [1, 0, 0])
    with pytest.raises(ValueError, match=r"rule must be one of \('model', 'none', 'dk'\)"):
        head_detail(res, 0, 0, "sqrt")


def test_a_histogram_of_one_value_with_no_spread_gets_a_unit_range() -> None:
    from engine.probe.analyze import _hist, _normal_pdf

    h = _hist(np.array([3.0, 3.0]), 4, 3.0, 0.0)
    np.testing.assert_allclose(h.edges, [2.5, 2.75, 3.0, 3.25, 3.5])
    np.testing.assert_array_equal(h.counts, [0, 0, 2, 0])
    x, pdf = _normal_pdf(h.edges, 3.0, 0.0)
    assert x.size == 300 and pdf.shape == (300,) and pdf.dtype == np.float64 and not pdf.any()
    x, pdf = _normal_pdf(np.array([0.0, 1.0]), 0.0, 1.0, points=3)
    np.testing.assert_allclose(pdf, np.exp([0.0, -0.125, -0.5]) / math.sqrt(2 * math.pi))
    # the data wider than 4 predicted stds sets the range, on each side
    h = _hist(np.array([-10.0, 20.0]), 3, 0.0, 1.0)
    np.testing.assert_allclose(h.edges, [-10, 0, 10, 20])
    h = _hist(np.array([0.0, 1.0]), 2, 0.5, 1.0)
    np.testing.assert_allclose(h.edges, [-3.5, 0.5, 4.5])


def test_the_bootstrap_reads_the_cancel_flag_too() -> None:
    """With bootstrap, a long layer can be cancelled inside: the flag is read more than once a
    layer (twice here: 2 layers, and 2 inside the resampling of 20)."""
    calls = []
    _ = run_to_result(analyze_capture(ProbeConfig(text="x", bootstrap=20), _loaded(),
                                      capture_of(), (5, 0, 6, 7),
                                      cancelled=lambda: calls.append(1) or False))
    assert len(calls) > 2


def test_sinks_of_different_shares_per_row_are_taken_out_row_by_row() -> None:
    """Rows lose 10 %, 40 % and 70 % to the sink: each row is divided by its own sum (a sum over
    the wrong axis divides a row by another row's)."""
    exact = np.stack([_softmax_rows(_model_logits(i), m) for i, m in ((0, CAUSAL), (1, FULL))])
    kept = np.array([0.9, 0.6, 0.3])[None, :, None]
    res = _run(capture_of(model_attn=exact * kept, sinks=True))
    assert res.attn_max_abs_diff.max() < 1e-6


def test_a_row_all_on_the_sink_stays_zero_not_nan() -> None:
    exact = np.stack([_softmax_rows(_model_logits(i), m) for i, m in ((0, CAUSAL), (1, FULL))])
    exact[1, 2] = 0.0  # layer 1's last row gives everything to the sink
    res = _run(capture_of(model_attn=exact, sinks=True))
    p = _softmax_rows(_model_logits(1), FULL)[2]
    assert res.attn_max_abs_diff[1, 0] == pytest.approx(p.max(), abs=1e-7)
    assert res.attn_max_abs_diff[0, 0] < 1e-6


def _with_rows(res, top: np.ndarray, ok: np.ndarray, threshold: float):
    from dataclasses import replace

    from engine.probe.stats import RowStats

    z = np.zeros_like(top)
    rows = {r: RowStats(entropy_norm=top + 1, top_weight=top, jacobian_fro=z, log10_jacobian_fro=z,
                        row_ok=ok, max_abs_diff=None) for r in ("model", "none", "dk")}
    return replace(res, rows=rows, config=ProbeConfig(text="x", saturation_threshold=threshold))


def test_head_means_and_saturation_over_the_counted_rows_by_hand() -> None:
    top = np.array([[[1.0, 0.7, 0.95, 0.6]], [[0.2, 0.95, 0.96, 0.94]]])  # (2 layers, 1 head, 4)
    res = _with_rows(_run(), top, np.array([False, True, True, True]), 0.95)
    np.testing.assert_allclose(res.head_mean("none", "top_weight"), [[0.75], [0.95]])
    np.testing.assert_allclose(res.head_mean("dk", "entropy_norm"), [[1.75], [1.95]])
    # strictly above 0.95: layer 0 none of 0.7, 0.95, 0.6; layer 1 one of 0.95, 0.96, 0.94
    np.testing.assert_allclose(res.saturated_frac("model"), [[0.0], [1 / 3]])
    assert res.head_mean("model", "top_weight").shape == (2, 1)
    res = _with_rows(_run(), top, np.array([True, False, False, False]), 0.5)
    np.testing.assert_allclose(res.head_mean("none", "top_weight"), [[1.0], [0.2]])
    np.testing.assert_allclose(res.saturated_frac("none"), [[1.0], [0.0]])
    none = _with_rows(_run(), top, np.zeros(4, dtype=bool), 0.5)
    for got in (none.head_mean("none", "top_weight"), none.saturated_frac("dk")):
        assert got.shape == (2, 1) and not got.any()
