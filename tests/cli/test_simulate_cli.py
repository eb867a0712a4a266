"""``main.py simulate``: outputs, and every bad input exits 2 with one line naming the parameter."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = ("d_k, n_keys, trials, scaling, raw_score_mean, raw_score_var, raw_score_std, logit_mean, "
            "logit_var, logit_std, top_weight_mean, top_weight_se, saturated_frac, entropy_mean, "
            "entropy_norm_mean, jacobian_fro_mean, jacobian_fro_se, jacobian_max_abs_mean").split(", ")


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_simulate_writes_summary_histograms_and_config(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = run("simulate", "--d-k", "4", "64", "512", "--keys", "8", "--trials", "4000",
            "--scaling", "none", "sqrt", "dk", "--seed", "0", "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "sqrt" in r.stdout and "512" in r.stdout
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert len(rows) == 9
    assert set(REQUIRED) <= set(rows[0])
    for row in rows:
        for key in REQUIRED[4:]:
            assert np.isfinite(float(row[key]))
    by = {(int(r["d_k"]), r["scaling"]): r for r in rows}
    assert float(by[(512, "none")]["saturated_frac"]) > float(by[(4, "none")]["saturated_frac"])
    assert float(by[(512, "sqrt")]["logit_var"]) == pytest.approx(1.0, abs=0.1)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["config"]["seed"] == 0 and cfg["d_ks"] == [4, 64, 512]
    assert {"numpy", "torch", "python"} <= set(cfg["versions"])
    assert cfg["resolved"][0]["backend"] == "numpy" and cfg["resolved"][0]["method"] == "exact"
    with np.load(out / "histograms.npz") as npz:
        names = set(npz.files)
        assert {"d512_none_logit_edges", "d512_none_logit_counts", "d4_raw_score_counts",
                "d64_sqrt_log10_jacobian_fro_counts", "d64_dk_top_weight_counts"} <= names
        counts = npz["d512_sqrt_logit_counts"]
        outside = npz["d512_sqrt_logit_outside"]
        assert counts.sum() + outside.sum() == 4000 * 8
        assert len(npz["d512_sqrt_logit_edges"]) == len(counts) + 1
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left


def test_config_json_reproduces_the_run(tmp_path: Path) -> None:
    from engine.config import SimulationConfig
    from engine.export import summary_rows
    from engine.simulate import run_simulation

    r = run("simulate", "--d-k", "32", "--scaling", "sqrt", "cosine", "--dist", "uniform",
            "--trials", "300", "--seed", "5", "--out", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    cfg = SimulationConfig.from_dict(json.loads((tmp_path / "config.json").read_text())["config"])
    again = summary_rows([run_simulation(cfg)])
    rows = list(csv.DictReader((tmp_path / "summary.csv").open()))
    for a, b in zip(rows, again):
        assert float(a["jacobian_fro_mean"]) == b["jacobian_fro_mean"]  # repr round-trips exactly


@pytest.mark.parametrize(("args", "names"), [
    (["--d-k", "0"], "--d-k"),
    (["--d-k", "x"], "--d-k"),
    (["--trials", "-5"], "--trials"),
    (["--keys", "1"], "--keys"),
    (["--scaling", "sqrt", "bogus"], "--scaling"),
    (["--correlation", "2"], "--correlation"),
    (["--q-std", "0"], "--q-std"),
    (["--dist", "cauchy"], "--dist"),
    (["--method", "exact", "--dist", "uniform"], "--method"),
    (["--saturation-threshold", "1"], "--saturation-threshold"),
    (["--backend", "numpy", "--device", "cuda"], "--device"),
    (["--figures"], "--figures"),
    (["--figures", "--out", "x", "--figure-style", "huge"], "--figure-style"),
])
def test_bad_input_exits_2_with_one_line(args: list[str], names: str) -> None:
    r = run("simulate", "--quiet", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert names in lines[0]
    assert "Traceback" not in r.stderr


def test_unwritable_out_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run("simulate", "--trials", "10", "--out", str(blocker / "sub"), "--quiet")
    assert r.returncode == 2 and "--out" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    if os.geteuid() != 0:  # root ignores permission bits
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        r = run("simulate", "--trials", "10", "--out", str(ro), "--quiet")
        assert r.returncode == 2 and list(ro.iterdir()) == []


def _stderr_on_a_terminal(*args: str) -> tuple[int, str]:
    """Run main.py with stderr on a pseudo-terminal (as in a shell); returns (exit status, what
    it wrote there), read while it runs so that a full terminal buffer never blocks it."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    master, slave = pty.openpty()
    # a terminal has a size (tqdm draws nothing on a 0-column one)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    code = proc.wait(timeout=300)
    reader.join(10)
    os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


QUICK = ("simulate", "--d-k", "8", "--trials", "100")


def test_progress_bar_on_a_terminal_only_for_long_runs(monkeypatch) -> None:
    """The bar waits PROGRESS_DELAY_S (1 s) before it shows: a run shorter than the delay prints
    nothing. The delay is injectable, so neither case depends on how fast this machine is: a
    run under a delay of a million seconds prints nothing, and at a delay of 0 the bar shows at
    once (on a terminal; --quiet never)."""
    from ui.cli.common import PROGRESS_DELAY_ENV, PROGRESS_DELAY_S, progress_delay

    assert PROGRESS_DELAY_S == 1.0 and progress_delay() == 1.0
    monkeypatch.setenv(PROGRESS_DELAY_ENV, "0.25")
    assert progress_delay() == 0.25
    for bad in ("-1", "soon"):
        monkeypatch.setenv(PROGRESS_DELAY_ENV, bad)
        assert progress_delay() == 1.0
    monkeypatch.setenv(PROGRESS_DELAY_ENV, "1e6")  # shorter than the delay, however loaded
    code, shown = _stderr_on_a_terminal(*QUICK)
    assert code == 0 and "trial" not in shown
    monkeypatch.setenv(PROGRESS_DELAY_ENV, "0")
    code, shown = _stderr_on_a_terminal(*QUICK)
    assert code == 0
    assert "simulate" in shown and "trial" in shown  # tqdm, at once
    code, shown = _stderr_on_a_terminal(*QUICK, "--quiet")
    assert code == 0 and "trial" not in shown


def test_no_progress_bar_when_stderr_is_a_pipe_or_a_file(monkeypatch) -> None:
    """A log file or a pipe would fill with the bar's carriage returns (even at delay 0)."""
    from ui.cli.common import PROGRESS_DELAY_ENV

    monkeypatch.setenv(PROGRESS_DELAY_ENV, "0")
    piped = run(*QUICK)
    assert piped.returncode == 0 and piped.stderr == ""


@pytest.mark.slow
def test_figures_writes_png_and_svg_of_every_plot(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    r = run("simulate", "--d-k", "16", "64", "--trials", "300", "--scaling", "none", "sqrt",
            "--out", str(tmp_path), "--figures", "--quiet")
    assert r.returncode == 0, r.stderr
    pngs = sorted(tmp_path.glob("*.png"))
    svgs = sorted(tmp_path.glob("*.svg"))
    # one set per d_k, prefixed like the arrays of histograms.npz, and the sweep once
    per_d_k = ("scores", "weights", "top_weight", "entropy", "jacobian")
    expected = {f"d{d}_{pid}" for d in (16, 64) for pid in per_d_k} | {"sweep"}
    assert {p.stem for p in pngs} == {p.stem for p in svgs} == expected
    import numpy as np

    with np.load(tmp_path / "histograms.npz") as npz:
        assert {f"d{d}_" for d in (16, 64)} <= {k[: k.index("_") + 1] for k in npz.files}
    for png in pngs:
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    for svg in svgs:
        root = ET.parse(svg).getroot()
        assert root.tag.endswith("svg")
        assert any(el.tag.endswith("path") for el in root.iter())


@pytest.mark.slow
def test_figures_with_several_keys_are_named_by_d_k_and_n(tmp_path: Path) -> None:
    """--keys 8 64: one figure set per point named like histograms.npz (d{d_k}_n{n}_...)."""
    r = run("simulate", "--d-k", "16", "--keys", "8", "64", "--trials", "100", "--scaling", "sqrt",
            "--out", str(tmp_path), "--figures", "--quiet")
    assert r.returncode == 0, r.stderr
    per_point = ("scores", "weights", "top_weight", "entropy", "jacobian")
    expected = {f"d16_n{n}_{pid}" for n in (8, 64) for pid in per_point} | {"sweep"}
    assert {p.stem for p in tmp_path.glob("*.png")} == expected
    import numpy as np

    with np.load(tmp_path / "histograms.npz") as npz:
        assert {"d16_n8_", "d16_n64_"} <= {k[: k.index("_", k.index("_") + 1) + 1] for k in npz.files}


def test_simulate_sweeps_the_length_with_several_keys(tmp_path: Path) -> None:
    """--keys 8 64 512: one row per (n, rule); with a correlation, the needle's weight and SE."""
    out = tmp_path / "len"
    r = run("simulate", "--d-k", "64", "--keys", "8", "64", "512", "--trials", "300",
            "--scaling", "sqrt", "logn", "ssmax", "--correlation", "0.3", "--out", str(out),
            "--quiet")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [(int(x["n_keys"]), x["scaling"]) for x in rows] == [
        (n, rule) for n in (8, 64, 512) for rule in ("sqrt", "logn", "ssmax")]
    w = {(int(x["n_keys"]), x["scaling"]): float(x["target_weight_mean"]) for x in rows}
    assert all(float(x["target_weight_se"]) > 0 for x in rows)
    assert w[(8, "logn")] == w[(8, "sqrt")]  # n_ref = 8 by default
    assert w[(512, "sqrt")] < w[(64, "sqrt")] < w[(8, "sqrt")]  # attention fades with n
    assert w[(512, "logn")] > 3 * w[(512, "sqrt")]
    with np.load(out / "histograms.npz") as z:
        assert "d64_n512_sqrt_logit_counts" in z.files
    assert json.loads((out / "config.json").read_text())["n_keys"] == [8, 64, 512]


PRESETS = json.loads((ROOT / "resources" / "presets" / "simulation.json").read_text())


def _sweeps(*argv: str) -> list:
    from main import build_parser
    from ui.cli.simulate import build_configs

    return build_configs(build_parser().parse_args(["simulate", *argv]))


def test_without_a_preset_the_documented_defaults_hold() -> None:
    (sweep,) = _sweeps()
    assert sweep.d_ks == (4, 64, 512)
    assert (sweep.base.n_keys, sweep.base.trials, sweep.base.scalings) == (
        8, 4000, ("none", "sqrt", "dk"))
    assert (sweep.base.dist, sweep.base.correlation, sweep.base.temperature) == ("gaussian", 0.0, 1.0)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_sets_every_field_it_names(name: str) -> None:
    wanted = PRESETS[name]["config"]
    (sweep,) = _sweeps("--preset", name)
    got = {**sweep.base.to_dict(), "d_k": sweep.d_ks[0]}
    assert len(sweep.d_ks) == 1
    for field, value in wanted.items():
        assert got[field] == (list(value) if isinstance(value, list) else value), field


def test_options_given_override_the_preset() -> None:
    assert PRESETS["correlated"]["config"]["correlation"] != 0.1
    (sweep,) = _sweeps("--preset", "correlated", "--correlation", "0.1", "--d-k", "16", "32")
    assert sweep.base.correlation == 0.1 and sweep.d_ks == (16, 32)
    assert list(sweep.base.scalings) == PRESETS["correlated"]["config"]["scalings"]


def test_an_unknown_preset_is_one_line_naming_the_option() -> None:
    r = run("simulate", "--preset", "nope", "--trials", "10")
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "--preset" in line and all(name in line for name in PRESETS)


def test_the_help_names_every_preset() -> None:
    text = run("simulate", "--help").stdout
    assert all(name in " ".join(text.split()) for name in PRESETS)


def test_the_cli_says_why_a_target_weight_is_blank(capsys):
    from main import main

    assert main(["simulate", "--d-k", "64", "--keys", "1024", "--trials", "50", "--scaling",
                 "none", "--correlation", "0.3"]) == 0
    assert "not estimable from these trials" in capsys.readouterr().out
