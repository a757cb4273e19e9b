"""JSON Schema -> IR for objects: property order (the schema's, or any), optional and
additional properties, `required`, `patternProperties`, counts, `propertyNames` and
dependencies.
"""

from __future__ import annotations

from structgen.errors import StructgenError
from structgen.grammar import ir
from structgen.grammar.json_schema import schema_to_ir
from tests.grammar.schema_checks import G, T, check, raises


def test_properties_in_schema_order():
    schema = {
        "type": "object",
        "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
        "required": ["b", "a"],
        "additionalProperties": False,
    }
    check(schema, accepted=[T('{"b": 1, "a": "x"}')], rejected=[T('{"a": "x", "b": 1}'), T('{"b": 1}'), {"b": 1, "a": 2}])
    check(schema, accepted=[T('{"b":1,"a":"x"}')], rejected=[T('{"b": 1, "a": "x"}')], whitespace="compact")


def test_any_property_order():
    """property_order="any": declared properties in any order, each at most once,
    undeclared ones anywhere between them; counts, required and styles still hold."""
    schema = {
        "type": "object",
        "properties": {"b": {"type": "integer"}, "a": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["b", "a"],
        "additionalProperties": False,
    }
    for style in ("default", "compact", "flexible"):
        check(
            schema,
            accepted=[{"b": 1, "a": "x"}, {"a": "x", "b": 1}, {"c": True, "a": "x", "b": 1}, {"a": "x", "c": False, "b": 2}],
            rejected=[{"a": "x"}, {"b": 1, "a": "x", "d": 1}, {}, T('{"a": "x", "b": 1, "b": 2}'), {"b": "x", "a": 1}],
            whitespace=style,
            property_order="any",
        )
    check(schema, accepted=[{"c": True, "b": 1, "a": "x"}], rejected=[{"b": 1}], indent=2, property_order="any")
    check(
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
         "patternProperties": {"^x": {"type": "string"}}, "additionalProperties": {"type": "null"},
         "minProperties": 2, "maxProperties": 3},
        accepted=[{"x1": "s", "a": 1}, {"b": 1, "z": None, "a": 2}, {"z": None, "y": None}, {"x": "s", "b": 2, "x2": "t"}],
        rejected=[{"a": 1}, {"x1": "s", "a": 1, "b": 2, "z": None}, {"a": 1, "x": 1}, T('{"a": 1, "b": 2, "a": 3}')],
        property_order="any",
    )
    # a const object matches whatever the order of its members
    check({"const": {"k": 1, "v": [2]}}, accepted=[{"k": 1, "v": [2]}, {"v": [2], "k": 1}], rejected=[{"k": 1}],
          property_order="any")
    # nested objects and recursion: each object tracks its own members
    node = {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        "required": ["v"],
        "additionalProperties": False,
    }
    check(
        {"$defs": {"n": node}, "$ref": "#/$defs/n"},
        accepted=[{"kids": [{"v": 2}, {"kids": [], "v": 3}], "v": 1}],
        rejected=[{"kids": [{"kids": []}], "v": 1}],
        property_order="any",
    )
    # an entry that can never be written (false schema) is never offered
    check({"type": "object", "properties": {"a": False, "b": {"type": "integer"}, "c": {"type": "null"}}},
          accepted=[{"c": None, "b": 1}, {}], rejected=[{"a": 1}], property_order="any")
    raises(StructgenError, {}, property_order="sorted")


def test_optional_properties():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "required": ["b"],
        "additionalProperties": False,
    }
    check(
        schema,
        accepted=[{"b": 1}, {"a": 1, "b": 2}, {"b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}],
        rejected=[{}, {"a": 1}, {"a": 1, "c": 2}, {"b": 1, "d": 1}, T('{"b": 1, }'), T('{, "b": 1}')],
    )
    g = G({**schema, "required": []})
    assert g.value({}) and g.value({"c": 1}) and g.value({"a": 1, "c": 1}) and not g.ok("{ }")


def test_many_optional_properties_stay_linear():
    props = {f"p{i}": {"type": "integer"} for i in range(60)}
    node = schema_to_ir({"type": "object", "properties": props, "additionalProperties": False})
    assert ir.expanded_size(node) < 20_000


def test_additional_properties():
    base = {"type": "object", "properties": {"name": {"type": "string"}}}
    g = check(base, accepted=[{"name": "x", "extra": [1]}, {"other": 1}, {}])
    # an undeclared key may not be a declared name in disguise
    assert not g.ok('{"name": "x", "na\\u006de": 1}')
    assert not g.ok('{"name": 1}') and not g.ok('{"x": 1, "name": "y"}')  # declared ones come first
    check({**base, "additionalProperties": False}, accepted=[{"name": "x"}], rejected=[{"name": "x", "y": 1}])
    check(
        {**base, "additionalProperties": {"type": "integer"}},
        accepted=[{"name": "x", "y": 1, "z": 2}, {"n": 1}],
        rejected=[{"y": "s"}, {"name": "x", "y": None}],
    )
    check(base, accepted=[{"name": "x"}], rejected=[{"name": "x", "y": 1}], strict=True)


def test_required_not_in_properties():
    check(
        {"type": "object", "required": ["id"], "additionalProperties": {"type": "integer"}},
        accepted=[{"id": 1}, {"id": 1, "x": 2}],
        rejected=[{}, {"id": "a"}, {"x": 2}],
    )


def test_pattern_properties():
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": False,
    }
    check(
        schema,
        accepted=[{"id": 1, "x-a": "s"}, {"x-": "t", "x-b": "u"}],
        rejected=[{"x-a": 1}, {"y": "s"}, {"id": "s"}],
    )
    # patternProperties also constrain declared properties whose names match
    check(
        {"properties": {"x-id": {"type": ["integer", "string"]}}, "patternProperties": {"^x-": {"type": "string"}}},
        accepted=[{"x-id": "a"}],
        rejected=[{"x-id": 1}],
    )
    # keys matching no pattern follow additionalProperties
    check(
        {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
        accepted=[{"ab": 1, "b": "s"}, {"b": "s"}],
        rejected=[{"b": 1}, {"ab": "s"}],
    )


def test_pattern_properties_unanchored_and_overlapping():
    schema = {
        "type": "object",
        "patternProperties": {"[0-9]{2,}": {"type": "boolean"}, "X_": {"type": "string"}},
        "additionalProperties": {"type": "integer"},
    }
    # keys matching no pattern follow additionalProperties, whatever their first character
    check(
        schema,
        accepted=[{"answer 1": 42}, {"a_x_3": 3}, {"a12": True}, {"X_y": "s"}],
        rejected=[{"a12": 1}, {"answer 1": "42"}, {"X_y": 1}, {"a12X_": True}, {"a12X_": "s"}],
    )
    # keys matching several patterns must satisfy all of their schemas
    check(
        {"patternProperties": {"a*": {"type": "integer"}, "aaa*": {"maximum": 20}}},
        accepted=[{"a": 21}, {"aaaa": 18}, {"b": 1}],
        rejected=[{"aaaa": 31}, {"aaa": "x"}],
    )
    check(
        {"patternProperties": {"f.*": True, "b.*": False}},
        accepted=[{"foo": 1}, {}],
        rejected=[{"bar": 1}, {"foobar": 1}],
    )


def test_min_max_properties():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "minProperties": 2,
        "maxProperties": 2,
        "additionalProperties": False,
    }
    check(schema, accepted=[{"a": 1, "b": 2}, {"b": 1, "c": 2}], rejected=[{"a": 1}, {"a": 1, "b": 2, "c": 3}, {}])
    check(
        {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}},
        accepted=[{}, {"x": 1}],
        rejected=[{"x": 1, "y": 2}],
    )
    check({"type": "object", "minProperties": 1}, accepted=[{"x": 1}], rejected=[{}])


def test_property_names():
    check(
        {"type": "object", "propertyNames": {"enum": ["a", "b"]}, "additionalProperties": {"type": "integer"}},
        accepted=[{"a": 1}, {"a": 1, "b": 2}, {}],
        rejected=[{"c": 1}],
    )
    check(
        {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}},
        accepted=[{"abc": 1}],
        rejected=[{"abcd": 1}, {"A": 1}],
    )
    check(
        {"type": "object", "properties": {"Ab": {}}, "propertyNames": {"pattern": "^[a-z]+$"}},
        accepted=[{"ab": 1}],
        rejected=[{"Ab": 1}],
    )


def test_names_that_require_the_same_properties_allow_exactly_what_each_one_does():
    """dependentRequired {a: [c, d], b: [c, d], e: [c]}: a and b share one disjunction (all
    of c, d present, or neither a nor b), e has its own. Every object over those five
    names, in schema order and in any order, is accepted exactly when jsonschema
    accepts it."""
    import itertools

    import jsonschema

    names = ["a", "b", "c", "d", "e"]
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "dependentRequired": {"a": ["c", "d"], "b": ["d", "c"], "e": ["c"]},
        "additionalProperties": False,
    }
    objects = [{n: 1 for n in keep} for r in range(len(names) + 1) for keep in itertools.combinations(names, r)]
    valid = [o for o in objects if jsonschema.Draft202012Validator(schema).is_valid(o)]
    invalid = [o for o in objects if o not in valid]
    assert len(valid) == 12 and len(invalid) == 20  # c, d: 8; c alone: 2 (e or not); neither c: 2 (d or not)
    check(schema, accepted=valid, rejected=invalid)
    reordered = [dict(reversed(list(o.items()))) for o in objects]
    check(schema, accepted=[o for o in reordered if o in valid], rejected=[o for o in reordered if o in invalid],
          property_order="any")


def test_dependencies():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "dependentRequired": {"a": ["b"]},
        "additionalProperties": False,
    }
    check(schema, accepted=[{}, {"b": 1}, {"a": 1, "b": 2}], rejected=[{"a": 1}])
    check(
        {"properties": {"a": {}, "b": {}}, "dependencies": {"a": {"required": ["b"]}}, "additionalProperties": False},
        accepted=[{"a": 1, "b": 1}, {"b": 1}],
        rejected=[{"a": 1}],
    )
