"""The one frozen, validated parameter set of a model probe (errors name the field and range)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.errors import ConfigError
from engine.validate import ConfigMethods, check_float, check_int

#: the scaling rules a probe compares; ``model`` is whatever factor the model itself applies
PROBE_RULES: tuple[str, ...] = ("model", "none", "dk")


#: a UTF-16 surrogate: never a character of valid text (a lone one in a JSON file, or a byte
#: of invalid UTF-8 in a command line, which Python hands over as U+DC80..U+DCFF)
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(text: object) -> str:
    """A text a tokenizer can take: a string with a non-blank character and no surrogate
    (ConfigError on ``text``, saying where the invalid character is)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("text", "must contain at least one non-blank character")
    bad = _SURROGATE.search(text)
    if bad is not None:
        code = ord(bad.group())
        what = (f"the byte 0x{code - 0xDC00:02x}, which is not UTF-8" if 0xDC80 <= code <= 0xDCFF
                else f"a lone surrogate U+{code:04X}, which is not a character")
        raise ConfigError("text", f"must be valid Unicode text; character {bad.start():,} is "
                          f"{what}")
    return text


def check_text_and_model(text: object, model: object) -> None:
    """The two fields every probe of a real model takes: a non-blank text, a folder or None."""
    check_text(text)
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ConfigError("model", "must be a model folder path (or left out for the bundled MiniLM)")


@dataclass(frozen=True)
class ProbeConfig(ConfigMethods):
    """What to analyse and how.

    ``model`` is a local Hugging Face model folder, or None for the bundled all-MiniLM-L6-v2.
    ``max_tokens`` caps the text below the model's own limit (None = the model's limit).
    ``bootstrap`` resamples of the tokens give the standard errors of the std figures (0 = none).
    """

    text: str
    model: str | None = None
    saturation_threshold: float = 0.99
    bootstrap: int = 200
    seed: int = 0
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        check_text_and_model(self.text, self.model)
        object.__setattr__(self, "saturation_threshold",
                           check_float("saturation_threshold", self.saturation_threshold, 0.5, 1.0,
                                       hi_open=True))
        object.__setattr__(self, "bootstrap", check_int("bootstrap", self.bootstrap, 0, 10_000))
        object.__setattr__(self, "seed", check_int("seed", self.seed, 0, 2**32 - 1))
        if self.max_tokens is not None:
            object.__setattr__(self, "max_tokens", check_int("max_tokens", self.max_tokens, 2, 1_000_000))
