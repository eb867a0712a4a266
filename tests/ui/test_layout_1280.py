"""The worst case a user can make at 1280x720: every rule checked, in both themes, in normal and
presentation mode, on every page; and every export style of every Simulation panel, the sweep
included, and every export style of the Score inspector's and Experiments page's panels.
No text item overlaps another or a plot's data area, none is clipped by its parent,
every checked rule is in view in the strip (or presentation mode's bar)."""

from __future__ import annotations

import re

import pytest
from PySide6.QtWidgets import QApplication

from engine.rules import RULES
from tests.ui.plot_layout import export_problems, label_cut, layout_problems, title_over_data
from tests.ui.test_window_size import _one_estimate_line  # noqa: F401  (autouse)
from ui.plots.base import PlotPanel

PAGES = ("Simulation", "Score inspector", "Training", "Real model", "Experiments")


def _settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(5)


def form_problems(title: str, page) -> list[str]:
    """Labels and buttons of ``page``'s form (outside its plots) that do not show their text
    whole: a word-wrapped label needing more height or width than it has, a button narrower
    than its text (the Real model form in presentation mode: "pen model folder")."""
    from PySide6.QtWidgets import QLabel, QPushButton

    out = []
    for label in page.findChildren(QLabel):
        if label.isVisibleTo(page) and label.wordWrap() and label.text():
            cut = label_cut(label)
            if cut:
                out.append(f"{title} label {label.objectName() or ''}: {cut}")
    for button in page.findChildren(QPushButton):
        if button.isVisibleTo(page) and button.text() and \
                button.width() < button.sizeHint().width() - 2:
            out.append(f"{title} button {button.text()!r} is {button.width()} px, its text needs "
                       f"{button.sizeHint().width()}")
    return out


def page_problems(window, title: str) -> list[str]:
    """Every problem of the page shown now: its plots (titles cut with "…" included) and its
    form; each view of the Real model page's tabs in turn."""
    page = window.tabs.currentWidget()
    views = getattr(page, "tabs", None)
    if views is None:
        return _view_problems(window, page, title)
    out = []
    for index in range(views.count()):
        views.setCurrentIndex(index)
        _settle_app()
        out += _view_problems(window, page, f"{title}/{views.tabText(index)}")
    views.setCurrentIndex(0)
    return out


def _settle_app() -> None:
    for _ in range(3):
        QApplication.processEvents()


def _view_problems(window, page, title: str) -> list[str]:
    if page is window.page:
        page.redraw(budget=9)
    panels = [p for p in page.findChildren(PlotPanel)
              if p.isVisibleTo(window) and p.glw.width() > 1]
    for panel in panels:
        panel.glw.grab()  # pyqtgraph sizes an axis for its labels when it paints
    QApplication.processEvents()
    out = []
    for panel in panels:
        where = f"{title}/{panel.plot_id}"
        out += layout_problems(where, panel, whole_titles=True) + title_over_data(where, panel)
    return out + form_problems(title, page)


def strip_problems(window) -> list[str]:
    """Every checked rule named in view: the page's strip, or presentation mode's chips."""
    if window.presenter.active:
        bar = window.presenter.bar
        room = bar.rect()
        out = []
        for rule, chip in bar.rule_buttons.items():
            seen = chip.mapTo(bar, chip.rect().topLeft())
            if not (chip.isVisibleTo(bar) and room.contains(seen)
                    and room.contains(seen + chip.rect().bottomRight())):
                out.append(f"bar chip {rule} is out of view")
            elif chip.width() < chip.sizeHint().width():  # squeezed: its name elided ("te…re")
                out.append(f"bar chip {rule} is {chip.width()} px, its name needs "
                           f"{chip.sizeHint().width()}")
        return out
    strip = window.page.rule_strip
    plain = re.sub(r"<[^>]+>", "", strip.text())
    out = [f"strip lacks {r}" for r in RULES if not re.search(rf"\b{r}\b", plain)]
    cut = label_cut(strip)
    return out + ([f"strip cut: {cut}"] if cut else [])


@pytest.mark.slow
def test_every_page_at_1280x720_with_every_rule_in_both_themes_and_modes(qtbot, wait_complete):
    from ui.window.main_window import MainWindow

    w = MainWindow(theme="light", restore=False, persist=False)
    qtbot.addWidget(w)
    w.resize(1280, 720)
    w.show()
    qtbot.waitExposed(w)
    try:
        w.apply_config({"scalings": list(RULES), "trials": 200})
        wait_complete(w, timeout=120_000)
        problems: list[str] = []
        for theme in ("light", "dark"):
            w.set_theme(theme)
            for present in (False, True):
                w.set_presentation(present)
                for title in PAGES:
                    assert w.open_page_titled(title)
                    _settle(qtbot)
                    if title == "Simulation":
                        problems += [f"{theme} {'present' if present else 'normal'}: {p}"
                                     for p in strip_problems(w)]
                    problems += [f"{theme} {'present' if present else 'normal'}: {p}"
                                 for p in page_problems(w, title)]
                w.set_presentation(False)
        assert not problems, "\n".join(problems)
    finally:
        w.shutdown()
        w.close()
        w.deleteLater()


@pytest.mark.slow
def test_every_export_style_of_every_panel_is_whole(qtbot, window, wait_complete):
    """PNG/SVG, slide and paper of every Simulation panel (the sweep included) with every rule,
    of the Score inspector's panels and of the Experiments page's grid and figures (the
    five-rule logit_control experiment, before a run): titles whole, nothing cut. (The Training
    and Real model panels' exports are checked after a run: test_plot_layout, test_real_model.)"""
    window.resize(1280, 720)
    window.apply_config({"scalings": list(RULES), "trials": 200})
    wait_complete(window, timeout=120_000)
    problems = []
    for pid, panel in window.page.panels.items():
        problems += export_problems(pid, panel)
    exported = {}
    for title, builtin in (("Score inspector", None), ("Experiments", "logit_control")):
        assert window.open_page_titled(title)
        page = window.tabs.currentWidget()
        if builtin:
            page.form.select_builtin(builtin)
        _settle(qtbot)
        panels = [p for p in page.findChildren(PlotPanel) if getattr(p, "_state", None) is not None]
        exported[title] = len(panels)
        for panel in panels:
            problems += export_problems(f"{title}/{panel.plot_id}", panel)
    assert exported["Score inspector"] >= 3 and exported["Experiments"] >= 5, exported
    assert not problems, "\n".join(problems)
