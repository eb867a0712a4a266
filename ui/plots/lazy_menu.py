"""A ViewBox whose right-click menu is built when it is first wanted, not with the plot.

pyqtgraph builds every ViewBox's context menu (ViewBoxMenu: a dozen widgets from a Designer
template) in the ViewBox's constructor; it was about a third of the time a plot took to build,
and the Real model page's Per head tab builds seven plots when first opened. The menu is the
same once built: ``menu`` builds it on first use (a right-click, a test that reads its actions)
and runs the ``on_menu`` hooks that add the lab's entries to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyqtgraph as pg
from pyqtgraph.graphicsItems.ViewBox.ViewBoxMenu import ViewBoxMenu


class LazyMenuViewBox(pg.ViewBox):
    """``pg.ViewBox`` with its menu built on first access of ``menu``."""

    _lab_menu: Any = None
    _lab_quiet = False  #: reading ``menu`` does not build it (pyqtgraph's bookkeeping)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lab_hooks: list[Callable[[Any], None]] = []
        wanted = kwargs.pop("enableMenu", True)
        super().__init__(*args, enableMenu=False, **kwargs)
        self.state["enableMenu"] = wanted

    @property
    def menu(self) -> Any:  # pyqtgraph's name
        if self._lab_menu is None and not self._lab_quiet and self.state.get("enableMenu", True):
            self._lab_menu = ViewBoxMenu(self)
            self.updateViewLists()
            for hook in self._lab_hooks:
                hook(self._lab_menu)
        return self._lab_menu

    @menu.setter
    def menu(self, value: Any) -> None:
        self._lab_menu = value

    def on_menu(self, hook: Callable[[Any], None]) -> None:
        """``hook(menu)`` once the menu exists (now, if it does)."""
        self._lab_hooks.append(hook)
        if self._lab_menu is not None:
            hook(self._lab_menu)

    def updateViewLists(self) -> None:  # pyqtgraph's names from here on
        quiet, self._lab_quiet = self._lab_quiet, True
        try:
            super().updateViewLists()
        finally:
            self._lab_quiet = quiet

    def _applyMenuEnabled(self) -> None:
        """Enabling builds nothing (the menu comes when wanted); disabling drops a built one."""
        if not self.state.get("enableMenu", True) and self._lab_menu is not None:
            self._lab_menu.setParent(None)
            self._lab_menu = None
