"""Covering examples (`automata.example`) and warming a grammar along one
(`CompiledGrammar.warm`, `compile_json_schema(warm_s=...)`), on the real SmolLM2 vocabulary.

An example must only ever write bytes of its grammar's language (a prefix of a sentence
at worst), and a complete one must validate; warming must change when masks are
computed, never what they are.
"""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import structgen
from structgen import warmup
from structgen.automata.dfa import DEAD
from structgen.errors import StructgenError
from tests.paths import GRAMMARS, MASKBENCH


def walk(grammar, data: bytes) -> int:
    with grammar.dfa.lock:
        return grammar.dfa.walk(grammar.dfa.start, data)


def test_examples_of_real_schemas_stay_in_the_language_and_validate(smollm2_vocab):
    paths = sorted(MASKBENCH.glob("*.json"))
    random.Random(11).shuffle(paths)
    complete = compiled = 0
    for path in paths[:80]:
        schema = json.loads(path.read_text())["schema"]
        try:
            grammar = structgen.compile_json_schema(schema, smollm2_vocab)
        except StructgenError:
            continue
        compiled += 1
        example = grammar.example()
        assert walk(grammar, example) != DEAD, (path.stem, example[:200])
        try:
            value = json.loads(example)
        except ValueError:
            continue  # stopped early (a recursive rule, an undeclared key): a prefix only
        complete += 1
        assert grammar.accepts_bytes(example), (path.stem, example[:200])
        jsonschema.validate(value, schema)
    assert compiled >= 60
    assert complete >= 0.9 * compiled, f"only {complete} of {compiled} examples complete"


def test_example_writes_every_optional_property_and_an_array_element(smollm2_vocab):
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 18}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
            "address": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        "required": ["name"],
    }
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    value = json.loads(grammar.example())
    assert list(value) == ["name", "age", "tags", "address"]
    assert isinstance(value["age"], int)  # the branch with more in it than null
    assert len(value["tags"]) >= 1 and value["address"].keys() == {"city"}
    jsonschema.validate(value, schema)


def test_example_of_a_recursive_schema_is_bounded(smollm2_vocab):
    schema = {
        "$defs": {"node": {"type": "object", "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        }, "required": ["value", "children"]}},
        "$ref": "#/$defs/node",
    }
    grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    example = grammar.example()
    assert 0 < len(example) < 4096
    assert walk(grammar, example) != DEAD


@pytest.mark.parametrize("path", sorted(GRAMMARS.glob("*.lark")) + sorted(GRAMMARS.glob("*.gbnf")),
                         ids=lambda p: p.name)
def test_examples_of_the_shipped_grammars_stay_in_the_language(path, smollm2_vocab):
    syntax = path.suffix[1:]
    grammar = structgen.compile_grammar(path.read_text(), smollm2_vocab, syntax=syntax)
    example = grammar.example()
    assert example and walk(grammar, example) != DEAD


def masks_along(grammar, tokens: list[int]) -> list[np.ndarray]:
    matcher = grammar.matcher()
    masks = []
    for token in tokens:
        mask = structgen.allocate_bitmask(1, grammar.vocab_size)
        matcher.fill_bitmask(mask, 0)
        masks.append(mask[0].copy())
        assert matcher.accept_token(token)
    return masks


def test_warming_computes_masks_ahead_without_changing_them(smollm2_vocab, smollm2_tokenizer):
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "title": {"type": "string", "maxLength": 40},
            "labels": {"type": "array", "items": {"type": "string"}},
            "owner": {"type": "object", "properties": {"login": {"type": "string"}, "site_admin": {"type": "boolean"}}},
        },
    }
    structgen.clear_cache()
    cold = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    assert not cold._tables and "warmed_states" not in cold.stats
    structgen.clear_cache()
    warm = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=5.0)
    structgen.clear_cache()
    assert warm is not cold
    # (a table may bring in the one it starts from, see tokens.near_state)
    assert warm.stats["warmed_states"] >= 8 and len(warm._tables) >= warm.stats["warmed_states"]
    text = json.dumps({"id": 7, "title": "Bug in parser", "labels": ["bug", "p1"],
                       "owner": {"login": "octocat", "site_admin": False}})
    tokens = smollm2_tokenizer.encode(text, add_special_tokens=False) + [smollm2_tokenizer.eos_token_id]
    tables_before = len(warm._tables)
    for a, b in zip(masks_along(cold, tokens), masks_along(warm, tokens), strict=True):
        assert np.array_equal(a, b)
    # the walk found most of its states already computed
    assert len(warm._tables) - tables_before < len(cold._tables)


def test_warm_stops_at_its_budget_and_where_the_data_leaves_the_language(smollm2_vocab):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    structgen.clear_cache()
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    structgen.clear_cache()
    assert grammar.warm(b'{"a": "x"}', [2, 5, 6], budget_s=0.0) == 0
    assert grammar.warm(b'{"b": "x"}', [2, 5, 6], budget_s=5.0) == 1  # after '{"' only: 'b' is no key
    assert grammar.warm(b'{"a": "x"}', [2, 5, 6], budget_s=5.0) == 2  # '{"' is computed already


def test_the_warm_walk_stops_before_a_state_of_more_items_than_its_cap(smollm2_vocab, monkeypatch):
    """A state past WARM_MAX_STATE_ITEMS ends the walk along the data (an example can
    nest where outputs seldom go, and such a state costs milliseconds to build): the
    states after it are not warmed, and decoding still builds them."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
              "required": ["a", "b"]}
    data = b'{"a": "xy", "b": 12}'
    every_offset = list(range(len(data) + 1))
    structgen.clear_cache()
    full = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    structgen.clear_cache()
    warmed_full = full.warm(data, every_offset, budget_s=5.0)
    monkeypatch.setattr(warmup, "WARM_MAX_STATE_ITEMS", 1)  # a string's body holds several
    capped = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    structgen.clear_cache()
    assert capped is not full
    warmed_capped = capped.warm(data, every_offset, budget_s=5.0)
    assert 0 < warmed_capped < warmed_full
    assert walk(capped, data) != DEAD and capped.dfa.accepting[walk(capped, data)]


def test_a_cached_grammar_is_warmed_by_the_first_call_that_asks(smollm2_vocab):
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date"}, "n": {"type": "number"}}}
    structgen.clear_cache()
    first = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    assert "warm_s" not in first.stats and not first._tables
    again = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=5.0)
    assert again is first and first.stats["warmed_states"] >= 3
    warmed = len(first._tables)
    assert structgen.compile_json_schema(schema, smollm2_vocab, warm_s=5.0) is first
    assert len(first._tables) == warmed and first.stats["warmed_states"] >= 3  # once per grammar
    structgen.clear_cache()


@pytest.mark.parametrize("bad", [-1, float("nan"), "0.5", True, [0.1]])
def test_a_bad_warm_budget_is_a_clear_error(bad, smollm2_vocab):
    with pytest.raises(StructgenError, match="warm_s must be a number of seconds"):
        structgen.compile_json_schema({"type": "integer"}, smollm2_vocab, warm_s=bad)


def test_warm_ignores_offsets_outside_the_data(smollm2_vocab):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    structgen.clear_cache()
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    structgen.clear_cache()
    assert grammar.warm(b'{"a": "x"}', [-3, 2, 99], budget_s=5.0) == 1


def test_a_given_budget_warms_along_the_example_inside_names_too(smollm2_vocab, monkeypatch):
    """The default, warm_s=None, warms nothing for a compile under WARM_FROM_COMPILE_S
    (set here above any compile's time); above it (set here to 0) it warms the example's
    boundaries and the likely token starts for the compile's own time, 1 ms at least; a
    budget given (warm_s=5) also its other bytes: the state inside a property name, where
    a token such as `{"tit` ends, has its mask before any decoding. warm_s=0 warms
    nothing."""
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["title", "n"], "additionalProperties": False}
    structgen.clear_cache()
    assert not structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)._tables
    structgen.clear_cache()
    monkeypatch.setattr(warmup, "WARM_FROM_COMPILE_S", 10.0)
    quick = structgen.compile_json_schema(schema, smollm2_vocab)
    assert quick.stats["warmed_states"] == 0 and not quick._tables
    structgen.clear_cache()
    monkeypatch.setattr(warmup, "WARM_FROM_COMPILE_S", 0.0)
    grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    structgen.clear_cache()
    assert grammar.stats["warmed_states"] >= 3 and grammar.stats["warm_s"] > 0
    generous = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=5.0)
    structgen.clear_cache()
    inside = generous.dfa.walk(generous.dfa.start, b'{"tit')
    assert inside >= 0 and inside in generous._tables
    key_start, mid_name = (grammar.dfa.walk(grammar.dfa.start, prefix) for prefix in (b'{"', b'{"tit'))
    assert key_start in grammar._tables and mid_name not in grammar._tables  # "title" is one token


def test_a_map_is_written_with_one_property(smollm2_vocab):
    """An object of undeclared properties only (additionalProperties, patternProperties)
    gets one member in the example, so that its key and value states are warmed."""
    for schema, key_ok in (
        ({"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "integer"}}}},
         lambda k: True),
        ({"type": "object", "patternProperties": {"^id_": {"type": "string"}}, "additionalProperties": False},
         lambda k: k.startswith("id_")),
    ):
        grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
        value = json.loads(grammar.example())
        assert len(value) == 1 and all(key_ok(k) for k in value)
        jsonschema.validate(value, schema)


def test_warm_takes_offsets_in_the_order_given(smollm2_vocab):
    """Boundaries first, then the other bytes: warm follows the order it is given, and
    skips offsets outside the data or past where it leaves the language."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    structgen.clear_cache()
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    structgen.clear_cache()
    assert grammar.warm(b'{"a": "x"}', [6, 2, 99, -1], budget_s=5.0) == 2
    assert set(grammar._tables) == {walk(grammar, b'{"a": '), walk(grammar, b'{"')}
    assert grammar.warm(b'{"b": "x"}', [9, 5, 2, 1], budget_s=5.0) == 1  # '{"b' leaves it: only '{' is new


JSON_TEXTS = [
    '{"ipBlock": {"cidr": "string", "except": ["string"]}, "namespaceSelector": {"matchLabels": {}}, "podSelector": 12}',
    '{"transactionTimestamp": "2022-01-01T12:00:00Z", "deviceid": "12345678901234567", "site_admin": false}',
    '{"metadata": {"file1.md": {"title": "Read me", "tags": ["docs", "examples"]}, "points": -200.5}}',
]


@pytest.mark.parametrize("text", JSON_TEXTS, ids=range(len(JSON_TEXTS)))
def test_likely_token_starts_are_where_the_tokenizer_cuts_json(smollm2_vocab, smollm2_tokenizer, text):
    """Cut greedily into the longest tokens, afresh at each JSON boundary, a JSON
    document falls mostly into the SmolLM2 tokenizer's own tokens (not always: BPE
    cuts "Timestamp" into "Tim" "estamp", the greedy cut into "Times" "ta" "mp"): its
    warm offsets start with the states a decode of it visits."""
    from structgen.automata.token_trie import token_trie
    from structgen.warmup import json_boundaries, warm_offsets

    data = text.encode()
    starts, offset = [], 0
    for token in smollm2_tokenizer.encode(text, add_special_tokens=False):
        starts.append(offset)
        offset += len(smollm2_vocab.token_bytes[token])
    trie = token_trie(smollm2_vocab)
    greedy = trie.token_starts(data, json_boundaries(data))
    assert greedy[-1] == len(data) and greedy == sorted(set(greedy))
    assert len(set(starts) - set(greedy)) <= 0.05 * len(starts)
    assert len(greedy) <= len(starts) + 2
    offsets = warm_offsets(data, trie)
    assert sorted(offsets) == list(range(len(data) + 1))
    assert set(offsets[: len(greedy)]) == set(greedy)


def test_token_starts_restart_at_each_boundary(smollm2_vocab):
    """A restart inside a long token cuts it there; bytes no token starts with count
    as one each."""
    from structgen.automata.token_trie import token_trie

    trie = token_trie(smollm2_vocab)
    assert trie.token_starts(b"information", []) == [0, 11]
    cut = trie.token_starts(b"information", [5])
    assert cut[:2] == [0, 5] and cut[1:] == [5 + i for i in trie.token_starts(b"mation", [])]
    assert trie.token_starts(b"\xff\xfe", []) == [0, 1, 2]
    assert trie.token_starts(b"", []) == [0]


def test_states_warmed_in_one_call_get_the_masks_they_get_one_by_one(smollm2_vocab):
    """`CompiledGrammar.warm` computes the plain states of a chunk in one compiled call
    (`FlatTokens.plain_tables`) and goes on from what it found for the others (strings,
    loops, counted strings with a twin, keys); every mask must be the one a state gets
    alone. Two grammars of one schema number their states alike only by chance, so the
    masks are compared at each offset of the example."""
    from structgen.automata import flat_tokens

    schema = {
        "type": "object",
        "properties": {
            "kind": {"enum": ["alpha", "beta", "gamma"]},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3,}$"},
            "note": {"type": "string"},
            "summary": {"type": "string", "minLength": 3, "maxLength": 300},
            "count": {"type": "integer", "minimum": -5, "maximum": 5000},
            "ratio": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string", "format": "date"}},
        },
        "required": ["kind", "code"],
    }
    grammars = []
    for _ in range(2):
        structgen.clear_cache()
        grammars.append(structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0))
    structgen.clear_cache()
    batched, alone = grammars
    example = batched.example()
    assert json.loads(example)
    offsets = range(len(example) + 1)
    with batched.dfa.lock:
        states = [batched.dfa.walk(batched.dfa.start, example[:i]) for i in offsets]
    with batched._lock, batched.dfa.lock:
        found = batched.dfa.plain_tables(batched._trie, sorted(set(states)))
    kinds = {t[0] if isinstance(t, tuple) else "plain" for t in found}
    assert {"plain", flat_tokens.NOT_PLAIN_BODY, flat_tokens.NOT_PLAIN_TWIN} <= kinds, kinds
    assert kinds & {flat_tokens.NOT_PLAIN_LOOP, flat_tokens.NOT_PLAIN_FREE, flat_tokens.NOT_PLAIN_WIDE}, kinds
    assert batched.warm(example, offsets, budget_s=60.0) == len(set(states))
    for i in offsets:
        with alone.dfa.lock:
            state = alone.dfa.walk(alone.dfa.start, example[:i])
        assert np.array_equal(batched.tokens_of(states[i]).words, alone.tokens_of(state).words), example[:i]
