"""Strings whose pattern is too big to multiply by their maxLength (`ir.Bound`): the
pattern's graph, bounded, whose (state, length) pairs the automata count as they reach
them. Its language must be exactly the schema's -- the same masks as the explicit
product where both can be built, in the compiled automaton and the Python one; long
words accepted, one character past maxLength refused -- and a state far from the bound
must take its twin's mask, so that writing a long string builds few states."""

from __future__ import annotations

import json

import jsonschema
import pytest

import structgen
from structgen.grammar import ir
from structgen.grammar.acceptor import ir_accepts
from structgen.grammar.json_schema import schema_to_ir, strings
from structgen.grammar.json_schema.memo import BoundedCache
from tests.automata.test_counted import bounded_graphs, twin_masks_checked, written_token_by_token
from tests.automata.test_flat import _both, same_masks_on_walks

WORDS = "^(?:\\S+\\s+){0,%d}\\S+$"
LONG = {"type": "string", "maxLength": 500, "pattern": WORDS % 49}  # 199 pattern states x 501 lengths


def explicit_products(monkeypatch) -> None:
    """From now on every pattern under a maxLength is lowered as the explicit (state,
    length) graph, with no string body remembered from another compile."""
    monkeypatch.setattr(strings, "BOUNDED_MIN_LENGTH", 10**6)
    monkeypatch.setattr(strings, "_PRODUCT_BUDGET", 10**6)
    monkeypatch.setattr(strings, "_BODIES", BoundedCache(256))
    structgen.clear_cache()


def test_a_long_max_length_over_a_big_pattern_is_a_bounded_graph():
    """No cap on the pattern's repetitions: the graph is the pattern's own (counting
    lengths only up to minLength), with a bound of maxLength characters."""
    [graph] = bounded_graphs(schema_to_ir(LONG))
    assert graph.bound.max == 500 and graph.num_states < 2 * 199
    assert graph.bound.need[graph.start] == 1  # one non-space character ends it
    assert graph.bound.zone_top == 500 - max(graph.bound.need)
    assert graph.bound.twin.bound is None and graph.bound.twin.edges is graph.edges
    [with_min] = bounded_graphs(schema_to_ir({**LONG, "minLength": 3}))
    assert with_min.bound.need[with_min.start] == 3


@pytest.mark.parametrize("text,valid", [
    ("Implementation", True),  # a word longer than any cap on the pattern's repetitions
    ("Cross-platform multi-disciplinary engineering and infrastructure", True),
    ("x" * 500, True), ("x" * 501, False),
    (" ".join(["w"] * 50), True), (" ".join(["w"] * 51), False),  # 50 words at most
    (" ".join(["abcdefghi"] * 49 + ["abcdefghij"]), True),  # 50 words, 500 characters
    (" ".join(["abcdefghi"] * 49 + ["abcdefghijk"]), False),  # 501
    ("", False), ("trailing ", False),
])
def test_its_language_is_the_schemas(text, valid):
    node = schema_to_ir(LONG)
    assert ir_accepts(node, json.dumps(text).encode()) is valid
    assert (jsonschema.Draft202012Validator(LONG).is_valid(text)) is valid


def test_a_bound_too_large_for_int64_compiles_and_still_binds_the_pattern(smollm2_vocab):
    """A maxLength of 1e30 is held as the largest bound the arrays take (no text is that
    long): the schema compiles, and the pattern still decides what is written."""
    schema = {"type": "string", "pattern": "^(ab)+$", "minLength": 3, "maxLength": 10**30}
    [graph] = bounded_graphs(schema_to_ir(schema))
    assert graph.bound.max == (1 << 62) - 1
    grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    assert grammar.accepts_bytes(b'"abab"') and not grammar.accepts_bytes(b'"ab"')  # minLength 3
    assert not grammar.accepts_bytes(b'"aba"')


@pytest.mark.parametrize("schema", [
    {"type": "string", "maxLength": 40, "pattern": WORDS % 5},
    {"type": "array", "maxItems": 2, "items": {"type": "string", "minLength": 2, "maxLength": 24,
                                                "pattern": "^[a-z]+(-[a-z0-9]+)*$"}},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 30, "pattern": "^[A-Za-z é]+$"},
                                      "b": {"type": "integer"}}, "required": ["a", "b"], "additionalProperties": False},
], ids=range(3))
def test_bounded_masks_equal_the_explicit_products_and_the_python_automatons(monkeypatch, smollm2_vocab, schema):
    """Short bounds, so that random walks reach them: the bounded graph gives the masks
    of the explicit (state, length) product token for token, in either automaton."""
    assert bounded_graphs(schema_to_ir(schema))
    python, bounded = _both(monkeypatch, lambda: structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0))
    explicit_products(monkeypatch)
    assert not bounded_graphs(schema_to_ir(schema))
    product = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    same_masks_on_walks(product, bounded, smollm2_vocab, walks=20, steps=40)
    same_masks_on_walks(python, bounded, smollm2_vocab, walks=8, steps=40, seed=1)
    structgen.clear_cache()  # (it holds the explicit product's grammar)


def test_twin_masks_equal_the_states_own(smollm2_vocab):
    """Random walks inside a 500-character string: wherever a state takes its twin's mask,
    that mask is the one the state's own walk computes."""
    grammar = structgen.compile_json_schema(LONG, smollm2_vocab, warm_s=0)
    twinned = twin_masks_checked(grammar, smollm2_vocab, walks=10, seed=0)
    assert twinned >= 100


def test_a_long_string_is_written_through_few_states(smollm2_vocab, smollm2_tokenizer):
    """A document of many words, token by token: each mask allows its token, the end is
    accepted, and the automaton grows by tens of states per word, not hundreds: every
    length far from the bound shares its twin's mask, so a mask's walk builds only the
    twin's states for the next word (its characters' partial UTF-8 and escape states,
    ~40). The pattern capped to fit the length, as it was lowered before, built ~340 a
    word."""
    schema = {"type": "object", "properties": {"summary": LONG}, "required": ["summary"], "additionalProperties": False}
    text = " ".join(["Implementation", "of", "cross-platform", "services,", "with", "support"] * 8)
    doc = {"summary": text}
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    written_token_by_token(grammar, smollm2_tokenizer, doc)
    jsonschema.validate(doc, schema)
    assert grammar.dfa.num_states < 80 * 48  # 48 words
