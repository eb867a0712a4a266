"""The files of a model folder that transformers or a tokenizer library reads whole: each is a
regular file within its size, checked before either reads it (an 800 MB tokenizer.json cost
4.1 GB, a FIFO would block forever). Refused in one line naming the file, at no cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import FileFormatError
from tests.fuzz.model_folders import (
    BERT,
    HOSTILE_LIBRARY_FILES,
    hostile_library_folder,
    model_folder,
)
from tests.fuzz.test_corpus import MEMORY_BOUND, TIME_BOUND_S, measured

WHERE = {"tokenizer_json_800mb": "tokenizer.json", "tokenizer_config_800mb":
         "tokenizer_config.json", "vocab_txt_fifo": "vocab.txt",
         "special_tokens_dev_zero": "special_tokens_map.json", "sentencepiece_1gb": "spiece.model"}


@pytest.mark.parametrize("case", HOSTILE_LIBRARY_FILES)
def test_a_hostile_library_file_is_refused_unread(tmp_path: Path, case: str) -> None:
    from engine.probe.model_folder import inspect_model_dir

    folder = hostile_library_folder(tmp_path / "m", case)
    _info, error, seconds, peak = measured(lambda: inspect_model_dir(folder))
    assert isinstance(error, FileFormatError), error
    assert error.option == "model" and error.file == str(folder / WHERE[case])
    assert "\n" not in str(error)
    assert seconds < TIME_BOUND_S and peak < MEMORY_BOUND


@pytest.mark.parametrize(("name", "limit"), [("tokenizer.json", 100_000_000),
                                             ("tokenizer_config.json", 16_000_000),
                                             ("merges.txt", 32_000_000),
                                             ("tokenizer.model", 64_000_000)])
def test_the_limit_holds_from_both_sides(tmp_path: Path, name: str, limit: int) -> None:
    """A file of exactly its limit is taken (sparse: no disk space), one byte more is not."""
    from engine.probe.model_folder import inspect_model_dir

    folder = model_folder(tmp_path / "m", BERT)
    with open(folder / name, "wb") as fh:
        fh.truncate(limit)
    inspect_model_dir(folder)
    with open(folder / name, "wb") as fh:
        fh.truncate(limit + 1)
    with pytest.raises(FileFormatError, match=f"{limit + 1:,} bytes, more than the {limit:,}"):
        inspect_model_dir(folder)
