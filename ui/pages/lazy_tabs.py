"""Sub-tabs built the first time they are shown (or asked for): a page with many plots opens at
once instead of building every pyqtgraph plot of every sub-tab up front (the Real model page's
four tabs held about 20 plots: building them all blocked the window for over a second).

Each lazy tab holds an empty placeholder until then; building puts the real widget in its place
(same index, same title) without a currentChanged signal of its own, and ``on_built`` lets the
page bring the new widget up to date (its theme, its data)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QTabWidget, QWidget


class LazyTabs:
    """The lazy tabs of one QTabWidget, by name. Connect this before anything else reacts to
    ``tabs.currentChanged``: a tab is built before the page's own handlers see it."""

    def __init__(self, tabs: QTabWidget, on_built: Callable[[str, QWidget], None]) -> None:
        self.tabs = tabs
        self.on_built = on_built
        self._factories: dict[str, Callable[[], QWidget]] = {}
        self._placeholders: dict[str, QWidget] = {}
        self._built: dict[str, QWidget] = {}
        tabs.currentChanged.connect(self._current_changed)

    def add(self, name: str, title: str, factory: Callable[[], QWidget]) -> None:
        """A tab titled ``title`` whose widget ``factory()`` makes when it is first needed."""
        placeholder = QWidget(self.tabs)
        placeholder.setObjectName(f"lazy_tab_{name}")
        self._factories[name] = factory
        self._placeholders[name] = placeholder
        self.tabs.addTab(placeholder, title)

    def built(self, name: str) -> QWidget | None:
        """The tab's widget if it was built, else None (builds nothing)."""
        return self._built.get(name)

    def get(self, name: str) -> QWidget:
        """The tab's widget, built now if it was not yet."""
        widget = self._built.get(name)
        if widget is not None:
            return widget
        placeholder = self._placeholders.pop(name)
        widget = self._factories.pop(name)()
        self._built[name] = widget
        tabs = self.tabs
        index, current = tabs.indexOf(placeholder), tabs.currentIndex()
        title, tip = tabs.tabText(index), tabs.tabToolTip(index)
        blocked = tabs.blockSignals(True)  # the tab shown does not change: no signal
        try:
            tabs.removeTab(index)
            tabs.insertTab(index, widget, title)
            tabs.setTabToolTip(index, tip)
            tabs.setCurrentIndex(current)
        finally:
            tabs.blockSignals(blocked)
        placeholder.deleteLater()
        self.on_built(name, widget)
        return widget

    def pending(self) -> list[str]:
        """The tabs not built yet."""
        return list(self._placeholders)

    def _current_changed(self, index: int) -> None:
        shown = self.tabs.widget(index)
        for name, placeholder in list(self._placeholders.items()):
            if placeholder is shown:
                self.get(name)
