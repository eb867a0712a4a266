"""Output folders are all old or all new: ``check_path`` refuses a path no file can have,
``check_output_dir`` creates nothing, and ``staged`` swaps a complete set of files in or leaves
the folder exactly as it was (disk full, an error while moving, Ctrl+C)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import engine.io as io_mod
from engine.errors import ConfigError, WouldOverwrite
from engine.io import check_output_dir, check_path, staged


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` with its content (None for a folder), hidden ones included."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


# -- check_path --------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "words"), [
    ("", "must not be empty"),
    ("   ", "must not be empty"),
    ("a\x00b", "NUL"),
    ("x" * 256, "256 bytes long, more than the 255"),
    ("é" * 128, "256 bytes long, more than the 255"),  # 128 characters, 256 bytes
    ("/".join(["d" * 200] * 21), "more than the 4,096 a path may have"),
])
def test_a_path_no_file_can_have_is_one_line(tmp_path: Path, path: str, words: str) -> None:
    with pytest.raises(ConfigError) as exc:
        check_path(str(tmp_path / path) if path.strip() else path, "out")
    assert exc.value.field == "out" and words in exc.value.message
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 300


def test_names_at_the_limit_and_paths_not_there_yet_are_fine(tmp_path: Path) -> None:
    assert check_path(tmp_path / ("x" * 255)) == tmp_path / ("x" * 255)
    assert check_path(tmp_path / "not" / "yet") == tmp_path / "not" / "yet"


def test_a_loop_of_links_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ConfigError, match="symbolic links"):
        check_path(tmp_path / "a" / "out", "out")


# -- check_output_dir: refuses, creates nothing -------------------------------------------------
def test_checking_a_new_folder_creates_nothing(tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    assert check_output_dir(tmp_path / "a" / "b", ("x.csv",)) == tmp_path / "a" / "b"
    assert snapshot(tmp_path) == before


def test_a_file_where_a_folder_goes_is_refused_even_with_force(tmp_path: Path) -> None:
    (tmp_path / "jobs").write_text("mine")
    for force in (False, True):
        with pytest.raises(ConfigError, match="is a file where this writes a folder"):
            check_output_dir(tmp_path, ("summary.csv", "jobs/"), force=force)
    assert snapshot(tmp_path) == {"jobs": b"mine"}


def test_files_in_the_way_are_named_and_force_lets_them_be(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("old")
    with pytest.raises(WouldOverwrite) as exc:
        check_output_dir(tmp_path, ("a.csv", "b.csv"))
    assert exc.value.files == ["a.csv"]
    check_output_dir(tmp_path, ("a.csv",), force=True)


def test_an_unwritable_parent_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="cannot write"):
        check_output_dir(tmp_path / "file" / "out")


# -- staged: all new, or all old ----------------------------------------------------------------
def test_a_new_folder_appears_only_complete(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    with staged(out, names=("x.csv",)) as stage:
        (stage / "x.csv").write_text("new")
        assert not out.exists()  # not yet: a reader never sees half of it
    assert snapshot(tmp_path) == {"a": None, "a/b": None, "a/b/x.csv": b"new"}
    assert (out.stat().st_mode & 0o777) == 0o777 & ~io_mod._umask()  # not mkdtemp's 0700


def test_a_failure_leaves_no_new_folder_and_no_parents(tmp_path: Path) -> None:
    with pytest.raises(OSError), staged(tmp_path / "a" / "b") as stage:
        (stage / "x.csv").write_text("new")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert snapshot(tmp_path) == {}


def _old_run(out: Path) -> None:
    out.mkdir()
    for name in ("summary.csv", "config.json", "d4_scores.png", "notes.txt"):
        (out / name).write_text(f"old {name}")


def test_a_complete_set_replaces_every_file_the_command_writes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _old_run(out)
    with staged(out, names=("summary.csv", "config.json"), patterns=("*.png",)) as stage:
        (stage / "summary.csv").write_text("new")
        (stage / "config.json").write_text("new")
        (stage / "d8_scores.png").write_text("new")
    # the old run's figure of another d_k is gone (it would sit beside the new run as if one);
    # the user's notes stay
    assert snapshot(out) == {"summary.csv": b"new", "config.json": b"new",
                             "d8_scores.png": b"new", "notes.txt": b"old notes.txt"}


def test_disk_full_while_writing_leaves_the_old_folder_intact(tmp_path: Path, monkeypatch
                                                              ) -> None:
    """ENOSPC at the second file (patched at the write itself, under atomic_write_bytes)."""
    out = tmp_path / "run"
    _old_run(out)
    before = snapshot(out)
    real_fdopen, calls = os.fdopen, []

    def fdopen(fd, *args, **kw):
        calls.append(fd)
        if len(calls) == 2:
            os.close(fd)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fdopen(fd, *args, **kw)

    monkeypatch.setattr(io_mod.os, "fdopen", fdopen)
    with pytest.raises(OSError, match="No space"), staged(out, names=("summary.csv",
                                                                       "config.json")) as stage:
        io_mod.write_csv(stage / "summary.csv", [{"a": 1.0}])
        io_mod.write_json(stage / "config.json", {"b": 2})
    assert snapshot(out) == before


def test_an_error_while_swapping_puts_every_old_file_back(tmp_path: Path, monkeypatch) -> None:
    """The moves themselves fail halfway (the third rename): what moved is moved back."""
    out = tmp_path / "run"
    _old_run(out)
    before = snapshot(out)
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append((src, dst))
        if len(calls) == 3:
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(src, dst)

    monkeypatch.setattr(io_mod.os, "replace", replace)
    with pytest.raises(OSError, match="Input/output"), staged(
            out, names=("summary.csv", "config.json")) as stage:
        (stage / "summary.csv").write_text("new")
        (stage / "config.json").write_text("new")
    assert snapshot(out) == before
    assert len(calls) > 3  # the undo ran


def test_an_interrupt_inside_the_block_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _old_run(out)
    before = snapshot(out)
    with pytest.raises(KeyboardInterrupt), staged(out, names=("summary.csv",)) as stage:
        (stage / "summary.csv").write_text("new")
        raise KeyboardInterrupt
    assert snapshot(out) == before
