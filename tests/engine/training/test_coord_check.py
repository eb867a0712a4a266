"""The coord check on a reduced grid: under sp with Adam the activations after a few updates
grow with the width, under muP they stay flat (bounds stated below), on both width axes."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

from engine.errors import ConfigError
from engine.training.coord_check import (
    CoordCheckConfig,
    _points,
    fit_slope,
    kind_means,
    run_coord_check,
    slopes,
)

#: after 3 Adam updates (lr 0.01), the slope of log2 mean |activation| on log2 width:
SP_GROWS = 0.4  #: sp: what follows a growing fan-in grows at least like width^0.4
MUP_FLAT = 0.2  #: mup: within ± 0.2, except ...
#: ... what muP itself starts small: the 1/d_k logits do not grow (they shrink while q and k are
#: not yet correlated); on the d_k axis W_O is an output layer whose init part shrinks like
#: width^-1/2 while its updates stay O(1), so its slope climbs from about -1/2 towards 0
LOGITS_AT_MOST = 0.1
OUTPUT_LAYER = (-0.5, 0.1)
AXES = {  # width axis: (widths, kinds sp grows, kinds mup keeps flat)
    "d_model": ((32, 64, 128, 256), ("attention logits", "attention output", "MLP output", "readout"),
                ("embedding", "attention output", "MLP output", "readout")),
    "d_k": ((64, 128, 256, 512), ("attention output",),
            ("embedding", "MLP output", "readout")),
}


def _slopes(**kw) -> dict[tuple[str, str, int], float]:
    cfg = CoordCheckConfig(steps=3, seeds=2, **kw)
    *_, last = run_coord_check(cfg)
    assert last.finished
    return {(s.param, s.kind, s.step): s.slope for s in slopes(last.rows)}


@pytest.mark.parametrize("axis", list(AXES))
def test_sp_grows_and_mup_stays_flat(axis):
    widths, growing, flat = AXES[axis]
    got = _slopes(widths=widths, width_axis=axis)
    for kind in growing:
        assert got[("sp", kind, 3)] > SP_GROWS, (kind, got)
    for kind in flat:
        assert abs(got[("mup", kind, 3)]) < MUP_FLAT, (kind, got)
    assert got[("mup", "attention logits", 3)] < LOGITS_AT_MOST
    # why 1/d_k: the 1/sqrt(d_k) logits grow with the width relative to muP's
    assert got[("sp", "attention logits", 3)] > got[("mup", "attention logits", 3)] + 0.2
    if axis == "d_k":
        start, after = got[("mup", "attention output", 0)], got[("mup", "attention output", 3)]
        assert start == pytest.approx(-0.5, abs=0.15)
        assert OUTPUT_LAYER[0] < after < OUTPUT_LAYER[1] and after > start


def test_the_slope_of_a_power_law_is_its_exponent():
    assert fit_slope([16, 32, 64], [1.0, 2 ** 0.5, 2.0]) == pytest.approx(0.5)
    assert math.isnan(fit_slope([16, 32], [0.0, 1.0]))  # zero at init: no slope


def _row(kind: str, layer: str, width: int, seed: int, value: float, step: int = 1) -> dict:
    return {"param": "sp", "scaling": "sqrt", "width": width, "seed": seed, "step": step,
            "layer": layer, "kind": kind, "mean_abs": value}


def test_a_kinds_value_is_the_mean_over_its_layers_then_fitted_per_seed():
    """Hand-made rows, two layers of one kind at widths 64 and 256. Seed 0: layer 0 goes 1 -> 4,
    layer 1 goes 3 -> 4; the mean over layers goes 2 -> 4: slope log2(4/2) / log2(256/64) = 0.5
    (the last layer alone would give log2(4/3) / 2 = 0.2075, the first alone 1). Seed 1: both
    layers 1 -> 2 (means 1 -> 2): slope 0.5 too. Over seeds: 0.5 ± 0."""
    rows = [_row("MLP output", "blocks.0", 64, 0, 1.0), _row("MLP output", "blocks.1", 64, 0, 3.0),
            _row("MLP output", "blocks.0", 256, 0, 4.0), _row("MLP output", "blocks.1", 256, 0, 4.0),
            _row("MLP output", "blocks.0", 64, 1, 1.0), _row("MLP output", "blocks.1", 64, 1, 1.0),
            _row("MLP output", "blocks.0", 256, 1, 2.0), _row("MLP output", "blocks.1", 256, 1, 2.0)]
    means = kind_means(rows)
    assert means[("sp", "sqrt", "MLP output", 1, 0, 64)] == 2.0
    assert means[("sp", "sqrt", "MLP output", 1, 0, 256)] == 4.0
    (s,) = slopes(rows)
    assert (s.param, s.scaling, s.kind, s.step, s.seeds) == ("sp", "sqrt", "MLP output", 1, 2)
    assert s.slope == pytest.approx(0.5) and s.se == pytest.approx(0.0)
    # seeds that differ: seed 1 from 1 -> 8 (slope 1.5): mean (0.5 + 1.5) / 2 = 1, SE
    # stdev(0.5, 1.5) / sqrt(2) = 0.5
    rows[6]["mean_abs"] = rows[7]["mean_abs"] = 8.0
    (s,) = slopes(rows)
    assert s.slope == pytest.approx(1.0) and s.se == pytest.approx(0.5)


def test_a_zero_activation_leaves_its_seed_out_of_the_slope():
    """A weight that starts at zero (muP's readout) has no slope at step 0: the seed is not
    counted, and with no seed left the slope is nan (an empty cell in slopes.csv)."""
    rows = [_row("readout", "head", w, seed, v, step=0)
            for seed, values in ((0, (0.0, 0.0)), (1, (1.0, 2.0))) for w, v in zip((64, 256), values)]
    (s,) = slopes(rows)
    assert s.seeds == 1 and s.slope == pytest.approx(0.5) and s.se == 0.0
    (none,) = slopes(rows[:2])
    assert none.seeds == 0 and math.isnan(none.slope) and none.row()["slope"] == ""


def test_the_least_squares_slope_of_three_widths_by_hand():
    """log2 widths 4, 5, 6 (16, 32, 64), log2 values 0, 2, 1: mean x 5, mean y 1; slope =
    ((-1)(-1) + 0 + (1)(0)) / 2 = 0.5."""
    assert fit_slope([16, 32, 64], [1.0, 4.0, 2.0]) == pytest.approx(0.5)
    assert fit_slope([16, 64], [8.0, 1.0]) == pytest.approx(-1.5)  # log2(1/8) / log2(4)


@pytest.mark.parametrize("kw,field", [
    (dict(params=("sp", "sp")), "param"),
    (dict(widths=(64,)), "widths"),
    (dict(widths=(64, 99)), "widths"),
    (dict(steps=101), "steps"),
    (dict(scaling="bad"), "scaling"),
    (dict(width_axis="heads"), "width_axis"),
])
def test_bad_settings_name_the_field(kw, field):
    with pytest.raises(ConfigError) as err:
        CoordCheckConfig(**kw)
    assert err.value.field == field


def test_a_figures_points_are_the_mean_over_seeds_with_one_se_and_a_positive_lower_end():
    """Hand-made per-seed kind means of one kind at one step (another kind and another step beside
    them must not leak in). Width 64: seeds 1, 3 -> mean 2, SE stdev / sqrt 2 = 1: 1 .. 3. Width
    128: one seed, 5 -> SE 0. Width 256: seeds 0, 4 -> mean 2, SE sqrt(8) / sqrt(2) = 2: the lower
    end would be 0 on a log axis, so it stays at the mean. Width 512: 0 (zero init) -> left out;
    width 1024: no value -> left out."""
    key = ("sp", "sqrt", "MLP output", 1)
    means = {(*key[:3], 1, 0, 64): 1.0, (*key[:3], 1, 1, 64): 3.0, (*key[:3], 1, 0, 128): 5.0,
             (*key[:3], 1, 0, 256): 0.0, (*key[:3], 1, 1, 256): 4.0, (*key[:3], 1, 0, 512): 0.0,
             ("sp", "sqrt", "readout", 1, 0, 64): 100.0, (*key[:3], 2, 0, 64): 100.0,
             ("mup", "sqrt", "MLP output", 1, 0, 64): 100.0, ("sp", "dk", "MLP output", 1, 0, 64): 7.0}
    x, y, lo, hi, n = _points(means, key, (64, 128, 256, 512, 1024))
    assert x == (64.0, 128.0, 256.0) and y == (2.0, 5.0, 2.0) and n == (2, 1, 2)
    assert lo == pytest.approx((1.0, 5.0, 2.0)) and hi == pytest.approx((3.0, 5.0, 4.0))
    # just above the edge: seeds 0.5, 3.5 -> mean 2, SE 1.5: the lower end 0.5 is kept
    (_, _, lo2, _, _) = _points({**means, (*key[:3], 1, 0, 256): 0.5, (*key[:3], 1, 1, 256): 3.5},
                                key, (256,))
    assert lo2 == pytest.approx((0.5,))


def test_slopes_come_in_param_scaling_drawing_order_then_step():
    """By param and scaling (alphabetical), then the kinds in drawing order (KINDS) with a kind
    it does not know last, then the step; the rows arrive in another order."""
    order = [("sp", "sqrt", "readout", 1), ("sp", "sqrt", "other", 0),
             ("sp", "sqrt", "embedding", 1), ("sp", "sqrt", "embedding", 0),
             ("mup", "dk", "MLP output", 0), ("sp", "dk", "attention logits", 0)]
    rows = [{**_row(kind, "blocks.0", w, 0, v, step), "param": p, "scaling": r}
            for p, r, kind, step in order for w, v in ((64, 1.0), (256, 2.0))]
    got = [(s.param, s.scaling, s.kind, s.step) for s in slopes(rows)]
    assert got == [("mup", "dk", "MLP output", 0), ("sp", "dk", "attention logits", 0),
                   ("sp", "sqrt", "embedding", 0), ("sp", "sqrt", "embedding", 1),
                   ("sp", "sqrt", "readout", 1), ("sp", "sqrt", "other", 0)]


def test_a_figures_point_below_one_is_kept():
    """Any positive mean has a place on the log axis: 0.5 (seeds 0.25, 0.75: SE 0.25, 0.25 ..
    0.75) and exactly 1 (one seed) are drawn."""
    key = ("sp", "sqrt", "readout", 0)
    means = {(*key[:3], 0, 0, 64): 0.25, (*key[:3], 0, 1, 64): 0.75, (*key[:3], 0, 0, 128): 1.0}
    x, y, lo, hi, n = _points(means, key, (64, 128))
    assert x == (64.0, 128.0) and y == (0.5, 1.0) and n == (2, 1)
    assert lo == pytest.approx((0.25, 1.0)) and hi == pytest.approx((0.75, 1.0))
