"""The training result files from a stand-in snapshot and trainer (no training): each file's
name, order and content, and what config.json says about the run. About 0.1 s after torch's
import (the column names come from the trainer's module)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from engine.io import read_csv
from engine.training.config import TrainingConfig
from engine.training.export import RESULT_FILES, write_training_outputs
from engine.training.observe import HEAD_CSV_COLUMNS


@dataclass
class Snap:
    config: TrainingConfig
    rules: tuple[str, ...] = ("none", "sqrt")
    device: str = "cpu"
    step: int = 7
    elapsed_s: float = 2.5
    steps_per_s: float = 2.8
    diverged_step: tuple = (np.int64(-1), np.int64(5))
    csv_columns: tuple[str, ...] = ("scaling", "step", "loss")

    def metrics_rows(self):
        return [{"scaling": "none", "step": 0, "loss": 1.25, "ignored": 3},
                {"scaling": "sqrt", "step": 0, "loss": 0.5}]

    def head_rows(self):
        return [{"scaling": "none", "step": 0, "layer": 0, "head": 1}]

    def histogram_arrays(self):
        return {"steps": np.array([0, 7]), "counts": np.ones((2, 3), dtype=np.int32)}


class Trainer:
    def __init__(self):
        self.saved: list[Path] = []

    def save_weights(self, path):
        self.saved.append(Path(path))
        Path(path).write_bytes(b"weights")


def test_the_five_files_in_order_with_their_contents(tmp_path):
    cfg = TrainingConfig(steps=7, scalings=("none", "sqrt"))
    trainer, out = Trainer(), tmp_path / "run"
    out.mkdir()
    paths = write_training_outputs(out, trainer, Snap(cfg), {"wall_s": 1.5, "device": "gpu?"})
    assert [p.name for p in paths] == ["metrics.csv", "metrics_heads.csv", "histograms.npz",
                                       "config.json", "weights.pt"] == list(RESULT_FILES)
    assert all(p.parent == out and p.is_file() for p in paths)
    assert trainer.saved == [out / "weights.pt"] and paths[4].read_bytes() == b"weights"
    # metrics.csv: the snapshot's columns only, in its order
    text = paths[0].read_text().splitlines()
    assert text[0] == "scaling,step,loss" and text[1:] == ["none,0,1.25", "sqrt,0,0.5"]
    # metrics_heads.csv: every head column, empty where the row has none
    heads = read_csv(paths[1])
    assert list(heads[0]) == list(HEAD_CSV_COLUMNS) and heads[0]["head"] == "1"
    assert heads[0][HEAD_CSV_COLUMNS[-1]] == ""
    with np.load(paths[2]) as npz:
        assert sorted(npz.files) == ["counts", "steps"] and npz["counts"].sum() == 6
    meta = json.loads(paths[3].read_text())
    assert meta["command"] == "train" and meta["config"] == json.loads(json.dumps(cfg.to_dict()))
    assert meta["rules"] == ["none", "sqrt"] and meta["head_dim"] == 256
    assert (meta["steps_done"], meta["elapsed_s"], meta["steps_per_s"]) == (7, 2.5, 2.8)
    assert meta["diverged_step"] == {"none": -1, "sqrt": 5}
    assert meta["weights_file"] == ("weights.pt: torch.load -> {config, step, weights: {rule: "
                                    "state_dict}}")
    assert set(meta["versions"]) >= {"numpy", "torch"}
    # the caller's extra keys come last, and win over the run's own (its place kept)
    assert meta["wall_s"] == 1.5 and meta["device"] == "gpu?"
    assert list(meta)[-2:] == ["versions", "wall_s"]


def test_without_extra_and_from_a_string_path(tmp_path):
    cfg = TrainingConfig(d_model=64, heads=4, steps=7, scalings=("none", "sqrt"))
    paths = write_training_outputs(str(tmp_path), Trainer(), Snap(cfg, device="cuda"))
    meta = json.loads((tmp_path / "config.json").read_text())
    assert paths[0] == tmp_path / "metrics.csv"
    assert meta["head_dim"] == 16 and meta["device"] == "cuda" and "wall_s" not in meta
    assert list(meta)[-1] == "versions"


def test_a_rule_count_that_differs_from_the_divergence_steps_is_refused(tmp_path):
    snap = Snap(TrainingConfig(steps=7), diverged_step=(np.int64(-1),))
    with pytest.raises(ValueError):
        write_training_outputs(tmp_path, Trainer(), snap)
