"""Training claims: a statistic over the seeds of an experiment, measured by running it once,
judged statistically (rounding plus 3 combined standard errors; success counts by their Wilson
intervals) or, where deterministic, by its rounding.

A tiny inline experiment (2 seeds x 4 steps) tests the machinery end to end; the selector's
statistics and the judging rule are tested on hand-made results (no training); the shipped
claims are validated against their experiments without running them.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

import engine.experiments.pool as pool
import engine.experiments.runner as runner
from engine.claims import KINDS, Claim, check_claims, judge_experiment, load_claims
from engine.errors import ConfigError
from engine.experiments.builtin import load_builtins
from engine.experiments.point import quantile_se
from engine.experiments.select import Figure, Selector

TINY = {"name": "tiny", "base": {"task": "retrieval", "d_model": 16, "heads": 1,
                                 "scalings": ["none", "sqrt"], "steps": 4, "log_every": 2,
                                 "batch": 8, "probe_size": 4},
        "axes": {"seed": [0, 1]}, "target": 0.2}


def _claim(measure: dict, published: str = "0", id: str = "tiny.x", spec: dict | None = None,
           **kw) -> Claim:
    return Claim(id=id, where="test", text="t", kind="experiment",
                 params={"spec": spec or TINY}, measure=measure, published=published, **kw)


MEASURES = {
    "acc2_mean": {"stat": "mean", "rule": "sqrt", "value": "accuracy@2"},
    "acc2_se": {"stat": "se", "rule": "sqrt", "value": "accuracy@2"},
    "loss_median": {"stat": "median", "rule": "none", "value": "final_loss"},
    "entropy0_max_rules": {"stat": "mean", "value": "entropy_norm_mean@0", "across": "max"},
    "successes": {"stat": "successes", "rule": "sqrt"},
    "rate_lo": {"stat": "rate_lo", "rule": "sqrt"},
    "rate_hi": {"stat": "rate_hi", "rule": "sqrt"},
    "n": {"stat": "n", "rule": "none"},
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[dict[str, float], Path, int]:
    """Every claim of MEASURES on one run of TINY (cached in a folder), and how many times the
    experiment ran."""
    cache = tmp_path_factory.mktemp("cache")
    calls = {"n": 0}
    original = runner.run_experiment

    def counting(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "run_experiment", counting)
        claims = [_claim(m, id=name) for name, m in MEASURES.items()]
        got = {c.claim.id: c.measured for c in check_claims(claims, workers=1, cache_dir=cache)}
    return got, cache / "tiny", calls["n"]


def _jobs(folder: Path) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((folder / "jobs").glob("job-*.json"))]


@pytest.mark.slow
def test_one_run_answers_every_claim_of_an_experiment(measured) -> None:
    got, folder, runs = measured
    assert runs == 1
    assert set(got) == set(MEASURES) and all(v is not None for v in got.values())
    assert len(_jobs(folder)) == 2


def test_the_statistics_are_those_of_the_job_files(measured) -> None:
    """Recomputed independently (NumPy, SciPy's Wilson interval) from the jobs on disk."""
    got, folder, _ = measured
    jobs = _jobs(folder)
    acc2 = np.array([next(r["accuracy"] for r in j["rows"] if r["scaling"] == "sqrt"
                          and r["step"] == 2) for j in jobs])
    assert got["acc2_mean"] == pytest.approx(acc2.mean(), rel=1e-12)
    assert got["acc2_se"] == pytest.approx(acc2.std(ddof=1) / math.sqrt(2), rel=1e-12, abs=1e-15)
    assert got["loss_median"] == pytest.approx(
        np.median([j["rules"]["none"]["final_loss"] for j in jobs]), rel=1e-12)
    entropy0 = {rule: np.mean([next(r["entropy_norm_mean"] for r in j["rows"]
                                    if r["scaling"] == rule) for j in jobs])
                for rule in ("none", "sqrt")}
    assert got["entropy0_max_rules"] == pytest.approx(max(entropy0.values()), rel=1e-12)
    k = sum(j["rules"]["sqrt"]["steps_to_target"] is not None for j in jobs)
    ci = binomtest(k, 2).proportion_ci(method="wilson")
    assert got["successes"] == k and got["n"] == 2
    assert got["rate_lo"] == pytest.approx(ci.low, abs=1e-12)
    assert got["rate_hi"] == pytest.approx(ci.high, abs=1e-12)


def test_a_rerun_reproduces_every_figure_bit_for_bit(measured) -> None:
    """On one machine a fresh pool without the cache gives the same numbers exactly (across
    machines only the statistical tolerance holds)."""
    got, _, _ = measured
    claims = [_claim(m, id=name) for name, m in MEASURES.items()]
    again = {c.claim.id: c.measured for c in check_claims(claims, workers=1)}
    assert again == got


def test_the_cache_is_reused_without_a_pool(measured, monkeypatch) -> None:
    got, folder, _ = measured

    def no_pool(*args, **kwargs):
        raise AssertionError("every job is in the cache: nothing should run")

    monkeypatch.setattr(runner, "process_pool", no_pool)
    monkeypatch.setattr(pool, "process_pool", no_pool)
    claims = [_claim(m, id=name) for name, m in MEASURES.items()]
    again = {c.claim.id: c.measured for c in check_claims(claims, cache_dir=folder.parent)}
    assert again == got


def test_a_cached_job_of_another_fingerprint_is_rerun_not_used(measured, tmp_path) -> None:
    """A job file made under another fingerprint (other code, torch or CPU kernels) never judges
    a claim: it is rerun and rewritten; the other job is reused."""
    import shutil

    got, folder, _ = measured
    cache = tmp_path / "cache"
    shutil.copytree(folder, cache / "tiny")
    path = cache / "tiny" / "jobs" / "job-00001.json"
    job = json.loads(path.read_text(encoding="utf-8"))
    job["fingerprint"], job["kernels"] = "made elsewhere", "x86_64 aten=AVX512 mkl=auto"
    job["rules"]["sqrt"]["final_loss"] = 123.0  # a number no claim may see
    path.write_text(json.dumps(job), encoding="utf-8")
    notes: list[str] = []
    claims = [_claim(m, id=name) for name, m in MEASURES.items()]
    again = {c.claim.id: c.measured
             for c in check_claims(claims, workers=1, cache_dir=cache, note=notes.append)}
    assert notes == ["experiment tiny: running 1 of 2 jobs on 1 worker(s)"]
    assert again == got
    rerun = json.loads(path.read_text(encoding="utf-8"))
    assert rerun["fingerprint"] == _jobs(folder)[1]["fingerprint"] != "made elsewhere"


def test_jobs_that_ran_under_another_fingerprint_fail_their_claims(measured, monkeypatch) -> None:
    """E.g. a worker whose torch had chosen its kernels before the pin: its numbers judge
    nothing."""
    monkeypatch.setattr(runner, "expected_fingerprint", lambda job: "this machine")
    (check,) = check_claims([_claim(MEASURES["n"], published="2")], workers=1)
    assert check.status == "FAIL" and "another fingerprint" in check.note


def test_a_claim_that_does_not_hold_fails_and_one_that_does_passes(measured) -> None:
    got, folder, _ = measured
    se = next(c.se for c in check_claims([_claim(MEASURES["acc2_mean"])], cache_dir=folder.parent))
    n = _claim(MEASURES["n"], published="2", id="n")
    far = got["acc2_mean"] + 0.02 + 3 * se + 0.01
    wrong = _claim(MEASURES["acc2_mean"], published=f"{far:.2f}", id="wrong")
    right = _claim(MEASURES["acc2_mean"], published=f"{got['acc2_mean']:.6f}", id="right")
    three = _claim(MEASURES["n"], published="3", id="three")
    status = {c.claim.id: (c.status, c.tolerance)
              for c in check_claims([n, wrong, right, three], cache_dir=folder.parent)}
    assert status["n"] == ("ok", 0.5) and status["three"][0] == "FAIL"  # exact: the grid's size
    assert status["wrong"][0] == "FAIL"
    assert status["right"] == ("ok", pytest.approx(5e-7 + 3 * se))  # rounding + 3 combined SE


# -- the selector on hand-made results (no training) -----------------------------------------
def _result(index: int, values: dict, rules: dict[str, dict], rows: list[dict] | None = None) -> dict:
    full = {rule: {"steps_to_target": None, "final_loss": 1.0, **r} for rule, r in rules.items()}
    return {"index": index, "key": str(values), "values": values, "rules": full,
            "rows": rows or [], "error": None}


@pytest.fixture
def grid():
    from engine.experiments.spec import ExperimentSpec

    spec = ExperimentSpec.from_dict({**TINY, "axes": {"d_k": [4, 8], "seed": [0, 1, 2]}})
    steps = {(4, 0): 2, (4, 1): None, (4, 2): 4, (8, 0): None, (8, 1): None, (8, 2): None}
    results = [_result(i, {"d_k": dk, "seed": s},
                       {"sqrt": {"steps_to_target": steps[(dk, s)], "final_loss": dk + s},
                        "none": {"final_loss": 10.0 * dk}},
                       rows=[{"scaling": "sqrt", "step": 2, "accuracy": 0.1 * s}])
               for i, (dk, s) in enumerate(steps)]
    return spec, results


@pytest.mark.parametrize("measure, expected", [
    ({"stat": "successes", "rule": "sqrt", "at": {"d_k": 4}}, 2.0),
    ({"stat": "n", "rule": "sqrt", "at": {"d_k": 8}}, 3.0),
    ({"stat": "rate", "rule": "sqrt", "at": {"d_k": 4}}, 2 / 3),
    ({"stat": "median_steps", "rule": "sqrt", "at": {"d_k": 4}}, 3.0),
    ({"stat": "median_steps", "rule": "sqrt", "at": {"d_k": 8}}, math.inf),  # none reached it
    ({"stat": "mean", "rule": "sqrt", "value": "final_loss", "at": {"d_k": 8}}, 9.0),
    ({"stat": "se", "rule": "sqrt", "value": "final_loss", "at": {"d_k": 8}},
     statistics.stdev([8, 9, 10]) / math.sqrt(3)),
    ({"stat": "median", "rule": "sqrt", "value": "final_loss", "at": {"d_k": 4}}, 5.0),
    ({"stat": "mean", "rule": "sqrt", "value": "accuracy@2", "at": {"d_k": 4}}, 0.1),
    ({"stat": "successes", "rule": "sqrt", "across": "max"}, 2.0),
    ({"stat": "successes", "rule": "sqrt", "across": "min"}, 0.0),
    ({"stat": "mean", "value": "final_loss", "at": {"d_k": [4, 8]}, "across": "max"}, 80.0),
    ({"stat": "mean", "value": "final_loss", "at": {"d_k": 4}, "across": "min"}, 5.0),
    ({"stat": "mean", "rule": "sqrt", "value": "final_loss", "at": {"d_k": 4, "seed": 2}}, 6.0),
])
def test_the_selector_statistics(grid, measure: dict, expected: float) -> None:
    spec, results = grid
    sel = Selector.from_dict(measure)
    sel.check(spec)
    assert sel.measure(spec, results).value == pytest.approx(expected)


def test_a_figure_comes_with_what_judging_it_needs(grid) -> None:
    spec, results = grid
    fig = Selector.from_dict({"stat": "mean", "rule": "sqrt", "value": "final_loss",
                              "at": {"d_k": 8}}).measure(spec, results)
    assert (fig.value, fig.se, fig.n) == pytest.approx((9.0, 1 / math.sqrt(3), 3))
    fig = Selector.from_dict({"stat": "successes", "rule": "sqrt", "at": {"d_k": 4}}
                             ).measure(spec, results)
    assert (fig.value, fig.n, fig.successes, fig.se) == (2.0, 3, 2, 0.0)
    for r in results:
        r["config"] = {"log_every": 2}
    fig = Selector.from_dict({"stat": "median_steps", "rule": "sqrt", "at": {"d_k": 4}}
                             ).measure(spec, results)
    assert (fig.value, fig.n, fig.resolution) == (3.0, 2, 2.0)
    assert fig.se == pytest.approx(quantile_se([2, 4]))
    fig = Selector.from_dict({"stat": "se", "rule": "sqrt", "value": "final_loss",
                              "at": {"d_k": 8}}).measure(spec, results)
    assert fig.value == pytest.approx(1 / math.sqrt(3)) and fig.se == pytest.approx(fig.value / 2)


# -- the judging rule ------------------------------------------------------------------------
def _judge(measure: dict, published: str, fig: Figure, **kw) -> tuple[str, float, str]:
    c = judge_experiment(_claim(measure, published, **kw), fig)
    return c.status, c.tolerance, c.note


MEAN = {"stat": "mean", "rule": "none", "value": "accuracy@4"}


def test_a_mean_agrees_within_rounding_plus_three_combined_standard_errors() -> None:
    """The README's 0.45 ± 0.09 against another machine's 0.563 ± 0.105 (issue 18): both are
    8-seed estimates of one chaotic outcome, and they agree."""
    status, tol, _ = _judge(MEAN, "0.45", Figure(0.563, 0.105, 8), published_se="0.09")
    assert status == "ok" and tol == pytest.approx(0.005 + 3 * math.hypot(0.105, 0.09))
    assert _judge(MEAN, "0.45", Figure(0.95, 0.01, 8), published_se="0.09")[0] == "FAIL"
    # without a printed SE the measured one counts twice
    status, tol, _ = _judge(MEAN, "0.45", Figure(0.55, 0.02, 8))
    assert status == "FAIL" and tol == pytest.approx(0.005 + 3 * math.sqrt(2) * 0.02)
    assert _judge(MEAN, "0.45", Figure(0.53, 0.02, 8))[0] == "ok"
    # the tolerance edge: rounding + 3 combined SE, no more
    edge = 0.005 + 3 * math.hypot(0.1, 0.1)
    assert _judge(MEAN, "0.45", Figure(0.45 + edge * 0.999, 0.1, 8), published_se="0.1")[0] == "ok"
    assert _judge(MEAN, "0.45", Figure(0.45 + edge * 1.01, 0.1, 8), published_se="0.1")[0] == "FAIL"
    # a scale (percent) applies to the measurement and its SE
    pct = dict(scale=100.0)
    assert _judge(MEAN, "45", Figure(0.47, 0.01, 8), **pct)[0] == "ok"
    assert _judge(MEAN, "45", Figure(0.60, 0.01, 8), **pct)[0] == "FAIL"


def test_a_printed_standard_error_is_judged_with_the_se_of_an_se() -> None:
    """SE / sqrt(2 (n - 1)) each: 0.09 against 0.6 with 8 seeds is too far apart."""
    status, _, note = _judge(MEAN, "0.45", Figure(0.45, 0.6, 8), published_se="0.09")
    assert status == "FAIL" and "its SE does not" in note
    assert _judge(MEAN, "0.45", Figure(0.45, 0.15, 8), published_se="0.09")[0] == "ok"
    status, _, _ = _judge({"stat": "se", "rule": "none", "value": "accuracy@4"}, "0.09",
                          Figure(0.15, 0.15 / math.sqrt(14), 8))
    assert status == "ok"
    status, _, _ = _judge({"stat": "se", "rule": "none", "value": "accuracy@4"}, "0.09",
                          Figure(0.60, 0.60 / math.sqrt(14), 8))
    assert status == "FAIL"
    status, tol, _ = _judge({"stat": "se", "rule": "none", "value": "accuracy@4"}, "0.09",
                            Figure(0.40, 0.40 / math.sqrt(14), 8))
    assert status == "ok" and tol == pytest.approx(0.005 + 3 * math.hypot(0.09, 0.4) / math.sqrt(14))


@pytest.mark.parametrize("published, measured_k, ok", [
    ("0", 0, True), ("0", 4, True), ("0", 5, True), ("0", 6, False),  # 0/8 (0.00-0.32)
    ("8", 3, True), ("8", 2, False), ("3", 8, True), ("3", 0, True),
])
def test_a_success_count_holds_while_the_wilson_intervals_overlap(published, measured_k, ok) -> None:
    from engine.experiments.point import wilson_interval

    status, _, note = _judge({"stat": "successes", "rule": "none"}, published,
                             Figure(float(measured_k), n=8, successes=measured_k))
    assert (status == "ok") == ok, note
    a, b = wilson_interval(int(published), 8), wilson_interval(measured_k, 8)
    assert (a[0] <= b[1] and b[0] <= a[1]) == ok  # (the rule, stated independently)
    assert f"{measured_k}/8" in note


@pytest.mark.parametrize("stat, published, measured_k, status", [
    ("rate_hi", "0.32", 0, "ok"), ("rate_hi", "0.32", 5, "ok"), ("rate_hi", "0.32", 6, "FAIL"),
    ("rate_lo", "0.68", 8, "ok"), ("rate_lo", "0.68", 3, "ok"), ("rate_lo", "0.68", 2, "FAIL"),
    ("rate_lo", "0.50", 8, "FAIL"),  # no count of 8 runs has this bound
    ("rate", "0.375", 3, "ok"), ("rate", "1", 2, "FAIL"),
])
def test_a_wilson_bound_is_judged_as_the_count_it_belongs_to(stat, published, measured_k,
                                                             status) -> None:
    from engine.experiments.point import wilson_interval

    value = {"rate_lo": wilson_interval(measured_k, 8)[0], "rate_hi": wilson_interval(measured_k, 8)[1],
             "rate": measured_k / 8}[stat]
    got, _, note = _judge({"stat": stat, "rule": "none"}, published,
                          Figure(value, n=8, successes=measured_k))
    assert got == status, note


def test_a_median_of_steps_allows_one_log_interval_more() -> None:
    med = {"stat": "median_steps", "rule": "sqrt"}
    assert _judge(med, "35", Figure(40.0, 0.0, 8, resolution=5.0))[0] == "ok"
    assert _judge(med, "35", Figure(45.0, 0.0, 8, resolution=5.0))[0] == "FAIL"
    assert _judge(med, "35", Figure(45.0, 2.0, 8, resolution=5.0))[0] == "ok"
    status, _, note = _judge(med, "35", Figure(40.0, math.nan, 1, resolution=5.0))
    assert status == "FAIL" and "cannot judge" in note  # one run: no spread
    assert _judge(med, "35", Figure(math.inf, 0.0, 0))[0] == "FAIL"  # none reached the target


def test_figures_at_step_0_and_run_counts_are_exact() -> None:
    """Before any training step nothing is chaotic: the rounding alone, whatever the SE."""
    at0 = {"stat": "mean", "rule": "none", "value": "entropy_norm_mean@0"}
    assert _claim(at0).tolerance == "exact" and _claim(MEAN).tolerance == "statistical"
    assert _claim({"stat": "n", "rule": "none"}).tolerance == "exact"
    assert _judge(at0, "0.077", Figure(0.0772, 0.002, 8), published_se="0.002")[0] == "ok"
    assert _judge(at0, "0.077", Figure(0.0776, 0.002, 8), published_se="0.002")[0] == "FAIL"
    status, _, note = _judge(at0, "0.077", Figure(0.077, 0.0031, 8), published_se="0.002")
    assert status == "FAIL" and "SE" in note
    forced = _claim(MEAN, "0.45", tolerance="exact")
    assert judge_experiment(forced, Figure(0.46, 0.1, 8)).status == "FAIL"


@pytest.mark.parametrize("measure, says", [
    ({"stat": "average", "rule": "sqrt"}, "stat must be one of"),
    ({"stat": "mean", "rule": "sqrt"}, "needs a value"),
    ({"stat": "mean", "rule": "sqrt", "value": "accuracy@3"}, "step 3 is not logged"),
    ({"stat": "mean", "rule": "sqrt", "value": "accuracy@40"}, "step 40 is not logged"),
    ({"stat": "mean", "rule": "sqrt", "value": "speed@0"}, "neither a per-rule result"),
    ({"stat": "n", "rule": "dk"}, "'dk' is not trained"),
    ({"stat": "n", "rule": "sqrt", "at": {"lr": 0.1}}, "'lr' is not an axis"),
    ({"stat": "n", "rule": "sqrt", "at": {"seed": 5}}, "seed=5 is not a value"),
    ({"stat": "n"}, "selects 2 points"),
    ({"stat": "n", "across": "median"}, "across must be one of"),
    ({"stat": "n", "rule": "sqrt", "where": 1}, "unknown key"),
    ({"stat": "n", "rule": 1}, "rule must be"),
    ({"stat": "min", "rule": "sqrt", "value": "final_loss"}, "stat must be one of"),
])
def test_a_bad_experiment_claim_is_refused_naming_it(tmp_path: Path, measure: dict, says: str) -> None:
    item = {"id": "tiny.bad", "where": "test", "text": "t", "kind": "experiment",
            "params": {"spec": TINY}, "measure": measure, "published": "1"}
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": [item]}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"tiny\.bad") as info:
        load_claims(path)
    assert says in info.value.message


@pytest.mark.parametrize("params, says", [
    ({"experiment": "no_such"}, "must be one of"),
    ({"experiment": "seeds", "spec": TINY}, "exactly one of"),
])
def test_an_unknown_experiment_is_refused(tmp_path: Path, params: dict, says: str) -> None:
    item = {"id": "tiny.bad", "where": "test", "text": "t", "kind": "experiment",
            "params": params, "measure": {"stat": "n", "rule": "sqrt"}, "published": "1"}
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": [item]}), encoding="utf-8")
    with pytest.raises(ConfigError, match=says):
        load_claims(path)


# -- the shipped training claims -------------------------------------------------------------
@pytest.mark.slow
def test_the_training_claims_are_over_seeds_slow_and_statistical() -> None:
    """Every training figure of the README rests on an experiment over seeds (never one run),
    is left out of --fast (minutes of training), is judged over its seeds (exactly only the
    number of runs and figures at step 0), and no claim publishes the extremes over seeds."""
    from engine.claims import experiment_of

    claims = [c for c in load_claims() if c.kind == "experiment"]
    assert len(claims) >= 150
    assert "train" not in KINDS  # no claim rests on a single training run
    names = set()
    for c in claims:
        spec = experiment_of(c)
        names.add(spec.name)
        assert c.slow and c.se_multiple == 3.0, c.id
        exact = c.measure["stat"] == "n" or c.measure.get("value", "").endswith("@0")
        assert c.tolerance == ("exact" if exact else "statistical"), c.id
        assert c.measure["stat"] not in ("min", "max"), c.id
        assert len(spec.axis_names) and "seed" in spec.axis_names, c.id
        assert spec.base.device == "cpu"
    assert {"seeds", "head_width", "heads", "learning_rate", "bugs_seeds"} <= names
    assert set(load_builtins()) <= names  # every built-in experiment publishes figures
    others = [c for c in load_claims() if c.kind in ("optimum", "coord")]
    assert others and all(c.se_multiple == 3.0 for c in others)  # within 3 of their own SE


def test_a_claim_field_that_belongs_to_experiments_is_refused_elsewhere(tmp_path: Path) -> None:
    for extra, says in (({"tolerance": "loose"}, r"tolerance: must be one of"),
                        ({"published_se": "0.1"}, "for experiment claims")):
        item = {"id": "a", "where": "w", "text": "t", "kind": "inspect", "params": {},
                "measure": {}, "published": "1", **extra}
        path = tmp_path / "claims.json"
        path.write_text(json.dumps({"claims": [item]}), encoding="utf-8")
        with pytest.raises(ConfigError, match=says):
            load_claims(path)
    item = {"id": "b", "where": "w", "text": "t", "kind": "experiment", "params": {"spec": TINY},
            "measure": {"stat": "successes", "rule": "sqrt"}, "published": "1",
            "published_se": "0.1"}
    path.write_text(json.dumps({"claims": [item]}), encoding="utf-8")
    with pytest.raises(ConfigError, match="published_se: goes with a mean or a median"):
        load_claims(path)
