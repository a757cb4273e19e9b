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

import structgen
from benchmarks.hostile import DEEP_SCHEMAS, SCHEMAS
from tests.test_properties import random_walk

@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(schema=st.one_of(SCHEMAS, DEEP_SCHEMAS), seed=st.integers(0, 2**16))
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
