"""What an installed lab is made of, checked from the source tree (fast): every package and every
data file reaches the wheel, the top-level names are the ones docs/install.md states, data is
found through one function, and the version has one source. tests/test_installed_wheel.py builds
and installs the wheel itself (slow)."""

from __future__ import annotations

import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (CI's); 3.10 runs the lab, not this file
ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
#: the checkout's data folder and the package it becomes in a wheel
DATA, DATA_PACKAGE = "resources", "engine.resources"
#: what stays in the checkout only (the README's pictures)
NOT_SHIPPED = ("screenshots/*",)


def _code_packages() -> set[str]:
    """Every folder under engine/ and ui/ holding Python code, as a dotted name (found on disk)."""
    found = set()
    for top in ("engine", "ui"):
        for init in (ROOT / top).rglob("*.py"):
            if "__pycache__" not in init.parts:
                found.add(".".join(init.parent.relative_to(ROOT).parts))
    return found


def _data_files() -> list[str]:
    """resources/ files a user's lab reads (relative, with "/")."""
    files = [p.relative_to(ROOT / DATA).as_posix() for p in (ROOT / DATA).rglob("*") if p.is_file()]
    return sorted(f for f in files if not any(fnmatch(f, pat) for pat in NOT_SHIPPED))


def _shipped(path: str) -> bool:
    """Whether pyproject's package-data puts resources/``path`` into the wheel."""
    folder, _, name = path.rpartition("/")
    package = DATA_PACKAGE + ("." + folder.replace("/", ".") if folder else "")
    patterns = SETUPTOOLS["package-data"].get(package, [])
    return package in SETUPTOOLS["packages"] and any(fnmatch(name, pat) for pat in patterns)


def test_every_code_package_is_in_the_distribution() -> None:
    listed = {p for p in SETUPTOOLS["packages"] if not p.startswith(DATA_PACKAGE)}
    on_disk = _code_packages()
    assert on_disk - listed == set(), f"add to pyproject.toml [tool.setuptools] packages: {sorted(on_disk - listed)}"
    assert listed - on_disk == set(), f"listed but not on disk: {sorted(listed - on_disk)}"
    assert SETUPTOOLS["py-modules"] == ["main"]


def test_every_data_file_is_package_data_and_the_mapping_points_at_resources() -> None:
    assert SETUPTOOLS["package-dir"] == {DATA_PACKAGE: DATA}
    files = _data_files()
    assert {"claims.json", "tour.json", "probe_texts.json", "icon.png",
            "presets/training.json", "presets/simulation.json"} <= set(files)
    assert sum(f.startswith("experiments/") for f in files) >= 10
    missing = [f for f in files if not _shipped(f)]
    assert not missing, f"resources/ files the wheel would lack (pyproject package-data): {missing}"
    assert not _shipped("screenshots/main_light.png")


def _documented_top_level() -> set[str]:
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    para = re.search(r"\*\*Top-level names\.\*\*(.*?)\n\n", text, flags=re.S)
    assert para is not None, "docs/install.md: the **Top-level names.** paragraph"
    stated = " ".join(para.group(1).split()).split("These are generic names")[0]  # what it names
    return set(re.findall(r"`([\w.-]+)`", stated))


def test_the_top_level_names_are_the_documented_ones() -> None:
    """A new top-level name (a package or module beside engine, ui, main) changes what the wheel
    puts into site-packages: pyproject's packages, check-wheel-contents' toplevel (which fails a
    wheel that differs) and docs/install.md must all say it."""
    from_packages = {p.split(".")[0] for p in SETUPTOOLS["packages"]} | set(SETUPTOOLS["py-modules"])
    checked = {name.removesuffix(".py") for name in PYPROJECT["tool"]["check-wheel-contents"]["toplevel"]}
    scripts = set(PYPROJECT["project"]["scripts"])
    assert from_packages == checked == {"engine", "ui", "main"}
    assert _documented_top_level() == from_packages | scripts


def test_no_module_finds_the_data_by_its_own_path() -> None:
    """engine/bundled.py is the one place that knows where resources/ is: a module building the
    path itself (``Path(__file__).parents[2] / "resources"``) breaks in an installed wheel."""
    offenders = []
    for path in [ROOT / "main.py", *(ROOT / "engine").rglob("*.py"), *(ROOT / "ui").rglob("*.py"),
                 *(ROOT / "bench").rglob("*.py")]:
        if path.name == "bundled.py" and path.parent.name == "engine":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"""/\s*["']resources["']|["']resources/""", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders


def test_data_is_found_in_the_checkout() -> None:
    from engine.bundled import checkout_root, resource, resources_root

    assert checkout_root() == ROOT
    assert resources_root() == ROOT / DATA
    assert resource("presets", "training.json") == ROOT / DATA / "presets" / "training.json"


def _fake_engine(site: Path, packaged: bool) -> None:
    """An installed-looking engine package (no pyproject.toml beside it), with or without its
    package data."""
    (site / "engine").mkdir(parents=True)
    (site / "engine" / "__init__.py").write_text("", encoding="utf-8")
    (site / "engine" / "bundled.py").write_bytes((ROOT / "engine" / "bundled.py").read_bytes())
    if packaged:
        (site / "engine" / "resources" / "presets").mkdir(parents=True)
        (site / "engine" / "resources" / "presets" / "x.json").write_text("{}", encoding="utf-8")


def _found(site: Path, cwd: Path) -> str:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from engine.bundled import resource; "
            "print(resource('presets', 'x.json'))")
    result = subprocess.run([sys.executable, "-I", "-c", code, str(site)], cwd=cwd,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_an_installed_engine_reads_its_package_data(tmp_path: Path) -> None:
    """The package data wins, even beside a checkout-like folder (resources/ and pyproject.toml
    next to engine/, and in the folder it is started from)."""
    site, cwd = tmp_path / "site", tmp_path / "work"
    _fake_engine(site, packaged=True)
    for folder in (site, cwd):
        (folder / "resources" / "presets").mkdir(parents=True)
        (folder / "pyproject.toml").write_text("", encoding="utf-8")
    assert _found(site, cwd) == str(site / "engine" / "resources" / "presets" / "x.json")


def test_a_broken_installation_names_where_the_file_should_be(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _fake_engine(site, packaged=False)
    assert _found(site, tmp_path) == str(site / "engine" / "resources" / "presets" / "x.json")


def test_the_version_has_one_source(tmp_path: Path) -> None:
    from engine.about import pyproject_version, version, version_line

    assert version() == PYPROJECT["project"]["version"]
    assert "dynamic" not in PYPROJECT["project"] or "version" not in PYPROJECT["project"]["dynamic"]
    assert f"attention-lab {version()} (torch " in version_line()
    other = tmp_path / "pyproject.toml"  # a version in another table is not the project's
    other.write_text('[tool.x]\nversion = "9"\n[project]\nname = "a"\nversion = "1.2.3"\n'
                     '[tool.y]\nversion = "8"\n', encoding="utf-8")
    assert pyproject_version(other) == "1.2.3"
    other.write_text('[project]\nname = "a"\n[tool.y]\nversion = "8"\n', encoding="utf-8")
    assert pyproject_version(other) is None


def test_version_prints_the_lab_torch_and_the_device() -> None:
    import importlib.metadata

    result = subprocess.run([sys.executable, "main.py", "--version"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    torch = importlib.metadata.version("torch")
    assert line.startswith(f"attention-lab {PYPROJECT['project']['version']} (torch {torch}, device ")
    assert re.search(r"device (cpu|cuda \(.+\)), Python 3\.\d+\.\d+\)$", line), line
