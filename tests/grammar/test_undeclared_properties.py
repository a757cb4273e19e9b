"""Undeclared object properties: JSON Schema's own semantics (the library's default), the
generation default that gives none where a schema is silent on `additionalProperties`
(`disable_additional_properties`), and OpenAI's strict mode, everywhere or per tool
(`strict_pointers`). Checked on texts, and on random walks of the real vocabulary whose
outputs must validate and must not carry a key the narrowing forbids."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

import structgen
from tests.grammar.schema_checks import G
from tests.test_properties import random_walk

CITY = {  # as pydantic writes a model: no additionalProperties
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "population": {"type": "integer", "minimum": 0}},
    "required": ["city"],
}
ONLY_CITY = '{"city": "Paris"}'
WITH_POPULATION = '{"city": "Paris", "population": 3}'
WITH_EXTRA = '{"city": "Paris", "capital": "yes"}'


def test_json_schema_semantics_allow_undeclared_properties_by_default():
    g = G(CITY)
    assert g.ok(ONLY_CITY) and g.ok(WITH_POPULATION) and g.ok(WITH_EXTRA)


def test_disabled_additional_properties_allow_declared_ones_only():
    g = G(CITY, disable_additional_properties=True)
    assert g.ok(ONLY_CITY) and g.ok(WITH_POPULATION)
    assert not g.ok(WITH_EXTRA) and not g.ok('{"city": "Paris", "population": 3, "x": 1}')


@pytest.mark.parametrize("additional, extra_ok", [(True, True), ({"type": "integer"}, False), (False, False)])
def test_an_explicit_additional_properties_is_honoured(additional, extra_ok):
    g = G({**CITY, "additionalProperties": additional}, disable_additional_properties=True)
    assert g.ok(WITH_EXTRA) == extra_ok
    assert g.ok('{"city": "Paris", "capital": 2}') == (additional is not False)


def test_disabled_additional_properties_keep_what_the_schema_declares_elsewhere():
    both = {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "integer"}}}],
            "required": ["a", "b"]}
    g = G(both, disable_additional_properties=True)
    assert g.ok('{"a": 1, "b": 2}') and not g.ok('{"a": 1, "b": 2, "c": 3}')
    required_only = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"]}
    g = G(required_only, disable_additional_properties=True)
    assert g.ok('{"a": 1, "b": "x"}') and not g.ok('{"a": 1, "b": "x", "c": 3}')
    patterns = {"type": "object", "properties": {"a": {"type": "integer"}},
                "patternProperties": {"^x_": {"type": "integer"}}}
    g = G(patterns, disable_additional_properties=True)
    assert g.ok('{"a": 1, "x_1": 2}') and not g.ok('{"a": 1, "x_1": "s"}') and not g.ok('{"a": 1, "y": 2}')


def test_a_min_properties_above_the_declared_names_stays_satisfiable():
    g = G({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2},
          disable_additional_properties=True)
    assert g.ok('{"a": 1, "b": 2}') and not g.ok('{"a": 1}')


def test_an_object_that_declares_nothing_stays_any_object():
    g = G({"type": "object"}, disable_additional_properties=True)
    assert g.ok('{"anything": [1, 2]}')


def test_strict_mode_allows_optional_properties_and_never_an_undeclared_one():
    g = G({**CITY, "additionalProperties": True}, strict=True)
    assert g.ok(ONLY_CITY) and g.ok(WITH_POPULATION) and not g.ok(WITH_EXTRA)


def test_strict_pointers_make_one_tool_strict_and_leave_the_other_alone():
    open_args = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": True}
    union = {"anyOf": [{"type": "object", "properties": {"name": {"const": n}, "arguments": open_args},
                        "required": ["name", "arguments"], "additionalProperties": False} for n in ("a", "b")]}
    g = G(union, strict_pointers=("/anyOf/0/properties/arguments",))
    extra = '{"name": "%s", "arguments": {"q": "x", "z": 1}}'
    assert not g.ok(extra % "a") and g.ok(extra % "b")
    assert g.ok('{"name": "a", "arguments": {"q": "x"}}')


def test_options_are_part_of_the_cache_key(smollm2_vocab):
    loose = structgen.compile_json_schema(CITY, smollm2_vocab, warm_s=0)
    narrow = structgen.compile_json_schema(CITY, smollm2_vocab, warm_s=0, disable_additional_properties=True)
    assert loose is not narrow
    assert loose.accepts_bytes(WITH_EXTRA.encode()) and not narrow.accepts_bytes(WITH_EXTRA.encode())


def key_seeking_walks(grammar, vocab, rng: random.Random, walks: int) -> list[bytes]:
    """Random walks that take a comma, or else a token with a quote in it, half the time
    they are allowed: they try to add keys and to close them."""
    def pick(allowed, _step):
        if rng.random() < 0.5:
            for mark in (b",", b'"'):
                marked = [t for t in allowed if mark in vocab.token_bytes[t]]
                if marked:
                    return rng.choice(marked)
        return rng.choice(allowed)

    texts = [random_walk(grammar, vocab, rng, 160, 0.3, pick) for _ in range(walks)]
    return [text for text in texts if text is not None]


@pytest.mark.parametrize("options", [{"disable_additional_properties": True}, {"strict": True}, {}])
def test_random_walks_validate_and_keep_to_the_declared_keys(options, smollm2_vocab):
    schema = {**CITY, "properties": {**CITY["properties"], "tags": {"type": "array", "items": CITY, "maxItems": 2}}}
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, **options)
    texts = key_seeking_walks(grammar, smollm2_vocab, random.Random(7), 50)
    assert len(texts) >= 8
    undeclared = 0
    for text in texts:
        value = json.loads(text)
        jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
        undeclared += len(set(value) - set(schema["properties"]))
        undeclared += sum(len(set(o) - set(CITY["properties"])) for o in value.get("tags", []))
    if options:
        assert undeclared == 0
    else:  # the control: under JSON Schema's semantics these walks do add keys
        assert undeclared > 0


def test_safe_integers_bound_the_open_sides_only():
    g = G({"type": "integer", "minimum": 0}, safe_integers=True)
    assert g.ok(str(2**53 - 1)) and not g.ok(str(2**53)) and not g.ok("-1")
    g = G({"type": "integer"}, safe_integers=True)
    assert g.ok(str(-(2**53 - 1))) and not g.ok(str(-(2**53)))
    g = G({"type": "integer", "maximum": 10**30}, safe_integers=True)  # an explicit bound is kept
    assert g.ok(str(10**30)) and not g.ok(str(-(2**53)))
    g = G({"type": "integer", "minimum": 2**60}, safe_integers=True)  # beyond the range: left open
    assert g.ok(str(2**61))
    g = G({"type": "integer", "multipleOf": 5}, safe_integers=True)
    assert g.ok("25") and not g.ok("26")
    assert G({"type": "integer"}).ok("1" * 40)
