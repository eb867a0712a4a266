"""An axis whose tick labels are never drawn over each other, and whose title fits.

pyqtgraph always draws every label of the first tick level, crowded or not (explicit ticks are
all first level): "64" and "2,048" ran together on a narrow sweep plot, "0.8/0.6/0.4" stacked on
a short one. This axis draws a label only where it clears the ones already placed (first level
first, in order), so a plot short of room shows fewer numbers, never a smudge. A vertical axis
whose title is longer than the plot is high (the plots of a 1280x720 window are short) writes it
on two or three lines instead of letting it run past the plot's ends, and the axis widens for
those lines (pyqtgraph leaves room for one: a two-line title touched its tick labels).

A category axis (``stagger``: the rules of a figure, the columns of a grid) must name every
category: a label that would touch its neighbour goes on a second line below (the axis grows by
that line) instead of being left out ("softcap" went missing between "qknorm" and "qkclip" in a
third of a 1280 px row).

A title that does not fit even on its most lines (three beside a plot, two under it) takes the
first of its ``shorter`` forms that fits (e.g. without its parentheses: "learning-rate
sensitivity of the final training loss"), and only when none does is it cut short with "…".

An axis of categories (``categories``: the grid's rules and columns) must name every one: where
the rows (or columns, even staggered) are shorter than its labels, its labels take a smaller type
(down to CATEGORY_MIN_PX) instead of every other rule going missing (the grid named 2 of 5 rules
in presentation mode, and 14 of 16 jobs).

The lines and the width settle: the width depends only on the lines chosen, and the legend below
the plot (ui.plots.legends) takes its room from the plot's whole width, not the view box's. When
it read the view box's width, axis and legend answered each other's sizes and a plot swapped
between two layouts for ever (a figure export never finished).
"""

from __future__ import annotations

import html
import itertools
import re
from typing import Any

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontInfo

from ui.plots import type_scale
from ui.plots.type_scale import AXIS_FLOOR

#: space between two tick labels, in parts of their height (less, and the later one is left
#: out): labels that only touch ("642,048") read as one number
GAP = 0.4
#: lines a vertical axis's title may take at most
MAX_LABEL_LINES = 3
#: lines a horizontal axis's title may take at most (each line makes the plot shorter)
MAX_BOTTOM_LINES = 2
#: pixels between a left axis's title and its tick labels (pyqtgraph leaves room for 0.8 of the
#: title's height: a title on two or three lines touched or covered the numbers)
LABEL_GAP = 4.0
#: smallest type (pixels) a category axis shrinks its labels to so that all show
CATEGORY_MIN_PX = 8
#: how far pyqtgraph moves a left axis's title past the axis's edge (AxisItem.resizeEvent)
LABEL_NUDGE = 5.0


def split_lines(text: str, n: int) -> str:
    """``text`` on ``n`` lines of about equal length (broken at spaces; fewer if it has fewer)."""
    words = text.split(" ")
    if n <= 1 or len(words) == 1:
        return text
    target = len(text) / n
    lines: list[str] = []
    line = ""
    for word in words:
        if line and len(lines) < n - 1 and len(line) + 1 + len(word) / 2 > target:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "<br>".join(lines)


def plain_text(text: str) -> str:
    """The characters an HTML title shows: tags dropped, escapes read ("mean ‖J‖<sub>F</sub>"
    -> "mean ‖J‖F", "&gt;0.99" -> ">0.99"): what its width is measured on, and its tooltip."""
    return html.unescape(re.sub(r"<[^>]*>", "", text))


#: shorter forms of titles that have no aside to drop ("prob…" and "fractio…" beside the short
#: plots of a 1280x720 window): the quantity named by its noun alone
SHORT_FORMS: dict[str, tuple[str, ...]] = {
    "probability density": ("density", "pdf"),
    "fraction saturated": ("saturated",),
    # (the Training page's short plots in presentation mode: the quantity with its unit)
    "cross-entropy loss (nats)": ("loss (nats)",),
    "pre-softmax logit std": ("logit std",),
    "mean ‖diag(p) − ppᵀ‖<sub>F</sub>": ("mean ‖J‖<sub>F</sub>", "‖J‖<sub>F</sub>"),
    # (the Real model's head detail in presentation mode: the row's Jacobian norm)
    "‖J‖<sub>F</sub> of the row": ("‖J‖<sub>F</sub>",),
    # (Training's gradient norms in presentation mode, beside its line-style key: L the loss,
    # as the gradient chain's ‖∂L/∂x‖ next to it)
    "‖∂loss/∂W‖": ("‖∂L/∂W‖",),
}


def shorter_titles(text: str) -> tuple[str, ...]:
    """Shorter forms of an axis title, longest first, each still naming the quantity: without
    its parenthesised asides and units ("learning-rate sensitivity (Wortsman et al.) of the
    final training loss" -> "learning-rate sensitivity of the final training loss"), then the
    quantity alone ("learning-rate sensitivity"). The full title stays on hover and in exports."""
    out: list[str] = []
    # (an aside follows a space: "loss (nats)"; "diag(p)" and "log(n)" are part of the quantity)
    bare = re.sub(r"\s+\([^()]*\)", "", text).strip()
    for form in (bare, re.split(r" (?:of the|of|at|after|over the|over|per|in) ", bare)[0]):
        form = form.strip(" ,;:")
        if form and form != text and form not in out:
            out.append(form)
    return tuple(out)


class TidyAxis(pg.AxisItem):
    _lines = 1  #: lines of the title (a vertical axis's long title takes more)
    _shown: str | None = None  #: the title cut short and ended by "…" (None: all of it)
    #: a horizontal axis of categories: a crowded label goes one line down, never away
    stagger = False
    _staggered = False  #: the last layout put labels on a second line (the axis is taller)
    _label_html: str | None = None  #: the HTML the label holds (set only through this class)
    #: shorter forms of the title (as HTML, longest first) tried before one is cut with "…";
    #: where none is set, those of SHORT_FORMS and shorter_titles (``_auto_shorter``)
    shorter: tuple[str, ...] = ()
    _auto_shorter: tuple[str, ...] = ()
    #: an axis of categories: every label shown, in a smaller type if need be
    categories = False
    _fit_font: QFont | None = None  #: the smaller type its category labels take now
    _wanted = 0  #: labels pyqtgraph would draw at the last layout

    _picture: Any = None
    #: the least presentation mode's larger type may shrink this title to (ui.plots.type_scale)
    type_floor = AXIS_FLOOR

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # kept as a pixmap: the axis draws the plot's grid too (its box covers the data area),
        # so every new curve repainted it, text and translucent grid lines (slow to rasterise:
        # 3 ms of a panel's 5 ms paint); a repaint now copies the pixmap, redrawn only when
        # the axis changes (``picture`` reset below)
        self.setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)

    @property
    def picture(self) -> Any:
        """pyqtgraph's recorded drawing of the axis, None when it must be drawn again."""
        return self._picture

    @picture.setter
    def picture(self, value: Any) -> None:
        # pyqtgraph resets it without always calling update() (a new pen, a new width): the
        # cached pixmap must go with it; not while the axis paints (its drawing, recorded then,
        # is current: an update() there queued a second paint of the panel)
        self._picture = value
        if value is None and not self._painting:
            self.update()

    _painting = False

    def paint(self, *args: Any) -> None:
        self._painting = True
        try:
            super().paint(*args)
        finally:
            self._painting = False

    def setLabel(self, *args: Any, **kwargs: Any) -> None:
        """pyqtgraph's, and the title's shorter forms found (used only where it does not fit),
        with the whole title on hover."""
        super().setLabel(*args, **kwargs)
        title = self.labelText or ""
        self._auto_shorter = tuple(dict.fromkeys(
            (*SHORT_FORMS.get(title, ()), *shorter_titles(title))))
        if self.label is not None:
            self.label.setToolTip(plain_text(title))

    def labelString(self) -> str:  # pyqtgraph's names from here on
        text = super().labelString()
        if (self._lines > 1 or self._shown is not None) and self.labelText:
            shown = self.labelText if self._shown is None else self._shown
            text = text.replace(self.labelText, split_lines(shown, self._lines), 1)
        return text

    def _updateLabel(self) -> None:
        """pyqtgraph's, without laying the same HTML out again: it runs on every label, style,
        unit or range change (about 60 times per plot while a page is built, a text re-layout
        each time)."""
        text = self.labelString()
        if text != self._label_html:
            self.label.setHtml(text)
            self._label_html = text
        self._adjustSize()
        self.picture = None
        self.update()

    def resizeEvent(self, ev: Any = None) -> None:
        # (a one-word title has no lines to wrap, but may have a shorter form: ‖∂loss/∂W‖)
        text = self.labelText or ""
        if self.label is not None and self.label.isVisible() and \
                (" " in text or self.shorter or self._auto_shorter):
            self._fit_label()
        super().resizeEvent(ev)

    def _room(self) -> float:
        """Pixels a title centred on this axis has before it runs past its plot's ends (a
        bottom axis: its own width, under the view box)."""
        plot = self.parentItem()
        if self.orientation in ("top", "bottom"):
            return self.size().width()
        if plot is None:
            return self.size().height()
        centre = self.mapToItem(plot, 0.0, self.size().height() / 2).y()
        # below the plot's title (a two-line header): a y title beside it ran into its text
        title = getattr(plot, "titleLabel", None)
        top = 0.0
        if title is not None and title.isVisible() and title.text:
            top = title.mapRectToItem(plot, title.boundingRect()).bottom()
        return 2 * min(centre - top, plot.boundingRect().height() - centre)

    def _fit_label(self) -> None:
        """As few lines as let the title fit along its plot (at most MAX_LABEL_LINES beside
        it, MAX_BOTTOM_LINES under it); a title that does not fit even then takes the first of
        its ``shorter`` forms that fits, and only then loses words from its end, then letters
        ("…": a compact figure's header names what is plotted in full)."""
        was = (self._lines, self._shown)
        margin = self.label.document().documentMargin()
        room = self._room()
        most = MAX_BOTTOM_LINES if self.orientation in ("top", "bottom") else MAX_LABEL_LINES

        def fits() -> bool:
            text = self.labelString()
            self.label.setHtml(text)
            self._label_html = text
            return self.label.boundingRect().width() - 2 * margin <= room

        done = False
        # presentation mode's type shrinks a title to fit its room: first no smaller than the
        # normal size, where a shorter form may take over ("cross-entropy loss" at full size,
        # not "cross-entropy loss (nats)" at three quarters), then down to AXIS_FLOOR; at each
        # floor the whole title, then each shorter form, on one line, then more
        floors = (1.0, AXIS_FLOOR) if type_scale.factor() > 1.0 else (AXIS_FLOOR,)
        shorter = self.shorter or self._auto_shorter
        forms: tuple[str | None, ...] = (None, *shorter)
        if " " not in self.labelText and shorter and type_scale.factor() > 1.0:
            # a one-word title's shorter form says the same thing (‖∂L/∂W‖ for ‖∂loss/∂W‖):
            # the form drawn largest goes first, or the whole title stood at the normal size
            # beside its neighbours' larger titles
            forms = tuple(sorted(forms, key=self._drawn_px, reverse=True))
        for floor, form, lines in itertools.product(floors, forms, range(1, most + 1)):
            self.type_floor, self._shown, self._lines = floor, form, lines
            if fits():
                done = True
                break
        if not done and " " not in self.labelText and shorter:
            # a one-word title is never cut ("‖…" names nothing): its shortest form, whole
            self._lines, self._shown = 1, shorter[-1]
            fits()
        elif not done:
            self._lines = most
            words = self.labelText.split(" ")
            first = words[0]
            cuts = [" ".join(words[:k]) for k in range(len(words) - 1, 0, -1)] + \
                   [first[:k] for k in range(len(first) - 1, 0, -1)]
            for cut in cuts:
                if cut.rfind("&") > cut.rfind(";") or cut.rfind("<") > cut.rfind(">"):
                    continue  # (never inside an escape such as &lt; nor a tag such as <sub>)
                self._shown = cut + "…"
                if fits():
                    break
        if (self._lines, self._shown) != was:
            self._adjustSize()

    def _drawn_px(self, form: str | None) -> float:
        """The type size ``form`` (None: the whole title) is drawn at on one line, as large as
        its room lets it be in presentation mode (ui.plots.type_scale)."""
        was = (self.type_floor, self._shown, self._lines)
        self.type_floor, self._shown, self._lines = AXIS_FLOOR, form, 1
        try:
            return type_scale.label_px(self)
        finally:
            self.type_floor, self._shown, self._lines = was

    def _updateWidth(self) -> None:
        """pyqtgraph's width (AxisItem._updateWidth), with room on a left axis for the whole
        title: its text ends LABEL_GAP px before the widest tick label (pyqtgraph leaves 0.8 of
        the title's height, short of a title on two or three lines). The width is set once, to
        its final value: an intermediate value would re-run the layout on every paint."""
        if self.orientation != "left" or self.fixedWidth is not None or not self.isVisible() \
                or self.label is None:
            super()._updateWidth()
            return
        style = self.style
        w = 0.0
        if style["showValues"]:
            w = self.textWidth if style["autoExpandTextSpace"] else style["tickTextWidth"]
            w += style["tickTextOffset"][0]
        w += max(0, style["tickLength"])
        if self.label.isVisible():
            w += self._title_width()
        self.setMaximumWidth(w)
        self.setMinimumWidth(w)
        self.picture = None

    def _title_width(self) -> float:
        """Width the title takes beside the tick labels: pyqtgraph's 0.8 of its box's height,
        or, for a title on more than one line, where its text ends plus LABEL_GAP when that is
        more. It depends only on the title's text and lines, never on the plot's size. (A
        one-line title keeps pyqtgraph's width, which leaves it 2.6 px or more even at slide
        sizes: figures whose titles take one line stay as they were.)"""
        height = self.label.boundingRect().height()
        if _text_lines(self.label.document()) <= 1:
            return 0.8 * height
        text_end = height - LABEL_NUDGE - self.label.document().documentMargin()
        return max(0.8 * height, text_end + LABEL_GAP)

    def _updateMaxTextSize(self, x: int) -> None:
        """Room for the second line of a staggered category axis."""
        super()._updateMaxTextSize(round((2 + GAP / 2) * x) if self._staggered else x)

    def generateDrawSpecs(self, p: Any) -> Any:
        specs = self._tidy_specs(p)
        if not self.categories or specs is None or len(specs[2]) >= self._wanted:
            self._fit_font = None
            return specs
        own = self.style["tickFont"]
        font = QFont(own if own is not None else p.font())
        size = QFontInfo(font).pixelSize()
        try:
            while size > CATEGORY_MIN_PX and len(specs[2]) < self._wanted:
                size -= 1
                font.setPixelSize(size)
                self.style["tickFont"] = font
                specs = self._tidy_specs(p)
        finally:
            self.style["tickFont"] = own
        self._fit_font = font
        return specs

    def drawPicture(self, p: Any, *specs: Any) -> None:
        """pyqtgraph's, in the smaller type a category axis chose (generateDrawSpecs)."""
        own = self.style["tickFont"]
        if self._fit_font is not None:
            self.style["tickFont"] = self._fit_font
        try:
            super().drawPicture(p, *specs)
        finally:
            self.style["tickFont"] = own

    def _tidy_specs(self, p: Any) -> Any:
        specs = super().generateDrawSpecs(p)
        if specs is None:
            return specs
        axis_spec, tick_specs, text_specs = specs
        self._wanted = len(text_specs)  #: labels pyqtgraph would draw (tidy keeps fewer)
        if self.categories and self._tickLevels:  # (pyqtgraph leaves out an end label too wide
            lo, hi = sorted(self.range)           # for the axis: every category is wanted)
            self._wanted = sum(1 for value, text in self._tickLevels[0] if lo <= value <= hi and text)
        kept: list[Any] = []
        staggered = False
        down = self.stagger and self.orientation == "bottom"
        for spec in text_specs:
            pad = GAP * spec[0].height()
            for shift in ((0.0, (1 + GAP / 2) * spec[0].height()) if down else (0.0,)):
                rect = spec[0].translated(0.0, shift)
                room = rect.adjusted(-pad, -pad / 4, pad, pad / 4)
                if all(not room.intersects(other[0]) for other in kept):
                    kept.append((rect, *spec[1:]))
                    staggered = staggered or shift > 0
                    break
        if staggered != self._staggered:  # (depends on the width only: it settles)
            self._staggered = staggered
            height = max((spec[0].height() for spec in text_specs), default=0.0)
            self._updateMaxTextSize(int(height))
        return axis_spec, tick_specs, kept


def _text_lines(doc: Any) -> int:
    """Lines a text document is laid out on (its blocks' lines: a <br> does not start a block)."""
    lines, block = 0, doc.begin()
    while block.isValid():
        lines += block.layout().lineCount()
        block = block.next()
    return lines


def tidy_axes() -> dict[str, TidyAxis]:
    """``axisItems`` for a new PlotItem: its two shown axes tidy (an axis given here is shown,
    so the right and top stay pyqtgraph's own, hidden)."""
    return {side: TidyAxis(side) for side in ("left", "bottom")}
