"""Port against source, one layer: hand-made fits (scales, bands, identifiability chosen here),
so every verdict's expected value is read off the inputs: a head's gap |log(s_port / s_source)|
against the sum of the two bands, from both sides of it and at its edge; the factor named is the
median of the flagged heads; the joint fit decides only where no head is identifiable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.probe.port.compare import LayerComparison, Side, compare, state
from engine.probe.scale_fit import AFTER_SOFTMAX, NOT_AUDITABLE, ScaleFit


def _fit(scale, tol=0.01, ident=True) -> ScaleFit:
    s = np.atleast_1d(np.asarray(scale, dtype=np.float64))
    h = s.size
    return ScaleFit(scale=s, misfit=np.zeros(h), curvature=np.ones(h),
                    tol_log=np.broadcast_to(np.asarray(tol, dtype=np.float64), (h,)).copy(),
                    residual_max_abs=np.zeros(h), residual_probe=np.zeros((h, 2)),
                    worse_probe=np.ones((h, 2)),
                    identifiable=np.broadcast_to(np.asarray(ident, dtype=bool), (h,)).copy(),
                    weight_sum=np.ones(h), weight_sum_tol=1e-6, rows=8)


def _side(heads, layer=None, tol=0.01, ident=True, verdict="1/sqrt(d_k)", d_k=16,
          layer_tol=0.01, layer_ident=True) -> Side:
    heads = np.asarray(heads, dtype=np.float64)
    layer = float(np.exp(np.mean(np.log(heads)))) if layer is None else layer
    return Side(_fit(heads, tol, ident), _fit(layer, layer_tol, layer_ident), verdict, d_k)


def test_a_side_reads_its_layer_scale_and_head_count() -> None:
    side = _side([0.25, 0.5, 1.0], layer=0.3)
    assert side.scale == 0.3 and isinstance(side.scale, float)
    assert side.n_heads == 3 and isinstance(side.n_heads, int)


def test_equal_scales_match_and_the_ratio_is_port_over_source() -> None:
    c = compare(_side([0.25] * 4, layer=0.5), _side([0.25] * 4, layer=0.25), 2)
    assert c == LayerComparison(True, 2.0, "")  # heads agree: the ratio only informs


@pytest.mark.parametrize("factor", [math.sqrt(2), 1 / math.sqrt(2)])
def test_a_scale_off_by_sqrt2_is_flagged_whichever_way(factor) -> None:
    s = 0.25
    c = compare(_side([s * factor] * 4), _side([s] * 4), 3)
    assert c.matches is False
    assert c.ratio == pytest.approx(factor, rel=1e-12)
    assert c.finding == f"layer 3: the port applies x{factor:.4g} the source's scale (all heads)"
    assert state(c) == "MISMATCH"


def test_the_band_is_the_sum_of_both_sides_bands_from_both_sides() -> None:
    """Bands 0.01 (port) and 0.02 (source): a gap of 0.029 agrees, 0.031 does not; neither band
    alone (0.01 or 0.02) nor their difference or product decides it."""
    for gap, ok in ((0.029, True), (0.031, False), (0.019, True), (0.011, True)):
        port = _side([math.exp(gap)] * 2, tol=0.01)
        source = _side([1.0] * 2, tol=0.02)
        assert compare(port, source, 0).matches is ok, gap
        # and with the bands the other way round
        port = _side([math.exp(-gap)] * 2, tol=0.02)
        source = _side([1.0] * 2, tol=0.01)
        assert compare(port, source, 0).matches is ok, gap


def test_a_gap_exactly_at_the_band_is_consistent() -> None:
    """|log 2| against bands log 2 and 0 (exact in floats): at the edge is inside."""
    port = _side([2.0], tol=math.log(2))
    source = _side([1.0], tol=0.0)
    assert compare(port, source, 0).matches is True
    assert compare(_side([2.0], tol=0.0), _side([1.0], tol=math.log(2)), 0).matches is True
    assert compare(_side([2.0001], tol=0.0), _side([1.0], tol=math.log(2)), 0).matches is False


def test_the_factor_named_is_the_median_of_the_flagged_heads_only() -> None:
    """Port/source per head 1, 2, 2, 8: heads 1-3 are flagged; their median is x2 (the geometric
    mean would be x3.175, the median over every head x2 too, so a second case: 1, 1.5, 4, 8 gives
    heads 1-3 with median x4, their geometric mean x3.63, the median over all heads x2.45)."""
    src = _side([0.1] * 4)
    c = compare(_side(np.array([1, 2, 2, 8]) * 0.1), src, 1)
    assert c.finding == "layer 1: the port applies x2 the source's scale (heads 1, 2, 3)"
    c = compare(_side(np.array([1, 1.5, 4, 8]) * 0.1), src, 1)
    assert c.finding == "layer 1: the port applies x4 the source's scale (heads 1, 2, 3)"
    c = compare(_side(np.array([1, 1, 1, 0.5]) * 0.1), src, 5)
    assert c.finding == "layer 5: the port applies x0.5 the source's scale (heads 3)"


def test_only_heads_identifiable_on_both_sides_are_compared() -> None:
    """Head 0 is off by x8 but cannot be identified on one side (either): not a finding; "all
    heads" then means all the compared ones."""
    for port_ident, source_ident in (([False, True, True], [True] * 3),
                                     ([True] * 3, [False, True, True])):
        port = _side([0.8, 0.1, 0.1], ident=port_ident)
        source = _side([0.1, 0.1, 0.1], ident=source_ident)
        assert compare(port, source, 0) .matches is True
        port = _side([0.8, 0.2, 0.2], ident=port_ident)
        c = compare(port, source, 0)
        assert c.finding == "layer 0: the port applies x2 the source's scale (all heads)"


def test_other_head_counts_or_widths_are_a_mismatch_naming_both() -> None:
    c = compare(_side([0.25] * 2, d_k=16), _side([0.25] * 4, d_k=16), 4)
    assert c.matches is False and c.ratio == pytest.approx(1.0)
    assert c.finding == ("layer 4: the port has 2 heads of width 16, the source 4 of width 16")
    c = compare(_side([0.25] * 4, d_k=8), _side([0.25] * 4, d_k=16), 4)
    assert c.finding == ("layer 4: the port has 4 heads of width 8, the source 4 of width 16")


@pytest.mark.parametrize("who", ["port", "source"])
def test_weights_scaled_after_the_softmax_on_one_side_is_a_mismatch(who) -> None:
    after = f"{AFTER_SOFTMAX} (weights sum to 0.5)"
    port = _side([0.25] * 2, verdict=after if who == "port" else "1/sqrt(d_k)")
    source = _side([0.25] * 2, verdict=after if who == "source" else "1/sqrt(d_k)")
    c = compare(port, source, 6)
    assert c.matches is False and c.ratio == pytest.approx(1.0)
    assert c.finding == (f"layer 6: the {who} scales the weights after the softmax, the other "
                         "does not")
    # both sides after the softmax (with other sums): compared as any other layer
    both = compare(_side([0.25] * 2, verdict=after),
                   _side([0.25] * 2, verdict=f"{AFTER_SOFTMAX} (weights sum to 0.7)"), 6)
    assert both.matches is True


def test_the_joint_fit_decides_when_no_head_is_identifiable() -> None:
    """No head identifiable on either side: the layers' joint fits are compared within the sum
    of their bands (0.01 + 0.02), from both sides."""
    def pair(ratio, port_ident=True, source_ident=True):
        port = _side([9.0, 0.01], layer=0.25 * ratio, ident=False, layer_tol=0.01,
                     layer_ident=port_ident)
        source = _side([0.25, 0.25], layer=0.25, ident=False, layer_tol=0.02,
                       layer_ident=source_ident)
        return compare(port, source, 7)

    assert pair(math.exp(0.029)) == LayerComparison(True, pytest.approx(math.exp(0.029)), "")
    for r in (math.exp(0.031), math.exp(-0.031), math.sqrt(2)):
        c = pair(r)
        assert c.matches is False and c.ratio == pytest.approx(r, rel=1e-12)
        assert c.finding == (f"layer 7: the port applies x{r:.4g} the source's scale (the "
                             "heads jointly)")
    assert pair(math.exp(-0.029)).matches is True
    # a side whose joint fit is not identifiable either: nothing to compare
    for ident in ((False, True), (True, False), (False, False)):
        c = pair(math.sqrt(2), *ident)
        assert c.matches is None and c.finding == ""
        assert c.ratio == pytest.approx(math.sqrt(2))
        assert state(c) == NOT_AUDITABLE


def test_a_source_scale_of_zero_gives_no_ratio() -> None:
    c = compare(_side([0.25], layer=0.25), _side([0.25], layer=0.0), 0)
    assert math.isnan(c.ratio)
    assert c.matches is True


def test_state_words() -> None:
    assert state(LayerComparison(True, 1.0, "")) == "as the source"
    assert state(LayerComparison(False, 2.0, "x")) == "MISMATCH"
    assert state(LayerComparison(None, 1.0, "")) == NOT_AUDITABLE


def test_the_joint_band_includes_its_edge() -> None:
    """No head identifiable; layers at x2 with bands log 2 and 0 (exact in floats): at the edge
    is consistent, a hair beyond is not."""
    def joint(port_layer):
        return compare(_side([1.0], layer=port_layer, ident=False, layer_tol=math.log(2)),
                       _side([1.0], layer=1.0, ident=False, layer_tol=0.0), 0)

    assert joint(2.0).matches is True
    assert joint(2.0001).matches is False
