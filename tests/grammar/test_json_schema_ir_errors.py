"""JSON Schema -> IR refusals: schema errors with their JSON pointers, unsupported keywords,
lenient mode and unknown keywords.
"""

from __future__ import annotations

import pytest

from structgen.errors import SchemaError, StructgenError, UnsupportedKeywordError
from structgen.grammar.json_schema import JsonOptions, schema_to_ir
from tests.grammar.schema_checks import check, raises


@pytest.mark.parametrize(
    "schema, pointer",
    [
        ({"type": "strnig"}, "/type"),
        ({"properties": {"age": {"minimum": "3"}}}, "/properties/age/minimum"),
        ({"minLength": -1}, "/minLength"),
        ({"minLength": 1.5}, "/minLength"),
        ({"minLength": 3, "maxLength": 2}, "/minLength"),
        ({"minimum": 3, "maximum": 2}, "/minimum"),
        ({"required": "a"}, "/required"),
        ({"enum": []}, "/enum"),
        ({"properties": []}, "/properties"),
        ({"items": 3}, "/items"),
        ({"anyOf": []}, "/anyOf"),
        ({"allOf": [{"type": "string"}, 3]}, "/allOf/1"),
        ({"$ref": "#/$defs/missing"}, "/$ref"),
        ({"$ref": "https://example.com/schema.json"}, "/$ref"),
        ({"properties": {"a/b": {"$ref": 5}}}, "/properties/a~1b/$ref"),
        ({"type": "string", "pattern": "(unclosed"}, "/pattern"),
    ],
)
def test_schema_errors(schema, pointer):
    e = raises(SchemaError, schema, pointer)
    assert not isinstance(e, UnsupportedKeywordError) or schema.get("$ref") is None


@pytest.mark.parametrize(
    "schema, keyword, pointer",
    [
        ({"unevaluatedProperties": False}, "unevaluatedProperties", "/unevaluatedProperties"),
        ({"items": {"unevaluatedItems": False}}, "unevaluatedItems", "/items/unevaluatedItems"),
        ({"$dynamicRef": "#x"}, "$dynamicRef", "/$dynamicRef"),
        ({"type": "string", "pattern": "(?=a)b"}, "pattern", "/pattern"),
    ],
)
def test_unsupported_keywords(schema, keyword, pointer):
    raises(UnsupportedKeywordError, schema, pointer, keyword)


def test_lenient_and_unknown_keywords():
    check({"type": "integer", "x-foo": 1, "javaType": "Int", "unevaluatedProperties": False}, accepted=[1], lenient=True)
    check({"type": "integer", "x-foo": 1, "nullable": True}, accepted=[1], rejected=[None])
    raises(UnsupportedKeywordError, {"type": "integer", "javaType": "x"}, "/javaType", "javaType", unknown_keywords="error")
    with pytest.raises(StructgenError):
        JsonOptions(whitespace="pretty")
    with pytest.raises(SchemaError):
        schema_to_ir("{not json")
    with pytest.raises(SchemaError):
        schema_to_ir([1, 2])
