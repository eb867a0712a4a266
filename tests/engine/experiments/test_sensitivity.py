"""Learning-rate sensitivity (Wortsman et al. 2023) from job results: hand-computed cases, the
verdict's judgments, the figure, and the claims' selector."""

from __future__ import annotations

import math
import statistics

import pytest

from engine.experiments.builtin import builtin
from engine.experiments.figures import figure_data, verdict
from engine.experiments.select import Selector
from engine.experiments.sensitivity import lr_sensitivity, seed_sensitivity
from engine.experiments.spec import ExperimentSpec

LRS = (0.001, 0.01, 0.1)


def _result(index, lr, seed, rules):
    """A job result as the runner stores it: rules -> (final loss or None, loss at init,
    largest |logit|)."""
    return {"index": index, "key": f"lr={lr!r},seed={seed!r}", "values": {"lr": lr, "seed": seed},
            "error": None,
            "rules": {r: {"final_loss": f, "max_logit_abs": m, "steps_to_target": None,
                          "diverged_step": None if f is not None else 50, "collapsed": False}
                      for r, (f, _, m) in rules.items()},
            "rows": [{"scaling": r, "step": 0, "loss": init} for r, (_, init, _) in rules.items()]}


#: sqrt: an optimum at 0.01, fails at 0.1 (diverges for seed 1) with huge logits; qknorm: a
#: wide basin with bounded logits; softcap: sqrt's basin, bounded logits
CURVES = {
    0: {"sqrt": ((2.5, 2.0, 5.0), (0.5, 2.0, 30.0), (1.0, 2.0, 4000.0)),
        "qknorm": ((0.6, 2.0, 4.0), (0.4, 2.0, 5.0), (0.45, 2.0, 5.5)),
        "softcap": ((2.5, 2.0, 5.0), (0.5, 2.0, 30.0), (1.1, 2.0, 50.0))},
    1: {"sqrt": ((1.5, 2.2, 6.0), (0.2, 2.2, 35.0), (None, 2.2, 6000.0)),
        "qknorm": ((0.5, 2.2, 4.1), (0.3, 2.2, 5.1), (0.35, 2.2, 5.4)),
        "softcap": ((1.5, 2.2, 6.0), (0.2, 2.2, 35.0), (2.1, 2.2, 50.0))},
}


def _results():
    out = []
    for i, (lr_i, seed) in enumerate((a, s) for a in range(3) for s in (0, 1)):
        out.append(_result(i, LRS[lr_i], seed,
                           {r: c[lr_i] for r, c in CURVES[seed].items()}))
    return out


SPEC = ExperimentSpec.from_dict({
    "name": "toy", "preset": "demo", "base": {"scalings": ["sqrt", "qknorm", "softcap"]},
    "axes": {"lr": list(LRS), "seed": [0, 1]},
    "figures": [{"kind": "lr_sensitivity", "x": "lr", "y": "final_loss", "title": "S"}],
    "verdict": {"kind": "lr_sensitivity", "metric": "final_loss", "over": "lr"}})


def test_hand_computed_sensitivity_with_a_diverged_run():
    # seed 0: min(loss, 2.0) = 2.0, 0.5, 1.0 -> mean 3.5/3 - best 0.5; seed 1: 1.5, 0.2, 2.2
    # (diverged = the loss at init) -> mean 3.9/3 - 0.2
    s0, s1 = 3.5 / 3 - 0.5, 3.9 / 3 - 0.2
    s = lr_sensitivity(_results(), "sqrt")
    assert s.per_seed == pytest.approx((s0, s1))
    assert s.mean == pytest.approx((s0 + s1) / 2)
    assert s.se == pytest.approx(statistics.stdev([s0, s1]) / math.sqrt(2))
    assert s.best == 0.01 and s.best_loss == pytest.approx(0.35) and s.n == 2
    assert seed_sensitivity(1.0, {1: 0.5, 2: 0.5}) == 0.0  # a flat curve: no sensitivity


def test_verdict_judges_each_rule_against_the_first():
    line = verdict(SPEC, _results())
    assert line.startswith("learning-rate sensitivity (Wortsman et al.) of the final training loss"
                           " over lr 0.001-0.1")
    assert "sqrt 0.883 ± 0.22 (best lr 0.01: 0.35 ± 0.15)" in line
    assert "qknorm widens the basin" in line and "and bounds the logit" in line
    assert "softcap does not change the basin measurably" in line
    assert "it only bounds the logit" in line


def test_the_sensitivity_figure_has_one_bar_per_rule_with_its_error():
    fig = figure_data(SPEC, _results())[0]
    assert fig.kind == "by_rule" and [t for _, t in fig.x_ticks] == ["sqrt", "qknorm", "softcap"]
    sqrt = fig.series[0]
    s = lr_sensitivity(_results(), "sqrt")
    assert sqrt.y == (s.mean,) and sqrt.lo == (s.mean - s.se,) and sqrt.n == (2,)


def test_selector_reads_the_sensitivity_and_the_best_rate():
    res = _results()
    sel = Selector.from_dict({"stat": "lr_sensitivity", "rule": "qknorm", "over": "lr"})
    sel.check(SPEC)
    s = lr_sensitivity(res, "qknorm")
    fig = sel.measure(SPEC, res)
    assert (fig.value, fig.se, fig.n) == pytest.approx((s.mean, s.se, 2))
    se_fig = Selector.from_dict({"stat": "lr_sensitivity_se", "rule": "qknorm", "over": "lr"}
                                ).measure(SPEC, res)
    assert (se_fig.value, se_fig.se) == pytest.approx((s.se, s.se / math.sqrt(2)))
    best = Selector.from_dict({"stat": "best", "rule": "sqrt", "over": "lr"})
    fig = best.measure(SPEC, res)
    # mean min(loss, init) over seeds: 1.75 ± 0.25 at 1e-3, 0.35 ± 0.15 at 1e-2, 1.6 ± 0.6 at
    # 1e-1 (a diverged seed counts as its loss at init): 1e-1 is within 3 combined SE of the
    # best (1.25 <= 3 * 0.618), 1e-3 is not (1.4 > 3 * 0.292)
    assert fig.value == 0.01 and sorted(fig.accepted) == [0.01, 0.1]
    from engine.errors import ConfigError

    for bad in ({"stat": "lr_sensitivity", "rule": "sqrt"},
                {"stat": "mean", "value": "final_loss", "rule": "sqrt", "over": "lr",
                 "at": {"lr": 0.01}},
                {"stat": "best", "rule": "sqrt", "over": "lr", "at": {"lr": 0.01}}):
        with pytest.raises(ConfigError):
            Selector.from_dict(bad).check(SPEC)


def test_a_published_best_rate_holds_when_the_seeds_cannot_tell_it_from_the_best():
    from engine.claims import Claim, judge_experiment

    fig = Selector.from_dict({"stat": "best", "rule": "sqrt", "over": "lr"}).measure(
        SPEC, _results())

    def claim(published):
        return Claim("c", "w", "t", "experiment", {"spec": SPEC.to_dict()},
                     {"stat": "best", "rule": "sqrt", "over": "lr"}, published)

    assert judge_experiment(claim("0.01"), fig).status == "ok"
    assert judge_experiment(claim("0.1"), fig).status == "ok"  # tied within 3 combined SE
    assert judge_experiment(claim("0.001"), fig).status == "FAIL"


def test_the_builtin_logit_control_experiment_is_sized_as_documented():
    spec = builtin("logit_control")
    lrs = next(a.values for a in spec.axes if a.field == "lr")
    seeds = next(a.values for a in spec.axes if a.field == "seed")
    assert len(lrs) >= 6 and max(lrs) / min(lrs) >= 100 and len(seeds) >= 4
    assert set(spec.rules) == {"sqrt", "qknorm", "softcap", "qkclip", "sink"}
    assert spec.rules[0] == "sqrt"  # the reference of the verdict
    assert spec.verdict.kind == "lr_sensitivity" and spec.verdict.over == "lr"
    b = spec.base
    assert b.warmup > 0 and b.decay == "cosine"
    assert {f.kind for f in spec.figures} >= {"vs_axis", "lr_sensitivity"}


def test_the_tie_rule_at_its_edge():
    """tied(k): a grid value whose mean loss is within k combined standard errors of the best
    one's. Best 1.0 ± 0.1; a value at 1.0 ± 0.1 is within 3 combined SE up to 1 + 3 sqrt(0.02) =
    1.424264; 1.42 is tied, 1.43 is not; with k = 1, 1.14 is (<= 1.141421) and 1.15 is not."""
    from engine.experiments.sensitivity import Sensitivity

    s = Sensitivity("sqrt", 0.0, 0.0, 2, "a", 1.0, 0.1, (),
                    {"a": (1.0, 0.1), "b": (1.42, 0.1), "c": (1.43, 0.1), "d": (1.14, 0.1),
                     "e": (1.15, 0.1), "f": (0.99, 0.0)})
    assert s.tied(3.0) == ["a", "b", "d", "e", "f"]
    assert s.tied(1.0) == ["a", "d", "f"]
    # a value with a large SE of its own is tied further away: 2.0 ± 0.5 vs 1.0 ± 0.1:
    # 1.0 <= 3 * hypot(0.5, 0.1) = 1.5297
    s2 = Sensitivity("sqrt", 0.0, 0.0, 2, "a", 1.0, 0.1, (), {"a": (1.0, 0.1), "g": (2.0, 0.5)})
    assert s2.tied(3.0) == ["a", "g"] and s2.tied(1.0) == ["a"]


def test_the_best_rate_is_the_lowest_mean_of_min_loss_init_over_seeds():
    """Two seeds, three rates. Seed 0 (init 2.0): 1.0, 0.6, 3.0; seed 1 (init 2.4): 0.2, 1.0,
    2.0. min(loss, init) per rate, mean over seeds: 0.6, 0.8, 2.0 -> the best rate is 0.001
    (although seed 0 alone is best at 0.01). Per seed: seed 0: (1.0 + 0.6 + 2.0) / 3 - 0.6 =
    0.6; seed 1: (0.2 + 1.0 + 2.0) / 3 - 0.2 = 0.866667."""
    curves = {0: (2.0, (1.0, 0.6, 3.0)), 1: (2.4, (0.2, 1.0, 2.0))}
    res = [_result(i, lr, seed, {"sqrt": (curves[seed][1][j], curves[seed][0], 1.0)})
           for i, (j, lr, seed) in enumerate((j, lr, s) for j, lr in enumerate(LRS)
                                             for s in (0, 1))]
    s = lr_sensitivity(res, "sqrt")
    assert s.best == 0.001 and s.best_loss == pytest.approx(0.6)
    assert s.means[0.1] == pytest.approx((2.0, 0.0))  # min(3.0, 2.0) and min(2.0, 2.4)
    assert s.means[0.01] == pytest.approx((0.8, 0.2))  # SE: stdev(0.6, 1.0) / sqrt(2)
    assert s.per_seed == pytest.approx((0.6, 3.2 / 3 - 0.2))


def test_when_no_rate_beats_the_loss_at_init_the_sensitivity_is_zero():
    """Every rate ends above the loss at init (or diverges): each counts as the loss at init, so
    the curve is flat at init and the sensitivity is 0 (not the spread of the raw losses)."""
    res = [_result(i, lr, seed, {"sqrt": (loss, 2.0 + seed, 1.0)})
           for i, (lr, seed, loss) in enumerate([(0.001, 0, 5.0), (0.01, 0, 9.0), (0.1, 0, None),
                                                 (0.001, 1, 3.5), (0.01, 1, 3.0),
                                                 (0.1, 1, 40.0)])]
    s = lr_sensitivity(res, "sqrt")
    assert s.per_seed == (0.0, 0.0) and s.mean == 0.0 and s.se == 0.0
    assert s.best_loss == pytest.approx(2.5)  # the mean of the two inits
    assert seed_sensitivity(2.0, {1: 5.0, 2: 9.0, 3: math.inf}) == 0.0
    # one rate below init: (2.0 + 1.0 + 2.0) / 3 - 1.0
    assert seed_sensitivity(2.0, {1: 5.0, 2: 1.0, 3: math.inf}) == pytest.approx(2 / 3)


def test_an_exact_tie_is_tied_and_the_sensitivity_names_its_rule():
    """Two rates with the same mean and no spread are tied (the edge itself belongs)."""
    from engine.experiments.sensitivity import Sensitivity

    s = Sensitivity("sqrt", 0.0, 0.0, 2, "a", 1.0, 0.0, (), {"a": (1.0, 0.0), "b": (1.0, 0.0)})
    assert s.tied(3.0) == ["a", "b"]
    assert lr_sensitivity(_results(), "qknorm").rule == "qknorm"


def test_where_selects_the_jobs_of_one_point_of_the_other_axes():
    """Jobs at two widths: ``where`` keeps one; the other width's losses (all 9.0, above init)
    would flatten the curve to a sensitivity of 0."""
    res = _results()
    wide = [{**r, "values": {**r["values"], "d_model": 64},
             "rules": {k: {**v, "final_loss": 9.0} for k, v in r["rules"].items()}}
            for r in _results()]
    for r in res:
        r["values"] = {**r["values"], "d_model": 16}
    both = res + wide
    narrow = lr_sensitivity(both, "sqrt", where={"d_model": 16})
    assert narrow.per_seed == pytest.approx(lr_sensitivity(_results(), "sqrt").per_seed)
    assert lr_sensitivity(both, "sqrt", where={"d_model": 64}).per_seed == (0.0, 0.0)


def test_runs_without_a_loss_at_init_or_without_the_rule_are_left_out():
    """A seed whose loss at init is missing or not finite has no curve (not an error, not an
    infinite init); a job without the rule is skipped, and the jobs after it still count."""
    res = _results()
    nan_init = [dict(r) for r in res if r["values"]["seed"] == 1]
    for r in nan_init:
        r["rows"] = [{**row, "loss": float("nan")} for row in r["rows"]]
    seed0 = [r for r in res if r["values"]["seed"] == 0]
    s = lr_sensitivity(nan_init + seed0, "sqrt")  # (the seed without a curve first)
    assert s.n == 1 and s.per_seed == pytest.approx((3.5 / 3 - 0.5,))
    no_rows = [{**r, "rows": []} for r in res if r["values"]["seed"] == 1]
    assert lr_sensitivity(no_rows + seed0, "sqrt").n == 1
    other = {**res[0], "rules": {"dk": res[0]["rules"]["sqrt"]}, "rows": []}
    s = lr_sensitivity([other, *res], "sqrt")  # the dk-only job comes first
    assert s.n == 2 and s.per_seed == pytest.approx(lr_sensitivity(res, "sqrt").per_seed)
