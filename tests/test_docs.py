"""The project stands alone: its science notes live in docs/ and every reference points there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCIENCE = ROOT / "docs" / "SCIENCE.md"
SOURCES = ("engine", "ui", "tests", "bench", "resources", "main.py", "README.md", "pyproject.toml")


def _project_files() -> list[Path]:
    files: list[Path] = []
    for name in SOURCES:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in path.rglob("*") if p.suffix in {".py", ".md", ".json", ".toml"}]
    return files


def test_every_science_reference_points_into_docs() -> None:
    assert SCIENCE.is_file()
    bad = []
    for path in _project_files():
        if path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"[\w./-]*SCIENCE\.md", text):
            if m.group(0) != "docs/SCIENCE.md":
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
        outside = "..", "/shared"  # a file outside the repository
        if (outside[0] + outside[1] in text or "/work" + outside[1] in text):
            bad.append(f"{path.relative_to(ROOT)}: refers outside the project")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("section", ["The core argument", "Exact shortcut for Gaussian keys",
                                     "Numerics that must hold", "Worked examples",
                                     "Shift invariance: which means cancel",
                                     "The gradient, link by link"])
def test_sections_the_code_cites_exist(section: str) -> None:
    assert f"## {section}" in SCIENCE.read_text(encoding="utf-8")


def test_worked_examples_table_is_the_one_the_tests_check() -> None:
    from tests.engine.test_softmax import WORKED

    text = SCIENCE.read_text(encoding="utf-8")
    for scores, weights, max_entry in WORKED:
        row = f"| {', '.join(str(s) for s in scores)} | {', '.join(weights)} | {max_entry} |"
        assert row in text, row
