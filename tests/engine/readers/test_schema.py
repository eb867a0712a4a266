"""The small schema validator: types, sizes, keys, paths; config dataclasses checked by type
before their own range checks (a wrong type is a ConfigError naming the field, never a
TypeError)."""

from __future__ import annotations

import pytest

from engine.config import SimulationConfig
from engine.errors import ConfigError, quote
from engine.readers.schema import (
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
