"""A user's files are never replaced silently: every --out writer refuses a folder that holds
files it would write (one line naming them, exit 2, nothing written) unless --force."""

from __future__ import annotations

from pathlib import Path

import pytest

import main

TINY_TRAIN = ["--steps", "2", "--d-model", "16", "--heads", "2", "--log-every", "2",
              "--batch", "4", "--probe-size", "2", "--scaling", "sqrt", "--quiet"]


def _exit_code(argv: list[str]) -> int:
    try:
        return main.main(argv)
    except SystemExit as exc:
        return int(exc.code)


def _refused(argv: list[str], out: Path, theirs: dict[str, str], capsys) -> None:
    for name, text in theirs.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    capsys.readouterr()
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "--force" in err[0], err
    for name in theirs:
        assert name in err[0]
        assert (out / name).read_text() == theirs[name]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before


def test_experiment_refuses_a_folder_with_the_users_results(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    argv = ["experiment", *TINY_TRAIN, "--axis", "seed=0", "--workers", "1", "--out", str(out)]
    _refused(argv, out, {"summary.csv": "mine", "metrics.csv": "mine",
                         "jobs/job-00000.json": "{}"}, capsys)


def test_experiment_figures_refuse_the_users_images(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    argv = ["experiment", *TINY_TRAIN, "--axis", "seed=0", "--workers", "1", "--figures",
            "--out", str(out)]
    _refused(argv, out, {"plot.png": "mine"}, capsys)


def test_train_refuses_then_force_replaces(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    _refused(["train", *TINY_TRAIN, "--out", str(out)], out, {"config.json": "mine"}, capsys)
    (out / "notes.txt").write_text("kept")  # a file the command does not write: no conflict
    assert _exit_code(["train", *TINY_TRAIN, "--out", str(out), "--force"]) == 0
    assert (out / "config.json").read_text() != "mine" and (out / "notes.txt").read_text() == "kept"
    assert _exit_code(["train", *TINY_TRAIN, "--out", str(tmp_path / "new")]) == 0


def test_simulate_refuses_its_files_and_with_figures_any_image(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    argv = ["simulate", "--d-k", "4", "--trials", "50", "--quiet", "--out", str(out)]
    _refused(argv, out, {"histograms.npz": "mine"}, capsys)
    (out / "histograms.npz").unlink()
    _refused([*argv, "--figures"], out, {"my_figure.svg": "mine"}, capsys)


def test_probe_and_audit_refuse_an_existing_config_or_table(tmp_path: Path, capsys,
                                                            tiny_bert_dir: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    _refused(["probe-model", "--model", str(tiny_bert_dir), "--text", "why is the key scaled",
              "--quiet", "--out", str(out)], out, {"config.json": "mine"}, capsys)
    _refused(["audit-model", "--model", str(tiny_bert_dir), "--text", "why is the key scaled",
              "--quiet", "--out", str(out)], out, {"layers.csv": "mine"}, capsys)


def test_reproduce_refuses_an_existing_claims_table(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    _refused(["reproduce", "--fast", "--quiet", "--out", str(out)], out,
             {"claims.csv": "mine"}, capsys)  # (refused before any claim is measured)


@pytest.fixture
def tiny_bert_dir(tmp_path: Path, save_tiny) -> Path:
    return save_tiny(tmp_path / "bert", "bert", 1, 2)
