"""Experiment folders are untrusted input: experiment.json is one FileFormatError naming the
file and the field path; a job file is taken only when it is complete and consistent, else it
is reported with its reason and its job runs again (nothing crashes later in the summaries)."""

from __future__ import annotations

import concurrent.futures as cf
import copy
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from engine.errors import FileFormatError
from engine.experiments.runner import load_experiment, run_experiment, scan_results
from engine.experiments.spec import Axis, ExperimentSpec
from engine.experiments.summary import group_results, summary_rows
from engine.training.config import TrainingConfig

BASE = TrainingConfig(d_model=16, heads=2, items_max=5, classes=4, key_dim=4,
                      scalings=("none", "sqrt"), steps=8, log_every=4, batch=8, probe_size=4,
                      hist_bins=20, device="cpu")
SPEC = ExperimentSpec("tiny", BASE, (Axis("seed", (0, 1)),))


def _run(out: Path, resume: bool = False):
    with cf.ThreadPoolExecutor(1) as pool:  # (no worker processes: fast)
        return list(run_experiment(SPEC, out, executor=pool, resume=resume))


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("exp") / "tiny"
    assert _run(out)[-1].finished
    return out


@pytest.fixture
def folder(finished, tmp_path) -> Path:
    out = tmp_path / "tiny"
    shutil.copytree(finished, out)
    return out


def _edit_job(folder: Path, index: int, change) -> None:
    path = folder / "jobs" / f"job-{index:05d}.json"
    res = json.loads(path.read_text())
    changed = change(copy.deepcopy(res))
    path.write_text(changed if isinstance(changed, str) else json.dumps(changed))


def _set(path: str, value):
    """A change that puts ``value`` at ``path`` (keys and list indexes split by '/')."""
    def change(res):
        node = res
        parts = [int(p) if p.isdigit() else p for p in path.split("/")]
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = value
        return res
    return change


@pytest.mark.parametrize(("change", "reason"), [
    (_set("index", [0]), "not a job of this grid"),
    (_set("index", 0.5), "not a job of this grid"),
    (_set("rules", "abc"), "rules: must be an object"),
    (_set("rows", "abc"), "rows: must be a list"),
    (_set("rows", [1, 2, 3]), "rows[0]: must be an object"),
    (_set("values", "seed=0"), "values: must be an object"),
    (_set("values", {"seed": 0}), "values: not the job's axis values"),
    (_set("rules/sqrt/final_loss", "abc"), "rules.sqrt.final_loss: must be a number or null"),
    (_set("rules/sqrt/collapsed", None), "rules.sqrt.collapsed: must be true or false"),
    (_set("rules/bogus", {}), "rules.bogus: must be one of none, sqrt"),
    (_set("rows/0/scaling", "bogus"), "rows[0].scaling: must be one of none, sqrt"),
    (_set("rows/0/loss", [1]), "rows[0].loss: must be a number or"),
    (_set("rows/0/step", 10**6), "rows[0].step: must be an integer in [0, 8]"),
    (_set("rows/1", {"scaling": "none", "step": 0}), "rows[1]: a second row of none at step 0"),
    (lambda r: {**r, "rules": {"none": r["rules"]["none"]}}, "rules.sqrt: required, but missing"),
    (lambda r: json.dumps(r).replace('"final_loss": ', '"final_loss": NaN, "x": ', 1),
     "nan is not a number"),
    (lambda r: "[" * 100_000 + "]" * 100_000, "nested more than"),
    (lambda r: [r], "not an object"),
    (lambda r: {**r, "rows": [r["rows"][0]] * 10_000}, "more than"),
    (_set("error", 5), "error: must be a string or null"),
])
def test_a_bad_job_file_is_ignored_with_its_reason_and_rerun(folder, change, reason):
    _edit_job(folder, 1, change)
    found, ignored = scan_results(SPEC, folder)
    assert len(found) == 1 and len(ignored) == 1
    assert ignored[0].startswith("job-00001.json: ") and reason in ignored[0], ignored[0]
    assert len(ignored[0]) < 300
    # what was taken is safe to summarise; the resume reruns the bad job and finishes
    summary_rows(SPEC, found.values())
    group_results(SPEC, found.values())
    last = _run(folder, resume=True)[-1]
    assert last.finished and last.resumed == 1 and last.done == 2
    assert json.loads((folder / "experiment.json").read_text())["status"] == "finished"
    assert scan_results(SPEC, folder) == (scan_results(SPEC, folder)[0], [])


@pytest.mark.parametrize(("text", "where", "says"), [
    ("[1, 2]", "", "must be an object"),
    ('{"experiment": {"name": "x", "base": "abc"}}', "experiment.base", "must be an object"),
    ('{"experiment": {"name": "x", "base": {}, "axes": {"seed": null}}}', "experiment.axes.seed",
     "must be a list of values"),
    ('{"experiment": {"name": "x", "base": {}, "axes": {"seed": [[0], [1]]}}}',
     "experiment.axes.seed[0]", "must be a number, a string or true/false"),
    ('{"experiment": {"name": "x", "base": {"scalings": 5}}}', "experiment.base.scalings",
     "must be a list of names"),
    ('{"experiment": {"name": "x", "base": {}, "figures": [5]}}', "experiment.figures[0]",
     "must be an object"),
    ('{"experiment": {"name": "x", "base": {}, "verdict": {"at": 3}}}', "experiment.verdict.at",
     "must be an object of axis: value"),
    ('{"experiment": {"name": "x", "base": {}}, "status": ["running"]}', "status",
     "must be a string"),
    ('{"experiment": ' * 50 + "{}" + "}" * 50, "", "nested more than"),
    ('{"experiment": {"name": "x", "base": {}, "target": NaN}}', "experiment.target",
     "nan is not a number"),
])
def test_a_bad_experiment_json_is_one_line_naming_the_field(tmp_path, text, where, says):
    (tmp_path / "experiment.json").write_text(text)
    with pytest.raises(FileFormatError) as info:
        load_experiment(tmp_path)
    err = info.value
    assert err.file == str(tmp_path / "experiment.json") and err.where.startswith(where)
    assert says in err.problem, str(err)
    assert "\n" not in str(err) and len(str(err)) < 400


def test_resume_refuses_a_bad_experiment_json_before_running(folder):
    from engine.errors import ConfigError

    (folder / "experiment.json").write_text('{"experiment": []}')
    with pytest.raises(ConfigError) as info:
        _run(folder, resume=True)
    assert isinstance(info.value, FileFormatError) and info.value.option == "resume"
