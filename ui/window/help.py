"""Help -> Help and shortcuts (F1): what the app does, its shortcuts, where its settings live;
Help -> About: the version, torch's, the device and where this copy of the lab runs from."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from ui.settings import settings_location

HELP_TEXT = """<h3>Attention Scaling Lab</h3>
<p>Why attention divides q·k by √d_k, shown live. Change any parameter on the left and every plot
reruns; results refine while trials stream in. Each scaling rule keeps its colour everywhere.</p>
{shortcuts}
<p>Right-click a plot to export it as PNG, SVG or CSV. Hover the sweep for exact values (the
point is marked in all six sweep plots); click a sweep point to set its d_k (or n, along n). Exported figures carry
their parameters: File → Open accepts them.</p>"""


def show_help(window: QWidget) -> None:
    """The help box over ``window`` (Qt's About box: modal, one OK button)."""
    QMessageBox.about(window, "Attention Scaling Lab", help_text(window))


def help_text(window: QWidget) -> str:
    """The help's HTML: the shortcuts table comes from the window's actions themselves."""
    from ui.window.shortcuts import help_table

    return (HELP_TEXT.replace("{shortcuts}", help_table(window))
            + f"<p>Settings are kept in {settings_location()}.</p>")


def about_text() -> str:
    """The About box's text: the versions (engine.about), the device, this copy's folder."""
    import html
    from pathlib import Path

    import engine
    from engine.about import device_description, version
    from engine.io import package_versions

    found = package_versions(("torch", "numpy", "PySide6", "pyqtgraph"))
    rows = [("Version", version()), ("torch", found["torch"]), ("Device", device_description()),
            ("Python", found["python"]), ("NumPy", found["numpy"]), ("PySide6", found["PySide6"]),
            ("pyqtgraph", found["pyqtgraph"]), ("Runs from", str(Path(engine.__file__).parent.parent))]
    table = "".join(f"<tr><td>{k}</td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return (f"<h3>Attention Scaling Lab {html.escape(version())}</h3><p>See, poke and measure why "
            f"attention divides its scores by √d_k.</p><table>{table}</table><p>License: MIT.</p>")


def show_about(window: QWidget) -> None:
    """Help -> About (modal, one OK button)."""
    QMessageBox.about(window, "About Attention Scaling Lab", about_text())
