"""Files written atomically (temp file in the same folder, then rename): never half-written."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ConfigError, WouldOverwrite


def ensure_writable_dir(path: str | os.PathLike[str], field: str = "out") -> Path:
    """Create ``path`` if needed and prove we can write there, before any long work starts."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(field, f"{str(path)!r} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(field, f"cannot write to {str(path)!r}: {reason}") from None
    return path


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
        elif (out / name).exists() or (out / name).is_symlink():
            found.add(name)
    for pattern in patterns:
        found.update(p.name for p in out.glob(pattern))
    return sorted(found)


def output_dir(path: str | os.PathLike[str], names: Iterable[str] = (),
               patterns: Iterable[str] = (), force: bool = False, field: str = "out") -> Path:
    """``path`` made writable for a command that writes ``names`` (and files matching
    ``patterns``): a folder already holding any of them is refused (WouldOverwrite naming the
    files) unless ``force``: a user's files are never replaced silently."""
    if not force:
        hits = files_in_the_way(path, names, patterns)
        if hits:
            raise WouldOverwrite(str(path), hits, field)
    return ensure_writable_dir(path, field)


@contextlib.contextmanager
def staged(out: str | os.PathLike[str], prefix: str = ".staging-") -> Iterator[Path]:
    """A hidden folder inside ``out`` to write a set of files into; when the block ends without
    an error every file in it is moved into ``out``, else none is: a failure (disk full) leaves
    no mix of new and old files. The folder is removed either way."""
    out = Path(out)
    stage = Path(tempfile.mkdtemp(prefix=prefix, dir=out))
    try:
        yield stage
        for path in sorted(stage.iterdir()):
            os.replace(path, out / path.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _default_file_mode() -> int:
    """What ``open(..., "w")`` would give a new file: 0o666 less the process umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


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
