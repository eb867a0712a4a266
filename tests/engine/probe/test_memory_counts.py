"""engine.probe.memory's counting and wording on modules and exceptions made here: numbers and
bytes per dtype (floating tensors in float32 at least), a shared tensor once, the largest tensor
named, the sizes as the refusal prints them, and the one-line error text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from engine.errors import ConfigError  # noqa: E402
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
    (9_994_999_999, "9.99 GB"), (10_000_000_000, "10 GB"), (12_345_678_901_234, "12,346 GB")])
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
