"""engine.probe.accounting on site records and declarations written by hand (no model): what the
fitted scale is compared with, whether it is the declaration's (known) or the code's own factors
(unknown), and every word the audit prints about it, against values worked out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.probe.accounting import AT_PRODUCT, PRE_TOL, code_factor, reference
from engine.probe.declared import Declaration, PositionLaw
from engine.probe.sites import RATIO_SPREAD_TOL, SiteRecord

CODE = "the factors the code applies"
#: q x (1 + 0.1 ln(1 + floor((p + 1) / 4))): 1 at positions 0-2, 1 + 0.1 ln 2 at 3-6, ...
LAW = PositionLaw("the test law", 0.1, 4.0, 1.0)


def _law(p) -> np.ndarray:
    return 1 + 0.1 * np.log(1 + np.floor((np.asarray(p, float) + 1) / 4))


def record(q_ratio=(1.0, 1.0), k_ratio=(1.0,), scaling=None, d=16, nq=8, q_position=None
           ) -> SiteRecord:
    h, hkv = 2, (1 if k_ratio is None else len(k_ratio))
    q = np.zeros((h, nq, d), np.float32)
    k = np.zeros((hkv, nq, d), np.float32)
    kv_head = np.arange(h) // (h // hkv)
    return SiteRecord(0, q, k, kv_head, np.arange(nq), np.zeros((h, nq, nq), np.float32),
                      np.ones((nq, nq), bool), None, None, None, scaling,
                      None if q_ratio is None else np.array(q_ratio, float),
                      None if k_ratio is None else np.array(k_ratio, float), False, False, None,
                      None, (), None if q_position is None else np.array(q_position, float))


def test_the_code_factor_is_what_it_passes_times_each_heads_pre_scales() -> None:
    """q's ratio per head times the ratio of the key head it reads; 1/sqrt(d_k) when the call
    passes no scaling (d_k = 16: 1/4)."""
    rec = record(q_ratio=(2.0, 3.0), k_ratio=(0.5, 4.0))
    np.testing.assert_allclose(code_factor(rec), [0.25 * 2 * 0.5, 0.25 * 3 * 4], rtol=1e-15)
    np.testing.assert_allclose(code_factor(record(q_ratio=(2.0, 3.0), k_ratio=(0.5, 4.0),
                                                  scaling=0.1)), [0.1, 1.2], rtol=1e-15)
    np.testing.assert_allclose(code_factor(record(q_ratio=None, k_ratio=None, scaling=0.0)), 0.0)


# -- checked at the product ----------------------------------------------------------------------


def test_at_the_product_only_the_product_factor_is_the_declarations() -> None:
    rec = record(q_ratio=None, k_ratio=None)
    ref = reference(Declaration(0.5, 3.0, "decl"), rec)
    assert (ref.known, ref.source, ref.why_unknown, ref.tol) == (True, "decl", "", 0.0)
    assert ref.value.tolist() == [0.5, 0.5] and ref.median == 0.5
    assert ref.note == AT_PRODUCT and ref.row_factor is None
    assert AT_PRODUCT == ("checked at the product: q and k are not a projection's output there, "
                          "so factors applied to them before it are not seen")
    lawful = reference(Declaration(0.5, 3.0, "decl", law=LAW), rec)
    assert lawful.note == AT_PRODUCT + "; the declared the test law is inside q there and is " \
                                       "not checked"
    assert lawful.known and lawful.row_factor is None


def test_at_the_product_a_scaling_applied_before_the_call_is_unknown() -> None:
    """pre None: the module applied its own attribute before the call, which cannot be seen at
    the product; the code's factor (what it passes) is the reference, with no band of its own."""
    rec = record(q_ratio=None, k_ratio=None, scaling=0.2)
    ref = reference(Declaration(0.2, None, "decl", attr=0.125), rec)
    assert (ref.known, ref.source, ref.tol, ref.note) == (False, CODE, 0.0, "")
    assert ref.why_unknown == ("the module applies its scaling 0.125 before the call, and q and "
                               "k are not a projection's output there")
    assert ref.value.tolist() == [0.2, 0.2] and ref.row_factor is None
    rec = record(q_ratio=None, k_ratio=None, scaling=0.2, q_position=[np.nan, 1.0, 1.5] + [2] * 5)
    ref = reference(Declaration(0.2, None, "decl", attr=0.125), rec)
    assert ref.row_factor.tolist() == [1.0, 1.0, 1.5] + [2.0] * 5


# -- measured against the projections -------------------------------------------------------------


def test_a_declared_pre_scale_is_the_reference_within_pre_tol_in_every_head() -> None:
    assert PRE_TOL == 2 * RATIO_SPREAD_TOL == 2e-4
    decl = Declaration(0.25, 0.5, "decl")
    ref = reference(decl, record(q_ratio=(0.5, 0.5)))
    assert (ref.known, ref.source, ref.note, ref.tol, ref.why_unknown) == (
        True, "decl", "", 0.0, "")
    assert ref.value.tolist() == [0.125, 0.125] and ref.row_factor is None
    for sign in (-1, 1):
        inside = 0.5 * math.exp(sign * PRE_TOL * (1 - 1e-6))
        outside = 0.5 * math.exp(sign * PRE_TOL * (1 + 1e-6))
        assert reference(decl, record(q_ratio=(inside, inside))).known
        assert not reference(decl, record(q_ratio=(0.5, outside))).known  # one head is enough
        assert not reference(decl, record(q_ratio=(outside, 0.5))).known


def test_an_unexplained_pre_scale_is_unknown_and_says_what_the_code_does() -> None:
    rec = record(q_ratio=(2.0, 3.0), k_ratio=(0.5,), scaling=0.1)
    ref = reference(Declaration(0.25, 0.5, "decl"), rec)
    assert (ref.known, ref.source, ref.tol, ref.note) == (False, CODE, PRE_TOL, "")
    np.testing.assert_allclose(ref.value, [0.1, 0.15], rtol=1e-15)
    assert ref.why_unknown == ("the code multiplies q.k by x1 to 1.5 before the product (q x2 to "
                               "3, k x0.5); the declaration accounts for x0.5")
    assert ref.row_factor is None
    # one value when the heads agree; a side within RATIO_SPREAD_TOL of 1 is not named
    one = record(q_ratio=(3.0, 3.0 * (1 + 0.5 * PRE_TOL)), k_ratio=(1 + 0.9 * RATIO_SPREAD_TOL,))
    why = reference(Declaration(0.25, 0.5, "decl"), one).why_unknown
    assert why.startswith("the code multiplies q.k by x3 before the product (q x3); ")
    spread = record(q_ratio=(3.0, 3.0 * (1 + 2 * PRE_TOL)), k_ratio=(1 - 1.1 * RATIO_SPREAD_TOL,))
    why = reference(Declaration(0.25, 0.5, "decl"), spread).why_unknown
    assert why.startswith("the code multiplies q.k by x3 to 3.001 before the product (q x3 "
                          "to 3.001, k x0.9999); ")
    none = record(q_ratio=(1 + 0.9 * RATIO_SPREAD_TOL, 1.0), k_ratio=(1.0,))
    why = reference(Declaration(0.25, 4.0, "decl"), none).why_unknown
    assert why == ("the code multiplies q.k by x1 before the product (q and k as the projections "
                   "made them); the declaration accounts for x4")


@pytest.mark.parametrize("ratios, where", [((0.3, 1.0), " on q"), ((0.3, 0.3), " on q and on k")])
def test_a_scaling_attribute_applied_on_q_or_on_q_and_k_is_as_declared(ratios, where) -> None:
    """pre None (OPT, BART): the module's own attribute before the call, on q (x attr) or on q
    and k (x attr^2), times RoPE's cos/sin factor squared."""
    decl = Declaration(1.0, None, "decl", attr=0.3, cos_sin=1.5)
    qr, kr = ratios[0] * 1.5, ratios[1] * 1.5
    ref = reference(decl, record(q_ratio=(qr, qr), k_ratio=(kr,)))
    assert ref.known and ref.source == "decl" + where
    np.testing.assert_allclose(ref.value, 0.3 * ratios[1] * 2.25, rtol=1e-14)


def test_a_scaling_attribute_that_explains_nothing_is_unknown() -> None:
    decl = Declaration(1.0, None, "decl", attr=0.3, cos_sin=1.5)
    for q in (0.3, 0.3 * 1.5, 0.09):  # without cos/sin^2, with cos/sin once, without it on q^2
        ref = reference(decl, record(q_ratio=(q, q), k_ratio=(1.0,)))
        assert not ref.known
    ref = reference(decl, record(q_ratio=(2.0, 2.0), k_ratio=(1.0,)))
    assert ref.why_unknown == ("the code multiplies q.k by x2 before the product (q x2); the "
                               "module's scaling 0.3 on q or on q and k does not explain it")


# -- a factor with the position ---------------------------------------------------------------------


def test_a_declared_law_the_code_applies_is_as_declared_from_the_first_query() -> None:
    """The first three tokens carry no q (NaN): the law is relative to position 3, where it
    is 1 + 0.1 ln 2, and the pre-scale measured there includes that factor."""
    at3 = 1 + 0.1 * math.log(2)
    f = np.r_[np.nan, np.nan, np.nan, _law(np.arange(3, 8)) / at3]
    decl = Declaration(0.5, 0.25, "decl", law=LAW)
    rec = record(q_ratio=(0.25 * at3, 0.25 * at3), q_position=f)
    ref = reference(decl, rec)
    assert ref.known and ref.source == "decl x the test law" and ref.note == ""
    np.testing.assert_allclose(ref.value, 0.5 * 0.25 * at3, rtol=1e-14)
    np.testing.assert_allclose(ref.row_factor, _law(np.arange(8)) / at3, rtol=1e-14)
    # measured without the factor at position 3: not what the declaration says
    ref = reference(decl, record(q_ratio=(0.25, 0.25), q_position=f))
    assert not ref.known
    assert ref.why_unknown.endswith(f"; the declaration accounts for x{0.25 * at3:.4g}")


def test_the_law_is_relative_to_the_first_query_not_the_second() -> None:
    """A law that differs at every position (1 + 0.1 ln(1 + p)); no q at positions 0-2."""
    law = PositionLaw("law", 0.1, 1.0, 0.0)
    full = 1 + 0.1 * np.log1p(np.arange(8))
    f = np.r_[np.nan, np.nan, np.nan, full[3:] / full[3]]
    ref = reference(Declaration(0.5, 0.25, "decl", law=law),
                    record(q_ratio=(0.25 * full[3], 0.25 * full[3]), q_position=f))
    assert ref.known and ref.note == ""
    np.testing.assert_allclose(ref.value, 0.5 * 0.25 * full[3], rtol=1e-14)
    np.testing.assert_allclose(ref.row_factor, full / full[3], rtol=1e-14)
    # with q at every position the law is relative to position 0
    ref = reference(Declaration(0.5, 0.25, "decl", law=law),
                    record(q_ratio=(0.25, 0.25), q_position=full))
    assert ref.known and ref.note == "" and ref.value.tolist() == [0.125, 0.125]


def test_a_declared_law_the_code_does_not_apply_is_noted() -> None:
    decl = Declaration(0.5, 0.25, "decl", law=LAW)
    top = _law(7)  # 1 + 0.1 ln 3 at position 7
    ref = reference(decl, record(q_ratio=(0.25, 0.25)))  # no q_position: no factor
    assert ref.known and ref.source == "decl x the test law"
    np.testing.assert_allclose(ref.row_factor, _law(np.arange(8)), rtol=1e-14)
    assert ref.note == (f"q carries no factor with the position; the declared law gives x1 to "
                        f"x{top:.4g} over these positions")
    flat = reference(decl, record(q_ratio=(0.25, 0.25), q_position=[1.0] * 8))
    assert flat.note == (f"q carries x1 to x1 with the position; the declared law gives x1 to "
                         f"x{top:.4g} over these positions")
    double = reference(decl, record(q_ratio=(0.25, 0.25), q_position=2 * _law(np.arange(8)) - 1))
    assert double.note == (f"q carries x1 to x{2 * top - 1:.4g} with the position; the declared "
                           f"law gives x1 to x{top:.4g} over these positions")
    # within PRE_TOL of the law at every position: nothing to say
    near = _law(np.arange(8)) * math.exp(0.9 * PRE_TOL)
    near[0] = 1.0
    assert reference(decl, record(q_ratio=(0.25, 0.25), q_position=near)).note == ""
    far = near * math.exp(0.2 * PRE_TOL)
    far[0] = 1.0
    assert reference(decl, record(q_ratio=(0.25, 0.25), q_position=far)).note != ""


def test_a_law_that_is_1_over_these_positions_needs_no_note() -> None:
    """Positions 0-2 only: the law is 1 there, and the code carries nothing."""
    decl = Declaration(0.5, 0.25, "decl", law=LAW)
    ref = reference(decl, record(q_ratio=(0.25, 0.25), nq=3))
    assert ref.known and ref.note == "" and ref.row_factor.tolist() == [1.0, 1.0, 1.0]
    # within PRE_TOL of 1, both ways
    for a in (0.9, -0.9):
        law = PositionLaw("tiny", a * PRE_TOL / math.log(2), 1.0, 0.0)
        ref = reference(Declaration(0.5, 0.25, "decl", law=law), record(q_ratio=(0.25, 0.25),
                                                                          nq=2))
        assert ref.note == ""
    law = PositionLaw("small", 1.1 * PRE_TOL / math.log(2), 1.0, 0.0)
    ref = reference(Declaration(0.5, 0.25, "decl", law=law), record(q_ratio=(0.25, 0.25), nq=2))
    assert ref.note.startswith("q carries no factor with the position")
    # a law just under 1 by PRE_TOL: 1 - law within it, |ln law| (2e-4 + 1e-8) a little beyond
    law = PositionLaw("under", -(PRE_TOL - 1e-8) / math.log(2), 1.0, 0.0)
    assert abs(law.factor(np.array([1.0]))[0] - 1) <= PRE_TOL < abs(math.log(law.factor(
        np.array([1.0]))[0]))
    ref = reference(Declaration(0.5, 0.25, "decl", law=law), record(q_ratio=(0.25, 0.25), nq=2))
    assert ref.known and ref.note == ""
    # a law of 1 here, but the code's q carries a factor: said
    tiny = PositionLaw("tiny", 0.9 * PRE_TOL / math.log(2), 1.0, 0.0)
    ref = reference(Declaration(0.5, 0.25, "decl", law=tiny),
                    record(q_ratio=(0.25, 0.25), nq=2, q_position=[1.0, 1.5]))
    assert ref.known and ref.note == ("q carries x1 to x1.5 with the position; the declared law "
                                      "gives x1 to x1 over these positions")


def test_a_position_factor_nothing_declares_is_unknown() -> None:
    f = [np.nan, 1.0, 1.0, 1.0, 1.25, 1.25, 1.5, 1.5]
    rec = record(q_ratio=(0.25, 0.25), q_position=f)
    ref = reference(Declaration(0.5, 0.25, "decl"), rec)  # the pre-scale itself is as declared
    assert not ref.known and ref.source == CODE and ref.tol == PRE_TOL
    assert ref.why_unknown == ("the code multiplies q.k by x0.25 before the product (q x0.25), "
                               "q by x1 to x1.5 with the position, which no config key declares; "
                               "the declaration accounts for x0.25")
    assert ref.row_factor.tolist() == [1.0, 1.0, 1.0, 1.0, 1.25, 1.25, 1.5, 1.5]
    np.testing.assert_allclose(ref.value, 0.25 * 0.25)
