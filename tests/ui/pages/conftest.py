"""Fixtures shared by the Score inspector's test files."""

from __future__ import annotations

import pytest

from ui.pages.inspector.page import InspectorPage


@pytest.fixture
def inspector_page(qtbot) -> InspectorPage:
    """A shown Score inspector at a size where every control is laid out."""
    w = InspectorPage()
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    return w
