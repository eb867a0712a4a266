"""The first start of the app offers the guided tour, once: the offer is remembered in the
settings (``tour/offered``), so it never comes back; ``--screenshot`` and the tests, which never
call this, never see it."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QMessageBox, QWidget

KEY = "tour/offered"
TEXT = ("New here? The guided tour walks through why attention divides q·k by √d_k in a dozen "
        "short steps: each sets the parameters and points at the plot to watch, and some ask "
        "you to guess first. It is always in Help → Start the guided tour.")


def already_offered(settings: Any) -> bool:
    return str(settings.value(KEY, "false")).lower() in ("true", "1")


def offer_tour_once(window: QWidget, settings: Any, start_tour: Any) -> QMessageBox | None:
    """On the very first start: remember the offer, then ask (non-modal); Yes starts the tour.
    Returns the question box, or None when the tour was offered before."""
    if already_offered(settings):
        return None
    settings.setValue(KEY, True)
    settings.sync()
    box = QMessageBox(QMessageBox.Icon.Question, "Guided tour", TEXT,
                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, window)
    box.setObjectName("tour_offer")
    box.button(QMessageBox.StandardButton.Yes).setText("Take the tour")
    box.button(QMessageBox.StandardButton.No).setText("Not now")
    box.setModal(False)

    def done(button: Any) -> None:
        if box.standardButton(button) == QMessageBox.StandardButton.Yes:
            start_tour()

    box.buttonClicked.connect(done)
    box.show()
    return box
