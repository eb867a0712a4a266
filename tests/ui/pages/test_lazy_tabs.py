"""A lazy sub-tab is built the first time it is shown or asked for, in its placeholder's place,
without a tab change of its own (the Real model page opened in over a second building ~20 plots
of tabs nobody had opened)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QTabWidget

from ui.pages.lazy_tabs import LazyTabs


def test_a_tab_is_built_once_when_first_shown_or_asked_for(qtbot) -> None:
    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    made: list[str] = []
    built: list[str] = []
    changes: list[int] = []
    lazy = LazyTabs(tabs, lambda name, widget: built.append(name))
    tabs.addTab(QLabel("first"), "First")
    for name in ("b", "c"):
        lazy.add(name, name.upper(), lambda n=name: made.append(n) or QLabel(n))
    tabs.currentChanged.connect(changes.append)
    assert made == [] and lazy.built("b") is None and lazy.pending() == ["b", "c"]
    tabs.setCurrentIndex(2)  # shown: built in its place, under its title
    assert made == ["c"] and built == ["c"] and changes == [2]
    assert tabs.currentWidget() is lazy.built("c") and tabs.tabText(2) == "C"
    b = lazy.get("b")  # asked for (a page's property): built, the shown tab unchanged
    assert made == ["c", "b"] and tabs.widget(1) is b and tabs.currentIndex() == 2
    assert changes == [2] and lazy.pending() == []
    tabs.setCurrentIndex(1)
    assert lazy.get("b") is b and made == ["c", "b"]  # never twice
