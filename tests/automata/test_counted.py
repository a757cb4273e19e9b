"""Strings that count their characters under a maxLength -- a pattern's bounded graph
(`ir.Bound`), a plain string's Repeat of characters: a state whose count cannot bind
within a token takes the mask of its twin state, which does not count
(`FlatDFA.twin_of`). That mask must be exactly the one the state's own walk computes,
outputs must still validate, and the automaton must stay small where a product of
(pattern state, count) states made it build thousands of rows per mask. The bounded
graph's own language: tests/automata/test_bounded_graph.py."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import structgen
from structgen.automata.dfa import DEAD
from structgen.grammar import ir
from structgen.grammar.json_schema import schema_to_ir

WORDS = "^(?:\\S+\\s+){0,5}\\S+$"
SCHEMAS = [
    {"type": "object", "properties": {
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 120, "pattern": WORDS}},
        "name": {"type": "string", "minLength": 2, "maxLength": 100, "pattern": "^[A-Za-z é]+$"}},
     "required": ["tags", "name"]},
    {"anyOf": [{"type": "string", "maxLength": 150, "pattern": "^[a-z]+(-[a-z0-9]+)*$"},
               {"type": "string", "maxLength": 90, "minLength": 3, "pattern": "^\\w+$"}]},
    {"type": "object", "properties": {  # plain strings: a Repeat of characters and its twin
        "title": {"type": "string", "minLength": 2, "maxLength": 200},
        "notes": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 150}}},
     "required": ["title", "notes"], "additionalProperties": False},
]


def graphs_where(node: ir.Node, keep) -> list[ir.Graph]:
    """The Graphs reachable from `node` for which `keep(graph)` holds."""
    found, seen, pending = [], set(), [node]
    while pending:
        n = pending.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, ir.Graph):
            if keep(n):
                found.append(n)
            pending += [lab for _, _, lab in n.edges if lab is not None]
        elif isinstance(n, (ir.Concat, ir.Alt)):
            pending += list(n.items)
        elif isinstance(n, ir.Repeat):
            pending.append(n.item)
        elif isinstance(n, ir.Ref):
            pending.append(n.target)
    return found


def bounded_graphs(node: ir.Node) -> list[ir.Graph]:
    return graphs_where(node, lambda graph: graph.bound is not None)


def test_a_bounded_graph_describes_its_zone():
    """A word-count pattern under maxLength 120 is the pattern's graph with a bound of 120
    characters, and a twin without it on the same edges; its zone ends where the state
    farthest from an end still could not reach the bound."""
    [graph] = bounded_graphs(schema_to_ir({"type": "string", "maxLength": 120, "pattern": WORDS}))
    # a state inside a word of the group still needs a space and a word: two characters
    assert graph.bound.max == 120 and graph.bound.zone_top == 118
    assert graph.bound.twin.edges is graph.edges and graph.bound.twin.bound is None
    # with a minLength the graph counts up to it: from the start, 3 characters to an end
    [with_min] = bounded_graphs(schema_to_ir({"type": "string", "minLength": 3, "maxLength": 120, "pattern": WORDS}))
    assert with_min.bound.zone_top == 117 and with_min.bound.need[with_min.start] == 3
    assert with_min.num_states <= 4 * graph.num_states
    # short bounds leave no zone to share: the explicit (state, length) graph, no bound
    assert not bounded_graphs(schema_to_ir({"type": "string", "maxLength": 12, "pattern": WORDS}))


def test_bounded_plain_string_has_an_unbounded_twin():
    """A string without a pattern is a Repeat of characters; under a maxLength its twin
    is the same character from minLength times on, without a bound."""
    body = schema_to_ir({"type": "string", "minLength": 2, "maxLength": 200}).items[1]
    assert isinstance(body, ir.Repeat) and (body.min, body.max) == (2, 200)
    assert body.twin.item is body.item and (body.twin.min, body.twin.max) == (2, None)
    assert schema_to_ir({"type": "string", "maxLength": 12}).items[1].twin is None


def twin_masks_checked(grammar, vocab, walks: int, seed: int, steps: int = 40) -> int:
    """Random walks over allowed tokens: wherever a state has a twin, the mask the matcher
    gives (the twin's) must equal the one the state's own walk computes. Returns how many
    such states the walks met."""
    rng = random.Random(seed)
    mask = structgen.allocate_bitmask(1, vocab.vocab_size)
    twinned = 0
    for _ in range(walks):
        matcher = grammar.matcher()
        for _ in range(steps):
            state = matcher._stack[-1]
            if state < 0:
                break
            matcher.fill_bitmask(mask, 0)
            if grammar.dfa.twin_of(state, grammar._trie.longest) >= 0:
                own = grammar.dfa.state_tokens(grammar._trie, state).words
                assert np.array_equal(mask[0, : own.size], own), f"state {state}: twin mask differs"
                twinned += 1
            token = int(rng.choice(matcher.allowed_token_ids().tolist()))
            if token in grammar.eos_token_ids:
                break
            assert matcher.accept_token(token)
    return twinned


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_twin_masks_equal_the_states_own(smollm2_vocab, index):
    """Random walks over allowed tokens: wherever a state has a twin, the mask the matcher
    gives (the twin's) equals the one the state's own walk computes, token for token."""
    grammar = structgen.compile_json_schema(SCHEMAS[index], smollm2_vocab, warm_s=0)
    assert grammar.dfa.flat.has_counted
    twinned = twin_masks_checked(grammar, smollm2_vocab, walks=25, seed=index)
    assert twinned >= 20  # the walks met the zone


def written_token_by_token(grammar, tokenizer, doc) -> None:
    """`doc`'s JSON text and EOS: each token in the mask before it, and accepted; the
    matcher ends terminated."""
    matcher = grammar.matcher()
    mask = structgen.allocate_bitmask(1, grammar.vocab_size)
    for token in tokenizer.encode(json.dumps(doc), add_special_tokens=False) + [tokenizer.eos_token_id]:
        matcher.fill_bitmask(mask, 0)
        assert (mask[0, token >> 5] >> (token & 31)) & 1
        assert matcher.accept_token(token)
    assert matcher.is_terminated()


def test_outputs_through_twins_validate(smollm2_vocab, smollm2_tokenizer):
    """Documents whose strings sit in the zone are accepted token by token (the twin's
    masks come without rows: the matcher follows each token's bytes itself), and the
    automaton stays small: every count shares its pattern state's mask."""
    schema = SCHEMAS[0]
    doc = {"tags": ["Feature one two", "Benefit 2", "Dédié à la sécurité des données"], "name": "Ann Lee"}
    structgen.clear_cache()  # a fresh automaton (the walks above grew the cached one)
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    written_token_by_token(grammar, smollm2_tokenizer, doc)
    jsonschema.validate(doc, schema)
    # one mask's walk built ~1,800 states without twins; with them, this whole document
    # builds ~1,000
    assert grammar.dfa.num_states < 1_500
    # too many words: rejected (the pattern still binds through the twin)
    matcher = grammar.matcher()
    bad = json.dumps({"tags": ["a b c d e f g"], "name": "Ann"})
    assert not all(matcher.accept_token(t) for t in smollm2_tokenizer.encode(bad, add_special_tokens=False))


def test_no_twin_where_the_count_may_bind(smollm2_vocab):
    """The zone ends where the longest token could reach maxLength: a state there keeps
    its own mask. (The zone's top is 98 here, see above; a state between characters
    counts the next one already -- its items continue at the state after it -- so the
    last string length in the zone is 98 less the longest token, less one.)"""
    schema = {"type": "string", "maxLength": 100, "pattern": WORDS}
    assert bounded_graphs(schema_to_ir(schema))[0].bound.zone_top == 98
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    longest = grammar._trie.longest
    assert longest < 98  # SmolLM2: 81 bytes
    dfa = grammar.dfa
    last = 98 - longest - 1
    assert dfa.twin_of(dfa.walk(dfa.start, b'"'), longest) >= 0
    assert dfa.twin_of(dfa.walk(dfa.start, b'"' + b"x" * last), longest) >= 0
    assert dfa.twin_of(dfa.walk(dfa.start, b'"' + b"x" * (last + 1)), longest) == DEAD


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_short_twin_masks_equal_the_states_own(smollm2_vocab, index):
    """Past the zone of the longest token but within that of SHORT_TWIN_BYTES, a state
    takes its twin's mask for short tokens and walks the long ones without building
    rows: random walks find its mask equal, token for token, to its own full walk."""
    from structgen.automata.flat_tokens import SHORT_TWIN_BYTES, SHORT_TWIN_CUTS

    grammar = structgen.compile_json_schema(SCHEMAS[index], smollm2_vocab, warm_s=0)
    rng = random.Random(100 + index)
    mask = structgen.allocate_bitmask(1, smollm2_vocab.vocab_size)
    longest, short, cut_longer = grammar._trie.longest, 0, 0
    for _ in range(40):
        matcher = grammar.matcher()
        for _ in range(60):
            state = matcher._stack[-1]
            if state < 0:
                break
            matcher.fill_bitmask(mask, 0)
            dfa = grammar.dfa
            if dfa.twin_of(state, SHORT_TWIN_BYTES) >= 0 and dfa.twin_of(state, longest) < 0:
                own = dfa.state_tokens(grammar._trie, state).words
                assert np.array_equal(mask[0, : own.size], own), f"state {state}: short-twin mask differs"
                short += 1
                cut_longer += dfa.twin_of(state, min(SHORT_TWIN_CUTS)) >= 0
            allowed = matcher.allowed_token_ids()
            # mostly short tokens, so that strings grow into the zone a few bytes at a time
            picks = [t for t in allowed.tolist() if len(smollm2_vocab.token_bytes[t] or b"") <= 4] or allowed.tolist()
            token = int(rng.choice(picks))
            if token in grammar.eos_token_ids:
                break
            assert matcher.accept_token(token)
    assert short >= 10  # the walks met the short-twin zone
    assert cut_longer >= 5  # ... and states whose twin holds for longer tokens than SHORT_TWIN_BYTES


def test_a_word_count_string_past_the_zone_builds_few_states(smollm2_vocab, smollm2_tokenizer):
    """The mask of a state in a word-count string a few words long, where the count may
    bind within the longest token: the short tokens come from its twin, and the walk of
    the long ones builds no row (it built ~3,000 states when it built the row of each
    state on their paths, one per count of each multi-byte character and escape)."""
    schema = {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 100,
                                                         "pattern": "^(?:\\S+\\s+){0,9}\\S+$"}}
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    matcher = grammar.matcher()
    mask = structgen.allocate_bitmask(1, smollm2_vocab.vocab_size)
    for token in smollm2_tokenizer.encode('["Highly skilled team', add_special_tokens=False):
        matcher.fill_bitmask(mask, 0)
        assert matcher.accept_token(token)
    before = grammar.dfa.num_states
    matcher.fill_bitmask(mask, 0)
    assert grammar.dfa.num_states - before < 600
    for text in ('",', '"]', " and more"):
        token = smollm2_tokenizer.encode(text, add_special_tokens=False)[0]
        assert (mask[0, token >> 5] >> (token & 31)) & 1, text
