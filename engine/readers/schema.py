"""A small schema of JSON data: what type each field has, how long lists and strings may be,
which keys an object may and must have. ``check`` returns the value (integral floats of an
``Int`` as ints) or raises :class:`SchemaError` naming the field path and what is wrong, quoting
at most a short prefix of the bad value.

``dataclass_schema`` derives the schema of a frozen config dataclass from its field types, so a
config from a file reaches the dataclass (which checks the ranges) only with the right types.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import numbers
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

from engine.errors import ConfigError, FileFormatError, quote
from engine.readers.json_file import format_path, join_path

#: most items in a list or an object, unless a schema says otherwise
MAX_ITEMS = 1000
#: most characters in a string, unless a schema says otherwise
MAX_CHARS = 10_000

Path = tuple[Any, ...]


class SchemaError(ConfigError):
    """A value of the wrong type or shape. ``path`` is its field path (``config.scalings[2]``;
    empty for the value as a whole), also the ConfigError's field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path or "value", message)
        self.path = path


def fail(path: Path, problem: str) -> NoReturn:
    raise SchemaError(format_path(path), problem)


def describe(value: Any) -> str:
    """What a bad value is, briefly (its prefix for a string or a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return (f"a list of {len(value):,} item{'s' * (len(value) > 1)}" if value else
                "an empty list")
    if isinstance(value, dict):
        return (f"an object of {len(value):,} key{'s' * (len(value) > 1)}" if value else
                "an empty object")
    return quote(value)


class Schema:
    """Checks one value. ``what`` completes "must be ..." in errors."""

    what = "a value"

    def check(self, value: Any, path: Path = ()) -> Any:
        raise NotImplementedError

    def wrong(self, value: Any, path: Path) -> NoReturn:
        fail(path, f"must be {self.what}, got {describe(value)}")


@dataclasses.dataclass(frozen=True)
class AnyValue(Schema):
    """Anything JSON holds (its size and depth were bounded when it was read)."""

    what: str = "a value"

    def check(self, value: Any, path: Path = ()) -> Any:
        return value


@dataclasses.dataclass(frozen=True)
class AnyObject(Schema):
    """Any object (its fields are checked by whoever takes it, e.g. a config's from_dict)."""

    what: str = "an object"

    def check(self, value: Any, path: Path = ()) -> Any:
        if not isinstance(value, dict):
            self.wrong(value, path)
        return value


@dataclasses.dataclass(frozen=True)
class Int(Schema):
    """An integer (an integral float such as 64.0 too, unless ``exact``: a value passed on to a
    library that needs an int; never true/false), optionally in [lo, hi]."""

    lo: int | None = None
    hi: int | None = None
    what: str = "an integer"
    exact: bool = False

    def check(self, value: Any, path: Path = ()) -> Any:
        if isinstance(value, float) and value.is_integer() and not self.exact:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            self.wrong(value, path)
        value = int(value)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            lo = "" if self.lo is None else f"{self.lo:,}"
            hi = "" if self.hi is None else f"{self.hi:,}"
            fail(path, f"must be an integer in [{lo}, {hi}], got {quote(value)}")
        return value


@dataclasses.dataclass(frozen=True)
class Number(Schema):
    """A number (integer or float; never true/false), optionally in [lo, hi]."""

    lo: float | None = None
    hi: float | None = None
    what: str = "a number"

    def check(self, value: Any, path: Path = ()) -> Any:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            self.wrong(value, path)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            fail(path, f"must be a number in [{self.lo}, {self.hi}], got {quote(value)}")
        return value


@dataclasses.dataclass(frozen=True)
class Text(Schema):
    """A string of at most ``max_chars`` characters, optionally one of ``choices``."""

    max_chars: int = MAX_CHARS
    choices: tuple[str, ...] | None = None
    what: str = "a string"

    def check(self, value: Any, path: Path = ()) -> Any:
        if not isinstance(value, str):
            self.wrong(value, path)
        if len(value) > self.max_chars:
            fail(path, f"a string of {len(value):,} characters, more than {self.max_chars:,}")
        if self.choices is not None and value not in self.choices:
            fail(path, f"must be one of {', '.join(self.choices)}; got {quote(value)}")
        return value


@dataclasses.dataclass(frozen=True)
class Boolean(Schema):
    what: str = "true or false"

    def check(self, value: Any, path: Path = ()) -> Any:
        if not isinstance(value, bool):
            self.wrong(value, path)
        return value


@dataclasses.dataclass(frozen=True)
class Nullable(Schema):
    """null or ``inner``."""

    inner: Schema

    @property
    def what(self) -> str:  # type: ignore[override]
        return f"{self.inner.what} or null"

    def check(self, value: Any, path: Path = ()) -> Any:
        if value is None:
            return None
        try:
            return self.inner.check(value, path)
        except SchemaError as exc:  # a wrong type: say that null would do too
            if exc.path == format_path(path) and exc.message.startswith(
                    f"must be {self.inner.what}, got"):
                self.wrong(value, path)
            raise


@dataclasses.dataclass(frozen=True)
class OneOf(Schema):
    """The first of ``options`` that accepts the value (by its JSON type); ``what`` names them."""

    options: tuple[Schema, ...]
    what: str = "a value"

    def check(self, value: Any, path: Path = ()) -> Any:
        for option in self.options:
            try:
                return option.check(value, path)
            except SchemaError as exc:
                if exc.path != format_path(path):  # inside a matching container: that error
                    raise
        self.wrong(value, path)


@dataclasses.dataclass(frozen=True)
class ListOf(Schema):
    """A list of ``item`` values, ``min_items`` to ``max_items`` long (a tuple too: values that
    come from the program rather than a file)."""

    item: Schema
    max_items: int = MAX_ITEMS
    min_items: int = 0
    what: str = "a list"

    def check(self, value: Any, path: Path = ()) -> Any:
        if not isinstance(value, (list, tuple)):
            self.wrong(value, path)
        if len(value) > self.max_items:
            fail(path, f"a list of {len(value):,} items, more than {self.max_items:,}")
        if len(value) < self.min_items:
            fail(path, f"needs at least {self.min_items} item(s), got {len(value)}")
        return [self.item.check(v, (*path, i)) for i, v in enumerate(value)]


@dataclasses.dataclass(frozen=True)
class MapOf(Schema):
    """An object whose keys are ``key`` strings and whose values are ``value``."""

    value: Schema
    key: Text = Text(max_chars=200)
    max_items: int = MAX_ITEMS
    what: str = "an object"

    def check(self, value: Any, path: Path = ()) -> Any:
        if not isinstance(value, dict):
            self.wrong(value, path)
        for k in itertools.islice(value, self.max_items + 1):  # a wrong key named first
            self.key.check(k, (*path, k))
        if len(value) > self.max_items:
            fail(path, f"an object of {len(value):,} keys, more than {self.max_items:,}")
        return {k: self.value.check(v, (*path, k)) for k, v in value.items()}


@dataclasses.dataclass(frozen=True)
class Record(Schema):
    """An object with known keys: ``fields`` (key -> schema), ``required`` among them; other keys
    are refused (``extra="refuse"``, named as an unknown ``label``) or kept unchecked ("keep")."""

    fields: Mapping[str, Schema]
    required: frozenset[str] = frozenset()
    extra: str = "refuse"
    label: str = "key"
    what: str = "an object"

    def check(self, value: Any, path: Path = ()) -> Any:
        if not isinstance(value, dict):
            self.wrong(value, path)
        if self.extra == "refuse":
            unknown = [k for k in value if k not in self.fields]
            if unknown:
                fail((*path, unknown[0]), f"unknown {self.label} (known: "
                                          f"{', '.join(sorted(self.fields))})")
        elif len(value) > MAX_ITEMS:
            fail(path, f"an object of {len(value):,} keys, more than {MAX_ITEMS:,}")
        for name in sorted(self.required):
            if name not in value:
                fail((*path, name), "required, but missing")
        out = dict(value)
        for name, schema in self.fields.items():
            if name in value:
                out[name] = schema.check(value[name], (*path, name))
        return out


@contextlib.contextmanager
def errors_in_file(source: str, where: str = "", option: str = "") -> Iterator[None]:
    """A ConfigError raised inside (a schema's or a config dataclass's) becomes the
    FileFormatError of ``source``, its field path under ``where`` (``experiment`` + ``base.lr``)."""
    try:
        yield
    except FileFormatError:
        raise
    except SchemaError as exc:
        raise FileFormatError(source, join_path(where, exc.path), exc.message, option) from None
    except ConfigError as exc:
        raise FileFormatError(source, join_path(where, exc.field), exc.message, option) from None


#: a config field's annotation (a string: the modules use ``from __future__ import annotations``)
#: -> its schema; anything else is left to the dataclass (AnyValue)
_ANNOTATIONS: dict[str, Callable[[], Schema]] = {
    "int": Int,
    "float": Number,
    "str": Text,
    "bool": Boolean,
    # a rule list: one name alone is accepted too (check_choices takes it)
    "tuple[str, ...]": lambda: OneOf((Text(max_chars=200), ListOf(Text(max_chars=200))),
                                     what="a list of names"),
    "tuple[int, ...]": lambda: ListOf(Int(), what="a list of integers"),
}


def annotation_schema(annotation: Any) -> Schema:
    text = str(annotation).replace("typing.", "")
    if text.endswith(" | None"):
        return Nullable(annotation_schema(text[: -len(" | None")]))
    make = _ANNOTATIONS.get(text)
    return make() if make is not None else AnyValue()


def dataclass_schema(cls: type, overrides: Mapping[str, Schema] | None = None,
                     label: str = "parameter") -> Record:
    """The Record of a dataclass's fields by their annotations (``overrides`` replaces some);
    the fields without a default are required, unknown keys are refused."""
    fields = dataclasses.fields(cls)
    schemas = {f.name: annotation_schema(f.type) for f in fields}
    schemas.update(overrides or {})
    required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING
                         and f.default_factory is dataclasses.MISSING)
    return Record(schemas, required=required, label=label)

