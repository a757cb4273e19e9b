"""Property tests of compiled JSON Schemas on the real SmolLM2 vocabulary.

1. Random walks that pick only allowed tokens never get stuck (every prefix stays
   completable) and every output completed with EOS validates with `jsonschema`: on
   hand-written schemas, and on a sample of MaskBench-dev's real-world ones (validated
   with the schema's own draft and its format checker).
2. Instances generated from the schema (hypothesis-jsonschema), serialized the way the
   whitespace mode promises, are accepted token by token.
"""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

import structgen
from structgen.errors import StructgenError
from structgen.validation import schema_error
from tests.paths import MASKBENCH

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "uid": {"type": "string", "format": "uuid"},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    {
        "type": "array",
        "items": {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": -1.5, "maximum": 10},
                {"type": "boolean"},
                {"type": "null"},
            ]
        },
        "minItems": 1,
        "maxItems": 4,
    },
    {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
            "when": {"type": "string", "format": "date"},
            "score": {"type": "number", "minimum": 0.5, "maximum": 99.5},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"kind": {"const": "point"}, "xy": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "items": False}},
        "required": ["kind", "xy"],
        "additionalProperties": False,
    },
]


def decode_ids(vocab, ids) -> bytes:
    return b"".join(vocab.token_bytes[i] for i in ids)


def random_walk(grammar, vocab, rng: random.Random, steps: int, eos_chance: float, pick) -> bytes | None:
    """Feed tokens the mask allows, chosen by `pick(allowed ids, step)`, taking EOS with
    `eos_chance` whenever it is allowed. Asserts the mask never runs empty (no dead end);
    returns the output when the walk ended with EOS, None when it ran out of steps."""
    eos = set(vocab.eos_token_ids)
    m = grammar.matcher()
    ids = []
    for step in range(steps):
        allowed = m.allowed_token_ids().tolist()
        assert allowed, f"dead end after {decode_ids(vocab, ids)!r}"
        allowed_eos = eos.intersection(allowed)
        tid = min(allowed_eos) if allowed_eos and rng.random() < eos_chance else pick(allowed, step)
        assert m.accept_token(tid)
        if tid in eos:
            assert m.is_terminated()
            return decode_ids(vocab, ids)
        ids.append(tid)
    return None


def completed_walks(grammar, vocab, rng: random.Random, walks: int) -> list[bytes]:
    """The outputs of `walks` uniform random walks of up to 120 tokens that ended in EOS
    (EOS taken with probability 0.5 whenever allowed, so that walks finish)."""
    texts = [random_walk(grammar, vocab, rng, 120, 0.5, lambda allowed, _: rng.choice(allowed)) for _ in range(walks)]
    return [text for text in texts if text is not None]


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_random_walks_stay_completable_and_validate(index, smollm2_vocab):
    schema = SCHEMAS[index]
    grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    texts = completed_walks(grammar, smollm2_vocab, random.Random(index), 25)
    for text in texts:
        jsonschema.validate(json.loads(text), schema, cls=jsonschema.Draft202012Validator)
    assert texts


def accepts_tokens(grammar, tokenizer, text: str) -> bool:
    m = grammar.matcher()
    for tid in tokenizer.encode(text, add_special_tokens=False):
        if not m.accept_token(tid):
            return False
    return m.is_accepting()


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_generated_instances_are_accepted(index, smollm2_vocab, smollm2_tokenizer):
    schema = SCHEMAS[index]
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    default = structgen.compile_json_schema(schema, smollm2_vocab)
    flexible = structgen.compile_json_schema(schema, smollm2_vocab, whitespace="flexible")

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema))
    def check(value):
        # hypothesis-jsonschema treats some formats as annotations: keep real instances
        assume(checker.is_valid(value))
        # property order follows the schema (a documented choice): re-order to match
        if isinstance(value, dict) and "properties" in schema:
            order = list(schema["properties"])
            value = {k: value[k] for k in sorted(value, key=order.index)}
        text = json.dumps(value)
        assert accepts_tokens(default, smollm2_tokenizer, text), text
        assert accepts_tokens(flexible, smollm2_tokenizer, json.dumps(value, indent=2)), text

    check()


OBJECT_SCHEMAS = [i for i, schema in enumerate(SCHEMAS) if schema.get("type") == "object"]


@pytest.mark.parametrize("index", OBJECT_SCHEMAS)
def test_any_property_order_walks_validate_and_shuffled_instances_pass(index, smollm2_vocab, smollm2_tokenizer):
    """property_order="any" on the real vocabulary: random walks end in valid objects
    (each declared key at most once), and instances with their keys shuffled are
    accepted token by token."""
    schema = SCHEMAS[index]
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, property_order="any")
    texts = completed_walks(grammar, smollm2_vocab, random.Random(index), 20)
    for text in texts:
        jsonschema.validate(json.loads(text), schema, cls=jsonschema.Draft202012Validator)
        keys = json.loads(text, object_pairs_hook=lambda pairs: [k for k, _ in pairs])
        assert len(keys) == len(set(keys)), text
    assert texts
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema), st.randoms(use_true_random=False))
    def check(value, order_rng):
        assume(checker.is_valid(value))
        keys = list(value)
        order_rng.shuffle(keys)
        text = json.dumps({k: value[k] for k in keys})
        assert accepts_tokens(grammar, smollm2_tokenizer, text), text

    check()


REAL_SCHEMAS = sorted(MASKBENCH.glob("*.json"))
random.Random(7).shuffle(REAL_SCHEMAS)


def closing_tokens(vocab) -> set[int]:
    """Short tokens that can close a string, an object or an array: walks biased to them
    finish within their step budget instead of growing one string forever."""
    return {i for i, b in enumerate(vocab.token_bytes) if b and len(b) <= 3 and any(c in b for c in b'"}],')}


@pytest.mark.parametrize("path", REAL_SCHEMAS[:40], ids=lambda p: p.stem)
def test_random_walks_over_real_schemas_validate(path, smollm2_vocab):
    schema = json.loads(path.read_text())["schema"]
    try:
        grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    except StructgenError:
        pytest.skip("refused with a clear error (tests/test_bad_input.py covers refusals)")
    closers = closing_tokens(smollm2_vocab)
    rng = random.Random(path.name)

    def pick(allowed, step):
        # wander first, then head for the end (large schemas nest deeply)
        if rng.random() < (0.5 if step < 150 else 0.95):
            near = [t for t in allowed if t in closers]
            if near:
                return rng.choice(near)
        return rng.choice(allowed)

    completed = 0
    for _ in range(6):
        text = random_walk(grammar, smollm2_vocab, rng, 600, 0.7, pick)
        if text is not None:
            completed += 1
            error = schema_error(text, schema, formats=True)  # numbers read exactly (Decimal)
            assert error is None, (text[:300], error)
    assert completed > 0
