"""Reading an experiment folder (experiment.json, jobs/job-NNNNN.json, the progress files): every
file is untrusted input, read bounded (``engine.readers``) and checked completely before any of
it reaches the summaries, the figures or the page. A bad experiment.json is one
FileFormatError (``FILE: field path: what is wrong``); a bad job file is not taken: its reason is
reported and the job runs again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, FileFormatError
from engine.experiments.job import RESULT_FIELDS, metrics_csv_columns
from engine.experiments.spec import ExperimentSpec, Job
from engine.readers.json_file import read_json
from engine.readers.schema import (
    AnyObject,
    Boolean,
    Int,
    ListOf,
    MapOf,
    Nullable,
    Number,
    OneOf,
    Record,
    SchemaError,
    Text,
    errors_in_file,
)

EXPERIMENT_FILE = "experiment.json"
JOBS_DIR = "jobs"
#: the largest experiment.json read (a spec and a few counts: a few kB; an axis of 100,000 values
#: about 1 MB)
EXPERIMENT_FILE_MAX = 8_000_000
#: the largest job file read (a job's logged rows: ~1 kB per rule and log; 64 MB is 60,000 logs)
JOB_FILE_MAX = 64_000_000

#: experiment.json: the spec and what the runner wrote about the run
EXPERIMENT_RECORD = Record({
    "experiment": AnyObject(), "status": Text(max_chars=100), "jobs": Int(lo=0),
    "done": Int(lo=0), "failed": Int(lo=0), "workers": Int(lo=0),
    "executor": Text(max_chars=100), "versions": MapOf(Text(max_chars=200)),
}, required=frozenset({"experiment"}), label="key of experiment.json")


def read_experiment(path: str | os.PathLike[str], option: str = "") -> tuple[ExperimentSpec, dict]:
    """(the spec, the whole file) of an experiment folder or an experiment.json. A file that
    holds the spec alone (no "experiment" key) is read as the spec."""
    path = Path(path)
    if path.is_dir():
        path = path / EXPERIMENT_FILE
    data = read_json(path, max_bytes=EXPERIMENT_FILE_MAX, kind="experiment.json", option=option)
    if isinstance(data, dict) and "experiment" not in data:
        data = {"experiment": data}
    with errors_in_file(str(path), option=option):
        EXPERIMENT_RECORD.check(data)
        for key in ("name", "base"):  # (the runner writes both: a file without is not one)
            if key not in data["experiment"]:
                raise ConfigError(f"experiment.{key}", "required, but missing")
    with errors_in_file(str(path), "experiment", option):
        spec = ExperimentSpec.from_dict(data["experiment"])
    return spec, data


def _result_schema(spec: ExperimentSpec) -> Record:
    """One rule's results in a job file: every RESULT_FIELDS entry, and those of the evaluation
    lengths (optional: a job of an earlier version may lack them)."""
    from engine.training.observe import length_columns

    number = Nullable(Number())
    step = Nullable(Int(lo=0))
    fields: dict[str, Any] = {name: number for name in RESULT_FIELDS}
    fields.update(steps_to_target=step, diverged_step=step, collapsed=Boolean(),
                  seconds=Number(lo=0))
    fields.update(dict.fromkeys(length_columns(spec.base.eval_lengths), number))
    return Record(fields, required=frozenset(RESULT_FIELDS), label="result")


def job_schema(spec: ExperimentSpec, job: Job) -> Record:
    """A job file of ``job``: its identity, its config, and its results: per rule (the config's
    rules, no others) and the logged rows (the metrics.csv columns: numbers, or "" where a log
    has no value; at most one row per rule and log step)."""
    rules = tuple(job.config.scalings)
    columns = metrics_csv_columns(job.config.eval_lengths)
    cell = OneOf((Number(), Text(max_chars=0)), what='a number or ""')
    row = Record({**dict.fromkeys(columns, cell),
                  "scaling": Text(max_chars=100, choices=rules),
                  "step": Int(lo=0, hi=job.config.steps)},
                 required=frozenset({"scaling", "step"}), label="column")
    max_rows = len(job.config.log_steps) * len(rules)
    return Record({
        "index": Int(), "key": Text(max_chars=10_000), "values": AnyObject(),
        "config": AnyObject(), "target": Number(),
        "rules": MapOf(_result_schema(spec), key=Text(max_chars=100, choices=rules),
                       max_items=len(rules)),
        "rows": ListOf(row, max_items=max_rows), "seconds": Number(lo=0),
        "device": Text(max_chars=200), "kernels": Text(max_chars=200),
        "fingerprint": Text(max_chars=200), "error": Nullable(Text(max_chars=100_000)),
        "traceback": Text(max_chars=100_000), "cancelled": Boolean(),
    }, required=frozenset({"index", "key", "values", "config", "rules", "rows", "error"}),
        label="key of a job file")


def same_config(saved: Any, job: Job) -> bool:
    """A saved job config matches when it rebuilds the same TrainingConfig: a file written before
    a field existed lacks it, and the field's default keeps the old behaviour (new knobs default
    off), so such a job still counts."""
    from engine.training.config import TrainingConfig

    try:
        return TrainingConfig.from_dict(saved) == job.config
    except (ConfigError, TypeError, ValueError):
        return False


def read_job_file(path: Path, spec: ExperimentSpec, jobs: dict[int, Job]) -> dict[str, Any]:
    """The result in a job file of ``spec``'s grid (``jobs`` by index), checked completely;
    ConfigError (the reason, without the file name) when it is not one to take."""
    try:
        res = read_json(path, max_bytes=JOB_FILE_MAX, kind="job file")
    except FileFormatError as exc:
        raise ConfigError("job", f"not a job file ({exc.message})") from None
    if not isinstance(res, dict):
        raise ConfigError("job", f"not a job file (a JSON {type(res).__name__}, not an object)")
    index = res.get("index")
    job = jobs.get(index) if isinstance(index, int) and not isinstance(index, bool) else None
    if job is None or res.get("key") != job.key:
        raise ConfigError("job", "not a job of this grid")
    if not same_config(res.get("config"), job):
        raise ConfigError("job", "its training config differs from this experiment's (another "
                                 "version of the experiment or of the app)")
    try:
        res = job_schema(spec, job).check(res)
    except SchemaError as exc:
        raise ConfigError("job", f"{exc.path}: {exc.message}") from None
    if res["values"] != job.values:
        raise ConfigError("job", "values: not the job's axis values")
    _check_consistent(res, job)
    return {**res, "values": dict(job.values)}  # (the job's own: 1 == True in a comparison)


def _check_consistent(res: dict[str, Any], job: Job) -> None:
    """A finished job has a result for each of its rules and its rows at distinct log steps; a
    failed one (``error``) has no results to draw."""
    if res["error"] is not None:
        return
    missing = [r for r in job.config.scalings if r not in res["rules"]]
    if missing:
        raise ConfigError("job", f"rules.{missing[0]}: required, but missing")
    seen = set()
    for i, row in enumerate(res["rows"]):
        key = (row["scaling"], row["step"])
        if key in seen:
            raise ConfigError("job", f"rows[{i}]: a second row of {row['scaling']} at step "
                                     f"{row['step']}")
        seen.add(key)


def scan_job_files(spec: ExperimentSpec, out_dir: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Finished jobs in ``out_dir/jobs`` that belong to this spec's grid, by job key, and one
    reason per job file not taken (another grid, a config this version cannot read, anything
    not a complete, consistent job file)."""
    jobs = {j.index: j for j in spec.jobs()}
    found: dict[str, dict[str, Any]] = {}
    ignored: list[str] = []
    folder = Path(out_dir) / JOBS_DIR
    if not folder.is_dir():
        return found, ignored
    for path in sorted(folder.glob("job-*.json")):
        try:
            res = read_job_file(path, spec, jobs)
        except ConfigError as exc:
            ignored.append(f"{path.name}: {exc.message}")
            continue
        if res["key"] in found:
            ignored.append(f"{path.name}: a second file of job {res['index']}")
            continue
        found[res["key"]] = res
    return found, ignored
