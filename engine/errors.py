"""The one error type a user can cause: it names the parameter and what is allowed (and
``quote``, how its message shows the bad value)."""

from __future__ import annotations

from typing import Any

#: characters of a bad value an error message quotes (a 20 MB string must not reach a dialog)
QUOTE_CHARS = 40


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` cut to about ``limit`` characters, saying how long the whole is: error
    messages quote user input this way, so a huge bad value costs nothing to report."""
    if isinstance(value, (list, tuple, dict, set, frozenset)) and len(value) > limit:
        kind = {list: "list", tuple: "list", dict: "object"}.get(type(value), "collection")
        return f"a {kind} of {len(value):,} items"
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1:,} digits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


class ConfigError(ValueError):
    """An invalid parameter. ``field`` is the parameter name as the config spells it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class FileFormatError(ConfigError):
    """A file the lab reads is not what it should be. Its one line is ``FILE: WHERE: PROBLEM``:
    ``where`` is the field path inside the file (``config.scalings[2]``; empty for the file as a
    whole). ``field`` is the file (so ``f"{field}: {message}"`` reads the same line) and
    ``option`` the command-line option or form field that named it, when the caller knows it."""

    def __init__(self, file: str, where: str, problem: str, option: str = "") -> None:
        super().__init__(str(file), f"{where}: {problem}" if where else problem)
        self.file = str(file)
        self.where = where
        self.problem = problem
        self.option = option


class WouldOverwrite(ConfigError):
    """An output folder holds files the command would replace (``files``, relative to
    ``folder``): refused unless the user allows it (``--force`` on the CLI; the GUI asks)."""

    def __init__(self, folder: str, files: list[str], field: str = "out") -> None:
        shown = ", ".join(files[:5]) + (f" and {len(files) - 5:,} more" if len(files) > 5 else "")
        super().__init__(field, f"{folder} already holds {shown}, which this would replace: "
                                "choose another folder, or allow replacing them (--force)")
        self.folder = folder
        self.files = files


class Cancelled(Exception):
    """Raised inside engine loops when the caller's cancel flag is set."""
