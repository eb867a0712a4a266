"""The hostile files, through every reader: each is refused with one clear line (``FILE: field
path: what is wrong``, naming the file) or, for the readers that never refuse, falls back; nothing
on disk changes; every read stays under a time and a memory bound. Then every field of each
reader's valid document is replaced, one at a time, by each hostile value: accepted and safe to
use downstream, or refused the same clear way.

The bounds are a hang and blow-up detector, not a benchmark: the slowest case reads in well under
a second and peaks at tens of MB (``bench/bench_readers.py`` prints the figures)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.corpus import (
    HOSTILE_CONTENT,
    HOSTILE_PLACES,
    HOSTILE_SVG,
    HOSTILE_VALUES,
    paths,
    replaced,
    spread,
)
from tests.fuzz.readers import Reader, readers

READERS = readers()
#: seconds one read may take (a hang would take forever; the slowest case reads in < 1 s)
TIME_BOUND_S = 20.0
#: how far one read may raise the resident memory at its peak (the 20 MB cases: ~3x that)
MEMORY_BOUND = 256 * 2**20
#: longest error line (the path, the field path, the problem, and for an unknown key the known
#: ones: a few hundred characters; a bad value is quoted by a prefix of 40)
LINE_MAX = 1000


def tree(root: Path) -> list[tuple[str, int, int]]:
    """(name, size, mtime) of everything under ``root`` (not following links)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out.append((os.path.relpath(os.path.join(dirpath, name), root), st.st_size,
                        st.st_mtime_ns))
    return sorted(out)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        return int(re.search(rf"{field}:\s+(\d+)", fh.read()).group(1))


def _reset_peak() -> bool:
    """Reset the process's peak resident memory (Linux); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def measured(fn) -> tuple[Any, BaseException | None, float, int]:
    """(result, exception, seconds, bytes the resident memory rose to above where it was) of
    ``fn()``; the memory is the kernel's peak (VmHWM after a reset), 0 where it cannot be read."""
    tracks = _reset_peak()
    before = _status_kb("VmRSS") if tracks else 0
    start = time.perf_counter()
    result, error = None, None
    try:
        result = fn()
    except BaseException as exc:  # judged by the caller
        error = exc
    seconds = time.perf_counter() - start
    peak = max(0, _status_kb("VmHWM") - before) * 1024 if tracks else 0
    return result, error, seconds, peak


def judge(reader: Reader, where: Path, result: Any, error: BaseException | None, seconds: float,
          peak: int, hostile: bool) -> None:
    """The contract of a read (``hostile``: the file must not be taken)."""
    assert seconds < TIME_BOUND_S, f"{reader.name}: {seconds:.1f} s"
    assert peak < MEMORY_BOUND, f"{reader.name}: {peak / 2**20:.0f} MB"
    if error is not None:
        assert isinstance(error, reader.errors), (
            f"{reader.name}: {type(error).__name__}: {str(error)[:300]}")
        line = str(error)
        assert "\n" not in line and len(line) <= LINE_MAX, line[:LINE_MAX * 2]
        assert str(where) in line or where.name in line, line
        return
    if reader.errors and hostile:
        pytest.fail(f"{reader.name}: took a hostile file: {str(result)[:200]}")
    if not reader.errors and hostile:
        assert reader.refused(result), f"{reader.name}: took a hostile file: {str(result)[:200]}"
    assert reader.sane(result), f"{reader.name}: unusable result {str(result)[:200]}"


def run_case(reader: Reader, tmp_path: Path, fill, hostile: bool = True) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    where = tmp_path / f"case{reader.suffix}"
    target = reader.prepare(where)
    fill(target)
    before = tree(tmp_path)
    result, error, seconds, peak = measured(lambda: reader.read(where))
    judge(reader, where, result, error, seconds, peak, hostile)
    assert tree(tmp_path) == before, f"{reader.name} changed files"


@pytest.mark.parametrize("case", HOSTILE_CONTENT)
@pytest.mark.parametrize("name", READERS)
def test_hostile_content_through_every_reader(name: str, case: str, tmp_path: Path, qapp) -> None:
    reader = READERS[name]
    run_case(reader, tmp_path, lambda target: reader.write(target, HOSTILE_CONTENT[case]()),
             hostile=case not in reader.sound)


@pytest.mark.parametrize("case", HOSTILE_PLACES)
@pytest.mark.parametrize("name", READERS)
def test_what_is_not_a_file_through_every_reader(name: str, case: str, tmp_path: Path,
                                                 qapp) -> None:
    if case == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    if not READERS[name].files:
        pytest.skip("not a file reader")
    run_case(READERS[name], tmp_path, HOSTILE_PLACES[case])


@pytest.mark.parametrize("case", HOSTILE_CONTENT)
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_hostile_content_as_the_image_itself(suffix: str, case: str, tmp_path: Path,
                                             qapp) -> None:
    reader = READERS["figure_png" if suffix == ".png" else "figure_svg"]
    run_case(reader, tmp_path, lambda target: target.write_bytes(HOSTILE_CONTENT[case]()))


@pytest.mark.parametrize("case", HOSTILE_SVG)
def test_a_hostile_svg_is_streamed_not_built(case: str, tmp_path: Path, qapp) -> None:
    """Millions of nested or flat elements: the reader stops at its depth or element limit (a
    tree of them took 1.3-2.5 GB and up to 105 s)."""
    reader = READERS["figure_svg"]
    run_case(reader, tmp_path, lambda target: target.write_bytes(HOSTILE_SVG[case]()))


MUTATED = [n for n, r in READERS.items() if r.valid is not None]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
@pytest.mark.parametrize("name", MUTATED)
def test_each_field_replaced_by_each_hostile_value(name: str, value: str, tmp_path: Path,
                                                   qapp) -> None:
    reader = READERS[name]
    valid = reader.valid()
    for i, path in enumerate(spread(list(paths(valid)))):
        doc = replaced(valid, path, HOSTILE_VALUES[value])
        run_case(reader, tmp_path / str(i), lambda target, doc=doc: reader.write(target, doc),
                 hostile=False)


@pytest.mark.parametrize("name", MUTATED)
def test_each_valid_document_is_taken(name: str, tmp_path: Path, qapp) -> None:
    """The control: the valid document itself is read, and is usable."""
    reader = READERS[name]
    where = tmp_path / f"case{reader.suffix}"
    reader.write(reader.prepare(where), reader.valid())
    result = reader.read(where)
    assert reader.sane(result)
    if name in ("job_file", "progress"):  # (the others have no refusal value)
        assert not reader.refused(result)
