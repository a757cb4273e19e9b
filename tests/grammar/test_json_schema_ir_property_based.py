"""JSON Schema -> IR, property-based (hypothesis): on a few schemas that cover most keywords,
a value is accepted exactly when `jsonschema` says it is valid, in every whitespace style
and in any property order; string lengths likewise.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.grammar.schema_checks import G, dumps


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(st.characters(codec="utf-8"), max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet="abcxyz", max_size=3), inner, max_size=4),
    max_leaves=12,
)

PROPERTY_SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": -5, "maximum": 100},
            "b": {"type": "string", "maxLength": 3},
            "c": {"type": "array", "items": {"type": ["boolean", "null"]}, "maxItems": 3},
        },
        "required": ["a"],
        "additionalProperties": False,
    },
    {"anyOf": [{"type": "string", "pattern": "^[a-c]*$"}, {"type": "number", "exclusiveMinimum": 0}, {"type": "null"}]},
    {
        "type": "object",
        "properties": {"x": {"enum": [1, "a", None, [1]]}},
        "patternProperties": {"^b": {"type": "boolean"}},
        "additionalProperties": {"type": "integer"},
        "maxProperties": 3,
    },
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": {"type": "object", "maxProperties": 1}},
    {"not": {"type": ["object", "array"]}, "oneOf": [{"type": "string"}, {"type": "number", "minimum": 0}]},
    {
        "type": "object",
        "patternProperties": {"a": {"type": "integer"}, "b|c": {"type": ["integer", "string"]}},
        "additionalProperties": {"type": ["null", "boolean"]},
        "propertyNames": {"maxLength": 2},
    },
    {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "string"}, "z": {}},
        "oneOf": [{"required": ["x"]}, {"required": ["y"]}],
        "dependentRequired": {"z": ["x"]},
        "additionalProperties": False,
    },
]


def _python_compatible(v) -> bool:
    """Values whose json.dumps text parses back to an equal value (floats from width=32
    strategies are exact), so validity of the value and of the text agree."""
    return json.loads(json.dumps(v)) == v


def _in_documented_subset(v, order: list[str], depth: int = 0, max_depth: int = 4) -> bool:
    """False for valid values the grammar documents it may refuse: integral floats
    ("1.0" for an integer), nesting deeper than the any-value bound (checked loosely)."""
    if isinstance(v, float) and v.is_integer():
        return False
    if isinstance(v, (list, dict)):
        if depth >= max_depth:
            return False
        items = v.values() if isinstance(v, dict) else v
        return all(_in_documented_subset(x, [], depth + 1, max_depth) for x in items)
    return True


def _reorder(v, order: list[str]):
    """Declared properties first, in schema order (the documented emission order)."""
    if not isinstance(v, dict):
        return v
    head = {k: v[k] for k in order if k in v}
    return {**head, **{k: x for k, x in v.items() if k not in head}}


@pytest.mark.parametrize("index", range(len(PROPERTY_SCHEMAS)))
@pytest.mark.parametrize("style", ["default", "compact", "indent", "flexible"])
def test_property_accepted_iff_valid(index, style):
    schema = PROPERTY_SCHEMAS[index]
    options = {"indent": 2} if style == "indent" else {"whitespace": style}
    g = G(schema, **options, max_any_depth=4)
    spellings = [lambda v: dumps(v, g.options)]
    if style == "flexible":
        spellings += [lambda v: json.dumps(v, indent=2), lambda v: json.dumps(v, separators=(",", ":"))]
    validator = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(json_values)
    def run(v):
        if not _python_compatible(v):
            return
        order = list(schema.get("properties", {}))
        v = _reorder(v, order)
        valid = validator.is_valid(v)
        for spell in spellings:
            accepted = g.ok(spell(v))
            assert not (accepted and not valid), f"accepted an invalid value {spell(v)!r}"
            if valid and _in_documented_subset(v, order):
                assert accepted, f"rejected a valid value {spell(v)!r}"

    run()


@pytest.mark.parametrize("index", range(len(PROPERTY_SCHEMAS)))
@pytest.mark.parametrize("style", ["default", "flexible"])
def test_property_any_order_accepted_iff_valid(index, style):
    """property_order="any": values in whatever key order hypothesis produces (and
    shuffled) are accepted exactly when they are valid."""
    schema = PROPERTY_SCHEMAS[index]
    g = G(schema, whitespace=style, max_any_depth=4, property_order="any")
    validator = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(json_values, st.randoms(use_true_random=False))
    def run(v, rnd):
        if not _python_compatible(v):
            return
        if isinstance(v, dict):
            keys = list(v)
            rnd.shuffle(keys)
            v = {k: v[k] for k in keys}
        valid = validator.is_valid(v)
        accepted = g.value(v)
        assert not (accepted and not valid), f"accepted an invalid value {v!r}"
        if valid and _in_documented_subset(v, []):
            assert accepted, f"rejected a valid value {v!r}"

    run()


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.text(st.characters(codec="utf-8"), max_size=8), st.integers(0, 3), st.integers(0, 6))
def test_property_string_lengths(text, lo, extra):
    schema = {"type": "string", "minLength": lo, "maxLength": lo + extra}
    g = G(schema)
    assert g.value(text) == (lo <= len(text) <= lo + extra)
    assert g.ok(json.dumps(text, ensure_ascii=False)) == (lo <= len(text) <= lo + extra)
