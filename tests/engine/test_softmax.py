"""Softmax numerics: docs/SCIENCE.md's worked examples, outside oracles (mpmath, torch), properties."""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from engine.softmax import JACOBIAN_ENTRY_MAX, jacobian, row_metrics, softmax

WORKED = [  # scores, softmax, largest |J| entry: docs/SCIENCE.md's table, digits as printed there
    ([8, 0, -8], ["0.99966454", "0.00033535", "1.1249742e-7"], "0.00033535"),
    ([1, 0, -1], ["0.66524096", "0.24472847", "0.09003057"], "0.22269543"),
    ([16, 8, 0, -8], ["0.99966454", "0.00033535", "1.1249742e-7", "3.77e-11"], "0.00033535"),
    ([2, 1, 0, -1], ["0.64391426", "0.23688282", "0.08714432", "0.03205860"], "0.22928869"),
]


def _sig_digits(literal: str) -> int:
    mantissa = literal.lower().split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa)


def _rounded_as_printed(value: float, literal: str) -> float:
    return float(f"{value:.{_sig_digits(literal)}g}")


@pytest.mark.parametrize(("scores", "weights", "max_entry"), WORKED)
def test_worked_examples(scores, weights, max_entry) -> None:
    m = row_metrics(np.array(scores, dtype=float))
    for got, literal in zip(m.weights, weights):
        assert _rounded_as_printed(float(got), literal) == float(literal)
    assert _rounded_as_printed(float(m.jacobian_max_abs), max_entry) == float(max_entry)


@pytest.mark.parametrize(("scores", "fro"), [([1, 0, -1], 0.389389774658), ([2, 1, 0, -1], 0.383675762151)])
def test_worked_frobenius_norms(scores, fro) -> None:
    assert row_metrics(np.array(scores, float)).jacobian_fro == pytest.approx(fro, abs=5e-13)


def _mp_oracle(scores: list[float]) -> tuple[mpmath.mpf, mpmath.mpf]:
    """Frobenius norm and entropy with enough digits that 1 - p_max is exact."""
    spread = max(scores) - min(scores)
    with mpmath.workdps(int(spread / 2.3) + 60):
        s = [mpmath.mpf(x) for x in scores]
        e = [mpmath.exp(x - max(s)) for x in s]
        z = mpmath.fsum(e)
        p = [x / z for x in e]
        fro2 = mpmath.fsum(((p[i] if i == j else 0) - p[i] * p[j]) ** 2
                           for i in range(len(p)) for j in range(len(p)))
        ent = -mpmath.fsum(x * mpmath.log(x) for x in p if x > 0)
        return mpmath.sqrt(fro2), ent


@pytest.mark.parametrize("scores", [
    [1, 0, -1], [3.5, -2, 0.25, 7, 7], [40, 0, -3], [400, 0, -1],  # 1 - p_max ~ 1e-174
    [0, -700, -710, -705], [0, -30, -30, -30, -30, -30], [12, 11.5, -20],
    [0, 0, 0, 0], [0, -800, -801],  # off-mass below the float64 range: the log stays exact
    list(np.linspace(-50, 50, 33)),
])
def test_jacobian_size_matches_mpmath_including_saturated_rows(scores) -> None:
    m = row_metrics(np.array(scores, float))
    fro, ent = _mp_oracle(scores)
    expected_log10 = float(mpmath.log10(fro)) if fro > 0 else None
    assert m.log10_jacobian_fro == pytest.approx(expected_log10, rel=1e-12, abs=1e-9)
    if fro > mpmath.mpf("1e-300"):
        assert m.jacobian_fro == pytest.approx(float(fro), rel=1e-12)
    assert m.entropy == pytest.approx(float(ent), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("a", [1e3, 1e5, 1e6])
def test_extreme_spread_has_exact_log_jacobian(a: float) -> None:
    """For scores (a, 0, -a), E = 1 - p_max ~ e^-a and ||J||_F -> 2E: log10 = log10(2) - a/ln 10."""
    m = row_metrics(np.array([a, 0.0, -a]))
    assert m.log10_jacobian_fro == pytest.approx(np.log10(2.0) - a / np.log(10.0), rel=1e-14)
    assert m.jacobian_fro == 0.0 and m.top_weight == 1.0 and m.entropy >= 0


def test_naive_one_minus_pmax_would_fail_here() -> None:
    """The trap the implementation avoids: 1 - p_max rounds to 0 although the others are not 0."""
    p = softmax(np.array([40.0, 0.0, -3.0]))
    assert 1.0 - p.max() == 0.0 and p[1:].sum() > 0
    assert row_metrics(np.array([40.0, 0.0, -3.0])).jacobian_fro > 0


def test_jacobian_matrix_equals_torch_autograd() -> None:
    rng = np.random.default_rng(1)
    for n in (2, 5, 17):
        s = rng.normal(scale=3, size=n)
        auto = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, 0),
                                                  torch.tensor(s, dtype=torch.float64))
        np.testing.assert_allclose(jacobian(softmax(s)), auto.numpy(), atol=1e-15)
        assert row_metrics(s).jacobian_fro == pytest.approx(float(torch.linalg.norm(auto)), rel=1e-12)


def test_largest_entry_never_exceeds_quarter() -> None:
    m = row_metrics(np.array([[0.0, 0.0], [0.0, np.log(3)], [5.0, -5.0]]))
    assert m.jacobian_max_abs[0] == pytest.approx(JACOBIAN_ENTRY_MAX)
    assert np.all(m.jacobian_max_abs <= JACOBIAN_ENTRY_MAX)


finite_scores = arrays(np.float64, st.integers(2, 40),
                       elements=st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


@given(finite_scores)
def test_properties_hold_for_any_scores(s: np.ndarray) -> None:
    m = row_metrics(s)
    for arr in (m.weights, m.top_weight, m.entropy, m.jacobian_fro, m.log10_jacobian_fro, m.jacobian_max_abs):
        assert np.all(np.isfinite(arr))
    assert m.weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(m.weights >= 0)
    assert 0 <= m.entropy <= np.log(s.size) + 1e-12
    assert 0 <= m.jacobian_max_abs <= 0.25
    assert 0 <= m.jacobian_fro <= 0.5 + 1e-12
    j = jacobian(m.weights)
    np.testing.assert_allclose(j.sum(axis=1), 0.0, atol=1e-15)
    np.testing.assert_allclose(j, j.T)
    assert m.jacobian_fro == pytest.approx(np.linalg.norm(j), rel=1e-9, abs=1e-300)


@given(finite_scores)
def test_float32_path_stays_finite(s: np.ndarray) -> None:
    m = row_metrics(s.astype(np.float32))
    assert m.weights.dtype == np.float32
    for arr in (m.weights, m.entropy, m.jacobian_fro, m.log10_jacobian_fro, m.jacobian_max_abs):
        assert np.all(np.isfinite(arr))
    assert float(m.weights.sum()) == pytest.approx(1.0, abs=1e-5)


def test_batched_rows_equal_single_rows() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(scale=20, size=(50, 9))
    batch = row_metrics(x)
    for i in (0, 17, 49):
        one = row_metrics(x[i])
        assert batch.jacobian_fro[i] == pytest.approx(float(one.jacobian_fro), rel=1e-14)
        assert batch.entropy[i] == pytest.approx(float(one.entropy), rel=1e-14, abs=1e-300)


def _mp_capped_log10_fro(z: list[float], c: float, sink: float | None) -> float:
    """log10 ||(diag(p) - p p^T) D||_F of capped logits c tanh(z/c), D = diag(sech^2(z/c)),
    the sink (if any) in the softmax, at 400 digits."""
    with mpmath.workdps(400):
        cc = mpmath.mpf(c)
        logits = [cc * mpmath.tanh(mpmath.mpf(x) / cc) for x in z]
        slope = [mpmath.sech(mpmath.mpf(x) / cc) ** 2 for x in z]
        pool = logits + ([mpmath.mpf(sink)] if sink is not None else [])
        top = max(pool)
        total = mpmath.fsum(mpmath.exp(x - top) for x in pool)
        p = [mpmath.exp(x - top) / total for x in logits]
        n = len(z)
        fro2 = mpmath.fsum((((p[i] if i == j else 0) - p[i] * p[j]) * slope[j]) ** 2
                           for i in range(n) for j in range(n))
        return float(mpmath.log10(mpmath.sqrt(fro2)))


@pytest.mark.parametrize(("z", "c", "sink"), [
    ([114079.74416004, 106982.26326796, -26037.62759279, -14472.72879596], 309.06213972, None),
    ([-118131.4052447, -9983.96023285, 147378.53081429], 538.01374621, -3.7778668491),
    ([159735.37709581, -141835.70063791, 91168.55395914, -38871.29619519], 209.82586420, 548.32842548),
])
def test_capped_rows_deep_in_the_tail_keep_a_finite_exact_log_jacobian(z, c, sink) -> None:
    """Two keys capped deep in tanh's tail: slope and weight ratios both underflow, the norm is
    ~1e-300, not 0; its log stays exact (a linear sum gave log(0) = -inf and a warning)."""
    from engine.rules import log_sech2, softcap

    z_arr = np.array(z)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = row_metrics(softcap(z_arr, c)[None, :], sink=sink, log_slope=log_sech2(z_arr / c)[None, :])
    assert np.isfinite(m.log10_jacobian_fro[0])
    assert m.log10_jacobian_fro[0] == pytest.approx(_mp_capped_log10_fro(z, c, sink), abs=1e-9)


def test_log_sech2_at_the_float_maximum_is_minus_inf_without_a_warning() -> None:
    from engine.rules import log_sech2

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = log_sech2(np.array([1e308, -1e308, 0.0]))
    assert out[0] == out[1] == -np.inf and out[2] == 0.0


# -- every figure of every path against a brute-force loop (moderate logits: nothing cancels) ----
def _brute(z, sink=None, log_slope=None, bias=None) -> dict:
    """The figures of one row by their definitions (module docstring), in plain loops: softmax
    over the keys (and the sink) or sigmoid(z + bias) per key; J = diag(p) - p p^T (sigmoid:
    diag(p (1 - p))), column j times exp(log_slope_j)."""
    z = [float(v) for v in z]
    n = len(z)
    if bias is not None:
        p = [1.0 / (1.0 + math.exp(-(v + bias))) for v in z]
        sink_w = 0.0
    else:
        pool = z + ([float(sink)] if sink is not None else [])
        total = sum(math.exp(v) for v in pool)
        p = [math.exp(v) / total for v in z]
        sink_w = math.exp(sink) / total if sink is not None else 0.0
    d = [math.exp(v) for v in log_slope] if log_slope is not None else [1.0] * n
    if bias is not None:
        jac = [[p[i] * (1 - p[i]) * d[j] if i == j else 0.0 for j in range(n)] for i in range(n)]
    else:
        jac = [[((p[i] if i == j else 0.0) - p[i] * p[j]) * d[j] for j in range(n)]
               for i in range(n)]
    mass = sum(p)
    q = [v / mass for v in p]
    fro = math.sqrt(sum(v * v for row in jac for v in row))
    return {"weights": p, "top_weight": max(p), "key_mass": mass, "sink_weight": sink_w,
            "entropy": -sum(v * math.log(v) for v in q if v > 0), "jacobian_fro": fro,
            "log10_jacobian_fro": math.log10(fro),
            "jacobian_max_abs": max(abs(v) for row in jac for v in row), "jacobian": jac}


FIELDS = ("weights", "top_weight", "entropy", "jacobian_fro", "log10_jacobian_fro",
          "jacobian_max_abs", "key_mass", "sink_weight")
ROWS = [[2.0, -1.0, 0.5, 3.0], [0.0, 0.0, 0.0], [-4.0, 1.5, 1.4, -0.3, 2.2], [7.0, -7.0]]


def _check(m, rows, refs) -> None:
    for i, ref in enumerate(refs):
        np.testing.assert_allclose(m.weights[i], ref["weights"], rtol=1e-12)
        for name in ("top_weight", "key_mass", "sink_weight", "entropy", "jacobian_fro",
                     "log10_jacobian_fro", "jacobian_max_abs"):
            assert float(getattr(m, name)[i]) == pytest.approx(ref[name], rel=1e-11, abs=1e-15), \
                (name, rows[i])


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("sink", [None, -1.0, 2.5])
@pytest.mark.parametrize("capped", [False, True])
def test_row_metrics_with_a_sink_or_a_cap_slope_match_brute_force(row, sink, capped) -> None:
    slope = [-0.1 * (j + 1) ** 2 for j in range(len(row))] if capped else None
    m = row_metrics(np.array([row]), sink=sink,
                    log_slope=np.array([slope]) if slope is not None else None)
    _check(m, [row], [_brute(row, sink, slope)])


def test_row_metrics_per_row_sinks_in_a_batch() -> None:
    rows = np.array([[2.0, -1.0, 0.5], [0.0, 1.0, -2.0]])
    sinks = np.array([[0.5], [-3.0]])  # one per row, shape (..., 1)
    m = row_metrics(rows, sink=sinks)
    _check(m, rows, [_brute(rows[0], 0.5), _brute(rows[1], -3.0)])
    ints = row_metrics(np.array([[2, -1, 0]]), sink=1.0)  # integer logits are read as floats
    _check(ints, [[2, -1, 0]], [_brute([2, -1, 0], 1.0)])
    # one row alone and rows in a (2, 1, n) batch (the last axis is the keys')
    one = row_metrics(rows[0], sink=0.5)
    np.testing.assert_allclose(one.weights, _brute(rows[0], 0.5)["weights"], rtol=1e-12)
    assert float(one.jacobian_fro) == pytest.approx(_brute(rows[0], 0.5)["jacobian_fro"], rel=1e-11)
    deep = row_metrics(rows[:, None, :], sink=sinks[:, None, :])
    np.testing.assert_allclose(deep.weights[:, 0], [_brute(rows[0], 0.5)["weights"],
                                                    _brute(rows[1], -3.0)["weights"]], rtol=1e-12)
    np.testing.assert_allclose(deep.jacobian_fro[:, 0], [_brute(rows[0], 0.5)["jacobian_fro"],
                                                         _brute(rows[1], -3.0)["jacobian_fro"]],
                               rtol=1e-11)
    for kw in ({"sink": 0.0}, {"log_slope": np.array([[0.0, -1.0]])}):
        low = row_metrics(np.array([[2.0, -1.0]], dtype=np.float32), **kw)
        assert all(getattr(low, k).dtype == np.float32 for k in FIELDS), kw


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("capped", [False, True])
def test_sigmoid_row_metrics_match_brute_force(row, capped) -> None:
    from engine.softmax import sigmoid_row_metrics

    bias = -math.log(len(row))
    slope = [-0.2 * j for j in range(len(row))] if capped else None
    m = sigmoid_row_metrics(np.array([row]), bias,
                            np.array([slope]) if slope is not None else None)
    _check(m, [row], [_brute(row, log_slope=slope, bias=bias)])


def test_sigmoid_row_metrics_per_row_bias_integers_and_float32() -> None:
    from engine.softmax import log_sigmoid, sigmoid_row_metrics

    m = sigmoid_row_metrics(np.array([[1, -2, 0], [3, 3, -1]]), np.array([[0.5], [-2.0]]))
    _check(m, [[1, -2, 0], [3, 3, -1]],
           [_brute([1, -2, 0], bias=0.5), _brute([3, 3, -1], bias=-2.0)])
    low = sigmoid_row_metrics(np.array([[1.0, -2.0]], dtype=np.float32), 0.0)
    assert all(getattr(low, k).dtype == np.float32 for k in FIELDS[:-1])
    # ln sigmoid(y) = -ln(1 + e^-y): by hand at 0 and +-2; exact far out (no log(0))
    np.testing.assert_allclose(log_sigmoid(np.array([0.0, 2.0, -2.0])),
                               [-math.log(2), -math.log1p(math.exp(-2)), -2 - math.log1p(math.exp(-2))],
                               rtol=1e-14)
    assert log_sigmoid(np.array([-800.0]))[0] == -800.0


@pytest.mark.parametrize("rest", [0.0, 0.2])
def test_the_jacobian_and_its_diagonal_with_a_sink_and_slopes_match_brute_force(rest) -> None:
    from engine.softmax import jacobian_diagonal

    p = np.array([0.5, 0.2, 0.1]) * (1 - rest) / 0.8  # keys; the rest is the sink's
    slope = np.array([0.0, -1.0, 0.5])
    want = [[((p[i] if i == j else 0.0) - p[i] * p[j]) * math.exp(slope[j]) for j in range(3)]
            for i in range(3)]
    np.testing.assert_allclose(jacobian(p, rest, slope), want, rtol=1e-14, atol=1e-17)
    np.testing.assert_allclose(jacobian_diagonal(p, rest), [v * (1 - v) for v in p], rtol=1e-14)
    # the top weight's 1 - p is the sum of the others and the rest, not 1 - p_max formed
    tiny = np.array([1 - 1e-17, 1e-17])  # 1 - p_max rounds to 0 in floats
    assert jacobian_diagonal(tiny, 1e-20)[0] == pytest.approx((1e-17 + 1e-20) * (1 - 1e-17),
                                                              rel=1e-12)


def test_the_exclusive_and_pair_sums_match_loops() -> None:
    from engine.softmax import _exclusive_sums, _pair_sum

    b = np.array([[1.0, 2.0, 4.0, 8.0], [3.0, 0.5, 0.0, 7.0]])
    for row, ex, pair in zip(b, _exclusive_sums(b), _pair_sum(b)):
        assert ex.tolist() == [sum(row) - v for v in row]  # (exact: small integers, halves)
        assert pair[0] == sum(row[i] * row[j] for i in range(4) for j in range(4) if i != j)


def test_sigmoid_row_metrics_of_one_row_and_of_a_deeper_batch() -> None:
    """The keys are the last axis whatever the leading shape: a row alone, rows as (2, 1, n)."""
    from engine.softmax import sigmoid_row_metrics

    rows = [[1.0, -2.0, 0.0], [3.0, 3.5, -1.0]]
    refs = [_brute(r, bias=-math.log(3)) for r in rows]
    one = sigmoid_row_metrics(np.array(rows[0]), -math.log(3))
    np.testing.assert_allclose(one.weights, refs[0]["weights"], rtol=1e-12)
    for name in FIELDS[1:-1]:
        assert float(getattr(one, name)) == pytest.approx(refs[0][name], rel=1e-11), name
    deep = sigmoid_row_metrics(np.array(rows)[:, None, :], -math.log(3))
    for name in FIELDS[1:-1]:
        assert getattr(deep, name)[:, 0] == pytest.approx([r[name] for r in refs], rel=1e-11), name
    # the diagonal's default rest is 0: p (1 - p) with 1 - p_max the other weight
    from engine.softmax import jacobian_diagonal

    assert jacobian_diagonal(np.array([0.75, 0.25])).tolist() == [0.1875, 0.1875]
