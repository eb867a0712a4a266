"""The headless ``coord-check`` command: coord.csv's columns, slopes, figures, one-line errors."""

from __future__ import annotations

import json

import pytest

from engine.io import read_csv
from main import main

pytest.importorskip("torch")

TINY = ["coord-check", "--widths", "16", "32", "--steps", "1", "--seeds", "1", "--quiet"]


def test_writes_coord_slopes_config_and_one_figure_per_param(tmp_path, capsys):
    assert main([*TINY, "--out", str(tmp_path), "--figures", "--figure-style", "paper"]) == 0
    out = capsys.readouterr().out
    assert "zero at init" in out and "slope" in out
    rows = read_csv(tmp_path / "coord.csv")
    assert list(rows[0])[:3] == ["param", "scaling", "width"]
    assert {"param", "width", "seed", "step", "layer", "kind", "mean_abs"} <= set(rows[0])
    assert {r["param"] for r in rows} == {"sp", "mup"}
    assert {(r["param"], r["scaling"]) for r in rows} == {("sp", "sqrt"), ("mup", "dk")}
    assert {r["kind"] for r in rows} == {"embedding", "attention logits", "attention output",
                                          "MLP output", "readout"}
    assert {r["step"] for r in rows} == {"0", "1"}
    # 2 params x 2 widths x 1 seed x 2 steps x (embedding + 2 layers x 3 kinds + readout)
    assert len(rows) == 2 * 2 * 2 * 8
    zero = [r for r in rows if r["param"] == "mup" and r["step"] == "0"
            and r["kind"] in ("attention logits", "readout")]
    assert zero and all(float(r["mean_abs"]) == 0.0 for r in zero)  # W_Q, readout start at 0
    slopes = read_csv(tmp_path / "slopes.csv")
    assert {(r["param"], r["kind"], r["step"]) for r in slopes} >= {("sp", "MLP output", "1")}
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["coord_check"]["widths"] == [16, 32]
    for param in ("sp", "mup"):
        for ext in ("png", "svg", "csv"):
            assert (tmp_path / f"coord_{param}.{ext}").stat().st_size > 0


@pytest.mark.parametrize("args,option", [
    (["--param", "xp"], "--param"),
    (["--widths", "64"], "--widths"),
    (["--widths", "64", "99"], "--widths"),  # 99 is not a multiple of the 2 heads
    (["--steps", "-1"], "--steps"),
    (["--lr", "0"], "--lr"),
    (["--scaling", "sqrtt"], "--scaling"),
])
def test_bad_input_exits_2_with_one_line_naming_the_option(tmp_path, capsys, args, option):
    with pytest.raises(SystemExit) as e:
        main(["coord-check", "--out", str(tmp_path), "--quiet", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and option in err, err
    assert not (tmp_path / "coord.csv").exists()


def test_out_is_required(capsys):
    with pytest.raises(SystemExit) as e:
        main(TINY)
    assert e.value.code == 2 and "--out" in capsys.readouterr().err


def test_a_folder_with_the_users_files_is_refused_unless_force(tmp_path, capsys):
    """Never overwritten silently: coord.csv (and with --figures any image, the figure tables)
    already there -> one line naming them, exit 2, nothing written; --force replaces them."""
    for name, figures in (("coord.csv", []), ("slopes.csv", []), ("mine.png", ["--figures"]),
                          ("coord_mup.csv", ["--figures"])):
        out = tmp_path / name.replace(".", "_")
        out.mkdir()
        (out / name).write_text("mine")
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            main([*TINY, "--out", str(out), *figures])
        err = capsys.readouterr().err.strip()
        assert e.value.code == 2 and len(err.splitlines()) == 1, err
        assert "--out" in err and "--force" in err and name in err
        assert sorted(p.name for p in out.iterdir()) == [name]
        assert (out / name).read_text() == "mine"
    out = tmp_path / "coord_csv"
    (out / "notes.txt").write_text("kept")  # not one of its files: no conflict
    assert main([*TINY, "--out", str(out), "--force"]) == 0
    assert (out / "coord.csv").read_text() != "mine" and (out / "notes.txt").read_text() == "kept"
