"""The engine is the Qt-free model layer: nothing under engine/ may import Qt or ui/."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "qtpy", "superqt", "ui")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_engine_never_imports_qt_or_ui() -> None:
    offenders = []
    files = sorted((ROOT / "engine").rglob("*.py"))
    assert files, "engine/ has no modules?"
    for path in files:
        for name in _imports(path):
            if name.split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.slow
def test_importing_the_whole_engine_loads_no_qt() -> None:
    code = (
        "import importlib, pkgutil, sys, engine\n"
        "for m in pkgutil.walk_packages(engine.__path__, 'engine.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in %r]\n"
        "print(','.join(bad))\n".replace("%r", repr(FORBIDDEN))
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_import_linter_contract() -> None:
    """The same rule, checked by import-linter from pyproject.toml (catches indirect imports)."""
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), str(ROOT / "pyproject.toml")], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_two_engine_modules_import_each_other() -> None:
    """A pair of modules that import each other (even inside a function) is one job split in
    two: e.g. the experiment runner and its time estimate share the process pool, which lives
    in its own module instead."""
    graph = {_module_name(p): set(_imports(p)) for p in sorted((ROOT / "engine").rglob("*.py"))}
    pairs = sorted({tuple(sorted((a, b))) for a, deps in graph.items() for b in deps
                    if b != a and b in graph and a in graph[b]})
    assert not pairs, pairs
