"""The headless ``experiment`` command: a tiny grid end to end, resume, one-line errors that
write nothing, a torch-free --help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.experiments.spec import Axis, ExperimentSpec
from engine.io import read_csv
from engine.training.config import TrainingConfig
from main import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ["experiment", "--task", "retrieval", "--d-model", "16", "--heads", "2", "--items-max", "5",
        "--classes", "4", "--key-dim", "4", "--scaling", "none", "sqrt", "--steps", "6",
        "--log-every", "3", "--batch", "8", "--probe-size", "4", "--hist-bins", "20",
        "--device", "cpu", "--quiet"]


def test_list_names_the_builtin_experiments(capsys):
    assert main(["experiment", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("seeds", "head_width", "learning_rate", "heads"):
        assert name in out


@pytest.mark.slow
def test_a_tiny_grid_writes_its_files_and_resume_reruns_nothing(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "exp"
    assert main([*TINY, "--axis", "lr=1e-3,1e-2", "--axis", "seed=0,1", "--workers", "1",
                 "--out", str(out), "--figures"]) == 0
    text = capsys.readouterr().out
    assert "verdict:" in text and "95 % CI" in text and "4 of 4 jobs done" in text
    summary = read_csv(out / "summary.csv")
    assert list(summary[0]) == ["job", "lr", "seed", "scaling", "final_loss", "final_accuracy",
                                "probe_accuracy", "steps_to_target", "max_logit_abs",
                                "max_logit_std", "min_entropy_norm", "diverged_step",
                                "collapsed", "seconds", "clip_events"]
    assert len(summary) == 8
    assert len(read_csv(out / "metrics.csv")) == 4 * 2 * 3
    saved = json.loads((out / "experiment.json").read_text())
    assert saved["status"] == "finished" and saved["experiment"]["axes"] == {
        "lr": [1e-3, 1e-2], "seed": [0, 1]}
    assert len(list(out.glob("custom_*.png"))) == len(list(out.glob("custom_*.svg"))) >= 3
    before = (out / "metrics.csv").read_text()
    assert main(["experiment", "--resume", "--out", str(out), "--quiet"]) == 0
    assert "4 from an earlier run" in capsys.readouterr().out
    assert (out / "metrics.csv").read_text() == before


def _other_experiment(folder: Path) -> None:
    folder.mkdir()
    spec = ExperimentSpec("other", TrainingConfig(), (Axis("seed", (0, 1)),))
    (folder / "experiment.json").write_text(json.dumps({"experiment": spec.to_dict()}))


@pytest.mark.parametrize("args,option", [
    (["--axis", "bogus=1,2"], "--axis"),
    (["--axis", "seed=a,b"], "--axis"),
    (["--axis", "seed=0.5"], "--axis"),
    (["--axis", "lr=1e-3,-1"], "--axis"),
    (["--axis", "heads=3"], "--axis"),
    (["--axis", "lr"], "--axis"),
    (["--axis", "seed=0", "--workers", "0"], "--workers"),
    (["--axis", "seed=0", "--target", "2"], "--target"),
    (["nope"], "NAME"),
    (["--axis", "seed=0", "--steps", "0"], "--steps"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, option, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["experiment", *args, "--out", str(out), "--quiet"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and option in err and "Traceback" not in err
    assert not out.exists()


def test_resume_of_another_experiment_exits_2_naming_resume(tmp_path, capsys):
    _other_experiment(tmp_path / "other")
    with pytest.raises(SystemExit) as exc:
        main([*TINY, "--axis", "seed=0", "--resume", "--out", str(tmp_path / "other")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--resume" in err
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["experiment.json"]


def test_missing_out_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "seeds", "--quiet"])
    assert exc.value.code == 2 and "--out" in capsys.readouterr().err


def test_help_imports_no_torch():
    code = ("import sys, main\n"
            "try:\n    main.main(['experiment', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().endswith("False")
