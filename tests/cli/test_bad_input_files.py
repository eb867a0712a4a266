"""A bad input file on the command line is one line naming the option, the file, the field path
and the problem (exit 2); nothing is written, and an --out folder the command created is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

import main


def _exit_code(argv: list[str]) -> int:
    try:
        return main.main(argv)
    except SystemExit as exc:
        return int(exc.code)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_audit_model_refuses_nan_weights_and_leaves_no_out(tmp_path: Path, capsys) -> None:
    torch = pytest.importorskip("torch")
    from engine.training.config import TrainingConfig
    from engine.training.trainer import Trainer

    cfg = TrainingConfig(d_model=16, heads=2, items_max=5, classes=4, key_dim=4,
                         scalings=("sqrt",), steps=1, log_every=1, batch=4, probe_size=2,
                         hist_bins=20, device="cpu")
    state = Trainer(cfg).state_dicts()
    name = next(iter(state["sqrt"]))
    state["sqrt"][name] = torch.full_like(state["sqrt"][name], float("nan"))
    weights = tmp_path / "weights.pt"
    torch.save({"config": cfg.to_dict(), "step": 1, "weights": state}, weights)
    out = tmp_path / "out"
    assert _exit_code(["audit-model", "--model", str(weights), "--out", str(out),
                       "--quiet"]) == 2
    line = _one_line(capsys)
    assert f"--model: {weights}: weights.sqrt.{name}: holds NaN" in line
    assert not out.exists()


@pytest.mark.parametrize(("text", "where"), [
    ("[1, 2]", "must be an object"),
    ('{"experiment": {"name": "x", "base": "abc"}}', "experiment.base: must be an object"),
    ("[" * 100_000 + "]" * 100_000, "nested more than 32 levels deep"),
])
def test_experiment_resume_names_a_bad_experiment_json(tmp_path: Path, capsys, text,
                                                       where) -> None:
    (tmp_path / "experiment.json").write_text(text)
    assert _exit_code(["experiment", "--resume", "--out", str(tmp_path), "--quiet"]) == 2
    assert f"{tmp_path / 'experiment.json'}: {where}" in _one_line(capsys)


def test_reproduce_names_a_bad_claims_file(tmp_path: Path, capsys) -> None:
    claims = tmp_path / "claims.json"
    claims.write_text('{"claims": [{"id": "a", "where": "w", "text": "t", "kind": "simulate", '
                      '"params": {"dist": "' + "g" * 5000 + '"}, "measure": {"column": "x"}, '
                      '"published": "1"}]}')
    assert _exit_code(["reproduce", "--claims", str(claims), "--quiet"]) == 2
    line = _one_line(capsys)
    assert f"--claims: {claims}: claims['a'].params.dist: must be one of" in line
    assert len(line) < 400  # the 5,000-character value is quoted by a prefix
