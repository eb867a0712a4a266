"""engine.probe.memory's counting and wording on modules and exceptions made here: numbers and
bytes per dtype (floating tensors in float32 at least), a shared tensor once, the largest tensor
named, the sizes as the refusal prints them, and the one-line error text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from engine.errors import ConfigError, FileFormatError  # noqa: E402
from engine.probe import memory  # noqa: E402
from engine.probe.memory import (  # noqa: E402
    BUDGET_MAX_GB,
    BUDGET_MIN_GB,
    COVER_SLACK,
    DEFAULT_BUDGET_GB,
    MIN_COVERED,
    ModelMemory,
    _gb,
    _one_line,
    check_budget,
    check_model_memory,
    count_tensors,
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(1000, 12)  # 12,000 float32: 48,000 bytes
        self.head = nn.Linear(12, 1000, bias=False)
        self.head.weight = self.emb.weight  # tied: counted once
        self.low = nn.Parameter(torch.zeros(3, 5, dtype=torch.float16))  # as float32: 60 bytes
        self.wide = nn.Parameter(torch.zeros(7, dtype=torch.float64))  # 56 bytes
        self.register_buffer("ids", torch.zeros(11, dtype=torch.int64))  # 88 bytes
        self.register_buffer("flags", torch.zeros(9, dtype=torch.bool))  # 9 bytes
        self.register_buffer("mask", torch.zeros(2, 2, dtype=torch.bfloat16))  # as float32: 16


def test_numbers_and_bytes_by_hand() -> None:
    mem = count_tensors(Net())
    assert mem == ModelMemory(parameters=12_000 + 15 + 7, buffers=11 + 9 + 4,
                              nbytes=48_000 + 60 + 56 + 88 + 9 + 16, largest="emb.weight (1,000 x 12)")


def test_the_largest_tensor_is_the_first_of_the_largest_and_may_be_a_buffer() -> None:
    net = nn.Module()
    net.a = nn.Parameter(torch.zeros(4, 6))
    net.b = nn.Parameter(torch.zeros(24))  # as many numbers: the first one stays
    net.register_buffer("big", torch.zeros(2, 3, 5))
    assert count_tensors(net).largest == "big (2 x 3 x 5)"
    net.big = torch.zeros(1)
    assert count_tensors(net).largest == "a (4 x 6)"
    empty = count_tensors(nn.Module())
    assert empty == ModelMemory(0, 0, 0, "")
    scalar = nn.Module()
    scalar.s = nn.Parameter(torch.tensor(2.0))
    assert count_tensors(scalar) == ModelMemory(1, 0, 4, "s ()")


def test_the_limits_as_numbers() -> None:
    assert (DEFAULT_BUDGET_GB, BUDGET_MIN_GB, BUDGET_MAX_GB) == (4.0, 0.1, 4096.0)
    assert (MIN_COVERED, COVER_SLACK) == (0.5, 1_000_000)
    assert check_budget(0.1) == 0.1 and check_budget(4096) == 4096.0
    for bad in (0.0999, 4096.5):
        with pytest.raises(ConfigError) as exc:
            check_budget(bad, "budget_field")
        assert exc.value.field == "budget_field"
        assert exc.value.message.startswith("must be in [0.1, 4096]")


@pytest.mark.parametrize("nbytes, text", [
    (0, "0.00 GB"), (1_234_567, "0.00 GB"), (5_555_000_000, "5.55 GB"),
    (9_994_999_999, "9.99 GB"), (10_000_000_000, "10 GB"), (12_345_678_901_234, "12,346 GB"),
    (2_995_000_001, "3.00 GB"), (12_500_000_001, "13 GB")])  # (GB = 1e9 bytes, not 1e9 + 1)
def test_sizes_as_the_refusal_prints_them(nbytes, text) -> None:
    assert _gb(nbytes) == text


def test_an_error_in_one_line_of_at_most_300_characters() -> None:
    assert _one_line(ValueError("a\n  b\tc  ")) == "a b c"
    assert _one_line(KeyError()) == "KeyError"
    assert _one_line(ValueError("   ")) == "ValueError"
    assert _one_line(ValueError("x" * 300)) == "x" * 300
    assert _one_line(ValueError("x" * 301)) == "x" * 300 + "…"
    assert _one_line(ValueError("abcdef"), limit=3) == "abc…"


def test_a_config_transformers_cannot_build_is_refused_naming_the_folder(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from engine.probe.memory import model_memory

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-model"}),
                                          encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        model_memory(tmp_path)
    assert exc.value.field == "model"
    msg = exc.value.message
    assert msg.startswith(f"cannot build the model {str(tmp_path)!r}'s config describes: ")
    assert "\n" not in msg and "no-such-model" in msg


def test_a_tensor_that_is_a_parameter_and_a_buffer_is_counted_once() -> None:
    net = nn.Module()
    net.w = nn.Parameter(torch.zeros(10))
    net.register_buffer("alias", net.w)  # the same tensor again, as a buffer
    net.register_buffer("after", torch.zeros(3))
    assert count_tensors(net) == ModelMemory(10, 3, 52, "w (10)")


def _refusal(monkeypatch, mem: ModelMemory, n_params, budget) -> FileFormatError | None:
    monkeypatch.setattr(memory, "model_memory", lambda folder: mem)
    try:
        assert check_model_memory(Path("f"), n_params, budget, "the/config.json") is mem
    except FileFormatError as exc:
        return exc
    return None


def test_the_refusals_edges_and_fields_on_a_counted_model(monkeypatch) -> None:
    """A model of 4,000,000 parameters and 500 buffer numbers, 2,000,000,000 bytes: a budget of
    2 GB holds it and one byte more is over it; weights of 1,000,000 numbers (half of it less
    1,000,000) pass, 999,999 do not."""
    mem = ModelMemory(4_000_000, 500, 2_000_000_000, "a.weight (2,000 x 2,000)")
    assert _refusal(monkeypatch, mem, 1_000_000, 2.0) is None
    assert _refusal(monkeypatch, mem, None, 2.0) is None
    over = _refusal(monkeypatch, ModelMemory(4_000_000, 500, 2_000_000_001, mem.largest), None, 2.0)
    assert (over.file, over.where, over.option) == ("the/config.json", "", "model")
    assert over.problem == ("the model it describes needs 2.00 GB for its tensors (4,000,500 "
                            "numbers; the largest a.weight (2,000 x 2,000)), more than the memory "
                            "budget of 2 GB (refused before allocating; raise the budget to load "
                            "it)")
    assert str(over) == "the/config.json: " + over.problem
    short = _refusal(monkeypatch, mem, 999_999, 2.0)
    assert (short.file, short.where, short.option) == ("the/config.json", "", "model")
    assert short.problem == ("the model it describes has 4,000,000 parameters (2.00 GB), but its "
                             "weights files hold 999,999: the rest would be allocated and left "
                             "random (the largest tensor: a.weight (2,000 x 2,000))")
    assert str(short) == "the/config.json: " + short.problem
    with pytest.raises(ConfigError) as exc:  # the budget is checked first
        _refusal(monkeypatch, mem, 1_000_000, 0.05)
    assert exc.value.field == "memory_budget"


def test_the_config_is_read_locally_and_no_code_from_the_folder_runs(monkeypatch) -> None:
    """The calls transformers gets: local files only, no remote code, eager attention (the
    lab's own), on the meta device."""
    transformers = pytest.importorskip("transformers")
    calls = {}

    def from_pretrained(path, **kwargs):
        calls["config"] = (path, kwargs)
        return "CFG"

    def from_config(config, **kwargs):
        calls["model"] = (config, kwargs, torch.empty(1).device.type)
        return Net()

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", from_pretrained)
    monkeypatch.setattr(transformers.AutoModel, "from_config", from_config)
    mem = memory.model_memory(Path("some/folder"))
    assert calls["config"] == ("some/folder", {"local_files_only": True,
                                               "trust_remote_code": False})
    assert calls["model"] == ("CFG", {"trust_remote_code": False,
                                      "attn_implementation": "eager"}, "meta")
    assert mem.parameters == 12_000 + 15 + 7
