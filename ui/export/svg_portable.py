"""Make pyqtgraph's SVG render the same in every renderer (resvg, librsvg, browsers, Qt).

pyqtgraph's SVGExporter (with Qt's SVG generator) writes a file that Qt draws right but others do
not: bars are ``<rect>`` elements in a scaled group with ``vector-effect="non-scaling-stroke"``
(renderers without that feature scale the 1 px outline by the data-to-pixel factor, up to
hundreds, and the bars become spikes); the text asks for Qt's alias "Sans Serif" (no such font
elsewhere: the text vanishes or changes width); the root has no size; heatmap images are a few
pixels stretched by a transform, which most renderers smooth into a blur. :func:`portable_svg`
rewrites those parts and leaves the picture as it is.
"""

from __future__ import annotations

import base64
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_S = f"{{{SVG_NS}}}"
_HREF = f"{{{XLINK_NS}}}href"
#: an embedded image is enlarged (nearest neighbour) to this many pixels per displayed pixel, so
#: a smoothing renderer blurs only a hair at each cell edge, even when the figure is zoomed 2x
IMAGE_OVERSAMPLE = 2.0
MAX_IMAGE_PIXELS = 4_000_000
_MATRIX = re.compile(r"matrix\(([^)]*)\)")


def _matrix(transform: str | None) -> tuple[float, ...] | None:
    m = _MATRIX.fullmatch((transform or "").strip())
    if m is None:
        return None
    values = tuple(float(v) for v in re.split(r"[ ,]+", m.group(1).strip()))
    return values if len(values) == 6 else None


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _bake_rects(group: ET.Element, m: tuple[float, ...]) -> bool:
    """Rects under ``group``'s matrix become paths in the parent's coordinates (the transform
    goes): their outlines keep the 1 px width they have in Qt. False if anything else is there."""
    kids = list(group)
    if not kids or any(k.tag != f"{_S}rect" for k in kids):
        return False
    a, b, c, d, e, f = m
    for rect in kids:
        x, y = float(rect.get("x", 0)), float(rect.get("y", 0))
        w, h = float(rect.get("width", 0)), float(rect.get("height", 0))
        corners = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
        pts = [(a * px + c * py + e, b * px + d * py + f) for px, py in corners]
        rect.tag = f"{_S}path"
        for key in ("x", "y", "width", "height"):
            rect.attrib.pop(key, None)
        rect.set("d", "M" + " L".join(f"{_fmt(px)},{_fmt(py)}" for px, py in pts) + " Z")
    del group.attrib["transform"]
    return True


def _crisp_image(image: ET.Element, m: tuple[float, ...]) -> None:
    """Enlarge the embedded PNG by whole pixels (nearest neighbour) to about the displayed size
    times IMAGE_OVERSAMPLE; the element's box stays, so the picture is the same, only crisp in
    renderers that smooth images (``image-rendering`` is a hint many ignore)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage

    href = image.get(_HREF) or image.get("href") or ""
    prefix = "data:image/png;base64,"
    if not href.startswith(prefix):
        return
    img = QImage.fromData(base64.b64decode(href[len(prefix):]), "PNG")
    if img.isNull() or img.width() == 0 or img.height() == 0:
        return
    w_box, h_box = float(image.get("width", img.width())), float(image.get("height", img.height()))
    a, b, c, d, _e, _f = m
    shown_w = math.hypot(a, b) * w_box  # displayed pixels across the whole image
    shown_h = math.hypot(c, d) * h_box
    kx = max(1, math.ceil(IMAGE_OVERSAMPLE * shown_w / img.width()))
    ky = max(1, math.ceil(IMAGE_OVERSAMPLE * shown_h / img.height()))
    while kx * ky * img.width() * img.height() > MAX_IMAGE_PIXELS and (kx > 1 or ky > 1):
        kx, ky = max(1, kx // 2), max(1, ky // 2)
    if kx == ky == 1:
        return
    big = img.scaled(img.width() * kx, img.height() * ky, Qt.AspectRatioMode.IgnoreAspectRatio,
                     Qt.TransformationMode.FastTransformation)
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    big.save(buf, "PNG")
    buf.close()
    image.set(_HREF, prefix + base64.b64encode(bytes(data)).decode("ascii"))
    image.set("image-rendering", "optimizeSpeed")
    image.set("style", "image-rendering:pixelated")


def _drop_invisible(root: ET.Element) -> None:
    """Paths with neither fill nor stroke go (each view box's background outline), and clip
    outlines are neither filled nor stroked."""
    for group in list(root.iter(f"{_S}g")):
        if group.get("fill") == "none" and group.get("stroke") == "none":
            for path in [p for p in group if p.tag == f"{_S}path"
                         and p.get("fill") in (None, "none") and p.get("stroke") in (None, "none")]:
                group.remove(path)
    # a clip path's outline is geometry only; a renderer that does not clip (SVG Tiny, Qt's)
    # drew it with the outer group's black stroke: a frame round every plot
    for clip in root.iter(f"{_S}clipPath"):
        for shape in clip:
            shape.set("fill", "none")
            shape.set("stroke", "none")


def _font_family(value: str, resolve: Callable[[str], str]) -> str:
    names = [n.strip().strip("\"'") for n in value.replace("&quot;", '"').split(",")]
    first = resolve(names[0]) if names and names[0] else "sans-serif"
    return f"'{first}', sans-serif" if first != "sans-serif" else "sans-serif"


def qt_font_family(name: str) -> str:
    """The font Qt really draws for ``name`` (its "Sans Serif" is an alias of the system's)."""
    from PySide6.QtGui import QFont, QFontInfo

    return QFontInfo(QFont(name)).family() or "sans-serif"


def portable_svg(svg: bytes, resolve_font: Callable[[str], str] = qt_font_family,
                 bake_rects: bool = True, crisp_images: bool = True) -> bytes:
    """``svg`` (pyqtgraph's export) rewritten to draw alike everywhere; see the module's doc.
    ``bake_rects`` / ``crisp_images`` off leave those parts as pyqtgraph wrote them (the tests
    show what goes wrong then)."""
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    root = ET.fromstring(svg)
    box = (root.get("viewBox") or "").split()
    if len(box) == 4 and not root.get("width"):
        root.set("width", f"{box[2]}px")
        root.set("height", f"{box[3]}px")
    resolved: dict[str, str] = {}
    for el in root.iter():
        family = el.get("font-family")
        if family is not None:
            if family not in resolved:
                resolved[family] = _font_family(family, resolve_font)
            el.set("font-family", resolved[family])
        if bake_rects:  # every scaled group of rects is baked below: strokes are in pixels
            el.attrib.pop("vector-effect", None)
    _drop_invisible(root)
    for group in root.iter(f"{_S}g"):
        m = _matrix(group.get("transform"))
        if m is None:
            continue
        if not (bake_rects and _bake_rects(group, m)) and crisp_images:
            for image in group.findall(f"{_S}image"):
                _crisp_image(image, m)
    body = ET.tostring(root, encoding="unicode")
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + body).encode("utf-8")
