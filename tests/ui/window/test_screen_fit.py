"""A first start fits the screen it opens on (a 1280x720 projector got a 1600x1000 window, its
right column and sweep off the screen), and a geometry saved on a larger screen is brought back
inside the current one."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QByteArray, QRect

from ui.window.screen_fit import TITLE_BAR, clamp_rect, first_rect


def test_first_rect_fits_a_small_screen_and_keeps_the_preferred_size_on_a_large_one():
    small = QRect(0, 0, 1280, 720)
    r = first_rect(small, (1600, 1000))
    assert (r.width(), r.height()) == (1280, 720 - TITLE_BAR)  # by hand: the whole width
    assert small.contains(r) and r.top() >= TITLE_BAR
    large = QRect(0, 0, 2560, 1440)
    r = first_rect(large, (1600, 1000))
    assert (r.width(), r.height()) == (1600, 1000)
    assert r.center().x() in (1279, 1280)  # centred: (2560 - 1600) / 2 + 800


def test_clamp_rect_shrinks_and_moves_a_restored_frame_inside():
    screen = QRect(0, 0, 1280, 720)
    assert clamp_rect(QRect(100, 50, 1600, 1000), screen) == QRect(0, 0, 1280, 720)
    assert clamp_rect(QRect(1000, 600, 800, 400), screen) == QRect(480, 320, 800, 400)
    inside = QRect(10, 20, 300, 200)
    assert clamp_rect(inside, screen) == inside  # already inside: untouched
    # a screen that does not start at 0 (a second monitor)
    assert clamp_rect(QRect(0, 0, 500, 500), QRect(1920, 0, 1280, 720)) == QRect(1920, 0, 500, 500)


class _FakeScreen:
    def __init__(self, rect: QRect) -> None:
        self._rect = rect

    def availableGeometry(self) -> QRect:  # Qt's name
        return QRect(self._rect)


@pytest.fixture
def screen_1280(monkeypatch, tmp_path):
    """A 1280x720 screen, and settings in a file of the test's own (never the user's)."""
    from PySide6.QtCore import QSettings

    from ui.window.main_window import MainWindow

    monkeypatch.setattr(MainWindow, "screen", lambda self: _FakeScreen(QRect(0, 0, 1280, 720)))
    settings = QSettings(str(tmp_path / "lab.ini"), QSettings.Format.IniFormat)
    monkeypatch.setattr("ui.window.main_window.open_settings", lambda: settings)
    return settings


def test_a_first_start_on_a_1280x720_screen_fits_it(qtbot, screen_1280):
    from ui.window.main_window import MainWindow

    w = MainWindow(theme="light", restore=True, persist=False)
    qtbot.addWidget(w)
    assert w.width() <= 1280 and w.height() <= 720 - TITLE_BAR
    assert w.width() == 1280  # the whole width (by hand: min(1600, 1280))
    w.shutdown()


def test_a_geometry_saved_on_a_larger_screen_is_clamped(qtbot, screen_1280):
    from ui.window.main_window import MainWindow

    big = MainWindow(theme="light", restore=False, persist=False)
    qtbot.addWidget(big)
    big.setGeometry(300, 200, 1700, 1050)
    screen_1280.setValue("geometry", QByteArray(big.saveGeometry()))
    big.shutdown()
    w = MainWindow(theme="light", restore=True, persist=False)
    qtbot.addWidget(w)
    frame = w.frameGeometry()
    assert QRect(0, 0, 1280, 720).contains(frame), frame
    w.shutdown()
