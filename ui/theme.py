"""Colours: one fixed colour per scaling rule (everywhere), and the light/dark themes.

The first six simulator rules use the Okabe-Ito colour-blind-safe set; the length rules take an
olive and a wine from Paul Tol's set, the two training-only bug rules a purple and a brown. They read on both backgrounds, so a rule keeps its colour
when the theme changes. Series that are not rules (the raw q·k, the inspector's p_i and
Jacobian bars, limit lines) take their colour from the :class:`Theme`.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

from engine.rules import RULE_REGISTRY

#: rule name -> hex colour, read from the one rule registry (engine.rules); the same in every
#: plot, legend, table and export, on every page
RULE_COLORS: dict[str, str] = {name: r.colour for name, r in RULE_REGISTRY.items()}


@dataclass(frozen=True)
class Theme:
    name: str
    background: str  #: plot background
    foreground: str  #: axes, text
    raw: str  #: the raw q.k series (not a rule)
    grid_alpha: float
    highlight: str  #: outline of a highlighted plot
    window: str
    base: str
    text: str
    button: str
    error: str
    #: the inspector's series (not rules): softmax weights p_i, Jacobian entries (p_i(1-p_i),
    #: the largest |J_ij|) and the 0.25 ceiling they are measured against
    weight: str = "#505A66"
    jacobian: str = "#332288"
    limit: str = "#C62828"
    link: str = "#0061A0"  #: hyperlinks in labels (the tour's "open the Score inspector")
    #: secondary text (notes, captions, an unchecked chip): quieter than ``text``, still at least
    #: 4.5:1 against ``window`` (WCAG AA)
    muted: str = "#595959"
    warning: str = "#8A5300"  #: a caution that is not an error (a locked form), also AA


LIGHT = Theme("light", background="#FFFFFF", foreground="#202020", raw="#7F7F7F", grid_alpha=0.15,
              highlight="#E69F00", window="#F2F2F2", base="#FFFFFF", text="#202020",
              button="#E8E8E8", error="#C62828", weight="#505A66", jacobian="#332288",
              limit="#C62828", link="#0061A0", muted="#595959", warning="#8A5300")
DARK = Theme("dark", background="#1E1F22", foreground="#DADADA", raw="#A8A8A8", grid_alpha=0.2,
             highlight="#F0C040", window="#2B2D30", base="#1E1F22", text="#E4E4E4",
             button="#3C3F41", error="#FF8A80", weight="#B8C2CC", jacobian="#9E8CF0",
             limit="#FF6B6B", link="#6CB6FF", muted="#A9ADB3", warning="#F0B060")
THEMES = {"light": LIGHT, "dark": DARK}


def rule_color(rule: str) -> str:
    return RULE_COLORS[rule]


#: the contrast WCAG AA asks of text against its background
AA_CONTRAST = 4.5


def luminance(colour: str) -> float:
    """WCAG relative luminance of a #RRGGBB colour (0 black .. 1 white)."""
    from PySide6.QtGui import QColor

    c = QColor(colour)

    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours (1 .. 21)."""
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


@functools.lru_cache(maxsize=512)
def readable(colour: str, backgrounds: tuple[str, ...], ratio: float = AA_CONTRAST) -> str:
    """``colour``, darkened on light backgrounds or lightened on dark ones (its hue kept) until
    its contrast with every one of ``backgrounds`` reaches ``ratio``. Cached: a search of up to
    100 steps, and the rule strip asks for every rule's colour whenever the rules change (15 ms
    of the GUI thread's first redraw tick with seven rules, bench/bench_gui.py --profile)."""
    from PySide6.QtGui import QColor

    dark_bg = max(luminance(b) for b in backgrounds) < 0.2
    c = QColor(colour)
    h, s, lightness, _a = c.getHslF()
    for _ in range(100):
        shown = QColor.fromHslF(max(h, 0.0), s, lightness).name()
        if min(contrast(shown, b) for b in backgrounds) >= ratio:
            return shown.upper()
        lightness = min(1.0, lightness + 0.01) if dark_bg else max(0.0, lightness - 0.01)
    return "#FFFFFF" if dark_bg else "#000000"


def rule_text_color(rule: str, theme: Theme | None = None) -> str:
    """A rule's colour for text (a check box, a chip, a legend strip) in ``theme`` (default the
    current one): the same hue, as dark or light as it takes to be read (4.5:1) on the theme's
    window and fields. Curves and markers keep the rule's own colour."""
    theme = theme or _current
    return readable(rule_color(rule), (theme.window, theme.base, theme.button))


_current: Theme = LIGHT
_style = None  #: the application's widget style (ui.lab_style.LabStyle)


def current_theme() -> Theme:
    """The theme the app last applied (light before any): widgets that write a colour into
    text or a style sheet (the error red) take it from here, never a literal."""
    return _current


def error_css(bold: bool = False) -> str:
    """Style sheet text of an error message in the current theme."""
    return f"color: {_current.error};" + (" font-weight: bold;" if bold else "")


CSS_PROPERTY = "lab_css"  #: a widget whose style sheet is a template of theme colours
#: style sheet templates (``$name``: a :class:`Theme` field), for :func:`themed_css`
ERROR_TEXT = "color: $error;"
ERROR_TEXT_BOLD = "color: $error; font-weight: bold;"
NOTE_TEXT = "color: $muted; font-size: 9pt;"
WARNING_TEXT = "color: $warning; font-size: 9pt;"


def field_error_css(selector: str) -> str:
    """A refused field: an error-coloured border on the theme's own field colours (a red border
    alone let the style draw a pink field under the dark theme's white text)."""
    return (f"{selector} {{ border: 2px solid $error; border-radius: 3px; "
            "background-color: $base; color: $text; }")


def styled_widgets() -> list:
    """The live widgets whose colours follow the theme (rule colours, style sheet templates)."""
    from shiboken6 import isValid

    return [w for w in list(_THEMED) if isValid(w)]


def themed_css(widget, template: str) -> None:
    """Give ``widget`` the style sheet ``template`` with the current theme's colours filled in,
    and again with each new theme (:func:`apply_app_theme`): a sheet written once kept the old
    theme's colours. An empty template clears it."""
    from dataclasses import asdict
    from string import Template

    widget.setProperty(CSS_PROPERTY, template)
    _THEMED.add(widget)
    widget.setStyleSheet(Template(template).substitute(asdict(_current)) if template else "")


RULE_PROPERTY = "lab_rule"  #: a widget written in its rule's colour (it follows the theme)
#: the widgets whose colours follow the theme (:func:`color_rule_widget`, :func:`themed_css`)
_THEMED: weakref.WeakSet = weakref.WeakSet()


def color_rule_widget(widget, rule: str) -> None:
    """A check box or label in its rule's text colour (:func:`rule_text_color`), bold, through
    its palette (a style-sheeted widget kept the previous theme's colours when the theme
    changed); :func:`apply_app_theme` recolours it for each theme."""
    from PySide6.QtGui import QColor, QPalette

    widget.setProperty(RULE_PROPERTY, rule)
    _THEMED.add(widget)
    pal = widget.palette()
    pal.setColor(QPalette.ColorRole.WindowText, QColor(rule_text_color(rule)))
    widget.setPalette(pal)
    font = widget.font()
    font.setBold(True)
    widget.setFont(font)


def apply_app_theme(app, theme: Theme) -> None:
    """Fusion style (with visible check box outlines: ui.lab_style) and a palette built from the
    theme (widgets); plots are themed per panel."""
    from PySide6.QtGui import QColor, QPalette

    global _current, _style
    from ui.lab_style import LabStyle

    _current = theme
    if not isinstance(app.style(), LabStyle):  # one style for the app's life, recoloured
        _style = LabStyle(theme.muted)
        app.setStyle(_style)
    app.style().outline = theme.muted
    pal = QPalette()
    roles = {
        QPalette.ColorRole.Window: theme.window,
        QPalette.ColorRole.WindowText: theme.text,
        QPalette.ColorRole.Base: theme.base,
        QPalette.ColorRole.AlternateBase: theme.window,
        QPalette.ColorRole.Text: theme.text,
        QPalette.ColorRole.Button: theme.button,
        QPalette.ColorRole.ButtonText: theme.text,
        QPalette.ColorRole.ToolTipBase: theme.base,
        QPalette.ColorRole.ToolTipText: theme.text,
        QPalette.ColorRole.PlaceholderText: theme.muted,
        QPalette.ColorRole.Highlight: "#0072B2",
        QPalette.ColorRole.Link: theme.link,
        QPalette.ColorRole.LinkVisited: theme.link,
        QPalette.ColorRole.HighlightedText: "#FFFFFF",
    }
    for role, colour in roles.items():
        pal.setColor(role, QColor(colour))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor(theme.raw))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor(theme.raw))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, QColor(theme.raw))
    app.setPalette(pal)
    # the rule colours and style sheets, for this theme (only the widgets that asked for them:
    # walking all of Qt's widgets from Python wrapped its inner ones, and those wrappers
    # outlived them)
    from shiboken6 import isValid

    for widget in list(_THEMED):
        if not isValid(widget):
            _THEMED.discard(widget)
            continue
        rule, template = widget.property(RULE_PROPERTY), widget.property(CSS_PROPERTY)
        if rule:
            color_rule_widget(widget, rule)
        if template:
            themed_css(widget, template)
