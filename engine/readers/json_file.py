"""JSON from a file or a string, bounded: the size is checked before anything is read, the
nesting depth and the numbers after parsing, so a hostile file costs at most ``max_bytes`` of
reading and a linear walk, never a recursion error, a hang or a NaN reaching the engine.

Errors are :class:`FileFormatError` (``FILE: where: problem``), where is the field path.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from engine.errors import FileFormatError, quote

#: deepest nesting of objects and lists any file of the lab needs (a session: 3, a job file: 4)
MAX_DEPTH = 32
#: the field path quoted in an error is cut to this many characters
PATH_CHARS = 120


def read_json(path: str | os.PathLike[str], *, max_bytes: int, kind: str = "file",
              option: str = "") -> Any:
    """The JSON value in ``path``: refused (FileFormatError) if it is not a regular file, is
    larger than ``max_bytes`` (``kind`` names what such a file is, for the message), is not
    UTF-8, not JSON, nested deeper than MAX_DEPTH or holds NaN/Infinity."""
    path = Path(path)
    raw = read_bytes(path, max_bytes=max_bytes, kind=kind, option=option)
    return parse_json(raw, str(path), max_bytes=max_bytes, kind=kind, option=option)


def check_file(path: str | os.PathLike[str], *, max_bytes: int, kind: str = "file",
               option: str = "") -> int:
    """The size of ``path``, a regular file of at most ``max_bytes`` (a folder, a FIFO, a device
    or a larger file is refused before anything opens it: nothing blocks or streams forever)."""
    path = Path(path)
    try:
        if not path.is_file():
            raise FileFormatError(str(path), "", _not_a_file(path), option)
        size = path.stat().st_size
    except OSError as exc:
        raise FileFormatError(str(path), "", f"cannot read: {exc.strerror or exc}", option
                              ) from None
    if size > max_bytes:
        raise FileFormatError(str(path), "", too_large(size, max_bytes, kind), option)
    return size


def _not_a_file(path: Path) -> str:
    """What ``path`` is instead of a regular file (by its mode: nothing is opened)."""
    if path.is_dir():
        return "is a folder, not a file"
    if not path.exists():
        return "no such file"
    mode = path.stat().st_mode
    what = ("a FIFO (a pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "something")
    return f"is {what}, not a regular file"


def read_bytes(path: str | os.PathLike[str], *, max_bytes: int, kind: str = "file",
               option: str = "") -> bytes:
    """At most ``max_bytes`` of a regular file (a larger one, a folder, a FIFO or a device is
    refused before reading: nothing blocks, nothing reads on forever)."""
    path = Path(path)
    check_file(path, max_bytes=max_bytes, kind=kind, option=option)
    try:
        # non-blocking, and checked again on the open file: a FIFO swapped in meanwhile is
        # refused, never waited on; at most max_bytes + 1 bytes, whatever the size said
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileFormatError(str(path), "", "is not a regular file", option)
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise FileFormatError(str(path), "", f"cannot read: {exc.strerror or exc}", option
                              ) from None
    if len(raw) > max_bytes:  # grew while being read
        raise FileFormatError(str(path), "", too_large(len(raw), max_bytes, kind), option)
    return raw


def too_large(size: int, max_bytes: int, kind: str) -> str:
    return f"{size:,} bytes, more than the {max_bytes:,} any {kind} needs (refused unread)"


def parse_json(raw: bytes | str, source: str, *, max_bytes: int, kind: str = "file",
               option: str = "", max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``raw`` (bytes: UTF-8, a BOM allowed); ``source`` names it in errors."""
    if len(raw) > max_bytes:
        raise FileFormatError(source, "", too_large(len(raw), max_bytes, kind), option)
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FileFormatError(source, "", f"not UTF-8 text (byte {exc.start:,})", option
                                  ) from None
    else:
        text = raw
    try:
        data = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise FileFormatError(source, "", f"nested more than {max_depth} levels deep", option
                              ) from None
    except json.JSONDecodeError as exc:
        if not text.strip():
            raise FileFormatError(source, "", "empty (no JSON in it)", option) from None
        raise FileFormatError(source, "", f"not valid JSON ({exc.msg} at line {exc.lineno}, "
                                          f"column {exc.colno})", option) from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
        raise FileFormatError(source, "", f"not valid JSON ({str(exc)[:80]})", option) from None
    problem = check_tree(data, max_depth)
    if problem is not None:
        where, what = problem
        raise FileFormatError(source, where, what, option)
    return data


def _constant(name: str) -> float:
    """NaN, Infinity, -Infinity: parsed as floats, then refused with their path by check_tree."""
    return float(name.replace("Infinity", "inf"))


def check_tree(data: Any, max_depth: int = MAX_DEPTH) -> tuple[str, str] | None:
    """(field path, problem) of the first container nested deeper than ``max_depth`` or number
    that is not finite, else None. Iterative: no recursion however deep the data."""
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(data, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            if isinstance(node, float) and not math.isfinite(node):
                return format_path(path), _not_finite(node)
            continue
        if depth > max_depth:
            return format_path(path), f"nested more than {max_depth} levels deep"
        for key, value in items:
            if isinstance(value, (dict, list)):
                stack.append((value, depth + 1, (*path, key)))
            elif isinstance(value, float) and not math.isfinite(value):
                return format_path((*path, key)), _not_finite(value)
    return None


def _not_finite(value: float) -> str:
    return (f"{value} is not a number this file may hold (only finite numbers: no NaN, "
            "Infinity or -Infinity)")


#: a key shown as is in a field path (others are quoted: ``config['\\n']``)
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-@/+: ]+")


def format_path(path: tuple[Any, ...] | list[Any]) -> str:
    """``("config", "scalings", 2)`` -> ``config.scalings[2]`` (cut to PATH_CHARS)."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(str(part)):  # a newline, a dot, a quote: shown quoted
            text += f"[{quote(str(part))}]"
        else:
            part = str(part)
            if len(part) > 40:
                part = part[:40] + "…"
            text += f".{part}" if text else part
    return text if len(text) <= PATH_CHARS else "…" + text[-PATH_CHARS:]


def join_path(where: str, path: str) -> str:
    """A field path inside ``where``: ``("base", "lr")`` -> ``base.lr``, ``("rows", "[2]")`` ->
    ``rows[2]`` (either may be empty)."""
    if not where or not path:
        return where or path
    return f"{where}{path}" if path.startswith("[") else f"{where}.{path}"
