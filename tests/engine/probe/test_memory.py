"""The memory a model folder's config commits to, counted on the meta device before anything is
allocated: the count matches the architecture's formula, a model over the budget or with far
fewer weights than its config builds is refused in one line, and the check itself costs no
memory however large the model it describes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ConfigError, FileFormatError
from tests.fuzz.model_folders import (
    BERT,
    HOSTILE_CONFIGS,
    bert_buffer_bytes,
    bert_parameters,
    hostile_config_folder,
    model_folder,
)
from tests.fuzz.test_corpus import measured

pytest.importorskip("transformers")

#: far above what building on the meta device takes (the hostile models: 1.3-6.4 GB if real)
CHECK_MEMORY_BOUND = 256 * 2**20


@pytest.fixture(scope="module", autouse=True)
def warm(tmp_path_factory) -> None:
    """One count first: importing transformers' model code is not the check's memory."""
    from engine.probe.memory import model_memory

    model_memory(model_folder(tmp_path_factory.mktemp("warm"), BERT))


def _cfg(case: str) -> dict:
    return {**BERT, **HOSTILE_CONFIGS[case][0]}


@pytest.mark.parametrize("case", ["small", *HOSTILE_CONFIGS])
def test_the_count_is_the_architectures_own(tmp_path: Path, case: str) -> None:
    from engine.probe.memory import model_memory

    cfg = BERT if case == "small" else _cfg(case)
    folder = model_folder(tmp_path, cfg) if case == "small" else hostile_config_folder(
        tmp_path, case)
    mem, error, _seconds, peak = measured(lambda: model_memory(folder))
    assert error is None, error
    assert mem.parameters == bert_parameters(cfg)
    assert mem.buffers == 2 * cfg["max_position_embeddings"]
    assert mem.nbytes == 4 * bert_parameters(cfg) + bert_buffer_bytes(cfg)
    assert peak < CHECK_MEMORY_BOUND, f"{peak / 2**20:.0f} MB"


def test_over_the_budget_is_refused_naming_it_and_the_largest_tensor(tmp_path: Path) -> None:
    from engine.probe.memory import check_model_memory

    folder = hostile_config_folder(tmp_path, "type_vocab_50m")
    label = str(folder / "config.json")
    _mem, error, _s, peak = measured(lambda: check_model_memory(folder, 3200, 4.0, label))
    assert isinstance(error, FileFormatError), error
    line = str(error)
    assert line.startswith(label) and "\n" not in line
    assert "more than the memory budget of 4 GB" in line
    assert "token_type_embeddings.weight (50,000,000 x 32)" in line
    assert f"{(4 * bert_parameters(_cfg('type_vocab_50m')) + 16 * 64) / 1e9:.2f} GB" in line
    assert peak < CHECK_MEMORY_BOUND


def test_the_budget_is_a_bound_from_both_sides(tmp_path: Path) -> None:
    """Exactly the tensors' bytes is within; a kilobyte less is over."""
    from engine.probe.memory import check_model_memory

    folder = hostile_config_folder(tmp_path, "positions_10m")
    cfg = _cfg("positions_10m")
    need = 4 * bert_parameters(cfg) + bert_buffer_bytes(cfg)
    params = bert_parameters(cfg)
    assert check_model_memory(folder, params, need / 1e9, "c").nbytes == need
    with pytest.raises(FileFormatError, match="memory budget"):
        check_model_memory(folder, params, (need - 1000) / 1e9, "c")


@pytest.mark.parametrize("case", ["positions_10m", "type_vocab_14m",
                                  "wide_24_layers_one_tensor"])
def test_weights_far_short_of_the_config_are_refused(tmp_path: Path, case: str) -> None:
    """Under the default budget, but the weights hold a sliver of what the config builds: the
    rest would be allocated and left random."""
    from engine.probe.memory import DEFAULT_BUDGET_GB, check_model_memory
    from engine.probe.model_folder import inspect_model_dir

    folder = hostile_config_folder(tmp_path, case)
    info = inspect_model_dir(folder)  # the folder's own checks take it
    with pytest.raises(FileFormatError) as exc:
        check_model_memory(folder, info.n_params, DEFAULT_BUDGET_GB, "c")
    assert f"its weights files hold {info.n_params:,}" in str(exc.value)
    assert f"has {bert_parameters(_cfg(case)):,} parameters" in str(exc.value)


def test_the_share_of_weights_is_a_bound_from_both_sides(tmp_path: Path) -> None:
    from engine.probe.memory import COVER_SLACK, MIN_COVERED, check_model_memory

    folder = hostile_config_folder(tmp_path, "wide_24_layers_one_tensor")
    params = bert_parameters(_cfg("wide_24_layers_one_tensor"))
    least = int(MIN_COVERED * params - COVER_SLACK) + 1
    check_model_memory(folder, least, 100.0, "c")
    with pytest.raises(FileFormatError, match="left random"):
        check_model_memory(folder, least - 2, 100.0, "c")
    check_model_memory(folder, None, 100.0, "c")  # torch weights: no header to count


@pytest.mark.parametrize("budget", [0, 0.05, -1, float("nan"), float("inf"), 1e9, "4", True])
def test_a_budget_out_of_range_is_refused(budget) -> None:
    from engine.probe.memory import check_budget

    with pytest.raises(ConfigError) as exc:
        check_budget(budget)
    assert exc.value.field == "memory_budget"


def test_load_model_refuses_before_it_loads_anything(tmp_path: Path) -> None:
    """The loader checks the budget before the tokenizer and the weights (this folder has no
    tokenizer: reaching it would be a different error)."""
    from engine.probe.loader import load_model

    folder = hostile_config_folder(tmp_path, "type_vocab_50m")
    _r, error, _s, peak = measured(lambda: load_model(str(folder)))
    assert isinstance(error, FileFormatError) and "memory budget" in str(error), error
    assert error.option == "model"
    assert peak < CHECK_MEMORY_BOUND
    _r, error, _s, _p = measured(lambda: load_model(str(folder), 100.0))
    assert isinstance(error, FileFormatError) and "left random" in str(error), error


def test_the_bundled_model_fits_the_default_budget() -> None:
    from engine.probe.loader import bundled_model_dir
    from engine.probe.memory import DEFAULT_BUDGET_GB, check_model_memory
    from engine.probe.model_folder import inspect_model_dir

    folder = bundled_model_dir()
    if folder is None:
        pytest.skip("the bundled all-MiniLM-L6-v2 is not installed")
    info = inspect_model_dir(folder)
    mem = check_model_memory(folder, info.n_params, DEFAULT_BUDGET_GB, "c")
    # its weights hold the model's parameters (and a buffer: position_ids)
    assert mem.parameters <= info.n_params <= mem.parameters + mem.buffers
