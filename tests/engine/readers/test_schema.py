"""The small schema validator: types, sizes, keys, paths; config dataclasses checked by type
before their own range checks (a wrong type is a ConfigError naming the field, never a
TypeError)."""

from __future__ import annotations

import dataclasses

import pytest

from engine.config import SimulationConfig
from engine.errors import ConfigError, quote
from engine.readers.schema import (
    AnyObject,
    Boolean,
    Int,
    ListOf,
    MapOf,
    Nullable,
    Number,
    OneOf,
    Record,
    SchemaError,
    Text,
    dataclass_schema,
)
from engine.training.config import TrainingConfig
from engine.validate import check_choice, check_choices, check_float, check_int


@pytest.mark.parametrize(("schema", "good", "bad"), [
    (Int(), [0, -3, 64.0], [True, 1.5, "1", None, [1]]),
    (Int(lo=0, hi=9), [0, 9], [-1, 10]),
    (Number(), [0, 1.5, -2], [True, "1.5", None, {}]),
    (Text(max_chars=3), ["", "abc"], ["abcd", 1, None]),
    (Text(choices=("a", "b")), ["a"], ["c"]),
    (Boolean(), [True, False], [0, 1, "true", None]),
    (Nullable(Int()), [None, 1], ["x"]),
    (ListOf(Int(), max_items=2, min_items=1), [[1], [1, 2], (3,)], [[], [1, 2, 3], [1.5], {}, "ab"]),
    (MapOf(Int(), max_items=2), [{}, {"a": 1}], [{"a": "x"}, {"a": 1, "b": 2, "c": 3}, []]),
    (OneOf((Text(), ListOf(Text())), what="names"), ["a", ["a"]], [5, None, [5]]),
])
def test_each_schema_takes_its_values_and_refuses_others(schema, good, bad):
    for value in good:
        schema.check(value)
    for value in bad:
        with pytest.raises(SchemaError):
            schema.check(value)


def test_a_record_names_the_path_of_the_first_problem():
    schema = Record({"a": Record({"b": ListOf(Int())}), "c": Text()}, required=frozenset({"c"}))
    with pytest.raises(SchemaError) as info:
        schema.check({"a": {"b": [1, 2, "x"]}, "c": ""}, ("top",))
    assert info.value.path == "top.a.b[2]"
    assert "must be an integer, got 'x'" in info.value.message
    with pytest.raises(SchemaError, match=r"^c: required, but missing"):
        schema.check({})
    with pytest.raises(SchemaError, match=r"^zz: unknown key \(known: a, c\)"):
        schema.check({"c": "", "zz": 1})
    assert Record({}, extra="keep").check({"any": [1]}) == {"any": [1]}


def test_long_bad_values_are_quoted_by_a_short_prefix():
    huge = "x" * 10_000_000
    assert len(quote(huge)) < 80 and "10,000,000 characters" in quote(huge)
    assert quote(list(range(10**6))) == "a list of 1,000,000 items"
    assert "digits" in quote(10**5000)
    for check in (lambda: check_choice("dist", huge, ("a", "b")),
                  lambda: check_int("d_k", huge, 1, 2), lambda: check_float("x", huge, 0, 1),
                  lambda: check_int("d_k", 10**5000, 1, 2)):
        with pytest.raises(ConfigError) as info:
            check()
        assert len(str(info.value)) < 200


def test_check_choices_refuses_what_is_not_a_list_of_names():
    for bad in (5, None, 2.5, {"a": 1}):
        with pytest.raises(ConfigError, match="must be a list of names"):
            check_choices("scalings", bad, ("none", "sqrt"))
    with pytest.raises(ConfigError, match="lists 3 names; there are 2"):
        check_choices("scalings", ["none"] * 3, ("none", "sqrt"))


@pytest.mark.parametrize(("cls", "data", "field"), [
    (SimulationConfig, {"scalings": 5}, "scalings"),
    (SimulationConfig, {"scalings": None}, "scalings"),
    (SimulationConfig, {"scalings": ["none", ["sqrt"]]}, "scalings[1]"),
    (SimulationConfig, {"d_k": "64"}, "d_k"),
    (SimulationConfig, {"q_std": True}, "q_std"),
    (SimulationConfig, {"dist": {"a": 1}}, "dist"),
    (SimulationConfig, {"dist": "g" * 20_000}, "dist"),
    (SimulationConfig, {"typo": 1}, "typo"),
    (TrainingConfig, {"eval_lengths": 5}, "eval_lengths"),
    (TrainingConfig, {"mlp": 1}, "mlp"),
    (TrainingConfig, {"steps": [300]}, "steps"),
])
def test_config_from_dict_checks_types_first(cls, data, field):
    with pytest.raises(ConfigError) as info:
        cls.from_dict(data)
    assert info.value.field == field


def test_dataclass_schema_follows_the_annotations():
    schema = dataclass_schema(SimulationConfig)
    assert isinstance(schema.fields["d_k"], Int)
    assert isinstance(schema.fields["q_std"], Number)
    assert schema.required == frozenset()
    assert SimulationConfig.from_dict({"d_k": 32.0, "scalings": "sqrt"}).scalings == ("sqrt",)


def test_the_default_limits_are_1000_items_and_10000_characters():
    """The defaults, written as numbers (not read from the module): a list, a map and a kept
    record take 1,000 items and refuse 1,001; a string takes 10,000 characters and refuses
    10,001."""
    assert len(ListOf(Int()).check(list(range(1000)))) == 1000
    with pytest.raises(SchemaError, match="1,001 items, more than 1,000"):
        ListOf(Int()).check(list(range(1001)))
    assert len(MapOf(Int()).check({str(i): i for i in range(1000)})) == 1000
    with pytest.raises(SchemaError, match="1,001 keys, more than 1,000"):
        MapOf(Int()).check({str(i): i for i in range(1001)})
    assert len(Record({}, extra="keep").check({str(i): i for i in range(1000)})) == 1000
    with pytest.raises(SchemaError, match="1,001 keys, more than 1,000"):
        Record({}, extra="keep").check({str(i): i for i in range(1001)})
    assert Text().check("x" * 10_000) == "x" * 10_000
    with pytest.raises(SchemaError, match="10,001 characters, more than 10,000"):
        Text().check("x" * 10_001)
    # a map's keys are names of at most 200 characters
    MapOf(Int()).check({"k" * 200: 1})
    with pytest.raises(SchemaError, match="201 characters, more than 200"):
        MapOf(Int()).check({"k" * 201: 1})


@pytest.mark.parametrize(("schema", "inside", "outside"), [
    (Int(lo=-2, hi=5), [-2, 5, 0], [-3, 6]),
    (Number(lo=0.5, hi=1.5), [0.5, 1.5, 1], [0.4999, 1.5001]),
    (ListOf(Int(), min_items=2, max_items=3), [[1, 2], [1, 2, 3]], [[1], [1, 2, 3, 4]]),
    (Text(max_chars=0), [""], ["a"]),
])
def test_explicit_bounds_are_inclusive_on_both_sides(schema, inside, outside):
    for value in inside:
        schema.check(value)
    for value in outside:
        with pytest.raises(SchemaError):
            schema.check(value)


def _message(schema, value, path=("f",)):
    with pytest.raises(SchemaError) as info:
        schema.check(value, path)
    return info.value.path, info.value.message


@pytest.mark.parametrize(("schema", "value", "path", "message"), [
    # what a wrong value is, by hand: null, true/false, counts with their plural from 2 on
    (Int(), None, "f", "must be an integer, got null"),
    (Int(), True, "f", "must be an integer, got true"),
    (Boolean(), [], "f", "must be true or false, got an empty list"),
    (Number(), [1], "f", "must be a number, got a list of 1 item"),
    (Number(), [1, 2], "f", "must be a number, got a list of 2 items"),
    (Text(), {}, "f", "must be a string, got an empty object"),
    (ListOf(Int()), {"a": 1}, "f", "must be a list, got an object of 1 key"),
    (MapOf(Int()), False, "f", "must be an object, got false"),
    (AnyObject(), [1, 2], "f", "must be an object, got a list of 2 items"),
    (Record({}), "ab", "f", "must be an object, got 'ab'"),
    (OneOf((Text(), ListOf(Text())), what="names"), 5, "f", "must be names, got 5"),
    (Int(), {"a": 1, "b": 2}, "f", "must be an integer, got an object of 2 keys"),
    # ranges, thousands separated, an open end left blank
    (Int(lo=-1000, hi=1000), 1001, "f", "must be an integer in [-1,000, 1,000], got 1001"),
    (Int(lo=0), -1, "f", "must be an integer in [0, ], got -1"),
    (Int(hi=9), 10, "f", "must be an integer in [, 9], got 10"),
    (Number(lo=0.5, hi=1.5), 1.6, "f", "must be a number in [0.5, 1.5], got 1.6"),
    (Text(choices=("a", "b")), "c", "f", "must be one of a, b; got 'c'"),
    (ListOf(Int(), min_items=2), [1], "f", "needs at least 2 item(s), got 1"),
    # null would do too, said only for a wrong type at the value itself
    (Nullable(Int()), "x", "f", "must be an integer or null, got 'x'"),
    (Nullable(Int(lo=0, hi=9)), 10, "f", "must be an integer in [0, 9], got 10"),
    (Nullable(ListOf(Int())), [1, "x"], "f[1]", "must be an integer, got 'x'"),
    # a map's wrong key and wrong value are named by their paths
    (MapOf(Int(), key=Text(max_chars=1)), {"ab": 1}, "f.ab", "a string of 2 characters, more than 1"),
    (MapOf(Int()), {"a": "x"}, "f.a", "must be an integer, got 'x'"),
])
def test_each_refusal_names_its_path_and_says_what_was_wrong(schema, value, path, message):
    assert _message(schema, value) == (path, message)


def test_a_value_refused_as_a_whole_is_named_value_and_an_object_is_any_dict():
    with pytest.raises(SchemaError) as info:
        Int().check("x")
    assert (info.value.field, info.value.path) == ("value", "")
    assert AnyObject().check({"a": [1]}) == {"a": [1]}


def test_a_maps_keys_are_checked_before_its_size_up_to_one_past_the_limit():
    """Keys 0 .. max_items (max_items + 1 of them) are checked before the size: a bad key at
    index 2 of a 2-item map is named, one at index 3 is not (the size is)."""
    schema = MapOf(Int(), key=Text(max_chars=1), max_items=2)
    assert _message(schema, {"a": 1, "b": 2, "cd": 3}) == ("f.cd", "a string of 2 characters, "
                                                           "more than 1")
    assert _message(schema, {"a": 1, "b": 2, "c": 3, "de": 4}) == (
        "f", "an object of 4 keys, more than 2")


def test_dataclass_schema_reads_optional_and_unknown_annotations_and_what_is_required():
    @dataclasses.dataclass(frozen=True)
    class Config:
        a: int
        b: int | None = None
        c: list[float] = dataclasses.field(default_factory=list)
        d: tuple[int, ...] = dataclasses.field(default_factory=tuple)

    schema = dataclass_schema(Config)
    assert schema.required == frozenset({"a"})
    assert schema.check({"a": 1, "b": None, "c": "anything"})["c"] == "anything"
    assert _message(schema, {"a": 1, "b": "x"}) == ("f.b", "must be an integer or null, got 'x'")
    assert _message(schema, {"a": 1, "b": 2.5}) == ("f.b", "must be an integer or null, got 2.5")
    assert _message(schema, {"b": 1}) == ("f.a", "required, but missing")
    assert _message(schema, {"a": 1, "e": 1}) == ("f.e", "unknown parameter (known: a, b, c, d)")
    assert _message(dataclass_schema(Config, label="key"), {"a": 1, "e": 1})[1].startswith(
        "unknown key ")
