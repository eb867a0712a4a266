"""The fuzz tests' setup: every reader is run once before anything is measured."""

from __future__ import annotations

import pytest

from tests.fuzz.readers import readers


@pytest.fixture(scope="session", autouse=True)
def warm(tmp_path_factory, qapp) -> None:
    """Every reader once (and so every module it imports, torch included) before any read is
    measured: a first import is not the reader's memory or time."""
    folder = tmp_path_factory.mktemp("warm")
    for reader in readers().values():
        where = folder / f"{reader.name}{reader.suffix}"
        reader.write(reader.prepare(where), reader.valid() if reader.valid else b"{}")
        try:
            reader.read(where)
        except reader.errors:
            pass
