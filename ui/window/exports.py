"""The main window's exports: every Simulation plot and the results at once (Ctrl+E), or one
plot (its menu), through dialogs that report a clear error instead of a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from ui.export.dialog import export_panel_dialog
from ui.export.plot_files import ExportError, export_all, export_panel
from ui.file_dialogs import choose_dir
from ui.window.part import WindowPart


class WindowExports(WindowPart):
    """Export actions of the main window (its Simulation page's plots and state)."""

    def export_all_to(self, parent: str | Path) -> Path:
        w = self.window
        out = export_all(w.page.panels.values(), w.state, parent)
        w.message("Export all", f"Exported every plot and the results to {out}")
        return out

    def export_plot(self, plot_id: str, path: str | Path, kind: str) -> Path:
        return export_panel(self.window.page.panels[plot_id], path, kind)

    def export_all_dialog(self) -> None:
        w = self.window
        folder = choose_dir(w, "Export all into folder")
        if not folder:
            return
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)  # rendering 12 figures takes ~1 s
        try:
            self.export_all_to(folder)
        except ExportError as exc:
            w.message("Export all", str(exc), error=True)
        finally:
            QApplication.restoreOverrideCursor()

    def page_panels(self) -> list[Any]:
        """The plots of the page shown now, in their order on it (every plot panel the page
        holds, whether or not its tab or mode shows it now)."""
        from ui.plots.base import PlotPanel

        w = self.window
        page = w.tabs.currentWidget()
        if page is w.page:
            return list(w.page.panels.values())
        if callable(getattr(page, "panels", None)):  # a page that lists its own (the inspector)
            return list(page.panels())
        # (a panel taken off the page, e.g. an experiment's old figure, was hidden first)
        return [p for p in page.findChildren(PlotPanel) if not p.isHidden()] if page else []

    def fill_plot_menu(self) -> None:
        """File -> Export plot: a submenu (PNG, SVG, CSV, slide, paper) per plot of the page
        shown now."""
        menu = self.window.plots_menu
        panels = self.page_panels()
        if [id(p) for p in panels] == getattr(self, "_menu_panels", None):
            return
        self._menu_panels = [id(p) for p in panels]
        for sub in menu.findChildren(type(menu)):  # the previous page's submenus go
            sub.deleteLater()
        menu.clear()
        for panel in panels:
            menu.addMenu(panel.export_menu(menu))
        if not panels:
            menu.addAction("(this page has no plots to export)").setEnabled(False)

    def export_panel_dialog(self, panel: Any, kind: str) -> None:
        w = self.window

        def report(text: str, error: bool) -> None:
            if error:
                w.message("Export", text, error=True)
            else:
                w.statusBar().showMessage(text, 5000)

        export_panel_dialog(w, panel, kind, report)
