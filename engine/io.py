"""Files written atomically (temp file in the same folder, then rename): never half-written;
output folders checked before any work (``check_path``, ``check_output_dir``: nothing is
created by a refused command) and filled all or none (``staged``)."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ConfigError, WouldOverwrite, quote

#: the longest name of one file or folder (bytes; ext4, XFS, APFS, NTFS) and of a whole path
NAME_MAX = 255
PATH_MAX = 4096


def check_path(path: str | os.PathLike[str], field: str = "path") -> Path:
    """``path`` as a Path, refused (ConfigError naming ``field``, one line) when no file could
    ever have that name: empty, a NUL character, a name longer than NAME_MAX bytes, longer
    than PATH_MAX, or one the system cannot look up (a loop of links, no permission). Every path
    option goes through here first, so a later ``exists()`` cannot raise "File name too long".
    A path that does not exist (yet) is fine."""
    text = os.fsdecode(path) if isinstance(path, bytes) else os.fspath(path)
    if not text.strip():
        raise ConfigError(field, "must not be empty (name a file or folder)")
    if "\x00" in text:
        raise ConfigError(field, f"{quote(text)} holds a NUL character")
    try:
        raw = os.fsencode(text)
    except UnicodeError:
        raise ConfigError(field, f"{quote(text)} holds a character no file name can hold"
                          ) from None
    if len(raw) > PATH_MAX:
        raise ConfigError(field, f"{quote(text)} is {len(raw):,} bytes long, more than the "
                          f"{PATH_MAX:,} a path may have")
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        raise ConfigError(field, f"{quote(text)}: a name in it is {len(longest):,} bytes long, "
                          f"more than the {NAME_MAX} a file or folder name may have")
    try:
        os.stat(text)
    except (FileNotFoundError, NotADirectoryError):
        pass  # not there (yet): the command says what it needs
    except OSError as exc:  # a loop of links, no permission, ...
        raise ConfigError(field, f"{quote(text)}: {exc.strerror or exc}") from None
    return Path(text)


def ensure_writable_dir(path: str | os.PathLike[str], field: str = "out") -> Path:
    """Create ``path`` if needed and prove we can write there, before any long work starts."""
    path = check_path(path, field)
    if path.exists() and not path.is_dir():
        raise ConfigError(field, f"{str(path)!r} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        _probe_write(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(field, f"cannot write to {str(path)!r}: {reason}") from None
    return path


def _probe_write(folder: Path) -> None:
    """Create and remove a file in ``folder`` (OSError if that is not possible): no trace."""
    fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
    os.close(fd)
    os.unlink(probe)


#: what a figure writer may name its files: any PNG or SVG in a folder would be replaced
FIGURE_PATTERNS = ("*.png", "*.svg")


def files_in_the_way(out: str | os.PathLike[str], names: Iterable[str] = (),
                     patterns: Iterable[str] = ()) -> list[str]:
    """The files in ``out`` that writing ``names`` (a name ending in "/" stands for every file in
    that folder) and files matching ``patterns`` would replace, sorted; [] for a new folder."""
    out = Path(out)
    if not out.is_dir():
        return []
    found: set[str] = set()
    for name in names:
        if name.endswith("/"):
            sub = out / name.rstrip("/")
            if sub.is_dir():
                found.update(f"{name}{p.name}" for p in sub.iterdir() if not p.name.startswith("."))
            elif os.path.lexists(sub):  # a file where the command writes a folder
                found.add(name.rstrip("/"))
        elif os.path.lexists(out / name):
            found.add(name)
    for pattern in patterns:
        found.update(p.name for p in out.glob(pattern))
    return sorted(found)


def check_output_dir(path: str | os.PathLike[str], names: Iterable[str] = (),
                     patterns: Iterable[str] = (), force: bool = False, field: str = "out"
                     ) -> Path:
    """``path`` checked for a command that will write ``names`` (and files matching
    ``patterns``) there, creating nothing: a refused command leaves no trace. Refused: a bad
    path (check_path), a file, a folder already holding any of those files (WouldOverwrite
    naming them) unless ``force``, a file where a folder of ``names`` goes (even with
    ``force``), and a folder (or, for a new one, its nearest existing parent) not writable."""
    path = check_path(path, field)
    if os.path.lexists(path) and not path.is_dir():
        raise ConfigError(field, f"{str(path)!r} is a file, not a folder")
    for name in names:
        sub = path / name.rstrip("/")
        if name.endswith("/") and os.path.lexists(sub) and not sub.is_dir():
            raise ConfigError(field, f"{str(sub)!r} is a file where this writes a folder: move "
                              "it away or choose another folder")
    if not force:
        hits = files_in_the_way(path, names, patterns)
        if hits:
            raise WouldOverwrite(str(path), hits, field)
    where = path if path.is_dir() else _nearest_existing(path)
    try:
        if not where.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{str(where)!r} is a file, not a folder")
        _probe_write(where)
    except OSError as exc:
        raise ConfigError(field, f"cannot write to {str(path)!r}: {exc.strerror or exc}"
                          ) from None
    return path


def output_dir(path: str | os.PathLike[str], names: Iterable[str] = (),
               patterns: Iterable[str] = (), force: bool = False, field: str = "out") -> Path:
    """``path`` checked like :func:`check_output_dir`, then created: for a writer that fills
    its folder as it goes (an experiment), not one that stages its outputs (:func:`staged`)."""
    check_output_dir(path, names, patterns, force, field)
    return ensure_writable_dir(path, field)


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (the current folder for a relative path)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


@contextlib.contextmanager
def staged(out: str | os.PathLike[str], prefix: str = ".staging-", names: Iterable[str] = (),
           patterns: Iterable[str] = ()) -> Iterator[Path]:
    """A temporary folder to write a command's outputs into, swapped in when the block ends
    without an error: ``out`` then holds every new file and none of the old files the command
    writes (``names``, files matching ``patterns``, any name the new set has); after an error
    (disk full, Ctrl+C) ``out`` is exactly as it was. A new ``out`` (and its missing parents)
    is created only then, by renaming the stage (a sibling of it); into an existing one the
    files are moved by name (the stage is a hidden folder inside it, so every move is a
    rename on one file system and a user's other files stay)."""
    out = Path(out)
    existing = out.is_dir()
    stage = Path(tempfile.mkdtemp(prefix=prefix, dir=out if existing else _nearest_existing(
        out.parent)))
    try:
        yield stage
        if existing or not _rename_into_place(stage, out):
            _swap_in(stage, out, names, patterns)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _rename_into_place(stage: Path, out: Path) -> bool:
    """Make the stage the new folder ``out`` (False: ``out`` appeared meanwhile); the parents
    made for it are removed again if that fails."""
    made = [p for p in reversed(out.parents) if not os.path.lexists(p)]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(stage, 0o777 & ~_umask())  # a folder like any mkdir'ed one, not mkdtemp's 0700
        os.rename(stage, out)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno == errno.ENOTEMPTY:
            return False
        for parent in reversed(made):
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise


def _swap_in(stage: Path, out: Path, names: Iterable[str], patterns: Iterable[str]) -> None:
    """Move the old files aside and the new ones in, all or none (undone on any error)."""
    new = sorted(p.name for p in stage.iterdir())
    old = {n.split("/")[0] for n in files_in_the_way(out, names, patterns)}
    old.update(n for n in new if os.path.lexists(out / n))
    aside = Path(tempfile.mkdtemp(prefix=".replaced-", dir=out))
    moved_old: list[str] = []
    moved_new: list[str] = []
    try:
        for name in sorted(old):
            os.replace(out / name, aside / name)
            moved_old.append(name)
        for name in new:
            os.replace(stage / name, out / name)
            moved_new.append(name)
    except BaseException:
        for name in reversed(moved_new):
            with contextlib.suppress(OSError):
                os.replace(out / name, stage / name)
        for name in reversed(moved_old):
            with contextlib.suppress(OSError):
                os.replace(aside / name, out / name)
        with contextlib.suppress(OSError):
            aside.rmdir()  # only if every old file went back
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _default_file_mode() -> int:
    """What ``open(..., "w")`` would give a new file: 0o666 less the process umask."""
    return 0o666 & ~_umask()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temp file in the same folder and ``os.replace``.

    The temp file is created private (mkstemp); it gets the usual permissions before the rename so
    exports are readable like any other file the user writes.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _default_file_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    text = json.dumps(data, indent=2, default=_json_default, allow_nan=False)
    return atomic_write_text(path, text + "\n")


def csv_text(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """CSV of dict rows; floats keep full precision (repr) so the file round-trips."""
    if columns is None:
        columns = list(rows[0].keys()) if rows else []
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k, "")) for k in columns})
    return buf.getvalue()


def _csv_value(value: Any) -> Any:
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"refusing to write a non-finite value ({value}) to CSV")
        return repr(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def write_csv(
    path: str | os.PathLike[str],
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
) -> Path:
    return atomic_write_text(path, csv_text(rows, columns))


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Compressed NPZ; refuses NaN/Inf in float arrays (nothing non-finite is ever exported)."""
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ValueError(f"refusing to write non-finite values in array {name!r}")
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return atomic_write_bytes(path, buf.getvalue())


def package_versions(names: Iterable[str] = ("numpy", "torch", "PySide6", "pyqtgraph")) -> dict[str, str]:
    """Installed versions without importing heavy packages (importlib.metadata only)."""
    from importlib import metadata

    dist_names = {"PySide6": ("PySide6-Essentials", "PySide6")}
    out: dict[str, str] = {}
    for name in names:
        for dist in dist_names.get(name, (name,)):
            try:
                out[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
        else:
            out[name] = "not installed"
    import platform

    out["python"] = platform.python_version()
    return out
