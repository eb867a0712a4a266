"""The coord check on a reduced grid: under sp with Adam the activations after a few updates
grow with the width, under muP they stay flat (bounds stated below), on both width axes."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

from engine.errors import ConfigError
from engine.training.coord_check import (
    CoordCheckConfig,
    fit_slope,
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
