"""The window's size on the screen it opens on: a first start fits the screen's available
geometry (a fixed 1600x1000 put the right column and the sweep off a 1280x720 projector), and a
geometry remembered from a larger screen is brought back inside the current one."""

from __future__ import annotations

from PySide6.QtCore import QRect

#: the first size wanted on a large screen; a smaller screen gets its available geometry
PREFERRED_SIZE = (1600, 1000)
#: pixels the window manager's title bar takes above the window (not known before it is shown)
TITLE_BAR = 32


def first_rect(available: QRect, preferred: tuple[int, int] = PREFERRED_SIZE) -> QRect:
    """The window's first geometry (its inside, the title bar above it): ``preferred`` shrunk
    to fit ``available`` (the screen less its panels), centred on it."""
    width = min(preferred[0], available.width())
    height = min(preferred[1], max(1, available.height() - TITLE_BAR))
    rect = QRect(0, 0, width, height)
    rect.moveCenter(available.center())
    rect.moveTop(max(rect.top(), available.top() + TITLE_BAR))
    return rect


def clamp_rect(rect: QRect, available: QRect) -> QRect:
    """``rect`` (a restored frame) no larger than ``available`` and moved wholly inside it."""
    width = min(rect.width(), available.width())
    height = min(rect.height(), available.height())
    x = min(max(rect.x(), available.left()), available.right() + 1 - width)
    y = min(max(rect.y(), available.top()), available.bottom() + 1 - height)
    return QRect(x, y, width, height)
