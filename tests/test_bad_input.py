"""Bad input through the public compile API: a clear error naming what and where, or a
bounded compile -- never a crash, a hang or a silent under-constraint."""

from __future__ import annotations

import json
import time

import pytest

import structgen


@pytest.mark.parametrize(
    "schema, error, fragments",
    [
        ('{"type": "object",', structgen.SchemaError, ["not valid JSON", "line 1"]),
        ({"type": "strnig"}, structgen.SchemaError, ["strnig", "/type"]),
        ({"type": "string", "minLength": 5, "maxLength": 2}, structgen.SchemaError, ["minLength"]),
        ({"type": "string", "minLength": -1}, structgen.SchemaError, ["/minLength"]),
        ({"type": "integer", "minimum": 10, "maximum": 1}, structgen.SchemaError, []),
        ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, structgen.SchemaError, ["/properties/a"]),
        ({"$ref": "https://example.com/schema.json"}, structgen.SchemaError, []),
        ({"type": "string", "pattern": "(unclosed"}, structgen.StructgenError, ["/pattern"]),
        ({"type": "string", "pattern": "(a)\\1"}, structgen.StructgenError, ["backreference"]),
        ({"properties": {"a": {"type": "string", "maxLenght": 3}}}, structgen.UnsupportedKeywordError, ["maxLenght", "maxLength", "/properties/a"]),
        ({"type": "object", "oneof": [{"required": ["a"]}]}, structgen.UnsupportedKeywordError, ["oneof", "oneOf"]),
        ({"type": "string", "format": "no-such-format"}, structgen.UnsupportedKeywordError, ["no-such-format"]),
        ({"type": "object", "unevaluatedProperties": False}, structgen.UnsupportedKeywordError, ["unevaluatedProperties"]),
        ({"$defs": {"node": {"$ref": "#/$defs/node"}}, "$ref": "#/$defs/node"}, structgen.SchemaError, ["cycle", "/$defs/node"]),
        ({"required": "name"}, structgen.SchemaError, ["/required"]),
        ({"enum": []}, structgen.SchemaError, ["/enum"]),
        (False, structgen.SchemaError, ["no value"]),
    ],
)
def test_bad_schema_is_a_clear_error(schema, error, fragments, smollm2_vocab):
    with pytest.raises(error) as info:
        structgen.compile_json_schema(schema, smollm2_vocab)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    if isinstance(info.value, structgen.UnsupportedKeywordError):
        assert info.value.keyword in message


def test_unknown_keywords(smollm2_vocab):
    """Keywords no draft defines are annotations (as for a validator), unless asked to
    refuse them; known keywords we cannot enforce are refused unless lenient."""
    schema = {"type": "integer", "frobnicate": 3}
    grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    assert grammar.accepts_bytes(b"42") and not grammar.accepts_bytes(b'"x"')
    with pytest.raises(structgen.UnsupportedKeywordError, match="frobnicate"):
        structgen.compile_json_schema(schema, smollm2_vocab, unknown_keywords="error")
    typo = {"type": "string", "maxLenght": 3}
    assert structgen.compile_json_schema(typo, smollm2_vocab, lenient=True).accepts_bytes(b'"abcd"')
    unsupported = {"type": "object", "unevaluatedProperties": False}
    lenient = structgen.compile_json_schema(unsupported, smollm2_vocab, lenient=True)
    assert lenient.accepts_bytes(b'{"a": 1}')  # documented: lenient may under-constrain


@pytest.mark.parametrize(
    "pattern, fragment",
    [("[z-a]", "range"), ("a{3,2}", "3"), ("(?=x)", "lookahead"), ("*a", "repeat"), ("a\\b", "\\b"), (5, "string")],
)
def test_bad_regex_is_a_clear_error(pattern, fragment, smollm2_vocab):
    with pytest.raises(structgen.StructgenError) as info:
        structgen.compile_regex(pattern, smollm2_vocab)
    assert fragment in str(info.value).lower() or fragment in str(info.value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "maxLength": 100000},
        {"type": "array", "items": {"type": "integer"}, "minItems": 5000},
        {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}, "minItems": 5000},
        json.loads('{"anyOf": [' * 40 + '{"type": "integer"}' + ', {"type": "null"}]}' * 40),
    ],
)
def test_huge_automata_are_bounded(schema, smollm2_vocab, smollm2_tokenizer):
    """Either a clear budget error or a compile that finishes fast and still works."""
    start = time.perf_counter()
    try:
        grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    except structgen.GrammarTooLargeError as e:
        assert "budget" in str(e) or "max_states" in str(e)
        return
    assert time.perf_counter() - start < 5.0
    matcher = grammar.matcher()
    assert matcher.allowed_token_ids().size > 0
    first = next(iter(range(len(smollm2_vocab.token_bytes))))  # any id: must not crash
    matcher.accept_token(first)


def test_budget_options_are_respected(smollm2_vocab):
    schema = {"type": "array", "items": {"type": "string", "maxLength": 50}, "minItems": 500}
    with pytest.raises(structgen.GrammarTooLargeError):
        structgen.compile_json_schema(schema, smollm2_vocab, max_states=10_000)
    # and raising the budget past the default lets a schema through (about 100M positions)
    big = {"type": "array", "items": {"type": "string", "maxLength": 50}, "maxItems": 2_000_000}
    with pytest.raises(structgen.GrammarTooLargeError, match="max_states"):
        structgen.compile_json_schema(big, smollm2_vocab)
    matcher = structgen.compile_json_schema(big, smollm2_vocab, max_states=200_000_000).matcher()
    assert matcher.accept_token(list(smollm2_vocab.token_bytes).index(b"["))


def test_time_budget_option_is_the_schema_compiles_budget(smollm2_vocab):
    """compile_json_schema's timeout_s bounds the schema's own compile, and the error
    names that budget (it used to keep the options' default of 10 s: a larger budget
    could not be asked for, and a smaller one was reported as 10 s)."""
    schema: dict = {"type": "integer"}
    for i in range(40):  # anyOf x allOf at every level: ~2^40 combinations to sort out
        schema = {"anyOf": [schema, {"type": "integer", "minimum": i}],
                  "allOf": [{"anyOf": [{"maximum": 100}, {"minimum": -100}]}]}
    start = time.perf_counter()
    with pytest.raises(structgen.GrammarTooLargeError, match=r"time budget \(0\.2 s\)"):
        structgen.compile_json_schema(schema, smollm2_vocab, timeout_s=0.2)
    assert time.perf_counter() - start < 5.0


def test_nothing_in_flight_is_lost(smollm2_vocab, smollm2_tokenizer):
    """A bad compile does not disturb matchers already running on good grammars."""
    good = structgen.compile_json_schema({"type": "integer"}, smollm2_vocab)
    m = good.matcher()
    assert m.accept_token(smollm2_tokenizer.encode("4", add_special_tokens=False)[0])
    with pytest.raises(structgen.StructgenError):
        structgen.compile_json_schema({"type": "nope"}, smollm2_vocab)
    assert m.accept_token(smollm2_tokenizer.encode("2", add_special_tokens=False)[0])
    assert m.is_accepting()
