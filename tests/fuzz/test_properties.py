"""Property-based fuzzing of every reader (hypothesis): random JSON values at every field of a
valid document, random whole documents and random text. A read is accepted and its result safe to
use downstream, or it is the reader's one clear error: never another exception, never more than
one line."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.corpus import paths, replaced
from tests.fuzz.readers import READERS_WITH_DOCUMENTS, readers
from tests.fuzz.test_corpus import judge, measured

READERS = readers()

SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40))


def json_values(keys: list[str]) -> st.SearchStrategy[Any]:
    """Any JSON value, objects keyed by the document's own keys as often as by random text (so
    the values reach the checks behind the key checks)."""
    key = st.sampled_from(keys) | st.text(max_size=12) if keys else st.text(max_size=12)
    return st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4)
                        | st.dictionaries(key, kids, max_size=4), max_leaves=24)


def _keys(doc: Any) -> list[str]:
    return sorted({str(p[-1]) for p in paths(doc) if isinstance(p[-1], str)})


def _read_doc(name: str, doc: Any) -> None:
    reader = READERS[name]
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / f"case{reader.suffix}"
        reader.write(reader.prepare(where), doc)
        result, error, seconds, peak = measured(lambda: reader.read(where))
        judge(reader, where, result, error, seconds, peak, hostile=False)


@pytest.mark.parametrize("name", READERS_WITH_DOCUMENTS)
@given(data=st.data())
def test_random_json_at_any_field(name: str, data, qapp) -> None:
    valid = READERS[name].valid()
    path = data.draw(st.sampled_from(list(paths(valid))), label="field")
    value = data.draw(json_values(_keys(valid)), label="value")
    _read_doc(name, replaced(valid, path, value))


@pytest.mark.parametrize("name", READERS_WITH_DOCUMENTS)
@given(data=st.data())
def test_random_whole_documents(name: str, data, qapp) -> None:
    _read_doc(name, data.draw(json_values(_keys(READERS[name].valid())), label="document"))


@pytest.mark.parametrize("name", sorted(READERS))
@given(text=st.text(max_size=200))
def test_random_text(name: str, text: str, qapp) -> None:
    _read_doc(name, text.encode("utf-8", "surrogatepass"))
