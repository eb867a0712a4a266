"""What a reader of a plot sees cut or crowded: tick labels drawn over each other, an axis label
that runs out of its plot (into a neighbour) or is cut by the edge of the plot area, a y title
(on one, two or three lines) that touches its tick labels, a title wider than its plot, a legend
entry cut by its plot's or the view's edge (the view as its parents clip it: a plot panel taller
than its row loses its bottom), an axis of categories (a figure's rules, the grid's rules) that
names fewer of them than it has, a title cut short with "…" (where asked). Used by the tests
that look at every panel of every page at 1280x720."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter

#: pixels two labels may share (anti-aliased edges) before they count as drawn over each other
TOUCH = 1.0
#: pixels a y axis's title keeps from its tick labels (closer, the two read as one)
TITLE_GAP = 2.0


def _tick_rects(axis: pg.AxisItem) -> list[tuple[QRectF, str]]:
    """The tick labels the axis draws now (pyqtgraph's own layout), in its coordinates."""
    img = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(img)
    try:
        if axis.style.get("tickFont") is not None:
            painter.setFont(axis.style["tickFont"])
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    if specs is None:
        return []
    return [(QRectF(rect), text) for rect, _flags, text in specs[2] if text]


def overlapping_ticks(axis: pg.AxisItem) -> list[str]:
    """Pairs of tick labels of ``axis`` that are drawn over each other."""
    rects = _tick_rects(axis)
    out = []
    for i, (a, ta) in enumerate(rects):
        for b, tb in rects[i + 1:]:
            shared = a.intersected(b)
            if shared.width() > TOUCH and shared.height() > TOUCH:
                out.append(f"{ta!r} over {tb!r}")
    return out


def tick_labels(axis: pg.AxisItem) -> list[str]:
    return [text for _rect, text in _tick_rects(axis)]


def hidden_categories(where: str, axis: pg.AxisItem) -> list[str]:
    """An axis of categories (``categories`` or ``stagger``: each tick a rule or a column) that
    draws fewer labels than it has ticks in view: a reader cannot tell its rows apart."""
    if not (getattr(axis, "categories", False) or getattr(axis, "stagger", False)):
        return []
    levels = getattr(axis, "_tickLevels", None)
    if not levels:
        return []
    lo, hi = sorted(axis.range)
    wanted = [text for value, text in levels[0] if lo <= value <= hi and text]
    drawn = tick_labels(axis)
    if len(drawn) < len(wanted):
        return [f"{where} {axis.orientation} axis names {len(drawn)} of its {len(wanted)} "
                f"categories ({', '.join(drawn)} of {', '.join(wanted)})"]
    return []


def seen_rect(view) -> QRectF:
    """The scene rectangle of ``view`` a user sees: its viewport as its parent widgets clip it
    (a panel shorter than its header and plot cuts the plot's bottom off)."""
    from PySide6.QtCore import QPoint, QRect

    port = view.viewport()
    room = QRect(port.rect())
    widget = port
    offset = QPoint(0, 0)
    while widget.parentWidget() is not None and not widget.isWindow():
        offset += widget.pos()
        widget = widget.parentWidget()
        room = room.intersected(widget.rect().translated(-offset))
    return view.mapToScene(room).boundingRect()


def _text_rect(item) -> QRectF:
    """Scene rectangle of the text a pyqtgraph label draws (its QGraphicsTextItem, less the
    empty margin of its document)."""
    m = item.document().documentMargin()
    return item.mapRectToScene(item.boundingRect().adjusted(m, m, -m, -m))


def title_gap(axis: pg.AxisItem) -> float | None:
    """Pixels between a left axis's title and the nearest tick label beside it (negative: they
    overlap); None when no tick label is beside the title."""
    if not axis.label.isVisible() or not axis.labelText:
        return None
    title = _text_rect(axis.label)
    gaps = []
    for rect, _label in _tick_rects(axis):
        tick = axis.mapRectToScene(rect)
        if tick.top() < title.bottom() and tick.bottom() > title.top():
            gaps.append(tick.left() - title.right())
    return min(gaps) if gaps else None


def _title_crowds_ticks(where: str, axis: pg.AxisItem) -> list[str]:
    gap = title_gap(axis)
    if gap is not None and gap < TITLE_GAP:
        return [f"{where} left label {axis.labelText!r} is {gap:.1f} px from its tick labels "
                f"(at least {TITLE_GAP:.0f})"]
    return []


def cut_legend_entries(where: str, plot, visible: QRectF) -> list[str]:
    """Legend entries of ``plot`` whose label is not wholly inside what holds the legend (the
    plot, or the layout of a legend shared by several plots) and ``visible`` (the scene rectangle
    the view shows)."""
    legend = getattr(plot, "legend", None)
    if legend is None or not legend.isVisible() or legend.parentItem() is None:
        return []
    holder = legend.parentItem().sceneBoundingRect()
    room = holder.intersected(visible).adjusted(-1, -1, 1, 1)
    out = []
    for _sample, label in legend.items:
        if not label.isVisible():
            continue
        text = _text_rect(label.item)
        if not room.contains(text):
            out.append(f"{where} legend entry {label.text!r} ({text.left():.0f}..{text.right():.0f}"
                       f" px) is cut (room {room.left():.0f}..{room.right():.0f} px)")
    return out


def layout_problems(name: str, panel, whole_titles: bool = False) -> list[str]:
    """Everything cut or crowded in ``panel``'s visible plots; with ``whole_titles``, an axis
    title cut short with "…" too (the Experiments page's figures: a shorter form must fit)."""
    problems = []
    scene_rect = seen_rect(panel.glw)
    for k, plot in enumerate(panel.plot_items()):
        if not plot.isVisible():
            continue
        where = f"{name}[{k}]"
        plot_rect = plot.sceneBoundingRect()
        for side in ("left", "bottom"):
            axis = plot.getAxis(side)
            if not axis.isVisible():
                continue
            problems += [f"{where} {side} ticks: {p}" for p in overlapping_ticks(axis)]
            problems += hidden_categories(where, axis)
            if whole_titles and str(getattr(axis, "_shown", None)).endswith("…") \
                    and axis.label.isVisible():
                problems.append(f"{where} {side} label {axis.labelText!r} is cut short to "
                                f"{axis._shown!r}")
            if axis.label.isVisible() and axis.labelText:
                text = _text_rect(axis.label)
                if side == "left":
                    problems += _title_crowds_ticks(where, axis)
                if not plot_rect.adjusted(-2, -2, 2, 2).contains(text):
                    problems.append(f"{where} {side} label {axis.labelText!r} ({text.width():.0f}"
                                    f" x {text.height():.0f} px) runs out of its plot")
                if not scene_rect.adjusted(-1, -1, 1, 1).contains(text):
                    problems.append(f"{where} {side} label {axis.labelText!r} is cut by the edge")
        problems += cut_legend_entries(where, plot, scene_rect)
    for k, bar in enumerate(getattr(panel, "colorbars", ())):
        # a colour bar's numbers (a short heatmap at the larger type ran "1.0 0.8 0.6" together)
        if bar.isVisible() and bar.scene() is not None:
            problems += [f"{name} colour bar {k} ticks: {p}" for p in overlapping_ticks(bar.axis)]
        title = plot.titleLabel
        if title.isVisible() and title.text:
            text = _text_rect(title.item)
            if text.width() > plot_rect.width() + 2 or \
                    not scene_rect.adjusted(-1, -1, 1, 1).contains(text):
                problems.append(f"{where} title {title.text!r} ({text.x():.0f}, {text.y():.0f}, "
                                f"{text.width():.0f} x {text.height():.0f} px) is cut or wider "
                                f"than its plot ({plot_rect.width():.0f} px wide)")
    return problems


def title_over_data(where: str, panel) -> list[str]:
    """A plot title drawn over its own plot's data area (a header that grew into the plot)."""
    out = []
    for k, plot in enumerate(panel.plot_items()):
        title = plot.titleLabel
        if not (plot.isVisible() and title.isVisible() and title.text):
            continue
        text = _text_rect(title.item)
        data = plot.getViewBox().sceneBoundingRect()
        left = plot.getAxis("left")
        if left.isVisible() and left.labelText and left.label.isVisible():
            beside = _text_rect(left.label).intersected(text)
            if beside.width() > 1 and beside.height() > 1:
                out.append(f"{where}[{k}] y title {left.labelText!r} runs into the title")
        shared = text.intersected(data)
        if shared.height() > 1 and shared.width() > 1:
            out.append(f"{where}[{k}] title {title.text[:40]!r}... runs {shared.height():.0f} px "
                       "into its data area")
    return out


def export_problems(where: str, panel) -> list[str]:
    """Everything cut or crowded in each export style of ``panel`` (PNG and SVG are the
    "screen" style; slide; paper): its plots with whole titles (an export shows every title in
    full), plot titles over the data, the figure's own title cut by the figure's edge."""
    from ui.export.plot_files import PRESETS, figure_clone

    out = []
    for style in PRESETS:
        with figure_clone(panel, style) as clone:
            at = f"{where} {style}"
            out += layout_problems(at, clone, whole_titles=True) + title_over_data(at, clone)
            label = getattr(clone, "_lab_figure_title", None)
            if label is not None and label.isVisible():
                seen = clone.glw.mapToScene(clone.glw.viewport().rect()).boundingRect()
                if not seen.contains(_text_rect(label.item)):
                    out.append(f"{at} figure title is cut")
    return out


def label_cut(label) -> str:
    """Why ``label``'s text does not show whole in the room it has ('' when it does): wider than
    the label on one line, or more lines than its height holds."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextDocument

    room = label.contentsRect()
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setDocumentMargin(0)
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and "<" in label.text())
    doc.setHtml(label.text()) if rich else doc.setPlainText(label.text())
    if label.wordWrap():
        doc.setTextWidth(room.width())
    if doc.idealWidth() > room.width() + 1:
        return f"{label.text()!r} needs {doc.idealWidth():.0f} px, has {room.width()}"
    if doc.size().height() > room.height() + 1:
        return f"{label.text()!r} needs {doc.size().height():.0f} px high, has {room.height()}"
    return ""

