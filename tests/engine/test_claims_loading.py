"""The claims file read and checked, and the simulate, experiment and probe measurers, on small
hand-written claims (no shipped claims file, no training, no model: each test is milliseconds,
so mutation testing of engine/claims.py can run them for every mutant).

Refusals name the file, the claim (by id, else its index) and the field inside it; a measurer's
figure is checked against a value computed here by hand or read from the run's own summary
row, and its plumbing (the cache, the pool, the fingerprints, the cancel flag) against stubs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

import engine.claims as claims_module
from engine.claims import Claim, check_claims, load_claims
from engine.errors import Cancelled, ConfigError, FileFormatError

BASE = {"where": "README.md", "text": "t"}
SIMULATE = {**BASE, "id": "sim", "kind": "simulate", "published": 4,
            "params": {"d_k": 4, "trials": 10}, "measure": {"column": "d_k"}}
INSPECT = {**BASE, "id": "ins", "kind": "inspect", "published": "0.5",
           "params": {"scores": [1, 0]}, "measure": {"value": "entropy"}}
PROBE = {**BASE, "id": "pro", "kind": "probe", "published": "1",
         "params": {"text_preset": "short"}, "measure": {"value": "x"}}
COORD = {**BASE, "id": "coo", "kind": "coord", "published": "1",
         "params": {"widths": [64, 128], "steps": 1, "seeds": 2},
         "measure": {"param": "mup", "kind": "readout", "step": 1, "stat": "slope"}}
TINY = {"name": "tiny", "base": {"task": "retrieval", "d_model": 16, "heads": 1,
                                 "scalings": ["none", "sqrt"], "steps": 4, "log_every": 2,
                                 "batch": 8, "probe_size": 4},
        "axes": {"seed": [0, 1]}, "target": 0.2}
EXPERIMENT = {**BASE, "id": "exp", "kind": "experiment", "published": "1",
              "params": {"spec": TINY},
              "measure": {"stat": "mean", "rule": "sqrt", "value": "final_loss"}}


def _write(tmp_path: Path, raw) -> Path:
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _refusal(tmp_path: Path, raw) -> FileFormatError:
    path = _write(tmp_path, raw)
    with pytest.raises(FileFormatError) as err:
        load_claims(path)
    assert err.value.file == str(path) and err.value.option == "claims", str(err.value)
    return err.value


# -- the file: valid claims of each kind -------------------------------------------------------
def test_a_claim_of_each_kind_loads_with_its_fields(tmp_path: Path) -> None:
    items = [SIMULATE, INSPECT, PROBE, COORD,
             {**EXPERIMENT, "published": 1.5, "published_se": 0.25, "se_multiple": 2,
              "slow": True},
             {**EXPERIMENT, "id": "exp.n", "measure": {"stat": "n", "rule": "sqrt"}},
             {**EXPERIMENT, "id": "exp.ok", "measure": {"stat": "successes", "rule": "sqrt"}},
             {**EXPERIMENT, "id": "exp.md", "published_se": "0.1",
              "measure": {"stat": "median_steps", "rule": "sqrt"}},
             {**EXPERIMENT, "id": "exp.me", "published_se": "0.1",
              "measure": {"stat": "median", "rule": "sqrt", "value": "final_loss"}},
             {**EXPERIMENT, "id": "exp.at0", "tolerance": "statistical",
              "measure": {"stat": "mean", "rule": "sqrt", "value": "accuracy@0"}},
             {**INSPECT, "id": "ins.1", "measure": {"value": 1}, "printed": "½", "scale": 100},
             {**EXPERIMENT, "id": "seeds", "params": {"experiment": "seeds"},
              "measure": {"stat": "n", "rule": "dk"}}]
    got = load_claims(_write(tmp_path, {"claims": items, "comment": "kept aside"}))
    assert [c.id for c in got] == [i["id"] for i in items]
    assert all(isinstance(c, Claim) for c in got)
    sim, ins, pro, coo, exp, n, ok, md, me, at0, ins1, seeds = got
    assert (sim.kind, sim.published, sim.params, sim.measure) == (
        "simulate", "4", {"d_k": 4, "trials": 10}, {"column": "d_k"})
    assert (sim.where, sim.text, sim.se_multiple, sim.slow, sim.scale) == (
        "README.md", "t", 3.0, False, 1.0)
    assert (sim.published_se, sim.tolerance, sim.printed) == ("", "", "")
    assert (ins.kind, ins.published) == ("inspect", "0.5")
    assert (pro.kind, pro.params) == ("probe", {"text_preset": "short"})
    assert coo.kind == "coord"
    # numbers as printed become their text; the defaults of an experiment claim
    assert (exp.published, exp.published_se, exp.se_multiple, exp.slow) == ("1.5", "0.25", 2, True)
    assert (exp.tolerance, n.tolerance, ok.tolerance) == ("statistical", "exact", "statistical")
    assert (md.published_se, me.published_se) == ("0.1", "0.1")
    assert at0.tolerance == "statistical"  # as written, not the step-0 default (exact)
    assert (ins1.measure, ins1.printed, ins1.scale) == ({"value": 1}, "½", 100)
    assert seeds.params == {"experiment": "seeds"}  # a built-in experiment, by name
    assert claims_module.experiment_of(seeds).name == "seeds"


def test_without_a_path_the_shipped_file_is_read(tmp_path: Path, monkeypatch) -> None:
    path = _write(tmp_path, {"claims": [INSPECT]})
    monkeypatch.setattr(claims_module, "CLAIMS_FILE", path)
    (claim,) = load_claims()
    assert claim.id == "ins"
    (again,) = load_claims(str(path))  # a path as text
    assert again == claim


# -- the file: refusals name the file, the claim and the field ---------------------------------
@pytest.mark.parametrize(("raw", "where", "says"), [
    ([INSPECT], "", "must be an object"),
    ({"other": [INSPECT]}, "claims", "required, but missing"),
    ({"claims": []}, "claims", "needs at least 1 item(s), got 0"),
    ({"claims": [5]}, "claims[0]", "must be an object"),
    ({"claims": [INSPECT, {**SIMULATE, "id": "ins"}]}, "claims['ins'].id", "'ins' appears twice"),
    ({"claims": [INSPECT, {**SIMULATE, "id": 7}]}, "claims[1].id", "must be a string"),
    ({"claims": [{**INSPECT, "published": "nan"}]}, "claims['ins'].published",
     "published must be finite, got 'nan'"),
    ({"claims": [{**INSPECT, "published": ["1"]}]}, "claims['ins'].published",
     "must be a number as printed, got a list of 1 item"),
    ({"claims": [{**INSPECT, "published": "1" * 101}]}, "claims['ins'].published",
     "must be a number as printed, got '1111"),
    ({"claims": [{**EXPERIMENT, "published_se": "abc"}]}, "claims['exp'].published_se",
     "published must be a number as printed or a bound, got 'abc'"),
    ({"claims": [{**EXPERIMENT, "published_se": "1" * 101}]}, "claims['exp'].published_se",
     "must be a number as printed, got '1111"),
    ({"claims": [{**EXPERIMENT, "params": [1]}]}, "claims['exp'].params", "must be an object"),
    ({"claims": [{**EXPERIMENT, "measure": [1]}]}, "claims['exp'].measure", "must be an object"),
    ({"claims": [{**EXPERIMENT, "tolerance": "loose"}]}, "claims['exp'].tolerance",
     "must be one of exact, statistical"),
    ({"claims": [{**INSPECT, "tolerance": "exact"}]}, "claims['ins'].tolerance",
     "tolerance and published_se are for experiment claims"),
    ({"claims": [{**INSPECT, "tolerance": "exact", "published_se": "0.1"}]},
     "claims['ins'].tolerance", "tolerance and published_se are for experiment claims"),
    ({"claims": [{**SIMULATE, "published_se": 0.1}]}, "claims['sim'].published_se",
     "tolerance and published_se are for experiment claims"),
    ({"claims": [{**INSPECT, "kind": "train"}]}, "claims['ins'].kind", "must be one of"),
    ({"claims": [{**INSPECT, "params": [1]}]}, "claims['ins'].params", "must be an object"),
    ({"claims": [{**INSPECT, "measure": [1]}]}, "claims['ins'].measure", "must be an object"),
])
def test_a_bad_file_or_claim_is_refused_naming_where(tmp_path, raw, where, says) -> None:
    err = _refusal(tmp_path, raw)
    assert err.where == where and err.problem.startswith(says), str(err)


def test_the_claims_file_and_its_list_are_bounded(tmp_path: Path) -> None:
    err = _refusal(tmp_path, {"claims": [{}] * 10_001})
    assert (err.where, err.problem) == ("claims", "a list of 10,001 items, more than 10,000")
    # the file's size: at most CLAIMS_FILE_MAX bytes (4 MB), whitespace counting
    text = json.dumps({"claims": [INSPECT]})
    path = tmp_path / "claims.json"
    path.write_text(text + " " * (4_000_000 - len(text)), encoding="utf-8")
    assert [c.id for c in load_claims(path)] == ["ins"]
    path.write_text(text + " " * (4_000_001 - len(text)), encoding="utf-8")
    with pytest.raises(FileFormatError) as err:
        load_claims(path)
    assert err.value.option == "claims" and err.value.problem == (
        "4,000,001 bytes, more than the 4,000,000 any claims file needs (refused unread)")
    path.write_text("{", encoding="utf-8")
    with pytest.raises(FileFormatError) as err:
        load_claims(path)
    assert err.value.option == "claims" and err.value.file == str(path)


NAME_201 = "r" * 201
COORD_NEEDS = ("needs param (one of the check's), kind (embedding, attention logits, attention "
               "output, MLP output, readout), step (0..1) and stat (slope or se)")
TOO_LONG = "a string of 201 characters, more than 200"


@pytest.mark.parametrize(("claim", "where", "says"), [
    # simulate: SimulationConfig's fields, the measure's keys
    ({**SIMULATE, "params": {"d_k": 0}}, "params.d_k", "must be from 1 to"),
    ({**SIMULATE, "params": {"nope": 1}}, "params.nope", "unknown parameter"),
    ({**SIMULATE, "measure": {"rule": "sqrt"}}, "measure.column", "required, but missing"),
    ({**SIMULATE, "measure": {"column": "d_k", "transform": "log"}}, "measure.transform",
     "must be one of sqrt"),
    ({**SIMULATE, "measure": {"column": "d_k", "x": 1}}, "measure.x",
     "unknown key (known: column, rule, se, transform)"),
    ({**SIMULATE, "measure": {"column": NAME_201}}, "measure.column", TOO_LONG),
    ({**SIMULATE, "measure": {"column": "d_k", "rule": NAME_201}}, "measure.rule", TOO_LONG),
    ({**SIMULATE, "measure": {"column": "d_k", "se": 5}}, "measure.se", "must be a string"),
    # inspect: the scores and options, a field path
    ({**INSPECT, "params": {"scores": [1]}}, "params.scores", "needs at least 2 item(s), got 1"),
    ({**INSPECT, "params": {"scale": 1.0}}, "params.scores", "required, but missing"),
    ({**INSPECT, "params": {"scores": [1, 0], "x": 1}}, "params.x", "unknown key"),
    ({**INSPECT, "params": {"scores": [0] * 100_001}}, "params.scores",
     "a list of 100,001 items, more than 100,000"),
    ({**INSPECT, "params": {"scores": [1, 0], "scale": "2"}}, "params.scale", "must be a number"),
    ({**INSPECT, "params": {"scores": [1, 0], "ssmax_s": "2"}}, "params.ssmax_s", "must be a number"),
    ({**INSPECT, "params": {"scores": [1, 0], "sink": "2"}}, "params.sink", "must be a number"),
    ({**INSPECT, "params": {"scores": [1, 0], "softcap": "2"}}, "params.softcap", "must be a number"),
    ({**INSPECT, "params": {"scores": [1, 0], "sigmoid": 1}}, "params.sigmoid", "must be true or false"),
    ({**INSPECT, "params": {"scores": [1, 0], "yarn_n_ref": 1.5}}, "params.yarn_n_ref",
     "must be an integer"),
    ({**INSPECT, "measure": {}}, "measure", "required, but missing"),
    ({**INSPECT, "measure": {"value": 1.5}}, "measure", "must be a field path, got 1.5"),
    ({**INSPECT, "measure": {"value": NAME_201}}, "measure", "must be a field path"),
    ({**INSPECT, "measure": {"value": "entropy", "x": 1}}, "measure.x", "unknown key"),
    # probe: ProbeConfig's fields and a preset's name
    ({**PROBE, "params": {"text": 5}}, "params.text", "must be a string"),
    ({**PROBE, "params": {"text": "a" * 500_001}}, "params.text",
     "a string of 500,001 characters, more than 500,000"),
    ({**PROBE, "params": {"text_preset": NAME_201}}, "params.text_preset", TOO_LONG),
    ({**PROBE, "params": {"bootstrap": "many"}}, "params.bootstrap", "must be an integer"),
    ({**PROBE, "params": {"bogus": 5}}, "params.bogus", "unknown key"),
    ({**PROBE, "measure": {}}, "measure", "required, but missing"),
    # coord: its config, the slope it names
    ({**COORD, "params": {"widths": [0]}}, "params.widths", "must be from 1 to"),
    ({**COORD, "measure": {"param": "mup"}}, "measure", "needs param (one of the check's)"),
    ({**COORD, "measure": {**COORD["measure"], "param": "ntk"}}, "measure", COORD_NEEDS),
    ({**COORD, "measure": {**COORD["measure"], "kind": "logits"}}, "measure", COORD_NEEDS),
    ({**COORD, "measure": {**COORD["measure"], "stat": "mean"}}, "measure", COORD_NEEDS),
    ({**COORD, "measure": {**COORD["measure"], "step": 2}}, "measure", COORD_NEEDS),
    # experiment: its spec, what it selects, a printed SE only with a mean or a median
    ({**EXPERIMENT, "params": {"spec": {**TINY, "target": -1}}}, "params.target", "must be in (0, 1]"),
    ({**EXPERIMENT, "params": {}}, "params", "needs exactly one of experiment (a built-in name) or spec"),
    ({**EXPERIMENT, "measure": {"stat": "mean", "rule": "dk", "value": "final_loss"}}, "measure",
     "rule 'dk' is not trained in 'tiny'"),
    ({**EXPERIMENT, "measure": {"stat": "average"}}, "measure", "stat must be one of"),
    ({**EXPERIMENT, "published_se": "0.1", "measure": {"stat": "successes", "rule": "sqrt"}},
     "published_se", "goes with a mean or a median"),
    ({**EXPERIMENT, "published_se": "0.1",
      "measure": {"stat": "se", "rule": "sqrt", "value": "final_loss"}},
     "published_se", "goes with a mean or a median"),
    ({**EXPERIMENT, "kind": "optimum", "measure": {}}, "measure", "needs stat, rule and at"),
])
def test_a_claim_whose_run_or_measure_is_wrong_is_refused_naming_the_field(
        tmp_path, claim, where, says) -> None:
    err = _refusal(tmp_path, {"claims": [INSPECT | {"id": "first"}, claim]})
    assert err.where == f"claims[{claim['id']!r}].{where}", str(err)
    assert err.problem.startswith(says), str(err)


def test_a_value_path_may_be_an_index_and_names_up_to_200_characters(tmp_path: Path) -> None:
    name = "r" * 200
    items = [{**INSPECT, "measure": {"value": 0}},
             {**SIMULATE, "measure": {"column": name, "rule": name, "se": name,
                                      "transform": "sqrt"}},
             {**PROBE, "params": {"text_preset": name, "text": "a b", "seed": 1}}]
    got = load_claims(_write(tmp_path, {"claims": items}))
    assert [c.measure for c in got[:2]] == [items[0]["measure"], items[1]["measure"]]


# -- the simulate measurer: a column of the summary row of its rule ---------------------------
SIM_PARAMS = {"d_k": 4, "n_keys": 4, "trials": 64, "seed": 3, "q_std": 2.0,
              "scalings": ["none", "sqrt"], "backend": "numpy"}


def _sim(measure: dict, published: str = "0", **kw) -> Claim:
    return Claim(id=kw.pop("id", "s"), where="w", text="t", kind="simulate",
                 params=kw.pop("params", SIM_PARAMS), measure=measure, published=published, **kw)


def _rows(params: dict = SIM_PARAMS) -> dict[str, dict]:
    from engine.config import SimulationConfig
    from engine.simulate import run_simulation

    snap = run_simulation(SimulationConfig.from_dict(params))
    return {row["scaling"]: row for row in snap.summary_rows()}


def test_a_simulate_claim_reads_its_rule_and_column() -> None:
    """The score variance of q.k over d_k = 4 dimensions, q of std 2, k of std 1, is
    4 * (2 * 1)^2 = 16 unscaled and 16 / 4 = 4 after 1/sqrt(d_k): the theory columns."""
    first, sqrt, root, n = check_claims([
        _sim({"column": "logit_var_theory"}, "16"),  # no rule: the first one run (none)
        _sim({"column": "logit_var_theory", "rule": "sqrt"}, "4", id="b"),
        _sim({"column": "logit_var_theory", "rule": "sqrt", "transform": "sqrt"}, "2", id="c"),
        _sim({"column": "trials", "rule": "sqrt"}, "640", scale=10.0, id="d")])
    assert (first.measured, first.se, first.status) == (pytest.approx(16.0), 0.0, "ok")
    assert (sqrt.measured, sqrt.status) == (pytest.approx(4.0), "ok")
    assert (root.measured, root.se, root.status) == (pytest.approx(2.0), 0.0, "ok")
    assert (n.measured, n.status, n.tolerance) == (640.0, "ok", 0.5)


def test_a_simulate_claim_carries_the_standard_error_of_its_column() -> None:
    """A variance's SE column; under "sqrt" the std's SE by the delta method, SE / (2 sqrt(v));
    a negative scale flips the figure, never its SE."""
    row = _rows()["sqrt"]
    v, se = row["logit_var"], row["logit_var_se"]
    assert 0 < se < v  # (a Monte-Carlo figure: the test means something)
    var, std, flipped = check_claims([
        _sim({"column": "logit_var", "se": "logit_var_se", "rule": "sqrt"}),
        _sim({"column": "logit_var", "se": "logit_var_se", "rule": "sqrt",
              "transform": "sqrt"}, id="b"),
        _sim({"column": "logit_var", "se": "logit_var_se", "rule": "sqrt"}, scale=-2.0,
             id="c")])
    assert (var.measured, var.se) == (pytest.approx(v, rel=1e-12), pytest.approx(se, rel=1e-12))
    assert var.tolerance == pytest.approx(0.5 + 3 * se)
    assert std.measured == pytest.approx(math.sqrt(v), rel=1e-12)
    assert std.se == pytest.approx(se / (2 * math.sqrt(v)), rel=1e-12)
    assert (flipped.measured, flipped.se) == (pytest.approx(-2 * v), pytest.approx(2 * se))


def test_a_zero_variance_has_a_zero_standard_error_under_sqrt(monkeypatch) -> None:
    """sqrt(0) = 0 and its delta-method SE would divide by zero: it is 0."""
    import engine.simulate as simulate

    rows = [{"scaling": "none", "v": 0.0, "v_se": 0.5}, {"scaling": "sqrt", "v": 9.0, "v_se": 3.0},
            {"scaling": "logn", "v": 0.25, "v_se": 0.1}]
    monkeypatch.setattr(simulate, "run_simulation",
                        lambda cfg: SimpleNamespace(summary_rows=lambda: rows))
    root = {"column": "v", "se": "v_se", "transform": "sqrt"}
    zero, nine, quarter = check_claims([_sim(root), _sim({**root, "rule": "sqrt"}, id="b"),
                                        _sim({**root, "rule": "logn"}, id="c")])
    assert (zero.measured, zero.se) == (0.0, 0.0)
    assert (nine.measured, nine.se) == (3.0, 3.0 / 6.0)
    assert (quarter.measured, quarter.se) == (0.5, pytest.approx(0.1 / (2 * 0.5)))  # below 1 too


@pytest.mark.parametrize(("measure", "says"), [
    ({"column": "logit_var", "rule": "dk"}, "claim 's': rule 'dk' was not run"),
    ({"column": "speed", "rule": "sqrt"}, "claim 's': no column 'speed' in summary.csv"),
])
def test_a_simulate_claim_the_run_cannot_answer_is_refused(monkeypatch, measure, says) -> None:
    import engine.simulate as simulate

    rows = [{"scaling": "none", "logit_var": 1.0}, {"scaling": "sqrt", "logit_var": 2.0}]
    monkeypatch.setattr(simulate, "run_simulation",
                        lambda cfg: SimpleNamespace(summary_rows=lambda: rows))
    with pytest.raises(ConfigError) as err:
        list(check_claims([_sim(measure)]))
    assert (err.value.field, err.value.message) == ("claims", says)


def test_a_simulation_runs_once_per_parameters(monkeypatch) -> None:
    import engine.simulate as simulate

    ran = []

    def run(cfg):
        ran.append((cfg.d_k, cfg.trials))
        return SimpleNamespace(summary_rows=lambda: [{"scaling": "sqrt", "d_k": cfg.d_k}])

    monkeypatch.setattr(simulate, "run_simulation", run)
    other = {**SIM_PARAMS, "d_k": 8}
    reordered = dict(reversed(SIM_PARAMS.items()))  # the same parameters: the same run
    got = check_claims([_sim({"column": "d_k"}, "4"), _sim({"column": "d_k"}, "4", id="b"),
                        _sim({"column": "d_k"}, "8", id="c", params=other),
                        _sim({"column": "d_k"}, "4", id="d", params=reordered)])
    assert [c.measured for c in got] == [4.0, 4.0, 8.0, 4.0]
    assert ran == [(4, 64), (8, 64)]


# -- check_claims: the order of things, what is skipped or failed, the pool ---------------------
def test_the_cancel_flag_is_asked_before_each_claim(monkeypatch) -> None:
    asked = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) > 1

    ins = Claim(id="i", where="w", text="t", kind="inspect", params={"scores": [0.0, 0.0]},
                measure={"value": "top_weight"}, published="0.5")
    gen = check_claims([ins, ins], cancelled=cancelled)
    assert next(gen).status == "ok"
    with pytest.raises(Cancelled):
        next(gen)
    assert len(asked) == 2
    (check,) = check_claims([ins], cancelled=lambda: False)
    assert check.measured == 0.5


def test_unavailable_is_skipped_a_failed_run_fails_and_the_rest_go_on(monkeypatch) -> None:
    def unavailable(claim, cache):
        raise claims_module.Unavailable("no model here")

    def failed(claim, cache):
        raise claims_module.MeasurementFailed("2 of 4 jobs failed")

    monkeypatch.setitem(claims_module.MEASURERS, "probe", unavailable)
    monkeypatch.setitem(claims_module.MEASURERS, "coord", failed)
    monkeypatch.setitem(claims_module.MEASURERS, "simulate", lambda claim, cache: (2.0, 0.25))
    make = lambda kind, i, **kw: Claim(id=i, where="w", text="t", kind=kind, params={},  # noqa: E731
                                       measure={}, published="2", **kw)
    probe, coord, sim, slow, fast_one = check_claims(
        [make("probe", "a"), make("coord", "b"), make("simulate", "c", scale=-1.0),
         make("simulate", "d", slow=True), make("simulate", "e")], fast=True)
    assert (probe.status, probe.measured, probe.note) == ("skipped", None, "unavailable: no model here")
    assert (probe.se, math.isnan(probe.tolerance), probe.claim.id) == (0.0, True, "a")
    assert (coord.status, coord.measured, coord.note) == ("FAIL", None, "2 of 4 jobs failed")
    assert (coord.se, math.isnan(coord.tolerance), coord.claim.id) == (0.0, True, "b")
    assert (sim.measured, sim.se, sim.status) == (-2.0, 0.25, "FAIL")  # scaled by -1: -2 vs 2
    assert (slow.status, slow.measured, slow.note) == ("skipped", None, "slow: skipped under --fast")
    assert (slow.se, math.isnan(slow.tolerance), slow.claim.id) == (0.0, True, "d")
    assert (fast_one.status, fast_one.measured, fast_one.se) == ("ok", 2.0, 0.25)
    (not_fast,) = check_claims([make("simulate", "d", slow=True)])
    assert (not_fast.status, not_fast.measured) == ("ok", 2.0)


# -- the experiment measurer: its run's plumbing, on stubs -------------------------------------
def _exp_claim(measure: dict | None = None, published: str = "1.5", **kw) -> Claim:
    return Claim(id=kw.pop("id", "e"), where="w", text="t", kind="experiment",
                 params={"spec": TINY}, published=published,
                 measure=measure or {"stat": "mean", "rule": "sqrt", "value": "final_loss"}, **kw)


def _job_result(seed: int, loss: float, **kw) -> dict:
    return {"index": seed, "key": f"seed={seed}", "values": {"seed": seed},
            "rules": {"sqrt": {"steps_to_target": None, "final_loss": loss},
                      "none": {"steps_to_target": None, "final_loss": 10 * loss}},
            "rows": [], "error": None, "fingerprint": f"fp seed={seed}", **kw}


@pytest.fixture
def fake_runner(monkeypatch) -> dict:
    """run_experiment, scan_results, the fingerprint and the pool replaced by recorders: what
    is tested is what the measurer asks of them and what it makes of their answers."""
    import engine.experiments.pool as pool
    import engine.experiments.runner as runner

    state: dict = {"cached": {}, "runs": [], "scans": [], "pools": [], "stops": [],
                   "results": [_job_result(0, 1.0), _job_result(1, 2.0)], "cancelled": False}

    class Pool:
        def __init__(self, workers: int) -> None:
            self.workers, self.shut = workers, None

        def shutdown(self, wait: bool) -> None:
            self.shut = wait

    def process_pool(workers: int) -> Pool:
        state["pools"].append(Pool(workers))
        return state["pools"][-1]

    def scan(spec, out, fingerprints=False):
        state["scans"].append((spec.name, out, fingerprints))
        return state["cached"], []

    def run(spec, out, **kw):
        state["runs"].append({"spec": spec, "out": out, **kw})
        yield SimpleNamespace(cancelled=False, results=[], total=2)  # (an early snapshot)
        yield SimpleNamespace(cancelled=state["cancelled"], results=state["results"], total=2)

    monkeypatch.setattr(runner, "run_experiment", run)
    monkeypatch.setattr(runner, "scan_results", scan)
    monkeypatch.setattr(runner, "expected_fingerprint", lambda job: f"fp {job.key}")
    monkeypatch.setattr(pool, "process_pool", process_pool)
    monkeypatch.setattr(pool, "default_workers", lambda: 3)
    monkeypatch.setattr(pool, "stop_executor",
                        lambda ex, owned, futures: state["stops"].append((ex, owned, futures)))
    return state


def test_an_experiment_claim_is_judged_on_the_last_snapshot(fake_runner) -> None:
    """Final losses 1 and 2 of rule sqrt: mean 1.5, SE = stdev / sqrt(2) = 0.5; judged over
    seeds (rounding 0.05 + 3 * sqrt(0.5^2 + 0.5^2))."""
    mean, n, none = check_claims([
        _exp_claim(), _exp_claim({"stat": "n", "rule": "sqrt"}, "2", id="n"),
        _exp_claim({"stat": "mean", "rule": "none", "value": "final_loss"}, "15", id="none")])
    assert (mean.measured, mean.se, mean.status) == (1.5, pytest.approx(math.sqrt(0.5)), "ok")
    assert mean.tolerance == pytest.approx(0.05 + 3 * math.sqrt(0.5))
    assert (n.measured, n.status, n.tolerance) == (2.0, "ok", 0.5)
    assert none.measured == 15.0
    (run,) = fake_runner["runs"]  # three claims, one run, on the CPU, with fingerprints
    assert run["spec"].name == "tiny" and run["spec"].base.device == "cpu"
    assert (run["out"], run["resume"], run["fingerprints"], run["workers"]) == (
        None, False, True, None)
    assert run["cancelled"] is None and fake_runner["scans"] == []
    (pool,) = fake_runner["pools"]  # two jobs pending: a pool of default_workers, shut after
    assert run["executor"] is pool and (pool.workers, pool.shut) == (3, True)
    assert fake_runner["stops"] == []


def test_two_experiments_are_two_runs(fake_runner) -> None:
    three = {**TINY, "axes": {"seed": [0, 1, 2]}}
    claims = [_exp_claim(), _exp_claim(id="f"),
              Claim(id="g", where="w", text="t", kind="experiment", params={"spec": three},
                    measure={"stat": "n", "rule": "sqrt"}, published="2")]
    assert [c.measured for c in check_claims(claims)] == [1.5, 1.5, 2.0]
    assert [len(r["spec"].jobs()) for r in fake_runner["runs"]] == [2, 3]


def test_an_experiment_uses_its_cache_folder_and_says_what_it_runs(fake_runner, tmp_path) -> None:
    notes: list[str] = []
    flag = lambda: False  # noqa: E731
    fake_runner["cached"] = {"seed=0": {}}
    (check,) = check_claims([_exp_claim()], workers=2, cache_dir=str(tmp_path), note=notes.append,
                            cancelled=flag)
    assert check.measured == 1.5
    assert notes == ["experiment tiny: running 1 of 2 jobs on 2 worker(s)"]
    assert fake_runner["scans"] == [("tiny", tmp_path / "tiny", True)]
    (run,) = fake_runner["runs"]
    assert (run["out"], run["resume"], run["workers"], run["cancelled"]) == (
        tmp_path / "tiny", True, 2, flag)
    assert [p.workers for p in fake_runner["pools"]] == [2]
    notes.clear()
    list(check_claims([_exp_claim()], cache_dir=tmp_path, note=notes.append))
    assert notes == ["experiment tiny: running 1 of 2 jobs on 3 worker(s)"]  # default_workers


def test_an_experiment_all_in_the_cache_starts_no_pool_and_says_nothing(fake_runner,
                                                                         tmp_path) -> None:
    notes: list[str] = []
    fake_runner["cached"] = {"seed=0": {}, "seed=1": {}}
    (check,) = check_claims([_exp_claim()], cache_dir=tmp_path, note=notes.append)
    assert check.measured == 1.5 and notes == [] and fake_runner["pools"] == []
    assert fake_runner["runs"][0]["executor"] is None


def test_a_cancelled_experiment_raises_and_ends_its_pool(fake_runner) -> None:
    fake_runner["cancelled"] = True
    with pytest.raises(Cancelled):
        list(check_claims([_exp_claim()]))
    (pool,) = fake_runner["pools"]
    assert fake_runner["stops"] == [(pool, True, [])] and pool.shut is None


def test_a_consumer_that_stops_early_ends_the_pool_at_once(fake_runner) -> None:
    gen = check_claims([_exp_claim(), _exp_claim(id="f")])
    next(gen)
    gen.close()
    (pool,) = fake_runner["pools"]
    assert fake_runner["stops"] == [(pool, True, [])] and pool.shut is None


@pytest.mark.parametrize(("results", "note"), [
    ([_job_result(0, 1.0), _job_result(1, 2.0, error="boom")],
     "1 of 2 jobs of 'tiny' failed: boom"),
    ([_job_result(0, 1.0, error="first"), _job_result(1, 2.0, error="second")],
     "2 of 2 jobs of 'tiny' failed: first"),
    ([_job_result(0, 1.0), _job_result(1, 2.0, fingerprint="elsewhere", kernels="aten=AVX512")],
     "1 of 2 jobs of 'tiny' ran under another fingerprint (aten=AVX512)"),
    ([_job_result(0, 1.0, fingerprint=None), _job_result(1, 2.0, fingerprint="x")],
     "2 of 2 jobs of 'tiny' ran under another fingerprint (None)"),
])
def test_failed_or_foreign_jobs_fail_every_claim_of_the_experiment(fake_runner, results,
                                                                   note) -> None:
    fake_runner["results"] = results
    first, second = check_claims([_exp_claim(), _exp_claim({"stat": "n", "rule": "sqrt"}, "2",
                                                           id="n")])
    assert (first.status, first.measured, first.note) == ("FAIL", None, note)
    assert (second.status, second.note) == ("FAIL", note)
    assert len(fake_runner["runs"]) == 1  # remembered, not rerun


# -- the probe measurer: a preset text, the summary's field path, a missing model --------------
@pytest.fixture
def fake_probe(monkeypatch) -> dict:
    """The probe's analysis replaced by a summary of fixed numbers; the presets by two texts."""
    import engine.probe.analyze as analyze
    import engine.probe.config as config
    import engine.probe.loader as loader
    import engine.probe.summary as summary
    import engine.probe.texts as texts

    state: dict = {"configs": [], "fail": None}

    @dataclasses.dataclass
    class Summary:
        ratio: float
        layers: list

    def probe_config(**kw):
        state["configs"].append(kw)
        return kw

    def run_to_result(gen):
        if state["fail"] is not None:
            raise state["fail"]
        return gen

    monkeypatch.setattr(loader, "models_extra_available", lambda: True)
    monkeypatch.setattr(texts, "load_text_presets",
                        lambda: [("other (long)", "text B"), ("short (a note)", "text A"),
                                 ("short", "text C"), ("two words (a note)", "text D")])
    monkeypatch.setattr(config, "ProbeConfig", probe_config)
    monkeypatch.setattr(analyze, "analyze", lambda cfg: ("analysed", cfg))
    monkeypatch.setattr(analyze, "run_to_result", run_to_result)
    monkeypatch.setattr(summary, "summarize",
                        lambda result: Summary(1.25, [{"std": 0.5}, {"std": 0.75}]))
    return state


def _probe(params: dict, value: str = "ratio", published: str = "1.25", **kw) -> Claim:
    return Claim(id=kw.pop("id", "p"), where="w", text="t", kind="probe", params=params,
                 measure={"value": value}, published=published, **kw)


def test_a_probe_claim_reads_its_figure_on_its_preset_text(fake_probe) -> None:
    ratio, std, again = check_claims([
        _probe({"text_preset": "short", "seed": 2}),
        _probe({"text_preset": "short", "seed": 2}, "layers.1.std", "0.75", id="q"),
        _probe({"text": "own text"}, "layers.0.std", "0.5", id="r", scale=2.0)])
    assert (ratio.measured, ratio.se, ratio.status) == (1.25, 0.0, "ok")
    assert (std.measured, std.status) == (0.75, "ok")
    assert (again.measured, again.status) == (1.0, "FAIL")  # 2 * 0.5 vs 0.5
    # the first preset whose name (up to " (") matches; one analysis per parameters
    assert fake_probe["configs"] == [{"text": "text A", "seed": 2}, {"text": "own text"}]
    (two,) = check_claims([_probe({"text_preset": "two words"})])  # a name with a space
    assert two.measured == 1.25 and fake_probe["configs"][-1] == {"text": "text D"}


def test_a_probe_claim_of_an_unknown_preset_is_refused(fake_probe) -> None:
    with pytest.raises(ConfigError) as err:
        list(check_claims([_probe({"text_preset": "long"})]))
    assert (err.value.field, err.value.message) == ("claims", "claim 'p': no probe text named 'long'")


def test_a_probe_claim_without_the_models_extra_is_skipped(fake_probe, monkeypatch) -> None:
    import engine.probe.loader as loader

    monkeypatch.setattr(loader, "models_extra_available", lambda: False)
    (check,) = check_claims([_probe({"text": "x"})])
    assert (check.status, check.note) == ("skipped", "unavailable: the models extra is not installed")
    assert fake_probe["configs"] == []


@pytest.mark.parametrize(("error", "skipped"), [
    (FileFormatError("model/config.json", "", "not found", "model"), "model/config.json: not found"),
    (FileFormatError("x.json", "", "not found", "text"), ""),
    (ConfigError("model", "no such folder"), "no such folder"),
    (ConfigError("seed", "must be an integer"), ""),
])
def test_only_a_missing_model_skips_a_probe_claim(fake_probe, error, skipped) -> None:
    """A model file (the file's line) or the model field (its message) is unavailable."""
    fake_probe["fail"] = error
    if skipped:
        (check,) = check_claims([_probe({"text": "x"})])
        assert (check.status, check.note) == ("skipped", f"unavailable: {skipped}")
    else:
        with pytest.raises(ConfigError) as err:
            list(check_claims([_probe({"text": "x"})]))
        assert err.value is error
