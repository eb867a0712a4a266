"""A figure's parameters inside the figure: written into an exported SVG (a ``<metadata>`` block)
or PNG (a text chunk, ``PlotPanel`` writes it), read back when File -> Open reopens the figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: key of the PNG text chunk and id of the SVG <metadata> that carry a figure's parameters
METADATA_KEY = "attention-lab"


def svg_with_metadata(svg: bytes, meta: dict[str, Any]) -> bytes:
    """``svg`` with ``<metadata id="attention-lab">{json}</metadata>`` right after <svg ...>."""
    from xml.sax.saxutils import escape

    text = svg.decode("utf-8")
    start = text.find("<svg")
    end = text.find(">", start)
    if start < 0 or end < 0:
        return svg
    block = f'<metadata id="{METADATA_KEY}">{escape(json.dumps(meta))}</metadata>'
    return (text[: end + 1] + block + text[end + 1:]).encode("utf-8")


#: largest exported figure File -> Open reads (an SVG holding a heatmap is a few MB)
FIGURE_FILE_MAX = 64_000_000
#: largest parameters a figure carries (a session's size: a few kB in practice)
FIGURE_METADATA_MAX = 1_000_000


def read_figure_metadata(path: str | Path) -> dict[str, Any] | None:
    """The parameters an exported PNG or SVG carries, or None (not one of ours). A figure too
    large, or whose parameters are not bounded, valid JSON, is refused (FileFormatError)."""
    from engine.readers.json_file import check_file, parse_json

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".png", ".svg"):
        return None
    check_file(path, max_bytes=FIGURE_FILE_MAX, kind="exported figure")
    raw = _png_metadata(path) if suffix == ".png" else _svg_metadata(path)
    if not raw:
        return None
    data = parse_json(raw, f"{path} (its {METADATA_KEY} metadata)", max_bytes=FIGURE_METADATA_MAX,
                      kind="figure's parameters")
    return data if isinstance(data, dict) else None


def _png_metadata(path: Path) -> str:
    from PySide6.QtGui import QImageReader

    return QImageReader(str(path)).text(METADATA_KEY)


#: the deepest element nesting and the most elements the SVG reader walks before it gives up
#: looking for the metadata (the lab's own exports: depth < 10, the metadata the root's first
#: child; a hostile file of millions of nested or flat elements stops here, in well under a
#: second and a few MB)
SVG_MAX_DEPTH = 256
SVG_MAX_ELEMENTS = 200_000
#: bytes fed to the XML parser at a time
SVG_CHUNK = 1 << 16


class _Found(Exception):
    """Stops the SVG parse: the metadata's text (None: no parameters within the limits)."""

    def __init__(self, text: str | None) -> None:
        super().__init__()
        self.text = text


def _svg_metadata(path: Path) -> str:
    """The text of ``<metadata id="attention-lab">``, streamed: no tree is built, and the parse
    stops at the metadata (right after the root in the lab's exports) or after SVG_MAX_ELEMENTS
    elements or SVG_MAX_DEPTH levels, whatever follows: bounded time and memory for any file."""
    from xml.parsers import expat

    from engine.errors import FileFormatError

    parser = expat.ParserCreate()
    state = {"depth": 0, "count": 0, "inside": 0, "chars": 0}
    parts: list[str] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        state["depth"] += 1
        state["count"] += 1
        if state["depth"] > SVG_MAX_DEPTH or state["count"] > SVG_MAX_ELEMENTS:
            raise _Found(None)
        if state["inside"]:
            state["inside"] += 1
        elif name.rpartition(":")[2] == "metadata" and attrs.get("id") == METADATA_KEY:
            state["inside"] = 1

    def end(_name: str) -> None:
        state["depth"] -= 1
        if state["inside"]:
            state["inside"] -= 1
            if not state["inside"]:
                raise _Found("".join(parts))

    def text(data: str) -> None:
        if state["inside"] == 1:
            parts.append(data)
            state["chars"] += len(data)
            if state["chars"] > FIGURE_METADATA_MAX:  # (then refused by the JSON reader)
                raise _Found("".join(parts))

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = text
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(SVG_CHUNK):
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
    except _Found as found:
        return found.text or ""
    except expat.ExpatError as exc:
        raise FileFormatError(str(path), "", f"not a valid SVG ({str(exc)[:120]})") from None
    except OSError as exc:
        raise FileFormatError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    return ""
