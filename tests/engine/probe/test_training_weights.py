"""weights.pt of the Training lab is untrusted input to audit-model: its structure, config, runs
and every tensor (name, shape, dtype, finiteness) are checked before any is used; a problem is
one FileFormatError naming the file and the field path."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch

from engine.errors import FileFormatError
from engine.probe.training_audit import load_training_runs
from engine.training.config import TrainingConfig

CFG = TrainingConfig(d_model=16, heads=2, items_max=5, classes=4, key_dim=4,
                     scalings=("none", "sqrt"), steps=2, log_every=2, batch=4, probe_size=2,
                     hist_bins=20, device="cpu")


@pytest.fixture(scope="module")
def good() -> dict:
    from engine.training.trainer import Trainer

    trainer = Trainer(CFG)
    for _ in trainer.iterate():
        pass
    return {"config": CFG.to_dict(), "step": trainer.step, "weights": trainer.state_dicts()}


def _tensor_change(fn):
    def change(data):
        w = copy.deepcopy(data["weights"])
        name = next(iter(w["sqrt"]))
        w["sqrt"][name] = fn(w["sqrt"][name])
        return {**data, "weights": w}
    return change


CASES = [
    (lambda d: {**d, "weights": "abc"}, "weights", "must be an object"),
    (lambda d: {**d, "weights": {}}, "weights", "holds no runs"),
    (lambda d: {**d, "weights": {"sqrt": 5}}, "weights.sqrt", "must be a state dict"),
    (lambda d: {**d, "step": "abc"}, "step", "must be an integer"),
    (lambda d: {**d, "step": -3}, "step", "must be an integer in [0, ]"),
    (lambda d: {**d, "weights": {"bogus": d["weights"]["sqrt"]}}, "weights.bogus",
     "not one of the config's rules"),
    (lambda d: [1, 2], "", "must be an object"),
    (lambda d: {**d, "config": [1]}, "config", "must be an object"),
    (lambda d: {**d, "config": {**d["config"], "scalings": 5}}, "config.scalings",
     "must be a list of names"),
    (lambda d: {k: v for k, v in d.items() if k != "config"}, "config", "required, but missing"),
    (_tensor_change(lambda t: torch.zeros(3, 3)), "weights.sqrt.", "shape (3, 3)"),
    (_tensor_change(lambda t: t.clone().fill_(float("nan"))), "weights.sqrt.",
     "holds NaN or infinite"),
    (_tensor_change(lambda t: t.to(torch.int64)), "weights.sqrt.", "dtype torch.int64"),
    (_tensor_change(lambda t: "x"), "weights.sqrt.", "must be a tensor"),
    (lambda d: {**d, "weights": {"sqrt": {**d["weights"]["sqrt"], "extra": torch.zeros(1)}}},
     "weights.sqrt.'extra'", "not a parameter"),
    (lambda d: {**d, "weights": {"sqrt": dict(list(d["weights"]["sqrt"].items())[1:])}},
     "weights.sqrt.", "required, but missing"),
]


@pytest.mark.parametrize(("change", "where", "says"), CASES)
def test_a_bad_weights_file_is_one_line_naming_the_field(tmp_path: Path, good, change, where,
                                                         says):
    path = tmp_path / "weights.pt"
    torch.save(change(good), path)
    with pytest.raises(FileFormatError) as info:
        load_training_runs(path)
    err = info.value
    assert err.file == str(path) and err.option == "model"
    assert err.where.startswith(where) and says in err.problem, str(err)
    assert "\n" not in str(err)


def test_a_good_file_loads_and_a_foreign_one_is_refused(tmp_path: Path, good):
    path = tmp_path / "weights.pt"
    torch.save(good, path)
    cfg, runs, step = load_training_runs(path)
    assert cfg == CFG and set(runs) == {"none", "sqrt"} and step == CFG.steps
    path.write_bytes(b"not a torch file")
    with pytest.raises(FileFormatError, match="not a Training lab weights file"):
        load_training_runs(path)
