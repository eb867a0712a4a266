"""The headless ``train`` command: files, columns, one-line errors, a torch-free --help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.io import read_csv
from main import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ["train", "--task", "retrieval", "--d-model", "32", "--heads", "2", "--items-max", "6",
        "--scaling", "none", "sqrt", "dk", "--steps", "6", "--log-every", "3", "--batch", "8",
        "--probe-size", "4", "--seed", "0", "--device", "cpu", "--quiet"]
REQUIRED = ("scaling", "step", "loss", "accuracy", "entropy_norm_mean", "logit_std",
            "saturated_frac", "jacobian_fro_mean", "grad_norm_q", "grad_norm_k", "grad_norm_v")


def test_writes_metrics_histograms_config_and_weights(tmp_path, capsys):
    pytest.importorskip("torch")
    assert main([*TINY, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "sqrt" in out and "wrote" in out
    rows = read_csv(tmp_path / "metrics.csv")
    assert set(REQUIRED) <= set(rows[0])
    assert [r["scaling"] for r in rows] == ["none"] * 3 + ["sqrt"] * 3 + ["dk"] * 3
    assert [int(r["step"]) for r in rows[:3]] == [0, 3, 6]
    heads = read_csv(tmp_path / "metrics_heads.csv")
    assert len(heads) == 9 * 2 and {r["head"] for r in heads} == {"0", "1"}
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["config"]["scalings"] == ["none", "sqrt", "dk"] and cfg["head_dim"] == 16
    with np.load(tmp_path / "histograms.npz") as z:
        assert z["logit_counts"].shape[:4] == (3, 3, 1, 2)
        assert list(z["rules"]) == ["none", "sqrt", "dk"]
    import torch

    saved = torch.load(tmp_path / "weights.pt")
    assert set(saved["weights"]) == {"none", "sqrt", "dk"} and saved["step"] == 6


def test_same_seed_same_csv(tmp_path):
    pytest.importorskip("torch")
    assert main([*TINY, "--out", str(tmp_path / "a")]) == 0
    assert main([*TINY, "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a" / "metrics.csv").read_text() == (tmp_path / "b" / "metrics.csv").read_text()


@pytest.mark.parametrize("args,option", [
    (["--heads", "3"], "--heads"),
    (["--scaling", "sqrt", "bogus"], "--scaling"),
    (["--steps", "0"], "--steps"),
    (["--lr", "-1"], "--lr"),
    (["--items-min", "9", "--items-max", "4"], "--items-max"),
    (["--preset", "nope"], "--preset"),
    (["--d-model", "abc"], "--d-model"),
    (["--figures"], "--figures"),
    (["--warmup", "-1"], "--warmup"),
    (["--decay", "linear"], "--decay"),
    (["--lr-floor", "2"], "--lr-floor"),
    (["--weight-decay", "-0.1"], "--weight-decay"),
    (["--grad-clip", "nan"], "--grad-clip"),
    (["--heads", "3", "--d-model", "256"], "--heads"),
    (["--task", "foo"], "--task"),
    (["--optimizer", "lbfgs"], "--optimizer"),
    (["--noise", "nan"], "--noise"),
    (["--lr", "inf"], "--lr"),
    (["--seed", "-1"], "--seed"),
    (["--d-k", "5000"], "--d-k"),
    (["--hist-bins", "1"], "--hist-bins"),
    (["--saturation-threshold", "1"], "--saturation-threshold"),
    # at the options' bounds the memory guards answer, naming what to shrink (no OOM)
    (["--batch", "65536"], "--batch"),
    (["--d-model", "4096"], "--d-model"),
    (["--d-model", "512", "--heads", "64", "--d-k", "4096"], "--d-model"),
    (["--probe-size", "4096", "--items-max", "200", "--batch", "1"], "--probe-size"),
])
def test_bad_input_exits_2_with_one_line_naming_the_parameter(args, option, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", *args, "--quiet"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and option in err and "Traceback" not in err


def test_help_imports_no_torch():
    code = ("import sys, main\n"
            "try:\n    main.main(['train', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().endswith("False")


def test_unwritable_out_exits_2_naming_out(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SystemExit) as exc:
        main([*TINY, "--out", str(blocker / "sub")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--out" in err and "Traceback" not in err
