"""structgen.validation: JSON texts checked against schemas with numbers read exactly,
and no text that the grammars can write makes it crash."""

from __future__ import annotations

import pytest

from structgen.validation import schema_error

SCHEMA = {"type": "object", "properties": {
    "count": {"type": "integer"},
    "price": {"type": "number", "multipleOf": 0.01},
    "score": {"type": "number", "maximum": 5},
}}


@pytest.mark.parametrize("text", [
    '{"count": 1}', '{"count": 1.0}', '{"count": 10e2}',  # integers in any spelling
    '{"price": 19.99}', '{"price": 0.07}', '{"price": 1e-2}',  # floats would reject 19.99
    '{"score": 5}', '{"score": -1e999}', '{"score": 1e-9999999999999999999}',
    '{"count": ' + "7" * 5000 + "}",  # past Python's 4,300-digit int parsing limit
])
def test_valid_texts(text):
    assert schema_error(text, SCHEMA) is None


@pytest.mark.parametrize("text, where", [
    ('{"count": 1.5}', "/count"),
    ('{"count": true}', "/count"),
    ('{"price": 19.999}', "/price"),
    ('{"score": 5.0000000000000000000001}', "/score"),  # equal to 5 as a float
    ('{"score": 1e9999999999999999999}', "/score"),  # past Decimal's exponent range
])
def test_invalid_texts_say_where(text, where):
    error = schema_error(text, SCHEMA)
    assert error is not None and error.startswith(f"at {where}:"), error


def test_not_json_and_formats():
    assert schema_error("{nope", SCHEMA).startswith("not JSON")
    assert schema_error('"2020-02-30"', {"format": "date"}) is None  # annotation unless asked
    assert schema_error('"2020-02-30"', {"format": "date"}, formats=True) is not None
    assert schema_error('[1, 1.0]', {"uniqueItems": True}) is not None  # 1 and 1.0 are equal
