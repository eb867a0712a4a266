"""Training tests run torch on one thread: its default pool on 2 shared cores costs seconds per
tiny run (and the trainer's own steps are single-threaded anyway)."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_thread():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
