"""What the main window remembers between runs (QSettings): layout, parameters, pages' choices,
the last folder used. A window that does not persist (``--screenshot``, tests) writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray

from engine.config import SimulationConfig
from engine.errors import ConfigError
from ui.settings import load_json, save_json
from ui.window.part import WindowPart


class WindowSettings(WindowPart):
    """Loads and saves the main window's remembered state through its ``settings``."""

    @property
    def settings(self) -> Any:
        return self.window.settings

    def restore(self) -> None:
        """Geometry, dock layout and the last Simulation parameters (a stale value: defaults)."""
        w = self.window
        geo = self.settings.value("geometry")
        if isinstance(geo, QByteArray) and not geo.isEmpty():
            w.restoreGeometry(geo)
            w.fit_to_screen()  # saved on a larger screen: kept inside this one
        state = self.settings.value("window_state")
        if isinstance(state, QByteArray) and not state.isEmpty():
            w.restoreState(state)
        data = load_json(self.settings, "config")
        if isinstance(data, dict):
            try:
                w.params.set_config(SimulationConfig.from_dict(data))
            except (ConfigError, TypeError):
                pass  # a stale or hand-edited value: keep the defaults

    def save(self) -> None:
        w = self.window
        if not w.persist:
            return
        self.settings.setValue("geometry", w.saveGeometry())
        if w.tabs.currentWidget() is not w.page:  # save the layout as the Simulation tab has it
            w.params_dock.setVisible(w._params_dock_wanted)
        self.settings.setValue("window_state", w.saveState())
        try:
            save_json(self.settings, "config", w.params.config_from_widgets().to_dict())
        except ConfigError:
            pass  # invalid parameters are not remembered; the last valid ones stay
        if w._remember:
            for page in w.pages.values():
                save = getattr(page, "save_settings", None)
                if callable(save):
                    save(self.settings)
        self.settings.sync()

    def save_theme(self, name: str) -> None:
        if self.window.persist:
            self.settings.setValue("theme", name)

    def last_dir(self, images: bool = False) -> Path:
        """Where a dialog opens: the last folder used, else Pictures (``images``) or Documents."""
        from ui.file_dialogs import start_dir

        return start_dir(images)

    def remember_dir(self, d: Path) -> None:
        if self.window.persist:
            from ui.file_dialogs import remember_dir

            remember_dir(d)
