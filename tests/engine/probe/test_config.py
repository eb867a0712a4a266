"""The probe's parameters: every field's range from both sides, its defaults, and the text check's
messages (where a surrogate is, and which byte of invalid UTF-8 it stands for), written by hand."""

from __future__ import annotations

import pytest

from engine.errors import ConfigError
from engine.probe.config import PROBE_RULES, ProbeConfig, check_text, check_text_and_model


def _refusal(**kw) -> tuple[str, str]:
    with pytest.raises(ConfigError) as info:
        ProbeConfig(**{"text": "a b", **kw})
    return info.value.field, info.value.message


def test_the_defaults_are_the_documented_ones() -> None:
    cfg = ProbeConfig(text="a b")
    assert (cfg.model, cfg.saturation_threshold, cfg.bootstrap, cfg.seed, cfg.max_tokens) == \
        (None, 0.99, 200, 0, None)
    assert PROBE_RULES == ("model", "none", "dk")


@pytest.mark.parametrize(("field", "ok", "bad", "message"), [
    ("saturation_threshold", (0.5, 0.999999), (0.4999999, 1.0, 1.5),
     "must be in [0.5, 1), got {}"),
    ("bootstrap", (0, 10_000), (-1, 10_001), "must be from 0 to 10,000, got {}"),
    ("seed", (0, 2**32 - 1), (-1, 2**32), "must be from 0 to 4,294,967,295, got {}"),
    ("max_tokens", (2, 1_000_000), (1, 1_000_001), "must be from 2 to 1,000,000, got {}"),
])
def test_each_range_is_held_at_both_ends(field: str, ok: tuple, bad: tuple, message: str) -> None:
    for value in ok:
        assert getattr(ProbeConfig(text="a b", **{field: value}), field) == value
    for value in bad:
        shown = f"{value:g}" if isinstance(value, float) else f"{value:,}"
        assert _refusal(**{field: value}) == (field, message.format(shown)), value


def test_the_fields_are_converted_where_they_are_checked() -> None:
    import numpy as np

    cfg = ProbeConfig(text="a b", saturation_threshold=np.float32(0.75), bootstrap=np.int64(3),
                      seed=5.0, max_tokens=np.int32(7))
    assert type(cfg.saturation_threshold) is float and cfg.saturation_threshold == 0.75
    assert (type(cfg.bootstrap), cfg.bootstrap) == (int, 3)
    assert (type(cfg.seed), cfg.seed) == (int, 5)
    assert (type(cfg.max_tokens), cfg.max_tokens) == (int, 7)
    assert ProbeConfig(text="a b", max_tokens=None).max_tokens is None


@pytest.mark.parametrize("text", ["", " ", " \n\t", None, 5, b"bytes", ["a"]])
def test_a_blank_or_non_string_text_is_refused(text) -> None:
    with pytest.raises(ConfigError) as info:
        check_text(text)
    assert (info.value.field, info.value.message) == (
        "text", "must contain at least one non-blank character")


def test_a_text_is_returned_unchanged() -> None:
    assert check_text("  x\n") == "  x\n"
    assert check_text("é ☃ \U0001f600") == "é ☃ \U0001f600"


@pytest.mark.parametrize(("text", "message"), [
    # a byte of invalid UTF-8 from the command line: U+DC80..U+DCFF stand for 0x80..0xff
    ("ab\udcff", "character 2 is the byte 0xff, which is not UTF-8"),
    ("\udc80", "character 0 is the byte 0x80, which is not UTF-8"),
    ("x" * 1234 + "\udcc3", "character 1,234 is the byte 0xc3, which is not UTF-8"),
    # just outside that range: lone surrogates, not bytes
    ("a\udc7f", "character 1 is a lone surrogate U+DC7F, which is not a character"),
    ("a\udd00", "character 1 is a lone surrogate U+DD00, which is not a character"),
    ("ok \ud800", "character 3 is a lone surrogate U+D800, which is not a character"),
    ("ok \udfff", "character 3 is a lone surrogate U+DFFF, which is not a character"),
    ("\ud83d then \udcff", "character 0 is a lone surrogate U+D83D, which is not a character"),
])
def test_a_surrogate_is_named_with_where_it_is(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_text(text)
    assert (info.value.field, info.value.message) == ("text", "must be valid Unicode text; "
                                                      + message)


@pytest.mark.parametrize("model", ["", "  ", 5, b"folder"])
def test_a_model_must_be_a_folder_path_or_none(model) -> None:
    with pytest.raises(ConfigError) as info:
        check_text_and_model("a b", model)
    assert (info.value.field, info.value.message) == (
        "model", "must be a model folder path (or left out for the bundled MiniLM)")
    assert _refusal(model=model)[0] == "model"


def test_a_model_folder_and_none_pass_and_the_text_is_checked_first() -> None:
    assert check_text_and_model("a b", None) is None
    assert check_text_and_model("a b", "some/folder") is None
    assert ProbeConfig(text="a b", model="some/folder").model == "some/folder"
    with pytest.raises(ConfigError) as info:
        check_text_and_model(" ", "")
    assert info.value.field == "text"
