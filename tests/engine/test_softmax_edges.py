"""Softmax figures where a plausible bug would show: batches whose rows differ in scale (a max or
sum over the wrong axis), float32 and integer logits, masked (-inf) keys, rows of one key, the
entropy's ceiling ln n hit in floats, the largest weight elsewhere than first. Expected values
come from plain loops in float64 or by hand (mutation testing, docs/testing.md)."""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest

from engine.softmax import jacobian, jacobian_diagonal, row_metrics, sigmoid_row_metrics, softmax


def _loop(z, sink=None, log_slope=None) -> dict:
    """The figures of one row by definition, in Python floats (a masked key: exp(-inf) = 0)."""
    z = [float(v) for v in z]
    n = len(z)
    top = max(z + ([float(sink)] if sink is not None else []))
    total = sum(math.exp(v - top) for v in z) + (math.exp(sink - top) if sink is not None else 0)
    p = [math.exp(v - top) / total for v in z]
    d = [math.exp(v) for v in log_slope] if log_slope is not None else [1.0] * n
    jac = [[((p[i] if i == j else 0.0) - p[i] * p[j]) * d[j] for j in range(n)] for i in range(n)]
    mass = sum(p)
    big = max(abs(v) for row in jac for v in row)  # (squares of e^-700 would underflow)
    fro = big * math.sqrt(sum((v / big) ** 2 for row in jac for v in row)) if big else 0.0
    return {"weights": p, "top_weight": max(p), "key_mass": mass,
            "entropy": -sum(v / mass * math.log(v / mass) for v in p if v > 0),
            "jacobian_fro": fro, "log10_jacobian_fro": math.log10(fro) if fro > 0 else -math.inf,
            "jacobian_max_abs": big}


def _agree(m, i, ref, rel=1e-11) -> None:
    np.testing.assert_allclose(m.weights[i], ref["weights"], rtol=rel, atol=1e-300)
    for name in ("top_weight", "key_mass", "entropy", "jacobian_fro", "log10_jacobian_fro",
                 "jacobian_max_abs"):
        assert float(getattr(m, name)[i]) == pytest.approx(ref[name], rel=rel, abs=0.0), name


def test_softmax_normalizes_each_row_of_a_batch_on_its_own() -> None:
    # rows 1000 apart: a max or a sum over the whole batch underflows the second row to 0/0;
    # s + max instead of s - max overflows the first
    s = np.array([[1000.0, 999.0, 990.0], [0.0, -1.0, -2.5]])
    want = [[1.0, math.exp(-1), math.exp(-10)], [1.0, math.exp(-1), math.exp(-2.5)]]
    want = [[v / sum(row) for v in row] for row in want]
    np.testing.assert_allclose(softmax(s), want, rtol=1e-14)
    low = softmax(s.astype(np.float32))
    assert low.dtype == np.float32
    np.testing.assert_allclose(low, want, rtol=1e-6)
    ints = softmax(np.array([2, 0, -1]))  # integer scores are read as float64
    assert ints.dtype == np.float64
    total = math.exp(2) + 1 + math.exp(-1)
    np.testing.assert_allclose(ints, [math.exp(2) / total, 1 / total, math.exp(-1) / total],
                               rtol=1e-15)


def _mp_log10_fro(row: list[float]) -> float:
    """log10 ||diag(p) - p p^T||_F at 500 digits (1 - p_max ~ e^-900 is kept)."""
    with mpmath.workdps(500):
        e = [mpmath.exp(mpmath.mpf(v) - max(row)) for v in row]
        p = [v / mpmath.fsum(e) for v in e]
        n = len(p)
        return float(mpmath.log10(mpmath.sqrt(mpmath.fsum(
            ((p[i] if i == j else 0) - p[i] * p[j]) ** 2 for i in range(n) for j in range(n)))))


@pytest.mark.parametrize("kw", [{}, {"sink": -np.inf}, {"log_slope": np.zeros((2, 3))}])
def test_a_saturated_row_beside_a_spread_one_keeps_its_own_exact_figures(kw) -> None:
    """Row 2's off-max mass e^-900 underflows; only its own runner-up keeps its log exact (a
    runner-up taken over the batch gives ln 0). The three paths: plain, sink, cap slope."""
    rows = np.array([[-1.0, 0.0, -2.5], [900.0, 0.0, -1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = row_metrics(rows, **kw)
    _agree(m, 0, _loop(rows[0]))
    # row 2 by hand: E = e^-900 (1 + e^-1), ||J|| -> E sqrt(2 + 2 sum v_i^2) ~ sqrt(2) E (1 + ...)
    assert float(m.log10_jacobian_fro[1]) == pytest.approx(_mp_log10_fro([900.0, 0.0, -1.0]),
                                                           rel=1e-13)
    assert float(m.top_weight[1]) == 1.0 and float(m.jacobian_fro[1]) == 0.0


def test_float32_and_integer_logits_give_every_figure_in_their_dtype() -> None:
    rows = np.array([[2.0, -1.0, 0.5], [0.0, 3.0, 1.0]])
    for kw in ({}, {"sink": 0.5}, {"log_slope": np.full((2, 3), -0.5)}):
        low = row_metrics(rows.astype(np.float32), **kw)
        for name in ("weights", "top_weight", "entropy", "jacobian_fro", "log10_jacobian_fro",
                     "jacobian_max_abs", "key_mass", "sink_weight"):
            assert getattr(low, name).dtype == np.float32, (kw, name)
        for i in range(2):
            _agree(low, i, _loop(rows[i], kw.get("sink"),
                                 kw["log_slope"][i] if "log_slope" in kw else None), rel=3e-6)
    ints = row_metrics(np.array([[2, -1, 0]]))
    assert ints.weights.dtype == np.float64
    _agree(ints, 0, _loop([2, -1, 0]))


def test_the_sink_is_a_logit_in_the_rows_dtype() -> None:
    """A float32 model's sink is a float32 logit like its keys: 10000.3 is 10000.2998046875
    there, which moves the sink's weight by 2e-4 (relative), far above float32's 6e-8."""
    keys = np.array([[10000.0, 9999.0]], dtype=np.float32)
    m = row_metrics(keys, sink=10000.3)
    sink32 = float(np.float32(10000.3))
    total = 1 + math.exp(-1) + math.exp(sink32 - 10000.0)
    assert float(m.sink_weight[0]) == pytest.approx(math.exp(sink32 - 10000.0) / total, rel=2e-6)
    assert float(m.weights[0, 0]) == pytest.approx(1 / total, rel=2e-6)


@pytest.mark.parametrize(("n", "dtype"), [(4, np.float64), (14, np.float64), (7, np.float32),
                                          (47, np.float32)])
def test_a_uniform_row_has_entropy_ln_n_and_never_more(n, dtype) -> None:
    """Computed in floats, ln Z of a uniform row is ln n plus one rounding at these n (log1p(13)
    > ln 14 in float64): the clip keeps H / ln n <= 1. Every path: plain, sink, slope, sigmoid."""
    z = np.zeros((1, n), dtype=dtype)
    ceiling = dtype(math.log(n))
    for m in (row_metrics(z), row_metrics(z, sink=-60.0), row_metrics(z, log_slope=z - 0.5),
              sigmoid_row_metrics(z, -math.log(n))):
        h = m.entropy[0]
        assert h <= ceiling
        assert float(h) == pytest.approx(math.log(n), rel=4e-7 if dtype == np.float32 else 1e-15)


@pytest.mark.parametrize("kw", [{}, {"sink": -1.0}, {"log_slope": [-0.3, 0.0, -1.0, -0.2]}])
def test_masked_keys_and_rows_of_one_key(kw) -> None:
    """A key masked by -inf gets weight 0 and adds nothing to the entropy (0 * ln 0 = 0, not
    NaN); a row with one key left has an exactly zero Jacobian: fro 0, log10 -inf, no warning."""
    rows = np.array([[0.5, -np.inf, 1.5, -0.5], [-np.inf, 2.0, -np.inf, -np.inf]])
    slope = np.array([kw["log_slope"]] * 2) if "log_slope" in kw else None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = row_metrics(rows, sink=kw.get("sink"), log_slope=slope)
        one = row_metrics(np.array([[3.0]]), sink=kw.get("sink"),
                          log_slope=slope[:1, :1] if slope is not None else None)
    _agree(m, 0, _loop(rows[0], kw.get("sink"), kw.get("log_slope")))
    _agree(m, 1, _loop(rows[1], kw.get("sink"), kw.get("log_slope")))
    _agree(one, 0, _loop([3.0], kw.get("sink"), slope[0, :1] if slope is not None else None))
    if "sink" not in kw:
        assert m.weights[1].tolist() == [0.0, 1.0, 0.0, 0.0] and one.weights[0, 0] == 1.0
        assert m.log10_jacobian_fro[1] == -np.inf and one.jacobian_fro[0] == 0.0
        assert m.entropy[1] == 0.0 and one.jacobian_max_abs[0] == 0.0


def test_cap_slopes_in_one_row_and_in_a_deeper_batch() -> None:
    """The slope's largest value is factored out per row: rows whose slopes differ by 800 in
    log (e^100 and e^-700, both representable times p (1 - p)) keep their own largest entry."""
    z = np.array([[1.0, -0.5, 0.0], [0.3, 2.0, -1.0]])
    ls = np.array([[100.0, 99.0, 98.5], [-700.0, -700.5, -699.0]])
    m = row_metrics(z, log_slope=ls)
    for i in range(2):
        _agree(m, i, _loop(z[i], log_slope=ls[i]))
    single = row_metrics(z[1], log_slope=ls[1])  # one row, shape (n,)
    _agree(single, ..., _loop(z[1], log_slope=ls[1]))
    deep = row_metrics(z[:, None, :], log_slope=ls[:, None, :] * 0.001)  # (2, 1, n)
    for i in range(2):
        _agree(deep, (i, 0), _loop(z[i], log_slope=ls[i] * 0.001))


def test_one_minus_p_and_the_jacobian_per_row_with_the_top_anywhere() -> None:
    """1 - p_max is the sum of the row's others (and the rest): each row of a batch its own, the
    largest weight in the middle or last, not first."""
    p = np.array([[0.1, 0.5, 0.2], [0.25, 0.15, 0.4]])  # each row: keys + rest 0.2 = 1
    np.testing.assert_allclose(jacobian_diagonal(p, 0.2), [[0.09, 0.25, 0.16],
                                                           [0.1875, 0.1275, 0.24]], rtol=1e-14)
    np.testing.assert_allclose(jacobian_diagonal(np.array([0.2, 0.8])), [0.16, 0.16], rtol=1e-14)
    want = [[[((r[i] if i == j else 0.0) - r[i] * r[j]) for j in range(3)] for i in range(3)]
            for r in p.tolist()]
    np.testing.assert_allclose(jacobian(p, 0.2), want, rtol=1e-14, atol=1e-17)
    tiny = np.array([[1e-17, 1 - 1e-17], [1 - 1e-16, 1e-16]])  # 1 - p_max rounds in floats
    np.testing.assert_allclose(jacobian_diagonal(tiny), [[1e-17, 1e-17], [1e-16, 1e-16]],
                               rtol=1e-12)
