"""The hostile files: what a careless or hostile user hands the lab (collected from the files
that once crashed or froze a reader: deep nesting, wrong types, huge values, NaN, non-files).

``HOSTILE_CONTENT`` and ``HOSTILE_PLACES`` are whole files (and things that are not files), put
through every reader; ``HOSTILE_VALUES`` replace one field of a reader's valid document at a
time. Big cases are built on demand (nothing large
is stored in the repository)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: a sparse file larger than any file a reader takes (costs no disk space)
HUGE_BYTES = 1_100_000_000


def _sparse(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.truncate(HUGE_BYTES)


def _folder(path: Path) -> None:
    path.mkdir()


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link_to_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _dangling_link(path: Path) -> None:
    path.symlink_to(path.parent / "nowhere")


def _deep(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return open_ * depth + close * depth


#: id -> the bytes of a hostile file (built on demand: some are tens of MB)
HOSTILE_CONTENT: dict[str, Callable[[], bytes]] = {
    "empty": lambda: b"",
    "whitespace": lambda: b" \n\t ",
    "not_json": lambda: b"this is not JSON",
    "truncated": lambda: b'{"config": {"d_k": 6',
    "binary": lambda: bytes(range(256)) * 4,
    "zip_magic": lambda: b"PK\x03\x04" + b"\x00" * 100,
    "utf16": lambda: '{"config": {}}'.encode("utf-16"),
    "latin1": lambda: '{"text": "caf\xe9"}'.encode("latin-1"),
    "lone_surrogate": lambda: b'{"text": "\\ud800"}',
    "lone_surrogate_in_probe_text": lambda: b'{"real_model": {"text": "a \\ud800 b"}}',
    "null": lambda: b"null",
    "number": lambda: b"5",
    "string": lambda: b'"session"',
    "true": lambda: b"true",
    "empty_list": lambda: b"[]",
    "list": lambda: b"[1, 2, 3]",
    "empty_object": lambda: b"{}",
    "deep_list_100k": lambda: _deep(100_000),
    "deep_object_100k": lambda: b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "deep_list_40": lambda: _deep(40),
    "deep_list_900": lambda: _deep(900),
    "deep_in_config": lambda: b'{"config": ' + _deep(5000) + b"}",
    "nan": lambda: b"NaN",
    "nan_nested": lambda: b'{"config": {"d_k": NaN}, "claims": [NaN], "step": NaN}',
    "infinity": lambda: b'{"steps": Infinity, "step": -Infinity}',
    "overflow_float": lambda: b'{"step": 1e999}',
    "huge_int": lambda: b'{"step": ' + b"9" * 5000 + b"}",
    "big_int": lambda: b'{"step": ' + b"9" * 300 + b"}",
    "string_20mb": lambda: b'{"config": {"dist": "' + b"g" * 20_000_000 + b'"}}',
    "string_1mb": lambda: b'{"config": {"dist": "' + b"g" * 1_000_000 + b'"}}',
    "list_1e6": lambda: b'{"config": {"scalings": [' + b"0," * 999_999 + b"0]}}",
    "keys_1e5": lambda: b"{" + b",".join(b'"k%d": 0' % i for i in range(100_000)) + b"}",
    "long_key": lambda: b'{"' + b"k" * 1_000_000 + b'": 1}',
    "duplicate_keys": lambda: b'{"config": {"d_k": 64, "d_k": "x"}}',
}

_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4">'

#: id -> the bytes of a hostile SVG (File -> Open of an exported figure): 45-62 MB of elements
#: that took 1.3-2.5 GB and 30-105 s when the reader built the tree
HOSTILE_SVG: dict[str, Callable[[], bytes]] = {
    "nested_g_6_5m": lambda: _SVG + b"<g>" * 6_500_000 + b"</g>" * 6_500_000 + b"</svg>",
    "nested_g_9m": lambda: _SVG + b"<g>" * 9_000_000 + b"</g>" * 9_000_000 + b"</svg>",
    "flat_g_15m": lambda: _SVG + b"<g/>" * 15_000_000 + b"</svg>",
    "metadata_after_1m_elements": lambda: _SVG + b"<g/>" * 1_000_000 + (
        b'<metadata id="attention-lab">{"config": {"d_k": 8}}</metadata></svg>'),
    "metadata_holding_1m_elements": lambda: _SVG + b'<metadata id="attention-lab">' + (
        b"<g/>" * 1_000_000) + b"</metadata></svg>",
}

#: id -> a writer of something at a path that is not a plain, small file
HOSTILE_PLACES: dict[str, Callable[[Path], None]] = {
    "sparse_1gb": _sparse,
    "folder": _folder,
    "fifo": _fifo,
    "symlink_dev_zero": _link_to_zero,
    "dangling_symlink": _dangling_link,
}


#: values put in place of one field of a valid document
HOSTILE_VALUES: dict[str, Any] = {
    "null": None,
    "five": 5,
    "negative": -1,
    "fraction": 0.5,
    "true": True,
    "text": "abc",
    "empty_text": "",
    "empty_list": [],
    "empty_object": {},
    "nested_list": [[0], [1]],
    "huge_number": 1e308,
    "huge_int": 10**40,
    "long_text": "x" * 200_000,
    "long_list": [0] * 20_000,
    "deep": {"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
    "nan": float("nan"),
}

#: at most this many fields of a document are mutated (evenly spread over its fields)
MAX_PATHS = 40


def paths(doc: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every field path of a JSON document (objects' keys and lists' indexes), depth first."""
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return
    for key, value in items:
        yield (*prefix, key)
        yield from paths(value, (*prefix, key))


def spread(all_paths: list[tuple], n: int = MAX_PATHS) -> list[tuple]:
    """``n`` of the paths, evenly spaced (deterministic); the top-level ones always."""
    top = [p for p in all_paths if len(p) == 1]
    rest = [p for p in all_paths if len(p) > 1]
    step = max(1, len(rest) // max(1, n - len(top)))
    return top + rest[::step][: max(0, n - len(top))]


def replaced(doc: Any, path: tuple, value: Any) -> Any:
    """A copy of ``doc`` with ``value`` at ``path``."""
    import copy

    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out
