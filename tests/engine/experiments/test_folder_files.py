"""experiment.json and the job files read from hand-written files (no training, about 1 s):
every limit of a job file at its value and one past it, each refusal's words, what a taken job
holds; test_folder.py checks the same against a real run and its resume (13 s)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import engine.experiments.folder as folder_module
from engine.errors import ConfigError, FileFormatError
from engine.experiments.folder import read_experiment, read_job_file, same_config, scan_job_files
from engine.experiments.spec import Axis, ExperimentSpec
from engine.training.config import TrainingConfig
from engine.training.observe import CSV_COLUMNS

BASE = TrainingConfig(d_model=16, heads=2, items_max=5, classes=4, key_dim=4,
                      scalings=("none", "sqrt"), steps=8, log_every=4, batch=8, probe_size=4,
                      hist_bins=20, device="cpu")
SPEC = ExperimentSpec("tiny", BASE, (Axis("seed", (0, 1)),))
JOBS = {j.index: j for j in SPEC.jobs()}
#: result fields of one rule (engine.experiments.job.RESULT_FIELDS, written out)
RESULT = {"final_loss": 0.5, "final_accuracy": 0.75, "probe_accuracy": 0.5, "steps_to_target": 4,
          "max_logit_abs": 3.0, "max_logit_std": 1.0, "min_entropy_norm": 0.5,
          "diverged_step": None, "collapsed": False, "seconds": 1.0, "clip_events": 0}


def job_data(index: int = 1, spec: ExperimentSpec = SPEC) -> dict:
    """A complete job file of job ``index``: both rules, one row per rule and log step 0, 4, 8."""
    job = {j.index: j for j in spec.jobs()}[index]
    rows = [{**dict.fromkeys(CSV_COLUMNS, 0.25), "scaling": r, "step": s, "temperature": ""}
            for r in ("none", "sqrt") for s in (0, 4, 8)]
    return {"index": index, "key": f"seed={index}", "values": {"seed": index},
            "config": job.config.to_dict(), "target": 0.9,
            "rules": {"none": dict(RESULT), "sqrt": dict(RESULT)}, "rows": rows, "seconds": 2.0,
            "device": "cpu", "kernels": "k", "fingerprint": "f", "error": None,
            "traceback": "", "cancelled": False}


def _write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _read(tmp_path: Path, data, spec: ExperimentSpec = SPEC) -> dict:
    path = _write(tmp_path / "jobs" / "job-00001.json", data)
    return read_job_file(path, spec, {j.index: j for j in spec.jobs()})


def _reason(tmp_path: Path, data, spec: ExperimentSpec = SPEC) -> str:
    with pytest.raises(ConfigError) as info:
        _read(tmp_path, data, spec)
    assert info.value.field == "job"
    return info.value.message


def test_a_complete_job_is_taken_with_the_jobs_own_values(tmp_path):
    data = job_data()
    data["values"] = {"seed": 1.0}  # equal to the job's 1, but the job's own value is returned
    res = _read(tmp_path, data)
    assert res["values"] == {"seed": 1} and type(res["values"]["seed"]) is int
    assert res["rules"] == data["rules"] and res["rows"] == data["rows"]
    assert res["key"] == "seed=1" and res["seconds"] == 2.0


def test_a_failed_job_needs_no_results(tmp_path):
    data = {**job_data(), "rules": {}, "rows": [], "error": "boom"}
    assert _read(tmp_path, data)["error"] == "boom"
    assert _reason(tmp_path, {**data, "error": None}) == "rules.none: required, but missing"


@pytest.mark.parametrize(("change", "reason"), [
    (lambda d: {**d, "index": True}, "not a job of this grid"),  # (True == 1, but not an index)
    (lambda d: {**d, "index": 2}, "not a job of this grid"),
    (lambda d: {k: v for k, v in d.items() if k != "index"}, "not a job of this grid"),
    (lambda d: {**d, "key": "seed=0"}, "not a job of this grid"),
    (lambda d: {**d, "config": {**d["config"], "lr": 0.5}},
     "its training config differs from this experiment's (another version of the experiment or "
     "of the app)"),
    (lambda d: {**d, "config": "abc"}, "its training config differs"),
    (lambda d: {**d, "config": {**d["config"], "steps": "x"}}, "its training config differs"),
    (lambda d: {**d, "values": {"seed": 0}}, "values: not the job's axis values"),
    (lambda d: [d], "not a job file (a JSON list, not an object)"),
    (lambda d: "{", "not a job file ("),
])
def test_what_makes_a_file_not_this_jobs(tmp_path, change, reason):
    got = _reason(tmp_path, change(job_data()))
    assert got.startswith(reason), got


def test_a_file_too_large_is_refused_unread(tmp_path, monkeypatch):
    path = _write(tmp_path / "jobs" / "job-00001.json", job_data())
    size = path.stat().st_size
    monkeypatch.setattr(folder_module, "JOB_FILE_MAX", size)
    assert read_job_file(path, SPEC, JOBS)["index"] == 1
    monkeypatch.setattr(folder_module, "JOB_FILE_MAX", size - 1)
    with pytest.raises(ConfigError) as info:
        read_job_file(path, SPEC, JOBS)
    assert info.value.message == (f"not a job file ({size:,} bytes, more than the {size - 1:,} "
                                  "any job file needs (refused unread))")


def test_a_config_without_a_newer_field_is_the_same_config():
    saved = JOBS[1].config.to_dict()
    del saved["grad_clip"]  # (0 by default: a file written before the field existed)
    assert same_config(saved, JOBS[1])
    assert not same_config({**saved, "grad_clip": 1.0}, JOBS[1])
    assert not same_config(["steps", 8], JOBS[1]) and not same_config(None, JOBS[1])


_DROP = object()


def _edit(path: str, value=_DROP):
    """A change of a job file's data: ``value`` put at ``path`` (keys and list indexes split by
    '/'), or the entry there removed."""
    *parents, last = [int(p) if p.isdigit() else p for p in path.split("/")]

    def change(d):
        node = d
        for p in parents:
            node = node[p]
        if value is _DROP:
            del node[last]
        else:
            node[last] = value
        return d
    return change


_set = _edit


def _drop(path: str):
    return _edit(path)


@pytest.mark.parametrize(("change", "reason"), [
    # a job file's own keys: which are required, their types and limits
    (_drop("rows"), "rows: required, but missing"),
    (_drop("error"), "error: required, but missing"),
    (_drop("rules"), "rules: required, but missing"),
    (_drop("values"), "values: required, but missing"),
    (_set("bogus", 1), "bogus: unknown key of a job file (known: cancelled, config, device, "
                       "error, fingerprint, index, kernels, key, rows, rules, seconds, target, "
                       "traceback, values)"),
    (_set("target", "x"), "target: must be a number, got 'x'"),
    (_set("seconds", -0.5), "seconds: must be a number in [0, None], got -0.5"),
    (_set("device", "d" * 201), "device: a string of 201 characters, more than 200"),
    (_set("kernels", "k" * 201), "kernels: a string of 201 characters, more than 200"),
    (_set("fingerprint", "f" * 201), "fingerprint: a string of 201 characters, more than 200"),
    (_set("error", "e" * 100_001), "error: a string of 100,001 characters, more than 100,000"),
    (_set("error", 5), "error: must be a string or null, got 5"),
    (_set("traceback", "t" * 100_001),
     "traceback: a string of 100,001 characters, more than 100,000"),
    (_set("cancelled", 0), "cancelled: must be true or false, got 0"),
    # a rule's results
    (_set("rules/third", dict(RESULT)), "rules.third: must be one of none, sqrt; got 'third'"),
    (_set("rules/" + "r" * 101, dict(RESULT)),
     f"rules.{'r' * 40}…: a string of 101 characters, more than 100"),  # (the path cut)
    (_drop("rules/sqrt/clip_events"), "rules.sqrt.clip_events: required, but missing"),
    (_set("rules/sqrt/bogus", 1), "rules.sqrt.bogus: unknown result (known: "),
    (_set("rules/sqrt/final_loss", "x"), "rules.sqrt.final_loss: must be a number or null"),
    (_set("rules/sqrt/steps_to_target", -1),
     "rules.sqrt.steps_to_target: must be an integer in [0, ], got -1"),
    (_set("rules/sqrt/steps_to_target", 2.5), "rules.sqrt.steps_to_target: must be an integer"),
    (_set("rules/sqrt/diverged_step", -1),
     "rules.sqrt.diverged_step: must be an integer in [0, ], got -1"),
    (_set("rules/sqrt/collapsed", None), "rules.sqrt.collapsed: must be true or false, got null"),
    (_set("rules/sqrt/seconds", -1), "rules.sqrt.seconds: must be a number in [0, None], got -1"),
    (_set("rules/sqrt/seconds", None), "rules.sqrt.seconds: must be a number, got null"),
    (_set("rules/sqrt/accuracy_len6", 0.5), "rules.sqrt.accuracy_len6: unknown result"),
    # the logged rows
    (_set("rows/0/scaling", "dk"), "rows[0].scaling: must be one of none, sqrt; got 'dk'"),
    (_set("rows/0/scaling", "n" * 101), "rows[0].scaling: a string of 101 characters, more than 100"),
    (_drop("rows/0/scaling"), "rows[0].scaling: required, but missing"),
    (_drop("rows/0/step"), "rows[0].step: required, but missing"),
    (_set("rows/0/step", 9), "rows[0].step: must be an integer in [0, 8], got 9"),
    (_set("rows/0/step", -1), "rows[0].step: must be an integer in [0, 8], got -1"),
    (_set("rows/0/loss", "x"), 'rows[0].loss: must be a number or "", got \'x\''),
    (_set("rows/0/bogus", 1), "rows[0].bogus: unknown column (known: "),
    (_set("rows/0/accuracy_len6", 0.5), "rows[0].accuracy_len6: unknown column"),
    (lambda d: {**d, "rows": [*d["rows"], {"scaling": "none", "step": 2}]},
     "rows: a list of 7 items, more than 6"),
    # consistent: each rule, each (rule, step) once
    (_drop("rules/sqrt"), "rules.sqrt: required, but missing"),
    (lambda d: {**d, "rules": {}}, "rules.none: required, but missing"),
    (_set("rows/4", {"scaling": "sqrt", "step": 0}), "rows[4]: a second row of sqrt at step 0"),
])
def test_each_refusal_of_a_job_file_names_where_and_what(tmp_path, change, reason):
    got = _reason(tmp_path, change(copy.deepcopy(job_data())))
    assert got.startswith(reason), got


def test_the_edges_of_a_job_file_are_taken(tmp_path):
    data = job_data()
    data.update(device="d" * 200, kernels="k" * 200, fingerprint="f" * 200, seconds=0,
                traceback="t" * 100_000)
    data["rules"]["sqrt"].update(steps_to_target=0, diverged_step=0, seconds=0)
    data["rows"][0].update(step=0, loss="")
    data["rows"][5].update(step=8)
    assert _read(tmp_path, data)["device"] == "d" * 200
    assert _read(tmp_path, {**job_data(), "rules": {}, "rows": [], "error": "e" * 100_000})
    # a row of each rule at each step, in any order; rows left out are fine
    rows = job_data()["rows"]
    assert len(_read(tmp_path, {**job_data(), "rows": rows[::-1]})["rows"]) == 6
    assert _read(tmp_path, {**job_data(), "rows": rows[:1]})["rows"] == rows[:1]


def test_the_evaluation_lengths_add_their_result_fields_and_columns(tmp_path):
    spec = ExperimentSpec("tiny", BASE.replace(eval_lengths=(6,)), (Axis("seed", (0, 1)),))
    data = job_data(spec=spec)
    data["rules"]["sqrt"].update(accuracy_len6=0.5, entropy_norm_len6=None)
    data["rows"][0].update(accuracy_len6=0.5, entropy_norm_len6="")
    res = _read(tmp_path, data, spec)
    assert res["rules"]["sqrt"]["accuracy_len6"] == 0.5
    assert "accuracy_len6" not in res["rules"]["none"]  # (optional: an earlier version's job)
    data["rules"]["none"]["entropy_norm_len6"] = "x"
    assert _reason(tmp_path, data, spec).startswith(
        "rules.none.entropy_norm_len6: must be a number or null")


# -- scanning a folder -----------------------------------------------------------------------
def test_a_folder_without_jobs_has_none(tmp_path):
    assert scan_job_files(SPEC, tmp_path) == ({}, [])
    (tmp_path / "jobs").write_text("not a folder")
    assert scan_job_files(SPEC, tmp_path) == ({}, [])


def test_a_scan_takes_each_job_once_and_names_each_file_it_leaves(tmp_path):
    jobs = tmp_path / "jobs"
    _write(jobs / "job-00000.json", job_data(0))
    _write(jobs / "job-00000a.json", [1])  # a bad file before a good one: the scan goes on
    _write(jobs / "job-00001.json", job_data(1))
    _write(jobs / "job-00001b.json", job_data(1))  # a second file of job 1 (read after)
    _write(jobs / "job-00002.json", {**job_data(1), "index": 2})
    _write(jobs / "other.json", "{")  # not a job file's name: not read
    found, ignored = scan_job_files(SPEC, tmp_path)
    assert sorted(found) == ["seed=0", "seed=1"]
    assert found["seed=0"]["index"] == 0 and found["seed=1"]["values"] == {"seed": 1}
    assert ignored == ["job-00000a.json: not a job file (a JSON list, not an object)",
                       "job-00001b.json: a second file of job 1",
                       "job-00002.json: not a job of this grid"]


# -- experiment.json -------------------------------------------------------------------------
def _json(data):
    return json.loads(json.dumps(data))


def _experiment(**extra) -> dict:
    return {"experiment": SPEC.to_dict(), "status": "finished", "jobs": 2, "done": 2,
            "failed": 0, "workers": 1, "executor": "process", "versions": {"numpy": "2.0"},
            **extra}


def test_a_folder_or_its_file_or_the_spec_alone(tmp_path):
    _write(tmp_path / "experiment.json", _experiment())
    spec, data = read_experiment(tmp_path)
    assert spec == SPEC and data == _json(_experiment())  # (the whole file, as JSON reads it)
    assert read_experiment(tmp_path / "experiment.json")[0] == SPEC
    alone = _write(tmp_path / "spec.json", SPEC.to_dict())
    spec, data = read_experiment(alone)
    assert spec == SPEC and data == {"experiment": _json(SPEC.to_dict())}


def _experiment_problem(tmp_path: Path, data, option: str = "") -> FileFormatError:
    path = _write(tmp_path / "experiment.json", data)
    with pytest.raises(FileFormatError) as info:
        read_experiment(tmp_path, option) if option else read_experiment(tmp_path)
    assert info.value.file == str(path) and info.value.option == option
    return info.value


@pytest.mark.parametrize(("data", "where", "problem"), [
    ({"experiment": {"base": {}}}, "experiment.name", "required, but missing"),
    ({"experiment": {"name": "x"}}, "experiment.base", "required, but missing"),
    (_experiment(status="s" * 101), "status", "a string of 101 characters, more than 100"),
    (_experiment(executor="e" * 101), "executor", "a string of 101 characters, more than 100"),
    (_experiment(jobs=-1), "jobs", "must be an integer in [0, ], got -1"),
    (_experiment(done=-1), "done", "must be an integer in [0, ], got -1"),
    (_experiment(failed=-1), "failed", "must be an integer in [0, ], got -1"),
    (_experiment(workers=-1), "workers", "must be an integer in [0, ], got -1"),
    (_experiment(versions={"numpy": "v" * 201}), "versions.numpy",
     "a string of 201 characters, more than 200"),
    (_experiment(bogus=1), "bogus", "unknown key of experiment.json (known: done, executor, "
                                    "experiment, failed, jobs, status, versions, workers)"),
    ({"status": "finished", "experiment": {"name": "x", "base": {"steps": 0}}},
     "experiment.base.steps", "must be from 1 to 1,000,000, got 0"),
])
@pytest.mark.parametrize("option", ["", "resume"])
def test_a_bad_experiment_json_names_the_file_the_field_and_the_option(tmp_path, data, where,
                                                                       problem, option):
    err = _experiment_problem(tmp_path, data, option)
    assert (err.where, err.problem) == (where, problem)


def test_the_edges_of_experiment_json_are_taken(tmp_path):
    data = _experiment(status="s" * 100, executor="e" * 100, jobs=0, done=0, failed=0, workers=0,
                       versions={"numpy": "v" * 200})
    _write(tmp_path / "experiment.json", data)
    assert read_experiment(tmp_path)[1] == _json(data)


def test_experiment_json_up_to_8_million_bytes(tmp_path):
    head = json.dumps(_experiment())
    path = _write(tmp_path / "experiment.json", head + " " * (8_000_000 - len(head)))
    assert path.stat().st_size == 8_000_000 and read_experiment(tmp_path)[0] == SPEC
    _write(path, head + " " * (8_000_001 - len(head)))
    err = _experiment_problem(tmp_path, path.read_text(), "resume")
    assert err.problem == ("8,000,001 bytes, more than the 8,000,000 any experiment.json needs "
                           "(refused unread)")
