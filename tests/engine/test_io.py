"""Atomic writes: complete files with ordinary permissions, never a half-written one."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.io import atomic_write_text, ensure_writable_dir, read_csv, write_csv, write_npz


def test_written_files_get_the_usual_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        p = atomic_write_text(tmp_path / "a.txt", "hello")
    finally:
        os.umask(old)
    assert p.read_text() == "hello"
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert [x.name for x in tmp_path.iterdir()] == ["a.txt"]  # no temp file left


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "h.npz"
    write_npz(target, {"a": np.arange(3.0)})
    before = target.read_bytes()
    with pytest.raises(ValueError):
        write_npz(target, {"a": np.array([1.0, np.nan])})  # refused: non-finite
    assert target.read_bytes() == before
    assert [x.name for x in tmp_path.iterdir()] == ["h.npz"]


def test_csv_round_trips_floats_exactly(tmp_path: Path) -> None:
    rows = [{"x": 0.1 + 0.2, "name": "sqrt"}, {"x": 1e-300, "name": "dk"}]
    write_csv(tmp_path / "t.csv", rows)
    back = read_csv(tmp_path / "t.csv")
    assert [float(r["x"]) for r in back] == [r["x"] for r in rows]
    with pytest.raises(ValueError):
        write_csv(tmp_path / "bad.csv", [{"x": float("inf")}])


def test_out_that_is_a_file_is_named_clearly(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="not a folder") as info:
        ensure_writable_dir(f)
    assert info.value.field == "out"


def test_staged_moves_every_file_or_none(tmp_path) -> None:
    from engine.io import staged

    with staged(tmp_path) as stage:
        (stage / "a.csv").write_text("a")
        (stage / "b.csv").write_text("b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]
    (tmp_path / "a.csv").write_text("old")
    with pytest.raises(OSError), staged(tmp_path) as stage:
        (stage / "a.csv").write_text("new")
        raise OSError(28, "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]  # no staging folder
    assert (tmp_path / "a.csv").read_text() == "old"
