"""The Simulation page's sweep along n (the sequence length): switch, curves, theory, hover."""

from __future__ import annotations

import numpy as np

from engine.config import N_KEYS_SWEEP


def test_sweep_along_n_with_theory_and_hover(qtbot, window, wait_complete):
    window.apply_config({"trials": 200, "scalings": ["sqrt", "logn"], "d_k": 256})
    wait_complete(window)
    sweep = window.page.panels["sweep"]
    sweep.axis_box.setCurrentIndex(1)  # the user's switch: along n
    assert window.sweep_axis == "n_keys"
    wait_complete(window, timeout=120_000)
    points = window.state.sweep
    assert window.state.sweep_axis == "n_keys" and tuple(p.x for p in points) == N_KEYS_SWEEP
    assert all(p.snapshot.config.d_k == 256 for p in points)
    # at most LENGTH_SWEEP_CELLS cells per point: fewer trials at the largest n
    assert points[-1].snapshot.trials_done < points[0].snapshot.trials_done == 200
    assert sweep.plots[0].getAxis("bottom").labelText == "keys n"
    # attention fades along n for sqrt (mean top weight falls)
    top = [p.snapshot.rules["sqrt"].top_weight.mean for p in points]
    assert top[-1] < top[len(top) // 2] < top[0]
    # the dashed asymptote of sqrt's entropy / log n is drawn where it applies (large n) and
    # agrees with the measured curve there; logn's spread grows with n, so it gets none
    i = next(k for k, m in enumerate(sweep_metrics()) if m.key == "entropy_norm")
    lx, y = sweep.theory[(i, "sqrt")].getData()  # x in log10 (a log axis)
    x = np.rint(10.0 ** lx)
    assert len(x) >= 5 and x.max() == 65_536
    measured = {p.x: p.snapshot.rules["sqrt"].entropy_norm for p in points}
    for n, pred in zip(x, y, strict=True):
        e = measured[int(n)]
        assert abs(e.mean - pred) < 5 * e.se + 0.01, (n, e, pred)
    lx, _ = sweep.theory[(i, "logn")].getData()
    assert lx is None or len(lx) == 0 or 10.0 ** lx.max() < 65_000
    text = sweep.show_values_at(1, np.log10(1000.0))
    assert "n = 1,024" in text and "sqrt" in text
    rows = sweep.data_rows()
    assert rows and all("n_keys" in r for r in rows)
    # back to d_k
    sweep.axis_box.setCurrentIndex(0)
    wait_complete(window, timeout=120_000)
    assert window.state.sweep_axis == "d_k" and sweep.plots[0].getAxis("bottom").labelText == "d_k"


def sweep_metrics():
    from ui.plots.sweep import METRICS

    return METRICS


def test_the_key0_plot_says_there_is_no_target_at_rho_0(qtbot, window, wait_complete):
    """At ρ = 0 key 0 is a key like the others (its weight is 1/n on average): the plot says so
    instead of calling it the target; with a correlation it is the target again."""
    from ui.plots.sweep import NO_TARGET_TITLE, single_metric_panel

    sweep = window.page.panels["sweep"]
    i = next(k for k, m in enumerate(sweep_metrics()) if m.key == "target_weight")
    window.apply_config({"trials": 100, "scalings": ["sqrt"], "correlation": 0.0})
    wait_complete(window)
    assert sweep.plots[i].titleLabel.text == NO_TARGET_TITLE
    single = single_metric_panel("target_weight")()
    qtbot.addWidget(single)
    single.refresh(window.state, force=True)
    assert NO_TARGET_TITLE in single.title
    window.apply_config({"correlation": 0.3})
    wait_complete(window)
    assert sweep.plots[i].titleLabel.text == sweep_metrics()[i].title
    single.refresh(window.state, force=True)
    assert single.title.startswith(sweep_metrics()[i].title)
    single.close()
