"""Colours: one fixed colour per scaling rule (everywhere), and the light/dark themes.

The first six simulator rules use the Okabe-Ito colour-blind-safe set; the length rules take an
olive and a wine from Paul Tol's set, the two training-only bug rules a purple and a brown. They read on both backgrounds, so a rule keeps its colour
when the theme changes. Series that are not rules (the raw q·k, the inspector's p_i and
Jacobian bars, limit lines) take their colour from the :class:`Theme`.
"""

from __future__ import annotations

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


LIGHT = Theme("light", background="#FFFFFF", foreground="#202020", raw="#7F7F7F", grid_alpha=0.15,
              highlight="#E69F00", window="#F2F2F2", base="#FFFFFF", text="#202020",
              button="#E8E8E8", error="#C62828", weight="#505A66", jacobian="#332288",
              limit="#C62828", link="#0061A0")
DARK = Theme("dark", background="#1E1F22", foreground="#DADADA", raw="#A8A8A8", grid_alpha=0.2,
             highlight="#F0C040", window="#2B2D30", base="#1E1F22", text="#E4E4E4",
             button="#3C3F41", error="#FF6B6B", weight="#B8C2CC", jacobian="#9E8CF0",
             limit="#FF6B6B", link="#6CB6FF")
THEMES = {"light": LIGHT, "dark": DARK}


def rule_color(rule: str) -> str:
    return RULE_COLORS[rule]


_current: Theme = LIGHT


def current_theme() -> Theme:
    """The theme the app last applied (light before any): widgets that write a colour into
    text or a style sheet (the error red) take it from here, never a literal."""
    return _current


def error_css(bold: bool = False) -> str:
    """Style sheet text of an error message in the current theme."""
    return f"color: {_current.error};" + (" font-weight: bold;" if bold else "")


def color_rule_widget(widget, rule: str) -> None:
    """A check box or label in its rule's colour, bold, through its palette (not a style sheet:
    a style-sheeted widget kept the previous theme's colours when the theme changed)."""
    from PySide6.QtGui import QColor, QPalette

    pal = widget.palette()
    pal.setColor(QPalette.ColorRole.WindowText, QColor(rule_color(rule)))
    widget.setPalette(pal)
    font = widget.font()
    font.setBold(True)
    widget.setFont(font)


def apply_app_theme(app, theme: Theme) -> None:
    """Fusion style with a palette built from the theme (widgets); plots are themed per panel."""
    from PySide6.QtGui import QColor, QPalette

    global _current
    _current = theme
    app.setStyle("Fusion")
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
        QPalette.ColorRole.PlaceholderText: theme.raw,
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
