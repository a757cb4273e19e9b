"""JSON Schema -> IR soundness on random schemas over a small vocabulary (hypothesis):
whatever compiles never accepts an invalid value, in either property order.
"""

from __future__ import annotations

import json

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.errors import StructgenError
from tests.grammar.schema_checks import G


KEYS = ["a", "b", "ab", "x-1"]
PATTERNS = ["^a", "b", "^[ab]+$", "[0-9]", "^x-"]
scalars = st.none() | st.booleans() | st.integers(-3, 12) | st.sampled_from([0.5, -1.5, 2.0, 10.25]) | st.sampled_from(["", "a", "b", "ab", "x-1", "a1", "zzz"])
small_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS + ["c", "1"]), inner, max_size=3),
    max_leaves=6,
)


def _schemas(depth: int):
    leaf = st.one_of(
        st.booleans(),
        st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "null", "boolean", "array", "object"])}),
        st.fixed_dictionaries({"type": st.sampled_from([["string", "null"], ["integer", "array"]])}),
        st.fixed_dictionaries({"const": scalars}),
        st.fixed_dictionaries({"enum": st.lists(scalars, min_size=1, max_size=4)}),
        st.fixed_dictionaries({"minimum": st.integers(-2, 8)}),
        st.fixed_dictionaries({"exclusiveMaximum": st.sampled_from([0, 3, 7.5])}),
        st.fixed_dictionaries({"minLength": st.integers(0, 2), "maxLength": st.integers(2, 3)}),
        st.fixed_dictionaries({"pattern": st.sampled_from(PATTERNS)}),
        st.fixed_dictionaries({"pattern": st.sampled_from(PATTERNS), "maxLength": st.integers(1, 3)}),
        st.fixed_dictionaries({"required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True)}),
        st.fixed_dictionaries({"minItems": st.integers(0, 2)}),
        st.fixed_dictionaries({"maxProperties": st.integers(0, 2)}),
        st.fixed_dictionaries({"minProperties": st.integers(1, 2)}),
        # steps a double holds exactly, so that jsonschema's float division is exact too
        st.fixed_dictionaries({"multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.25])}),
        st.fixed_dictionaries({"dependentRequired": st.fixed_dictionaries({"a": st.lists(st.sampled_from(["b", "ab"]), min_size=1, max_size=2, unique=True)})}),
    )
    if depth == 0:
        return leaf
    sub = _schemas(depth - 1)
    return st.one_of(
        leaf,
        st.fixed_dictionaries(
            {"properties": st.dictionaries(st.sampled_from(KEYS), sub, max_size=2)},
            optional={
                "additionalProperties": sub,
                "patternProperties": st.dictionaries(st.sampled_from(PATTERNS), sub, max_size=2),
                "required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
            },
        ),
        st.fixed_dictionaries({"items": sub}, optional={"prefixItems": st.lists(sub, max_size=2), "maxItems": st.integers(0, 3)}),
        st.fixed_dictionaries({"contains": sub}, optional={"minContains": st.integers(0, 2), "maxContains": st.integers(1, 2)}),
        st.fixed_dictionaries({"propertyNames": st.fixed_dictionaries({"pattern": st.sampled_from(PATTERNS)})}),
        st.fixed_dictionaries({"anyOf": st.lists(sub, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"oneOf": st.lists(sub, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"allOf": st.lists(sub, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"not": sub}),
        st.fixed_dictionaries({"if": sub, "then": sub}, optional={"else": sub}),
        st.fixed_dictionaries({"uniqueItems": st.just(True), "items": st.fixed_dictionaries({"enum": st.lists(scalars, min_size=1, max_size=3)})}),
    )


FUZZ = {"schemas": 0, "compiled": 0, "values": 0, "valid": 0, "valid_accepted": 0}


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_schemas(2), st.lists(small_values, min_size=12, max_size=12))
def test_fuzz_random_schemas_are_sound(schema, values):
    """Random schemas over a small vocabulary: whatever compiles never accepts an
    invalid value (checked against jsonschema, draft 2020-12), in either property order."""
    FUZZ["schemas"] += 1
    try:
        g = G(schema, max_any_depth=3, timeout_s=5)
        any_order = G(schema, max_any_depth=3, timeout_s=5, property_order="any")
    except StructgenError:
        return
    FUZZ["compiled"] += 1
    validator = jsonschema.Draft202012Validator(schema)
    for v in values:
        text = json.dumps(v)
        valid = validator.is_valid(v)
        accepted = g.ok(text)
        FUZZ["values"] += 1
        FUZZ["valid"] += valid
        FUZZ["valid_accepted"] += valid and accepted
        assert valid or not accepted, f"accepted invalid {text} for {json.dumps(schema)}"
        assert valid or not any_order.ok(text), f"accepted invalid {text} in any order for {json.dumps(schema)}"
        assert any_order.ok(text) or not accepted, f"any order refused {text}, schema order took it"
