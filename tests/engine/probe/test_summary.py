"""The one probe summary (CLI and Real model page): figures recomputed here from heads.csv's table."""

from __future__ import annotations

import numpy as np
import pytest

from engine.probe.analyze import analyze_capture, run_to_result
from engine.probe.capture import capture
from engine.probe.config import ProbeConfig
from engine.probe.export import head_table
from engine.probe.summary import summarize

pytest.importorskip("transformers")


def test_summary_matches_the_head_table(make_bert) -> None:
    loaded = make_bert(init=0.3)
    ids = [int(i) for i in np.random.default_rng(0).integers(1, 64, 24)]
    cap = capture(loaded, ids, None)
    result = run_to_result(analyze_capture(ProbeConfig(text="x", bootstrap=30), loaded, cap, ids))
    t = head_table(result)
    s = summarize(result)
    ratio, se = t["std_ratio"].ravel(), t["std_ratio_se"].ravel()
    assert s.heads == 2 * 4 == ratio.size
    assert (s.ratio_min, s.ratio_max) == (ratio.min(), ratio.max())
    assert s.ratio_median == pytest.approx(np.median(ratio))
    assert s.ratio_se_median == pytest.approx(np.median(se)) and s.ratio_se_median > 0
    assert s.heads_above_1 == sum(r > 1 for r in ratio)
    assert s.heads_above_1_by_2se == sum(r - 2 * e > 1 for r, e in zip(ratio, se))
    for rule in ("model", "none", "dk"):
        assert s.entropy_norm[rule] == pytest.approx(t[f"entropy_norm_{rule}"].mean())
        assert s.saturated_frac[rule] == pytest.approx(t[f"saturated_frac_{rule}"].mean())
    assert s.entropy_norm["none"] < s.entropy_norm["model"] < s.entropy_norm["dk"]
    assert s.attn_max_abs_diff == t["attn_max_abs_diff"].max() < 1e-5
    assert [row.layer for row in s.layers] == [0, 1]
    assert s.layers[1].entropy_norm_none == pytest.approx(np.median(t["entropy_norm_none"][1]))
    assert s.layers[0].ratio_max == t["std_ratio"][0].max()


def test_without_bootstrap_there_is_no_standard_error(make_bert) -> None:
    loaded = make_bert()
    ids = list(range(1, 12))
    result = run_to_result(analyze_capture(ProbeConfig(text="x", bootstrap=0), loaded,
                                           capture(loaded, ids, None), ids))
    s = summarize(result)
    assert s.ratio_se_median is None and s.heads_above_1_by_2se == 0
