"""``main.py inspect``: the worked examples, JSON output, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "inspect", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=60)


def test_json_output_has_the_documented_keys() -> None:
    r = run("16", "8", "0", "-8", "--scale", "8", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {"scores", "scaled", "weights", "jacobian", "jacobian_fro", "jacobian_max_abs", "entropy"} <= set(d)
    assert d["scaled"] == [2.0, 1.0, 0.0, -1.0]
    np.testing.assert_allclose(d["weights"], [0.64391426, 0.23688282, 0.08714432, 0.03205860], atol=5e-9)
    assert d["jacobian_fro"] == pytest.approx(0.383675762151, abs=1e-12)
    jac = np.array(d["jacobian"])
    np.testing.assert_allclose(jac.sum(1), 0, atol=1e-15)
    assert d["jacobian_max_abs"] == pytest.approx(0.22928869, abs=5e-9)


def test_text_output_mentions_the_quarter_bound() -> None:
    r = run("8", "0", "-8")
    assert r.returncode == 0
    assert "0.25" in r.stdout and "0.0003353" in r.stdout


@pytest.mark.parametrize(("args", "name"), [
    (["1", "x"], "SCORE"), (["1"], "SCORE"), (["1", "nan"], "SCORE"),
    (["1", "2", "--scale", "0"], "--scale"), (["1", "2", "--scale", "abc"], "--scale"),
])
def test_bad_input_exits_2_with_one_line(args: list[str], name: str) -> None:
    r = run(*args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and name in r.stderr
    assert "Traceback" not in r.stderr


def test_negative_scores_in_exponent_notation_parse() -> None:
    # argparse alone takes "-1e6" for an unknown option; the README promises exact logs at 1e6
    r = run("1e6", "0", "-1e6", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["scores"] == [1e6, 0.0, -1e6]
    assert d["weights"][0] == 1.0 and np.isfinite(d["log10_jacobian_fro"])
    assert d["log10_jacobian_fro"] < -4e5  # ||J|| ~ exp(-1e6): far below any float, log still exact


def test_a_spread_beyond_float_range_is_refused_not_nan() -> None:
    r = run("1e308", "-1e308")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "SCORE" in r.stderr
    assert "nan" not in r.stdout.lower()


def test_the_saturated_diagonal_of_40_0_minus3() -> None:
    """The README's example: the first diagonal entry is 4.46e-18, not 0 (1 - p_max rounds away)."""
    import mpmath

    with mpmath.workdps(100):
        p = [mpmath.exp(x) for x in (40, 0, -3)]
        z = mpmath.fsum(p)
        want = float(p[0] / z * (p[1] + p[2]) / z)
    r = run("40", "0", "-3", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jacobian"][0][0] == pytest.approx(want, rel=1e-13)
    assert f"{want:.3g}" == "4.46e-18"
def test_inspect_repeated_scores_with_ssmax():
    """SSMax Figure 1 at n = 100: softmax 0.5999, SSMax (s = 0.43) 0.9951."""
    import json
    import subprocess
    import sys

    def top(*extra: str) -> float:
        out = subprocess.run([sys.executable, "main.py", "inspect", "3,", "-2*99", "--json", *extra],
                             capture_output=True, text=True, check=True).stdout
        return max(json.loads(out)["weights"])

    assert round(top(), 4) == 0.5999
    assert round(top("--ssmax", "0.43"), 4) == 0.9951
    bad = subprocess.run([sys.executable, "main.py", "inspect", "3", "-2*0"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "SCORE" in bad.stderr and "Traceback" not in bad.stderr


def test_a_long_row_prints_its_ends_and_a_count_unless_full() -> None:
    r = run("3", "-2*999")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) < 20, len(lines)
    assert "1000 values, first and last 3 shown; --full prints all" in r.stdout
    assert "..." in r.stdout and "entropy" in r.stdout
    full = run("3", "-2*40", "--full")
    assert full.returncode == 0
    assert "..." not in full.stdout and full.stdout.count("-2.") >= 40
    short = run("8", "0", "-8")  # a short row prints whole, with no count
    assert "values" not in short.stdout and "..." not in short.stdout


def test_sink_softcap_sigmoid_and_yarn_options() -> None:
    r = run("8", "0", "-8", "--sink", "0", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    z = np.exp([8.0, 0.0, -8.0]).sum() + 1.0
    assert d["sink_weight"] == pytest.approx(1 / z, rel=1e-13)
    assert d["key_mass"] + d["sink_weight"] == pytest.approx(1.0, abs=1e-15)
    r = run("8", "0", "-8", "--sink", "0")
    assert "sink weight: 0.0003352" in r.stdout
    r = run("30", "0", "-30", "--softcap", "5", "--json")
    assert max(abs(x) for x in json.loads(r.stdout)["scaled"]) <= 5.0
    r = run("3", "-2*9", "--yarn", "5", "--json")
    factor = (0.1 * np.log(10 / 5) + 1) ** 2
    np.testing.assert_allclose(json.loads(r.stdout)["scaled"][:2], [3 * factor, -2 * factor])
    r = run("1", "2", "--sigmoid", "--sink", "1")
    assert r.returncode == 2 and "--sink" in r.stderr and "Traceback" not in r.stderr
    r = run("1", "2", "--yarn", "0")
    assert r.returncode == 2 and "--yarn" in r.stderr
