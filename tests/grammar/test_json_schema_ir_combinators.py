"""JSON Schema -> IR for the combinators: `anyOf`, `allOf`, `oneOf` (and its discriminator),
`not`, `if`/`then`/`else`, the textual order of members they bring, and strict mode.
"""

from __future__ import annotations

from structgen.errors import UnsupportedKeywordError
from tests.grammar.schema_checks import T, check, raises


def test_any_of_and_all_of():
    check(
        {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 1}]},
        accepted=[5, "a", ""],
        rejected=[4, "ab", None],
    )
    check(
        {"allOf": [{"type": ["integer", "string"]}, {"type": ["string", "null"]}, {"minLength": 2}]},
        accepted=["ab"],
        rejected=[1, None, "a"],
    )
    # sibling keywords apply to every branch
    check(
        {
            "type": "object",
            "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer"}},
            "additionalProperties": False,
            "anyOf": [{"required": ["kind"]}, {"required": ["x"]}],
        },
        accepted=[{"kind": "a"}, {"x": 1}, {"kind": "b", "x": 2}],
        rejected=[{}],
    )
    # allOf merges object members: additionalProperties sees its own subschema only
    check(
        {
            "allOf": [
                {"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                {"properties": {"b": {"type": "integer"}}},
            ]
        },
        accepted=[{"a": 1}, {}],
        rejected=[{"a": 1, "b": 2}, {"b": 2}],
    )


def test_one_of():
    check({"oneOf": [{"type": "string"}, {"type": "null"}]}, accepted=["a", None], rejected=[1])
    check({"oneOf": [{"type": "integer"}, {"type": "number"}]}, accepted=[1.5], rejected=[1, "a"])
    check(
        {
            "oneOf": [
                {"properties": {"t": {"const": "a"}, "x": {"type": "integer"}}, "required": ["t"]},
                {"properties": {"t": {"const": "b"}, "y": {"type": "string"}}, "required": ["t"]},
            ]
        },
        accepted=[{"t": "a", "x": 1}, {"t": "b", "y": "s"}],
        rejected=[{"t": "a", "x": "s"}, {"t": "c"}, {"x": 1}],
    )
    # not provably disjoint, but the other branch can be negated exactly
    check(
        {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        accepted=[{"a": 1}, {"b": 1}],
        rejected=[{"a": 1, "b": 2}, {}],
    )
    raises(
        UnsupportedKeywordError,
        {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "pattern": "b"}]},
        "/oneOf",
        "oneOf",
    )


def test_not():
    check({"not": {"type": "string"}}, accepted=[1, None, [], {}], rejected=["a"])
    check({"type": "string", "not": {"enum": ["a", "b"]}}, accepted=["", "c", "ab"], rejected=["a", "b", T('"\\u0061"')])
    check({"type": "integer", "not": {"const": 3}}, accepted=[2, 4], rejected=[3])
    check({"not": {"minimum": 3}, "type": "integer"}, accepted=[2], rejected=[3])
    check({"type": "object", "not": {"required": ["a"]}}, accepted=[{}, {"b": 1}], rejected=[{"a": 1}])
    check({"not": {}}, rejected=[1, None])
    raises(UnsupportedKeywordError, {"not": {"pattern": "a"}}, "/not", "not")


def test_if_then_else():
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
        "additionalProperties": False,
        "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
        "then": {"required": ["n"]},
        "else": {"properties": {"n": {"maximum": 0}}},
    }
    check(
        schema,
        accepted=[{"kind": "a", "n": 5}, {"kind": "b", "n": -1}, {"n": 0}, {"kind": "b"}],
        rejected=[{"kind": "a"}, {"kind": "b", "n": 1}, {"n": 3}],
    )


def test_textual_property_order():
    # members of $ref, allOf and anyOf branches keep the schema's textual order
    schema = {
        "$defs": {"base": {"properties": {"id": {"type": "integer"}}, "required": ["id"]}},
        "allOf": [{"$ref": "#/$defs/base"}],
        "anyOf": [{"properties": {"kind": {"const": "a"}}, "required": ["kind"]}],
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }
    check(schema, accepted=[{"id": 1, "kind": "a", "name": "n"}], rejected=[{"name": "n", "id": 1, "kind": "a"}])
    check(
        {"properties": {"b": {"type": "integer"}}, "$ref": "#/$defs/a", "$defs": {"a": {"properties": {"a": {}}}}},
        accepted=[{"b": 1, "a": 2}],
        rejected=[{"a": 2, "b": 1}],
    )


def test_one_of_discriminator_without_required():
    # branches overlap only on objects lacking "kind": requiring it makes them exclusive
    schema = {
        "type": "object",
        "oneOf": [
            {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}},
            {"properties": {"kind": {"const": "b"}, "x": {"type": "string"}}},
        ],
    }
    g = check(schema, accepted=[{"kind": "a", "x": 1}, {"kind": "b", "x": "s"}], rejected=[{"kind": "a", "x": "s"}])
    assert not g.value({"x": 1})  # documented subset: the discriminator becomes required


def test_strict_mode():
    schema = {
        "allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "integer"}}}],
        "additionalProperties": {"type": "integer"},
        "required": ["a"],
    }
    check(schema, accepted=[{"a": 1}, {"a": 1, "b": 2}], rejected=[{"a": 1, "c": 3}], strict=True)
    check({"type": "object", "required": ["x"]}, rejected=[{"x": 1}], strict=True)
