"""The automata core and the Matcher interface on the real SmolLM2 vocabulary.

Masks are checked against a brute-force oracle: every token's bytes walked one by one
through the DFA in plain Python.
"""

from __future__ import annotations

import json
import random
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structgen
from structgen.automata.dfa import LazyDFA
from structgen.automata.item_sets import ACCEPT
from structgen.automata.nfa import LazyNFA, LexemeSpace
from structgen.grammar import ir
from structgen.grammar.acceptor import ir_accepts
from structgen.matcher import CompiledGrammar


def grammar_of(node: ir.Node, vocab) -> CompiledGrammar:
    return CompiledGrammar("test", "", LazyDFA(LazyNFA(node)), vocab)


def oracle_allowed(grammar: CompiledGrammar, sid: int, vocab) -> set[int]:
    """Tokens whose bytes keep the DFA alive from `sid`, plus EOS when accepting."""
    allowed = set()
    for tid, data in enumerate(vocab.token_bytes):
        if not data or tid in vocab.special_ids:
            continue
        if grammar.dfa.walk(sid, data) >= 0:
            allowed.add(tid)
    if grammar.dfa.accepting[sid]:
        allowed |= set(vocab.eos_token_ids)
    return allowed


def allowed_at(grammar: CompiledGrammar, sid: int) -> set[int]:
    """The token ids a matcher standing in DFA state `sid` allows (through fill_bitmask)."""
    matcher = grammar.matcher()
    matcher._stack[-1] = sid
    return set(matcher.allowed_token_ids().tolist())


def assert_masks_match_oracle(grammar: CompiledGrammar, states, vocab) -> None:
    """Each state's mask, through fill_bitmask, is the oracle's, and so is its count."""
    for sid in dict.fromkeys(states):
        got = allowed_at(grammar, sid)
        assert got == oracle_allowed(grammar, sid, vocab), f"state {sid}"
        assert grammar.tokens_of(sid).num_allowed == len(got)


JSONISH = ir.seq(
    ir.lit('{"name": "'),
    ir.rep(ir.alt(ir.byteset([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7E)]), ir.lit("\\n")), 0, None),
    ir.lit('", "age": '),
    ir.alt(ir.lit("0"), ir.seq(ir.byte_range(0x31, 0x39), ir.rep(ir.byte_range(0x30, 0x39), 0, 3))),
    ir.lit("}"),
)


def test_masks_equal_bruteforce_oracle(smollm2_vocab):
    grammar = grammar_of(JSONISH, smollm2_vocab)
    text = b'{"name": "Ann \\n Lee", "age": 42}'
    sid = grammar.dfa.start
    visited = [sid]
    for b in text:
        sid = grammar.dfa.walk(sid, bytes([b]))
        visited.append(sid)
    assert_masks_match_oracle(grammar, visited, smollm2_vocab)


def test_accept_rollback_and_eos(smollm2_vocab, smollm2_tokenizer):
    grammar = grammar_of(JSONISH, smollm2_vocab)
    m = grammar.matcher()
    text = '{"name": "Bob", "age": 7}'
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    eos = smollm2_vocab.eos_token_ids[0]
    masks = []
    for tid in ids:
        assert not m.is_accepting()
        masks.append(m.allowed_token_ids())
        assert eos not in masks[-1]
        assert m.accept_token(tid)
    assert m.is_accepting()
    assert eos in m.allowed_token_ids()
    # rollback is exact: masks are reproduced step by step
    m.rollback(len(ids))
    for tid, mask in zip(ids, masks):
        assert np.array_equal(m.allowed_token_ids(), mask)
        assert m.accept_token(tid)
    assert m.accept_token(eos)
    assert m.is_terminated()
    assert set(m.allowed_token_ids().tolist()) == set(smollm2_vocab.eos_token_ids)
    m.rollback(1)
    assert m.num_accepted == len(ids) and m.is_accepting()
    # complete and nothing but EOS can follow: terminated without EOS too
    assert m.is_terminated()
    m.reset()
    assert m.num_accepted == 0


def test_disallowed_token_leaves_state_unchanged(smollm2_vocab, smollm2_tokenizer):
    grammar = grammar_of(JSONISH, smollm2_vocab)
    m = grammar.matcher()
    bad = smollm2_tokenizer.encode("[", add_special_tokens=False)[0]
    before = m.allowed_token_ids()
    assert not m.accept_token(bad)
    assert not m.accept_token(-1)
    assert not m.accept_token(10**9)
    assert m.num_accepted == 0
    assert np.array_equal(before, m.allowed_token_ids())


def test_forced_bytes(smollm2_vocab, smollm2_tokenizer):
    grammar = grammar_of(JSONISH, smollm2_vocab)
    m = grammar.matcher()
    assert m.forced_bytes() == b'{"name": "'
    for tid in smollm2_tokenizer.encode('{"name": "X"', add_special_tokens=False):
        assert m.accept_token(tid)
    assert m.forced_bytes() == b', "age": '
    assert m.accept_bytes(m.forced_bytes())
    assert m.forced_bytes() == b""
    m.rollback(1)
    assert m.forced_bytes() == b', "age": '


def test_padded_vocab_and_special_tokens_never_allowed(smollm2_vocab):
    grammar = grammar_of(ir.rep(ir.byte_range(0, 255), 0, None), smollm2_vocab)
    mask = structgen.allocate_bitmask(2, smollm2_vocab.vocab_size + 100)
    mask[:] = -1
    grammar.matcher().fill_bitmask(mask, 1)
    bits = np.unpackbits(mask[1].view(np.uint8), bitorder="little")
    allowed = set(np.flatnonzero(bits).tolist())
    assert all(t < smollm2_vocab.vocab_size for t in allowed)
    specials = set(smollm2_vocab.special_ids) - set(smollm2_vocab.eos_token_ids)
    assert not (allowed & specials)
    assert set(smollm2_vocab.eos_token_ids) <= allowed  # the empty string is accepted


def test_walk_random_tokens_matches_byte_level(smollm2_vocab):
    """Driving random allowed tokens keeps the byte string inside the language."""
    grammar = grammar_of(JSONISH, smollm2_vocab)
    rng = random.Random(0)
    for _ in range(20):
        m = grammar.matcher()
        out = b""
        for _ in range(40):
            allowed = m.allowed_token_ids().tolist()
            choice = rng.choice(allowed)
            if choice in smollm2_vocab.eos_token_ids:
                break
            assert m.accept_token(choice)
            out += smollm2_vocab.token_bytes[choice]
        if m.is_accepting():
            assert ir_accepts(JSONISH, out)
        else:
            assert grammar.dfa.walk(grammar.dfa.start, out) >= 0


def test_concurrent_matchers_agree(smollm2_vocab, smollm2_tokenizer):
    grammar = grammar_of(JSONISH, smollm2_vocab)
    ids = smollm2_tokenizer.encode('{"name": "concurrent test", "age": 123}', add_special_tokens=False)
    results = []

    def run():
        m = grammar.matcher()
        masks = []
        for tid in ids:
            masks.append(m.allowed_token_ids())
            assert m.accept_token(tid)
        results.append(masks)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for other in results[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(results[0], other))


def test_budget_is_a_clear_error(smollm2_vocab):
    from structgen.compiler import _build

    huge = ir.rep(ir.lit("abcdefgh"), 0, 10_000_000)
    with pytest.raises(structgen.GrammarTooLargeError, match="max_states"):
        _build("regex", "x", lambda _d: huge, smollm2_vocab, 1_000_000, 1000, 5)


def test_dfa_state_budget_while_decoding(smollm2_vocab, smollm2_tokenizer):
    """A counter that outgrows the DFA state budget is a clear error, not a hang."""
    from structgen.compiler import _build

    counted = ir.rep(ir.byte_range(0x61, 0x7A), 0, 100_000)
    grammar = _build("regex", "x", lambda _d: counted, smollm2_vocab, 10**9, 50, 5)
    m = grammar.matcher()
    with pytest.raises(structgen.GrammarTooLargeError, match="states"):
        for tid in smollm2_tokenizer.encode("abcdefghij" * 20, add_special_tokens=False):
            assert m.accept_token(tid)


def test_empty_language_is_refused(smollm2_vocab):
    with pytest.raises(structgen.StructgenError):
        from structgen.compiler import _build

        _build("regex", "x", lambda _d: ir.seq(ir.lit("a"), ir.NOTHING), smollm2_vocab, 1000, 1000, 5)


def test_choice(smollm2_vocab, smollm2_tokenizer):
    grammar = structgen.compile_choice(["positive", "negative", "neutral"], smollm2_vocab)
    assert structgen.compile_choice(["positive", "negative", "neutral"], smollm2_vocab) is grammar
    for word in ["positive", "negative", "neutral"]:
        m = grammar.matcher()
        for tid in smollm2_tokenizer.encode(word, add_special_tokens=False):
            assert m.accept_token(tid)
        assert m.is_accepting() and m.is_terminated()
    m = grammar.matcher()
    for tid in smollm2_tokenizer.encode("neu", add_special_tokens=False):
        assert m.accept_token(tid)
    assert m.forced_bytes() == b"tral"
    with pytest.raises(structgen.StructgenError):
        structgen.compile_choice([], smollm2_vocab)
    with pytest.raises(structgen.StructgenError):
        structgen.compile_choice("abc", smollm2_vocab)


def test_loop_slice_masks_equal_bruteforce_oracle(smollm2_vocab, monkeypatch):
    """Every JSON string body loops on the same bytes: once that loop set has been met
    twice, a string state's mask is its LoopSlice (the packed tokens made only of those
    bytes) plus a walk of the trie of the other tokens. It must equal the oracle. (The
    strings have a minLength: a string without bounds takes its body's tables instead,
    see the next test.)"""
    import json

    string = {"type": "string", "minLength": 1}
    schema = {"type": "object", "properties": {k: string for k in "abc"}, "required": list("abc")}
    text = json.dumps({"a": "x y", "b": 'é"q', "c": "z"}).encode()

    def string_states(grammar):
        sid, visited = grammar.dfa.start, []
        for b in text:
            sid = grammar.dfa.walk(sid, bytes([b]))
            visited.append(sid)
        for sid in visited:
            grammar.dfa.expand(sid)  # its loop set is known once its row is built
        return [sid for sid in dict.fromkeys(visited) if grammar.dfa.loops[sid].any()]

    for _ in range(2):  # the second grammar meets a loop set already sighted: its slice is made
        structgen.clear_cache()
        grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
        states = string_states(grammar)
        for sid in states:
            assert allowed_at(grammar, sid) == oracle_allowed(grammar, sid, smollm2_vocab), f"state {sid}"
    grammar._trie.wait_for_slices()
    structgen.clear_cache()  # a third grammar's masks are computed with the slices made
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    states = string_states(grammar)
    assert len(states) >= 3
    for sid in states:
        assert grammar._trie.loop_slice(grammar.dfa.loops[sid]) is not None, f"state {sid} walked the whole trie"
        assert allowed_at(grammar, sid) == oracle_allowed(grammar, sid, smollm2_vocab), f"state {sid}"
    # Without a slice (a loop set met once, or one that does not pay), a looping state's
    # mask is a walk of the whole trie, in the same compiled call.
    monkeypatch.setattr(grammar._trie, "loop_slice", lambda loops: None)
    structgen.clear_cache()
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    for sid in string_states(grammar):
        assert allowed_at(grammar, sid) == oracle_allowed(grammar, sid, smollm2_vocab), f"state {sid}"


def test_string_body_masks_equal_bruteforce_oracle(smollm2_vocab):
    """A state inside a JSON string without bounds (a string value, the name of an
    undeclared property) takes its mask from its vocabulary's BodyExits -- the tokens
    that stay inside or close the string there, and a walk of what the others read
    after the closing quote -- without building its own row. It must equal the oracle,
    and so must a state where a string body is one branch among others, which cannot
    take it (checked by that path: its row is built)."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"anyOf": [{"type": "string"}, {"type": "string", "pattern": "^x+$"}]},
                       "c": {"type": "array", "items": {"type": "string"}}},
        "required": ["a", "b", "c"],
    }
    text = json.dumps({"a": 'é "q\\ 中 🙂', "b": "xx", "c": ["", "ü"], "undeclared": "v"}, ensure_ascii=False).encode()
    structgen.clear_cache()
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    visited = [int(s) for s in grammar.dfa.path(grammar.dfa.start, text)]
    assert min(visited) >= 0
    bodies, others = [], []
    for sid in dict.fromkeys(visited):
        (bodies if grammar.dfa.body_exit(sid) >= 0 else others).append(sid)
    # "a"'s body, the strings of "c" (one state for both), the undeclared name once it
    # has left the declared names, and its value; not "b"'s
    b_state = visited[text.index(b'"b": "') + len(b'"b": "x')]
    assert len(bodies) == 4 and b_state in others
    assert_masks_match_oracle(grammar, bodies + others, smollm2_vocab)
    # a matcher follows allowed tokens from a body state whose row was never built
    start = visited[text.index(b'"a": "') + len(b'"a": "')]
    assert start in bodies
    allowed = sorted(allowed_at(grammar, start))
    for tid in random.Random(0).sample(allowed, 200):
        matcher = grammar.matcher()
        matcher._stack[-1] = start
        assert matcher.accept_token(tid)
        assert matcher._stack[-1] == grammar.dfa.walk(start, smollm2_vocab.token_bytes[tid]) >= 0


def test_tokens_in_a_string_are_followed_without_a_compiled_call(monkeypatch, smollm2_vocab, smollm2_tokenizer):
    """A token from a state inside a string body whose row is not built (a body state
    first met at a token boundary) is followed in Python: through the bytes the state
    loops on, found from its items when its mask was made, and its closing quote, whose
    state the mask computation found. Only a byte outside both (an escape, a multi-byte
    character) would need `dfa.walk`. Every state reached equals the one `dfa.path`
    gives over the same bytes."""
    from structgen.automata.flat import FlatDFA

    schema = {"type": "object", "properties": {"note": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["note", "n"], "additionalProperties": False}
    head, rest = '{"note": "', 'the quick brown fox jumps over the lazy dog, again and again", "n": 7}'
    ids = smollm2_tokenizer.encode(rest, add_special_tokens=False)
    structgen.clear_cache()
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
    body = grammar.dfa.walk(grammar.dfa.start, head.encode())  # (a walk builds no row)
    assert body >= 0 and not grammar.dfa.expanded[body]
    walked_from = []
    walk = FlatDFA.walk
    monkeypatch.setattr(FlatDFA, "walk", lambda dfa, sid, data: walked_from.append(sid) or walk(dfa, sid, data))
    matcher = grammar.matcher()
    matcher._stack[-1] = body
    closing = 0
    for tid in ids:
        table = grammar.tokens_of(matcher._stack[-1])  # the mask first, as a decoder asks
        closing += table.closed >= 0 and b'"' in smollm2_vocab.token_bytes[tid]
        assert matcher.accept_token(tid)
    assert matcher.is_accepting() and closing == 1
    assert walked_from == [] and not grammar.dfa.expanded[body]
    monkeypatch.setattr(FlatDFA, "walk", walk)
    path = grammar.dfa.path(body, rest.encode())
    ends = np.cumsum([len(smollm2_vocab.token_bytes[t]) for t in ids])
    assert matcher._stack[1:] == [int(path[end]) for end in ends]

def _abcd_trie():
    """A TokenTrie of the 20 words of one or two letters of "abcd" (id 20: EOS)."""
    import itertools

    from structgen.automata.token_trie import TokenTrie

    words = sorted({bytes(p) for n in (1, 2) for p in itertools.product(b"abcd", repeat=n)})
    return TokenTrie.of_tokens([(w, i) for i, w in enumerate(words)], len(words) + 1, [len(words)])


def _loop_bits(letters: bytes):
    """A loop set (4 x u64) of these bytes."""
    import numpy as np

    bits = np.zeros(4, dtype=np.uint64)
    for b in letters:
        bits[b // 64] |= np.uint64(1) << np.uint64(b % 64)
    return bits


def test_loop_slices_are_bounded(monkeypatch):
    """A server meeting ever new loop sets keeps at most LOOP_SLICE_MAX_BUILT slices and
    LOOP_SLICE_MAX_SIGHTINGS counts; past the cap a loop set simply gets no slice."""
    import itertools

    from structgen.automata import token_trie as tt

    monkeypatch.setattr(tt, "LOOP_SLICE_MIN_TOKENS", 1)
    monkeypatch.setattr(tt, "LOOP_SLICE_MAX_BUILT", 2)
    monkeypatch.setattr(tt, "LOOP_SLICE_MAX_SIGHTINGS", 3)
    trie = _abcd_trie()
    for letters in (b"ab", b"ab", b"bc", b"bc", b"cd"):
        trie.loop_slice(_loop_bits(letters))
    assert trie.loop_slice(_loop_bits(b"cd")) is None  # seen twice, but two slices exist already
    trie.wait_for_slices()
    built = [s for s in trie._slices.values() if s is not None]
    assert len(built) == 2
    assert trie.loop_slice(_loop_bits(b"ab")).count == 6  # "a", "b", "aa", "ab", "ba", "bb"
    for letters in itertools.combinations(b"abcdefgh", 3):  # 56 one-off loop sets
        assert trie.loop_slice(_loop_bits(bytes(letters))) is None
    assert len(trie._sightings) <= 3


def test_a_loop_slice_is_made_off_the_step(monkeypatch):
    """A step that sees a loop set for the second time asks for its slice and walks on
    without it; the slice is made on the background thread, and used once made."""
    import threading

    from structgen.automata import offstep
    from structgen.automata import token_trie as tt

    monkeypatch.setattr(tt, "LOOP_SLICE_MIN_TOKENS", 1)
    trie = _abcd_trie()
    gate = threading.Event()
    offstep.executor().submit(gate.wait)  # the background thread is busy until the gate opens
    try:
        sightings = [trie.loop_slice(_loop_bits(b"ab")) for _ in range(3)]
    finally:
        gate.set()
    assert sightings == [None, None, None]  # none of them waited for the slice
    trie.wait_for_slices()
    assert trie.loop_slice(_loop_bits(b"ab")).count == 6


def test_loop_slices_hold_a_bounded_number_of_other_tokens(monkeypatch):
    """The tries of the tokens outside the slices built hold LOOP_SLICE_MAX_REST_TOTAL
    tokens at most, however few slices there are."""
    from structgen.automata import token_trie as tt

    monkeypatch.setattr(tt, "LOOP_SLICE_MIN_TOKENS", 1)
    monkeypatch.setattr(tt, "LOOP_SLICE_MAX_REST_TOTAL", 20)
    trie = _abcd_trie()
    for letters in (b"abc", b"abc", b"ab", b"ab"):
        trie.loop_slice(_loop_bits(letters))
    trie.wait_for_slices()
    first = trie.loop_slice(_loop_bits(b"abc"))
    assert first is not None and first.rest.token_ids.size == 20 - 12  # "d" and what has a "d"
    assert trie.loop_slice(_loop_bits(b"ab")) is None  # its 14 other tokens would pass 20
    assert trie._rest_built == 8


def test_counted_pattern_class_runs_equal_bruteforce_oracle(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """A pattern's counted class of letters and digits (62 bytes, `[0-9A-Za-z]{8}`) is a
    counted run too: once its LoopSlice is built (the trie of the 33k other tokens, in
    compiled code), each position's mask takes the class's tokens by length and walks
    the others. Every visited state's mask must equal the oracle, runs shorter than
    RUN_MAX included, and the instance must be accepted token by token."""
    import json

    from structgen.automata import tokens as tk

    runs = []
    real = tk.run_of
    monkeypatch.setattr(tk, "run_of", lambda *a: (lambda r: runs.append(r and r[1]) or r)(real(*a)))
    schema = {"type": "object", "properties": {
        "key": {"type": "string", "pattern": "^[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-[a-z]{2,20}$"}}, "required": ["key"]}
    text = json.dumps({"key": "a1B2c3D4-9Zz0-abcdefghijklmnopq"})
    for _ in range(2):  # the second grammar finds the class's LoopSlice built
        runs.clear()
        structgen.clear_cache()
        grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
        visited = walk_text(grammar, text)
        for sid in dict.fromkeys(visited):
            grammar.tokens_of(sid)
    lengths = [n for n in runs if n is not None]
    assert 8 in lengths and 4 in lengths, lengths
    assert_masks_match_oracle(grammar, visited, smollm2_vocab)
    m = grammar.matcher()
    for tid in smollm2_tokenizer.encode(text, add_special_tokens=False):
        assert m.accept_token(tid)
    assert m.is_accepting()


def test_counted_run_masks_equal_bruteforce_oracle(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """The characters of a string with a maxLength lead from one count's state to the
    next: no loop, but a counted run (tokens.run_of), whose tokens made only of plain
    characters come from the LoopSlice by length. Every visited state's mask must equal
    the oracle -- runs cut short by the bound, runs longer than RUN_MAX (whose longer
    tokens are walked), several counts advancing together (anyOf) -- the shortcut must
    have been taken, and tokens accepted through it must advance to the right state."""
    import json

    from structgen.automata import tokens as tk

    runs = []
    real = tk.run_of
    monkeypatch.setattr(tk, "run_of", lambda *a: (lambda r: runs.append(r and r[1]) or r)(real(*a)))
    schema = {
        "type": "object",
        "properties": {
            "warm": {"type": "string"},
            "long": {"type": "string", "maxLength": 40},
            "short": {"type": "string", "minLength": 3, "maxLength": 12},
            "either": {"anyOf": [{"type": "string", "maxLength": 9},
                                 {"type": "string", "minLength": 5, "maxLength": 30}]},
        },
        "required": ["warm", "long", "short", "either"],
    }
    texts = [
        json.dumps({"warm": "a body", "long": "forty characters, 'quoted' and \u00e9 x", "short": "twelve chars",
                    "either": "a string past nine"}),
        json.dumps({"warm": "", "long": "", "short": "abc", "either": "\"q\" é"}, ensure_ascii=False),
    ]
    for _ in range(2):  # the second grammar finds the string body's LoopSlice built
        structgen.clear_cache()
        grammar = structgen.compile_json_schema(schema, smollm2_vocab)
        visited = [sid for text in texts for sid in walk_text(grammar, text)]
        for sid in dict.fromkeys(visited):
            grammar.tokens_of(sid)
    lengths = [n for n in runs if n is not None]
    assert tk.RUN_MAX in lengths and any(n < tk.RUN_MAX for n in lengths), lengths
    assert_masks_match_oracle(grammar, visited, smollm2_vocab)
    for text in texts:
        m = grammar.matcher()
        for tid in smollm2_tokenizer.encode(text, add_special_tokens=False):
            assert m.accept_token(tid)
        assert m.is_accepting()
        assert grammar.accepts_bytes(text.encode())


def test_free_key_masks_equal_bruteforce_oracle(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """Inside a key of an object that allows undeclared properties, any plain ASCII text
    goes on (as a declared name or an undeclared one): a state holding the key's
    StringExcept takes every token made only of such bytes unwalked (LazyDFA.free_bytes)
    and walks the others. Every visited state's mask must equal the oracle, and tokens
    accepted through such a mask, whose paths were not built, advance to the right state."""
    import json

    from structgen.automata import flat_tokens as ft
    from structgen.automata import tokens as tk

    free = []  # the states whose mask took a free-bytes slice unwalked (in Python or in one compiled call)
    real, real_sliced_walk = tk._walked_tokens, ft.FlatTokens.sliced_walk
    monkeypatch.setattr(tk, "_walked_tokens",
                        lambda *a, **k: (free.append(a[2]) if k.get("free_piece") else None) or real(*a, **k))

    def sliced_walk(dfa, trie, sid, known):
        walk, known = real_sliced_walk(dfa, trie, sid, known)
        if walk is not None and not walk.rows_built and walk.closed < 0:  # free bytes' slice, not a string body
            free.append(sid)
        return walk, known

    monkeypatch.setattr(ft.FlatTokens, "sliced_walk", sliced_walk)
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "nickname": {"type": "string"}, "age": {"type": "integer"},
                       **{f"{letter}key": {"type": "null"} for letter in "bcdefghijklmopq"}},
    }
    texts = [json.dumps({"name": "x", "nickname": "y", "age": 1, "bkey": None, "ckey": None, "nam": 2, "nick": [3]}),
             json.dumps({"age": 2, "dkey": None, "ekey": None, "n\u00e9": "z", "naME": {"name": 1}}),
             r'{"name": "x", "n\"ame": 1, "a\\ge": 2, "name ": 3, "\u00e9t\u00e9": 4, "nick\u006e": 5}']
    for _ in range(2):  # the second grammar finds the key's LoopSlice built
        structgen.clear_cache()
        grammar = structgen.compile_json_schema(schema, smollm2_vocab)
        visited = [sid for text in texts for sid in walk_text(grammar, text)]
        assert_masks_match_oracle(grammar, visited, smollm2_vocab)
    assert len(set(free)) >= 10, free
    for text in texts:  # a fresh grammar: accepting a free token builds its path itself
        structgen.clear_cache()
        grammar = structgen.compile_json_schema(schema, smollm2_vocab)
        m = grammar.matcher()
        data = b""
        for tid in smollm2_tokenizer.encode(text, add_special_tokens=False):
            m.fill_bitmask(structgen.allocate_bitmask(1, smollm2_vocab.vocab_size), 0)
            assert m.accept_token(tid)
            data += smollm2_vocab.token_bytes[tid]
            assert m._stack[-1] == grammar.dfa.walk(grammar.dfa.start, data)
        assert m.is_accepting()


def test_near_state_masks_equal_bruteforce_oracle(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """Inside a key of an object that allows undeclared properties and declares a name
    that is not ASCII (so its keys are a tree of basic nodes, not a StringExcept with
    free bytes), the state after a prefix of a declared name differs from the free rest
    of the key on a few bytes only: its mask is copied from that state's and patched
    (tokens.near_state), and so is the start of a key from the start of the previous one
    (a sibling). Every visited state's mask must still equal the oracle, and both
    shortcuts must have been taken."""
    import json

    from structgen.automata import tokens as tk

    used, from_sibling = [], []
    real, real_near = tk._near_tokens, tk.near_state
    monkeypatch.setattr(tk, "_near_tokens", lambda *a: used.append(a[2]) or real(*a))

    def near_state(dfa, sid, dominant, sibling=None):
        got = real_near(dfa, sid, dominant, sibling)
        if got is not None and got[0] != dominant[0]:
            from_sibling.append(sid)
        return got

    monkeypatch.setattr(tk, "near_state", near_state)
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "nickname": {"type": "string"}, "\u00e2ge": {"type": "integer"},
                       **{f"{letter}key": {"type": "null"} for letter in "bcdefghijklmopq"}},
    }
    texts = [json.dumps({"name": "x", "nickname": "y", "\u00e2ge": 1, "bkey": None, "ckey": None, "nam": 2, "nick": [3]}),
             json.dumps({"\u00e2ge": 2, "dkey": None, "ekey": None, "n\u00e9": "z", "naME": {"name": 1}})]
    structgen.clear_cache()
    grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    visited = [sid for text in texts for sid in walk_text(grammar, text)]
    assert_masks_match_oracle(grammar, visited, smollm2_vocab)
    assert len(used) >= 5, used
    # the start of a key after each property of many: near the start after the previous one
    assert from_sibling, "no state started from a sibling's mask"
    # tokens accepted through a copied mask advance to the right state
    for text in texts:
        m = grammar.matcher()
        for tid in smollm2_tokenizer.encode(text, add_special_tokens=False):
            assert m.accept_token(tid)
        assert m.is_accepting()


def test_key_prefix_rows_equal_the_rows_of_their_moves(smollm2_vocab, monkeypatch):
    """A state inside the name of an undeclared property gets its row as a copy of the
    row its Stepper shares with every prefix, patched (LazyDFA._expand_parts). Each such
    row must be the one the generic path builds from the items' moves."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "nickname": {"type": "integer"}, "n/a": {"type": "boolean"},
                       "a\\b": {"type": "null"}, "nam": {"type": "string", "maxLength": 2}},
    }
    texts = [json.dumps({"name": "x", "nickname": 1, "n/a": True, "nam": "", "na": 2, "naME": {"name": 1}}),
             json.dumps({"a\\b": None, "nam": "z", "\u00e9": [], "nick": "q", "a\\": 0}, ensure_ascii=True)]
    monkeypatch.setenv("STRUCTGEN_AUTOMATON", "python")  # a shortcut of the Python automaton
    structgen.clear_cache()
    grammar = structgen.compile_json_schema(schema, smollm2_vocab)
    for text in texts:
        for sid in walk_text(grammar, text):
            grammar.tokens_of(sid)  # the walk expands the rows of every prefix a token reaches
    dfa, checked = grammar.dfa, 0
    for sid in range(dfa.num_states):
        if not dfa.expanded[sid] or dfa.nfa.row_parts(dfa._sets[sid]) is None:
            continue
        expected = np.full(256, -1, dtype=np.int32)
        for lo, hi, target in dfa.nfa.successors(dfa._sets[sid]):
            expected[lo : hi + 1] = dfa.state_of(target)
        assert (dfa.table[sid] == expected).all(), f"state {sid}"
        assert (dfa.loops[sid] == np.packbits(expected == sid, bitorder="little").view("<u8")).all()
        checked += 1
    assert checked >= 30, checked

LEXEME_SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "nick": {"type": "string", "maxLength": 3}}},
    {"type": "object", "properties": {"id": {"type": "string", "minLength": 2, "maxLength": 6}},
     "required": ["id"], "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "pattern": "^[a-zé]+$"}},
    {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
]


def _plain_and_lexeme_dfas(schema):
    from structgen.automata.languages import AUTOMATA
    from structgen.grammar.json_schema import JsonOptions, schema_to_ir

    node = schema_to_ir(schema, JsonOptions(), languages=AUTOMATA)
    return LazyDFA(LazyNFA(node, lexemes=False)), LazyDFA(LazyNFA(node))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(LEXEME_SCHEMAS) - 1),
    key=st.text(max_size=5),
    value=st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    cut=st.integers(0, 40),
    noise=st.binary(max_size=3),
)
def test_lexemes_accept_exactly_what_the_plain_automaton_accepts(which, key, value, cut, noise):
    """One JSON string character runs as a lexeme on a DFA shared by all grammars
    (nfa.LexemeSpace). The automaton built that way must accept, and keep alive, exactly
    the byte strings the automaton of plain leaves does: valid instances, instances
    with escaped and multi-byte characters, and byte-level damage to them."""
    plain, lexed = _plain_and_lexeme_dfas(LEXEME_SCHEMAS[which])
    instance = [
        {key: value, "name": value},
        {"id": value + key},
        [value, key],
        {"x-" + key: value, key: 1},
    ][which]
    for ensure_ascii in (False, True):
        text = json.dumps(instance, ensure_ascii=ensure_ascii).encode()
        for data in (text, text[:cut] + noise + text[cut:]):
            a, b = plain.start, lexed.start
            for i in range(len(data)):
                a, b = plain.walk(a, data[i : i + 1]), lexed.walk(b, data[i : i + 1])
                assert (a >= 0) == (b >= 0), (data, i)
                if a < 0:
                    break
            else:
                assert bool(plain.accepting[a]) == bool(lexed.accepting[b]), data
    if which != 2:  # a pattern's characters are the regex's own, not a lexeme
        assert any(isinstance(item[0], LexemeSpace) for items in lexed._sets for item in items if item is not ACCEPT)


def test_lexeme_space_is_shared_and_replaced_when_full(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """Grammars share one lexeme DFA; past its cap new grammars start a fresh one while
    the old ones keep theirs, and every mask still equals the oracle."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "maxLength": 4}}}
    text = json.dumps({"a": "h\u00e9llo \\ \"\u2603\" \U0001f600", "b": "x\ny", "c": "z"})
    monkeypatch.setenv("STRUCTGEN_AUTOMATON", "python")  # the compiled automaton has no lexeme space
    structgen.clear_cache()
    first = structgen.compile_json_schema(schema, smollm2_vocab)
    second = structgen.compile_json_schema(schema, smollm2_vocab, whitespace="compact")
    walk_text(first, text)
    walk_text(second, text.replace(", ", ",").replace(": ", ":"))
    assert first.dfa.nfa._space is second.dfa.nfa._space is LexemeSpace.current()
    monkeypatch.setattr(LexemeSpace, "MAX_STATES", 0)
    third = structgen.compile_json_schema(schema, smollm2_vocab, whitespace="flexible")
    assert third.dfa.nfa._space is not first.dfa.nfa._space
    for grammar, data in ((first, text), (third, text)):
        visited = walk_text(grammar, data)
        assert_masks_match_oracle(grammar, visited, smollm2_vocab)
        m = grammar.matcher()
        for tid in smollm2_tokenizer.encode(data, add_special_tokens=False):
            assert m.accept_token(tid)
        assert m.is_accepting()


def walk_text(grammar: CompiledGrammar, text: str) -> list[int]:
    """The DFA states a text passes through, byte by byte (each must be alive)."""
    sid, visited = grammar.dfa.start, []
    for b in text.encode():
        sid = grammar.dfa.walk(sid, bytes([b]))
        assert sid >= 0, text
        visited.append(sid)
    assert grammar.dfa.accepting[sid]
    return visited


def test_forced_bytes_through_built_rows_only(smollm2_vocab):
    """The engine's jump-forward first asks whether the forced bytes are known from built
    rows (it must not build a costly row inside a step): None where a row on the way is
    not built, and the whole span once the rows exist."""
    grammar = structgen.compile_regex(r"abcdef(x|y)", smollm2_vocab)
    dfa = grammar.dfa
    after_a = dfa.walk(dfa.start, b"a")  # (a walk builds no row)
    assert not dfa.expanded[after_a]
    assert grammar.forced_bytes(after_a, built_only=True) is None
    assert dfa.known_forced_bytes(after_a) is None
    assert grammar.forced_bytes(after_a) == b"bcdef"
    assert grammar.forced_bytes(after_a, built_only=True) == b"bcdef"
