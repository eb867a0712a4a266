"""Training claims: a statistic over the seeds of an experiment, measured by running it once.

A tiny inline experiment (2 seeds x 4 steps) tests the machinery end to end; the selector's
statistics are tested on hand-made results (no training); the shipped claims are validated
against their experiments without running them.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

import engine.experiments.runner as runner
from engine.claims import KINDS, Claim, check_claims, load_claims
from engine.errors import ConfigError
from engine.experiments.builtin import load_builtins
from engine.experiments.select import Selector, run_value

TINY = {"name": "tiny", "base": {"task": "retrieval", "d_model": 16, "heads": 1,
                                 "scalings": ["none", "sqrt"], "steps": 4, "log_every": 2,
                                 "batch": 8, "probe_size": 4},
        "axes": {"seed": [0, 1]}, "target": 0.2}


def _claim(measure: dict, published: str = "0", id: str = "tiny.x", spec: dict | None = None) -> Claim:
    return Claim(id=id, where="test", text="t", kind="experiment",
                 params={"spec": spec or TINY}, measure=measure, published=published)


MEASURES = {
    "acc2_mean": {"stat": "mean", "rule": "sqrt", "value": "accuracy@2"},
    "acc2_se": {"stat": "se", "rule": "sqrt", "value": "accuracy@2"},
    "loss_min": {"stat": "min", "rule": "none", "value": "final_loss"},
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
    assert got["loss_min"] == min(j["rules"]["none"]["final_loss"] for j in jobs)
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
    """Why the tolerance of a training claim is the rounding alone: a fresh pool, no cache,
    the same numbers exactly."""
    got, _, _ = measured
    claims = [_claim(m, id=name) for name, m in MEASURES.items()]
    again = {c.claim.id: c.measured for c in check_claims(claims, workers=1)}
    assert again == got


def test_the_cache_is_reused_without_a_pool(measured, monkeypatch) -> None:
    got, folder, _ = measured

    def no_pool(*args, **kwargs):
        raise AssertionError("every job is in the cache: nothing should run")

    monkeypatch.setattr(runner, "process_pool", no_pool)
    claims = [_claim(m, id=name) for name, m in MEASURES.items()]
    again = {c.claim.id: c.measured for c in check_claims(claims, cache_dir=folder.parent)}
    assert again == got


def test_a_claim_that_does_not_hold_fails_and_one_that_does_passes(measured) -> None:
    got, folder, _ = measured
    n = _claim(MEASURES["n"], published="2", id="n")
    wrong = _claim(MEASURES["acc2_mean"], published=f"{got['acc2_mean'] + 0.02:.2f}", id="wrong")
    right = _claim(MEASURES["acc2_mean"], published=f"{got['acc2_mean']:.6f}", id="right")
    status = {c.claim.id: (c.status, c.tolerance)
              for c in check_claims([n, wrong, right], cache_dir=folder.parent)}
    assert status["n"][0] == "ok"
    assert status["wrong"][0] == "FAIL"
    assert status["right"] == ("ok", pytest.approx(5e-7))  # rounding only: no SE term


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
    ({"stat": "max", "rule": "sqrt", "value": "final_loss", "at": {"d_k": 4}}, 6.0),
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
    assert sel.measure(spec, results)[0] == pytest.approx(expected)


def test_a_mean_comes_with_its_standard_error(grid) -> None:
    spec, results = grid
    value, se = Selector.from_dict({"stat": "mean", "rule": "sqrt", "value": "final_loss",
                                    "at": {"d_k": 8}}).measure(spec, results)
    assert (value, se) == pytest.approx((9.0, 1 / math.sqrt(3)))


def test_a_value_at_a_step_reads_that_logged_row() -> None:
    res = _result(0, {}, {"sqrt": {}}, rows=[{"scaling": "sqrt", "step": 0, "loss": 3.0},
                                             {"scaling": "sqrt", "step": 30, "loss": 2.0},
                                             {"scaling": "sqrt", "step": 60, "loss": 1.0}])
    assert run_value(res, "sqrt", "loss@30") == 2.0
    assert run_value(res, "sqrt", "loss@0") == 3.0
    assert run_value(res, "sqrt", "loss@end") == 1.0
    assert run_value(res, "sqrt", "loss@40") is None


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
def test_the_training_claims_are_over_seeds_slow_and_exact() -> None:
    """Every training figure of the README rests on an experiment over seeds (never one run),
    is left out of --fast (minutes of training) and is judged by its rounding alone."""
    from engine.claims import experiment_of

    claims = [c for c in load_claims() if c.kind == "experiment"]
    assert len(claims) >= 150
    assert "train" not in KINDS  # no claim rests on a single training run
    names = set()
    for c in claims:
        spec = experiment_of(c)
        names.add(spec.name)
        assert c.slow and c.se_multiple == 0.0, c.id
        assert len(spec.axis_names) and "seed" in spec.axis_names, c.id
        assert spec.base.device == "cpu"
    assert {"seeds", "head_width", "heads", "learning_rate", "bugs_seeds"} <= names
    # (the length section of the README is being reworked: its figures are not claims yet)
    assert set(load_builtins()) - names <= {"length"}
