"""Hostile schemas, generated: every keyword, nested deep and wide, with values of the
wrong type and out of range. The compiler answers each with a grammar or a
`StructgenError`, nothing else (no RecursionError, TypeError, KeyError, ...), within its
time budget; a grammar it returns accepts only valid documents on a random walk."""

from __future__ import annotations

import json
import random
import time

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import random_walk

import structgen

ODD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=True),
                       st.text(max_size=6), st.lists(st.integers(-2, 5), max_size=3))
PATTERNS = st.sampled_from(["^a+$", "[0-9]{2,4}", "(x|y)*z", "(", "\\d+(?=a)", "(a)\\1", "[^\\s]{0,3}", ".*"])
FORMATS = st.sampled_from(["date", "email", "uuid", "ipv4", "date-time", "no-such-format", "uri"])
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array", "strnig"])


def keyword_schemas(children):
    """One subschema: a few keywords, each with a sensible or a hostile value."""
    entries = st.one_of(
        st.tuples(st.just("type"), st.one_of(TYPES, st.lists(TYPES, max_size=3), ODD_VALUES)),
        st.tuples(st.sampled_from(["minLength", "maxLength", "minItems", "maxItems", "minProperties",
                                   "maxProperties", "minContains", "maxContains"]),
                  st.one_of(st.integers(-1, 40), ODD_VALUES)),
        st.tuples(st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]),
                  st.one_of(st.integers(-10**6, 10**6), st.floats(-1e9, 1e9), st.just(0), ODD_VALUES)),
        st.tuples(st.just("pattern"), st.one_of(PATTERNS, ODD_VALUES)),
        st.tuples(st.just("format"), st.one_of(FORMATS, ODD_VALUES)),
        st.tuples(st.sampled_from(["enum", "const"]), st.one_of(st.lists(ODD_VALUES, max_size=4), ODD_VALUES)),
        st.tuples(st.sampled_from(["items", "not", "additionalProperties", "contains", "propertyNames",
                                   "if", "then", "else"]), st.one_of(children, ODD_VALUES)),
        st.tuples(st.sampled_from(["anyOf", "allOf", "oneOf", "prefixItems"]),
                  st.one_of(st.lists(children, max_size=4), ODD_VALUES)),
        st.tuples(st.sampled_from(["properties", "patternProperties", "$defs", "dependentSchemas"]),
                  st.one_of(st.dictionaries(st.sampled_from(["a", "b", "^c", "d/e", "~f"]), children, max_size=3),
                            ODD_VALUES)),
        st.tuples(st.just("required"), st.one_of(st.lists(st.sampled_from(["a", "b", "z"]), max_size=3), ODD_VALUES)),
        st.tuples(st.just("$ref"), st.sampled_from(["#", "#/$defs/a", "#/properties/a", "#/nowhere", "http://x/y",
                                                    "#/$defs/b/items"])),
        st.tuples(st.sampled_from(["uniqueItems", "unevaluatedProperties", "maxLenght", "$dynamicRef"]), ODD_VALUES),
    )
    return st.lists(entries, max_size=5).map(dict)


SCHEMAS = st.recursive(st.one_of(st.booleans(), keyword_schemas(st.just({}))), keyword_schemas, max_leaves=40)


def nested(schema, levels: int, keyword: str):
    for _ in range(levels):
        schema = {keyword: schema} if keyword != "anyOf" else {"anyOf": [schema, True]}
    return schema


DEEP = st.builds(nested, SCHEMAS, st.integers(0, 1500), st.sampled_from(["items", "not", "anyOf", "additionalProperties"]))


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(schema=st.one_of(SCHEMAS, DEEP), seed=st.integers(0, 2**16))
def test_hostile_schemas_get_a_grammar_or_a_structgen_error(schema, seed, smollm2_vocab):
    started = time.monotonic()
    try:
        grammar = structgen.compile_json_schema(schema, smollm2_vocab, timeout_s=2.0, warm_s=0)
    except structgen.StructgenError:
        assert time.monotonic() - started < 2.0 + 5.0  # the budget, and a margin for a busy machine
        return
    assert time.monotonic() - started < 2.0 + 5.0
    rng = random.Random(seed)
    text = random_walk(grammar, smollm2_vocab, rng, 60, 0.5, lambda allowed, _: rng.choice(allowed))
    if text is not None and schema_is_valid(schema):
        jsonschema.validate(json.loads(text), schema, cls=jsonschema.Draft202012Validator)


def schema_is_valid(schema) -> bool:
    """Whether the metaschema accepts it. structgen checks every keyword it uses, and
    those of negated subschemas (`not`, `if`); it does not yet check keywords of
    subschemas that a negated one contains and that cannot matter to the result."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True
