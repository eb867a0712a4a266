"""The lab as a user installs it: ``python -m build`` makes the sdist and, from it, the wheel; both
pass ``check-wheel-contents`` and ``twine check``; the wheel, installed (not editable) into a
fresh virtual environment, runs every kind of command from a folder outside the checkout and
finds its data there.

Offline: the build uses this environment's setuptools (``--no-isolation``), and the fresh
environment reaches this one's packages (torch, PySide6, ...) through a .pth file listing its
site-packages, so nothing is downloaded or installed but the wheel itself. Such a path line adds
those folders after the fresh environment's own and runs none of their .pth files: an editable
install of the lab there (its import finder) stays inactive, and ``engine``, ``ui`` and ``main``
come from the wheel, which the test checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("build")
pytest.importorskip("twine")
pytest.importorskip("check_wheel_contents")

ROOT = Path(__file__).resolve().parents[1]
#: what the sdist is built from (the rest of the checkout is not part of the distribution)
SOURCES = ("pyproject.toml", "README.md", "main.py", "engine", "ui", "resources")
BIN = "Scripts" if os.name == "nt" else "bin"


def _run(argv: list, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                            timeout=timeout, **kwargs)
    assert result.returncode == 0, (argv, result.stdout[-3000:], result.stderr[-3000:])
    return result


def _build(tmp: Path) -> tuple[Path, Path]:
    """sdist and wheel, built from a copy of the sources (the build writes build/ and
    *.egg-info beside them; the checkout stays untouched)."""
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp / "dist", src])
    (wheel,), (sdist,) = (tmp / "dist").glob("*.whl"), (tmp / "dist").glob("*.tar.gz")
    return wheel, sdist


def _check_contents(wheel: Path, sdist: Path) -> None:
    # the top-level names are pyproject's [tool.check-wheel-contents] toplevel (W201/W202)
    _run([sys.executable, "-m", "check_wheel_contents", "--config", ROOT / "pyproject.toml", wheel])
    _run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdist])
    names = zipfile.ZipFile(wheel).namelist()
    data = [p.relative_to(ROOT / "resources").as_posix() for p in (ROOT / "resources").rglob("*")
            if p.is_file() and p.parent.name != "screenshots"]
    missing = [f for f in data if f"engine/resources/{f}" not in names]
    assert not missing and len(data) >= 15, missing
    assert not [n for n in names if "screenshots" in n or "__pycache__" in n or n.startswith("tests/")]
    print(f"\nwheel: {len(names)} files, {wheel.stat().st_size / 1e3:.0f} kB; "
          f"sdist {sdist.stat().st_size / 1e3:.0f} kB")


def _fresh_env(tmp: Path, wheel: Path) -> tuple[Path, Path]:
    """A new virtual environment with the wheel installed (not editable); its Python and its
    site-packages."""
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / BIN / ("python.exe" if os.name == "nt" else "python")
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                        ).stdout.strip())
    parents = [*site.getsitepackages(), site.getusersitepackages()]
    (purelib / "_parent_environment.pth").write_text(
        "".join(f"{p}\n" for p in parents if Path(p).is_dir()), encoding="utf-8")
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile", wheel])
    return python, purelib


def _lab(env: dict, cwd: Path, venv_bin: Path, *args: str, timeout: float = 300):
    return _run([venv_bin / "attention-lab", *args], timeout=timeout, cwd=cwd, env=env)


TOUR_FIRST_STEP = """
from PySide6.QtWidgets import QApplication
app = QApplication([])
from ui.window.main_window import MainWindow
w = MainWindow(theme="light", restore=False, persist=False)
w.show()
w.show_tour()
app.processEvents()
print(w.tour.index, w.tour.current_step.title, flush=True)
w.shutdown()
w.deleteLater()
app.processEvents()
"""


@pytest.mark.slow
def test_the_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    wheel, sdist = _build(tmp_path)
    _check_contents(wheel, sdist)
    python, purelib = _fresh_env(tmp_path, wheel)
    work = tmp_path / "work"  # outside the checkout, holding nothing of it
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path / "home"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    venv_bin = python.parent

    where = _run([python, "-c", "import engine, ui, main, engine.bundled as b; print(engine.__file__);"
                  "print(ui.__file__); print(main.__file__); print(b.resources_root())"],
                 cwd=work, env=env).stdout.split()
    assert [Path(p) for p in where] == [purelib / "engine" / "__init__.py", purelib / "ui" / "__init__.py",
                                        purelib / "main.py", purelib / "engine" / "resources"]

    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert _lab(env, work, venv_bin, "--version").stdout.startswith(f"attention-lab {version} (torch ")

    shot = _lab(env, work, venv_bin, "--screenshot", "shot.png")
    assert (work / "shot.png").stat().st_size > 10_000
    assert not re.search(r"unavailable|no such file|Traceback", shot.stderr), shot.stderr[-2000:]

    _lab(env, work, venv_bin, "train", "--preset", "demo", "--steps", "5", "--out", "train", "--quiet")
    assert (work / "train" / "metrics.csv").is_file()
    _lab(env, work, venv_bin, "simulate", "--preset", "correlated", "--trials", "200", "--out",
         "sim", "--quiet")
    ran = json.loads((work / "sim" / "config.json").read_text())["config"]
    preset = json.loads((ROOT / "resources" / "presets" / "simulation.json").read_text())
    wanted = preset["correlated"]["config"]
    assert {k: ran[k] for k in ("d_k", "correlation", "scalings")} == {
        k: wanted[k] for k in ("d_k", "correlation", "scalings")}
    assert (work / "sim" / "summary.csv").is_file()

    listing = _lab(env, work, venv_bin, "experiment", "--list").stdout
    builtins = [p.stem for p in (ROOT / "resources" / "experiments").glob("*.json")]
    assert len(builtins) >= 10 and all(re.search(rf"^{b}\b", listing, re.M) for b in builtins), listing

    tally = _lab(env, work, venv_bin, "reproduce", "--fast", "--quiet").stdout
    assert re.search(r"^[1-9]\d* ok, 0 failed, \d+ skipped", tally, re.M), tally

    assert "Jacobian" in _lab(env, work, venv_bin, "inspect", "8", "0", "-8").stdout

    first = json.loads((ROOT / "resources" / "tour.json").read_text(encoding="utf-8"))["steps"][0]
    shown = _run([python, "-c", TOUR_FIRST_STEP], cwd=work, env=env).stdout.strip()
    assert shown == f"0 {first['title']}"

    _lab(env, work, venv_bin, "--install-desktop-entry")
    entry = (tmp_path / "data" / "applications" / "attention-lab.desktop").read_text()
    assert f"\nExec={venv_bin / 'attention-lab'}\n" in entry
    assert not list(work.glob("*.desktop")) and sorted(p.name for p in work.iterdir()) == [
        "shot.png", "sim", "train"]
    print(f"installed-wheel test: {time.perf_counter() - t0:.0f} s")
