"""The first start offers the tour once (remembered in the settings); windows made without
``ui.app`` (tests, ``--screenshot``) never offer it."""

from __future__ import annotations

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from ui.pages.tour.first_start import KEY, already_offered, offer_tour_once


def _ini(tmp_path) -> QSettings:
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


def test_the_tour_is_offered_once_and_never_again(window, qtbot, tmp_path):
    settings = _ini(tmp_path)
    assert not already_offered(settings)
    box = offer_tour_once(window, settings, window.show_tour)
    assert box is not None and box.isVisible() and not box.isModal()
    assert already_offered(_ini(tmp_path))  # written at once: a crash does not ask again
    box.button(QMessageBox.StandardButton.Yes).click()
    assert window.tour_dock is not None and window.tour_dock.isVisible()
    assert window.tour.index == 0
    # the next start (a fresh settings object on the same file) does not ask
    assert offer_tour_once(window, _ini(tmp_path), window.show_tour) is None
    assert _ini(tmp_path).value(KEY) in (True, "true")


def test_not_now_does_not_start_the_tour(window, tmp_path):
    box = offer_tour_once(window, _ini(tmp_path), window.show_tour)
    box.button(QMessageBox.StandardButton.No).click()
    assert window.tour_dock is None or not window.tour_dock.isVisible()
    assert offer_tour_once(window, _ini(tmp_path), window.show_tour) is None


def test_a_window_made_directly_offers_nothing(window):
    assert window.findChild(QMessageBox, "tour_offer") is None
    assert not already_offered(window.settings)
