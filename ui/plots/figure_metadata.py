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


def _svg_metadata(path: Path) -> str:
    """The text of ``<metadata id="attention-lab">``, read incrementally: the parse stops there
    (right after the root in our exports), whatever follows."""
    import xml.etree.ElementTree as ET

    from engine.errors import FileFormatError

    try:
        for _event, el in ET.iterparse(str(path), events=("end",)):
            if el.tag.endswith("metadata") and el.get("id") == METADATA_KEY:
                return el.text or ""
            if len(el) == 0:
                el.clear()  # (memory: what was seen is not kept)
    except ET.ParseError as exc:
        raise FileFormatError(str(path), "", f"not a valid SVG ({str(exc)[:120]})") from None
    except OSError as exc:
        raise FileFormatError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    return ""
