"""The one error type a user can cause: it names the parameter and what is allowed."""

from __future__ import annotations


class ConfigError(ValueError):
    """An invalid parameter. ``field`` is the parameter name as the config spells it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Cancelled(Exception):
    """Raised inside engine loops when the caller's cancel flag is set."""
