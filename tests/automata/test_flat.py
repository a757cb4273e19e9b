"""The compiled automaton (automata/flat.py) against the Python one: same masks, same
acceptance, token by token, on real schemas, regexes and grammars with the SmolLM2
vocabulary; its errors; its store growing while it runs."""

from __future__ import annotations

import random

import numpy as np
import pytest

import structgen
from structgen.automata import flat
from structgen.automata.dfa import LazyDFA
from structgen.automata.flat import FlatDFA, FlatUnsupported
from structgen.automata.nfa import LazyNFA
from structgen.errors import GrammarTooLargeError
from structgen.grammar import ir
from structgen.grammar.json_schema import schema_to_ir
from structgen.matcher import CompiledGrammar
from tests.test_matcher import assert_masks_match_oracle

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 130}},
     "required": ["name"]},  # undeclared keys allowed: a Stepper, flattened as its plain tree
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "tags": {"type": "array", "items": {"enum": ["a", "b", "ccc"]}, "maxItems": 3},
                                      "score": {"type": "number", "exclusiveMinimum": -1.5, "maximum": 99.25}},
     "additionalProperties": False},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                        "required": ["v"], "additionalProperties": False}},
     "$ref": "#/$defs/node"},  # recursive: a pushdown automaton
    {"anyOf": [{"type": "string", "pattern": "^[a-z]{2,5}-\\d+$"}, {"type": "null"}, {"type": "boolean"},
               {"type": "array", "items": {"type": "string", "minLength": 1}}]},
    {},  # any JSON value
]
REGEXES = [r"(\w+ ){1,3}[é日本]+", r"\d{3}-\d{4}|[A-F0-9]{8}"]
LARK = """
start: expr
expr: term (("+" | "-") term)*
term: NUMBER | "(" expr ")"
NUMBER: /[0-9]+/
"""


def _both(monkeypatch, compile_):
    """The same grammar compiled with each automaton."""
    grammars = []
    for automaton in ("python", "flat"):
        monkeypatch.setenv("STRUCTGEN_AUTOMATON", automaton)
        structgen.clear_cache()
        grammars.append(compile_())
    structgen.clear_cache()
    assert isinstance(grammars[0].dfa, LazyDFA) and isinstance(grammars[1].dfa, FlatDFA)
    return grammars


def same_masks_on_walks(python, compiled, vocab, walks=12, steps=60, seed=0):
    """Random walks choosing allowed tokens: at every step both matchers give the same
    mask and acceptance, and both accept the chosen token."""
    rng = random.Random(seed)
    masks = [structgen.allocate_bitmask(1, vocab.vocab_size) for _ in range(2)]
    eos = set(vocab.eos_token_ids)
    for _ in range(walks):
        matchers = [python.matcher(), compiled.matcher()]
        for _ in range(steps):
            for m, mask in zip(matchers, masks):
                m.fill_bitmask(mask, 0)
            assert np.array_equal(masks[0], masks[1])
            assert matchers[0].is_accepting() == matchers[1].is_accepting()
            allowed = np.flatnonzero(np.unpackbits(masks[0][0].view(np.uint8), bitorder="little"))
            choices = [t for t in allowed.tolist() if t not in eos]
            if not choices:
                break
            token = rng.choice(choices)
            assert matchers[0].accept_token(token) and matchers[1].accept_token(token)


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_flat_masks_equal_python_on_schemas(monkeypatch, smollm2_vocab, schema):
    python, compiled = _both(monkeypatch, lambda: structgen.compile_json_schema(schema, smollm2_vocab))
    same_masks_on_walks(python, compiled, smollm2_vocab)


ANY_ORDER = [
    SCHEMAS[0],
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3}, "c": {"type": "boolean"},
                                      "d": {"enum": ["x", "y"]}},
     "required": ["a", "c"], "additionalProperties": False, "minProperties": 3},
    {"type": "object", "properties": {"p": {"type": "object", "properties": {"q": {"type": "null"}, "r": {"type": "integer"}}}},
     "patternProperties": {"^x-": {"type": "integer"}}, "maxProperties": 2},  # nested, a pattern, a cap
    {"type": "object", "properties": {"a": {"not": {}}, "b": {"type": "integer"}}, "required": ["b"]},  # an entry with no value
    # 70 properties: a mask wider than a state's index (interned, `flat._wide_mask`),
    # required entries in both of its words
    {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(70)},
     "required": ["k1", "k61", "k62", "k69"], "additionalProperties": False, "maxProperties": 6},
]


@pytest.mark.parametrize("schema", ANY_ORDER, ids=range(len(ANY_ORDER)))
def test_flat_masks_equal_python_on_objects_in_any_order(monkeypatch, smollm2_vocab, schema):
    python, compiled = _both(monkeypatch, lambda: structgen.compile_json_schema(schema, smollm2_vocab, property_order="any"))
    same_masks_on_walks(python, compiled, smollm2_vocab)


def test_flat_any_order_accepts_members_in_every_order(smollm2_vocab):
    """Each permutation of the members is accepted, a repeated or missing required one
    is not, and the object closes only once its required members are in."""
    import itertools
    import json
    schema = ANY_ORDER[1]
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, property_order="any")
    assert isinstance(grammar.dfa, FlatDFA)
    members = {"a": 1, "b": "xy", "c": True}
    for order in itertools.permutations(members):
        text = json.dumps({k: members[k] for k in order}).encode()
        assert grammar.dfa.accepting[grammar.dfa.walk(grammar.dfa.start, text)], text
    for text in (b'{"a": 1, "c": true}', b'{"a": 1, "c": true, "a": 2}', b'{"b": "x", "c": true, "d": "x"}'):
        assert not grammar.dfa.accepting[max(grammar.dfa.walk(grammar.dfa.start, text), 0)], text


@pytest.mark.parametrize("pattern", REGEXES)
def test_flat_masks_equal_python_on_regexes(monkeypatch, smollm2_vocab, pattern):
    python, compiled = _both(monkeypatch, lambda: structgen.compile_regex(pattern, smollm2_vocab))
    same_masks_on_walks(python, compiled, smollm2_vocab, steps=20)


def test_flat_masks_equal_python_on_a_recursive_grammar(monkeypatch, smollm2_vocab):
    python, compiled = _both(monkeypatch, lambda: structgen.compile_grammar(LARK, smollm2_vocab))
    same_masks_on_walks(python, compiled, smollm2_vocab, steps=30)


def test_flat_masks_equal_bruteforce_oracle(smollm2_vocab):
    node = ir.seq(ir.lit('{"n": '), ir.alt(ir.lit("0"), ir.seq(ir.byte_range(0x31, 0x39), ir.rep(ir.byte_range(0x30, 0x39), 0, 2))),
                  ir.lit(', "s": "'), ir.rep(ir.byteset([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7E)]), 0, None), ir.lit('"}'))
    grammar = CompiledGrammar("test", "", FlatDFA(LazyNFA(node)), smollm2_vocab)
    sid, visited = grammar.dfa.start, [grammar.dfa.start]
    for b in b'{"n": 907, "s": "a b"}':
        sid = grammar.dfa.walk(sid, bytes([b]))
        visited.append(sid)
    assert grammar.dfa.accepting[sid]
    assert_masks_match_oracle(grammar, visited, smollm2_vocab)


def test_flat_free_bytes_of_a_key_and_its_masks(smollm2_vocab, smollm2_tokenizer):
    """Inside the name of an undeclared property the state takes any raw ASCII text
    unwalked (its StringExcept trie marks it), as the Python automaton's does; not
    inside an escape nor in a declared name's value. Masks equal the oracle's."""
    from structgen.grammar.string_except import StringExcept

    node = ir.seq(ir.lit('{"'), StringExcept(["name", "nick"]), ir.lit('": '), ir.rep(ir.byte_range(0x30, 0x39), 1, 3),
                  ir.lit("}"))
    grammar = CompiledGrammar("test", "", FlatDFA(LazyNFA(node)), smollm2_vocab)
    python = LazyDFA(LazyNFA(node))
    dfa, raw_ascii = grammar.dfa, {b for b in range(0x20, 0x80) if b not in b'"\\'}
    visited = []
    for prefix in (b'{"', b'{"n', b'{"ni', b'{"nick', b'{"x', b'{"n\\', b'{"nam": 1'):
        sid, expected = dfa.walk(dfa.start, prefix), python.free_bytes(python.walk(python.start, prefix))
        assert sid >= 0, prefix
        free = dfa.free_bytes(sid)
        got = None if free is None else {b for b in range(256) if (int(free[b >> 6]) >> (b & 63)) & 1}
        want = None if expected is None else {b for b in range(256) if (int(expected[b >> 6]) >> (b & 63)) & 1}
        assert got == want, prefix
        if prefix in (b'{"', b'{"ni'):
            assert got == raw_ascii
        visited.append(sid)
    assert_masks_match_oracle(grammar, visited, smollm2_vocab)


def test_flat_accepting_state_has_no_free_bytes_of_its_own(smollm2_vocab):
    """ACCEPT is item 0, whose row's leaf is -1 like a free-bytes marker's (of bitsets
    row 0): a state that accepts declares no free bytes for it. (numba's `_free_entry`
    took ACCEPT for a marker: wherever the IR had free bytes somewhere -- in any process
    once its warm-up had shared a key's trie -- an accepting state claimed the bytes of
    bitsets row 0 as free, a mask of tokens allowed unwalked once their slice was built.)"""
    from structgen.grammar.string_except import StringExcept

    node = ir.seq(ir.lit('{"'), StringExcept(["name"]), ir.lit('": '), ir.alt(ir.lit("1}"), ir.seq(
        ir.lit("2"), ir.rep(ir.byte_range(0x30, 0x39), 0, None))))
    flat_dfa, python = FlatDFA(LazyNFA(node)), LazyDFA(LazyNFA(node))
    assert flat_dfa.flat.has_free and flat_dfa.flat.arrays[6][0].any()
    for text in (b'{"x": 1}', b'{"x": 23'):  # ACCEPT alone (no loop), ACCEPT and the digits' loop
        sid = flat_dfa.walk(flat_dfa.start, text)
        assert flat_dfa.accepting[sid] and flat_dfa.items_of(sid)[0] == flat.ACCEPT, text
        assert flat_dfa.free_bytes(sid) is None, text
        assert python.free_bytes(python.walk(python.start, text)) is None, text
        grammar = CompiledGrammar("test", "", flat_dfa, smollm2_vocab)
        assert_masks_match_oracle(grammar, [sid], smollm2_vocab)


def test_flat_walk_steps_through_unbuilt_rows(smollm2_vocab):
    """`FlatDFA.walk` follows bytes through states whose rows are not built (the path
    of a token allowed unwalked) without building them, and ends where a walk over
    built rows ends: the same item set, DEAD alike, accepting alike. The same walk again
    ends in the same state and adds nothing to the store; the bytes a state without a
    row loops on are known in its `loops` once a step of a walk has looped there."""
    from structgen.grammar.string_except import StringExcept

    key = ir.seq(ir.lit('{"'), StringExcept(["name", "nick"]), ir.lit('": '), ir.rep(ir.byte_range(0x30, 0x39), 1, 3),
                 ir.lit("}"))
    schema = schema_to_ir(SCHEMAS[1])
    cases = [(key, [b'{"', b'{"nam', b'{"nick', b'{"nick": 7}', b'{"x\\"y": 12}', b'{"ni"', b'{"na": 1234'])]
    cases.append((schema, [b'{"id": "0', b'{"tags": ["ccc", "a"], "score": -1.25}', b'{"score": 99.3', b'{"tags": ["c"]']))
    for node, texts in cases:
        grammars = [CompiledGrammar("test", "", FlatDFA(LazyNFA(node)), smollm2_vocab) for _ in range(2)]
        stepped, built = grammars[0].dfa, grammars[1].dfa
        for text in texts:
            rows = int(stepped.expanded.sum())
            end = stepped.walk(stepped.start, text)
            assert int(stepped.expanded.sum()) == rows, text  # no row built on the way
            hashed = int(stepped._store[flat.S_META][flat.M_HASHED])
            assert stepped.walk(stepped.start, text) == end, text
            assert int(stepped._store[flat.S_META][flat.M_HASHED]) == hashed, text
            state = built.start
            for byte in text:
                built.expand(state)
                state = int(built.table[state, byte])
                if state < 0:
                    break
            assert (end < 0) == (state < 0), text
            if end >= 0:
                assert np.array_equal(grammars[0].tokens_of(end).words, grammars[1].tokens_of(state).words), text
    # In the free rest of a key, which loops on every character but the quote, the
    # backslash and the first bytes of multi-byte characters: a step that loops finds
    # all those bytes from the state's items, without its row.
    dfa = FlatDFA(LazyNFA(key))
    body = dfa.walk(dfa.start, b'{"xyzzy')
    assert not dfa.expanded[body]
    remembered = dfa.loops[body].copy()
    dfa.expand(body)
    assert np.array_equal(remembered, dfa.loops[body])
    assert set(np.flatnonzero(dfa.table[body] == body).tolist()) == set(range(0x20, 0x80)) - set(b'"\\')


def test_flat_nodes_shared_between_grammars_are_flattened_once(monkeypatch, smollm2_vocab):
    """The second grammar holding the same node objects (a JSON string's characters)
    moves them into the shared block; a third grammar starts from it and flattens only
    its own nodes, with masks still equal to the Python automaton's."""
    monkeypatch.setattr(flat, "SHARED", flat._SharedNodes())
    schemas = [{"type": "object", "properties": {k: {"type": "string"}}, "required": [k]} for k in ("a", "b")]
    for schema in schemas:
        monkeypatch.setenv("STRUCTGEN_AUTOMATON", "flat")
        structgen.clear_cache()
        structgen.compile_json_schema(schema, smollm2_vocab)
    shared = flat.SHARED.base()
    assert shared.kind.size > 0
    third = {"type": "object", "properties": {"c": {"type": "string", "minLength": 2}, "d": {"type": "array"}}}
    python, compiled = _both(monkeypatch, lambda: structgen.compile_json_schema(third, smollm2_vocab))
    assert compiled.dfa.flat.num_nodes > shared.kind.size
    assert np.array_equal(compiled.dfa.flat.arrays[0][: shared.kind.size], shared.kind)  # it starts with them
    same_masks_on_walks(python, compiled, smollm2_vocab, walks=6, steps=40)


def test_nodes_met_once_hold_a_bounded_amount_whatever_the_schemas(monkeypatch, smollm2_vocab):
    """The nodes a FlatIR met once are held until met again, and counted by what they
    hold (a Graph by its edges and states): schemas with a large pattern graph each,
    never sent twice, leave at most MAX_SIGHTINGS of it held, not one graph per schema."""
    from structgen.grammar.json_schema import schema_to_ir

    monkeypatch.setattr(flat, "SHARED", flat._SharedNodes())
    monkeypatch.setattr(flat._SharedNodes, "MAX_SIGHTINGS", 20_000)
    held = []
    for words in range(300, 310):  # a bounded graph of ~1,200 states
        schema = {"type": "string", "pattern": "^(?:\\S+\\s+){0,%d}\\S+$" % words, "maxLength": 100_000}
        structgen.clear_cache()
        structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0)
        held.append(ir.footprint(ir.Alt(tuple(flat.SHARED._met_once.values())), 10**7))
    graph = ir.footprint(schema_to_ir(schema), 10**7)
    assert graph > 5_000  # each schema's own graph is large
    assert max(held) <= 20_000 + 2 * graph  # the bound, and what the last compile added


def test_flat_store_grows_while_building(smollm2_vocab):
    """A grammar whose automaton outgrows the store's first arrays (1,024 frames and
    items, 8,192 hash slots): every row is still right after the growth and retries."""
    names = [f"field_{i}" for i in range(300)]
    node = ir.seq(ir.lit("{"), ir.alt(*(ir.seq(ir.lit(f'"{n}": '), ir.rep(ir.byte_range(0x30, 0x39), 1, 3)) for n in names)),
                  ir.lit("}"))
    dfa = FlatDFA(LazyNFA(node))
    python = LazyDFA(LazyNFA(node))
    for n in names:
        text = f'{{"{n}": 42}}'.encode()
        assert dfa.accepting[dfa.walk(dfa.start, text)] and python.accepting[python.walk(python.start, text)]
        assert dfa.walk(dfa.start, text[:-1] + b"x") < 0
    meta = dfa._store[flat.S_META]
    assert meta[flat.M_ITEMS] > 1024 and meta[flat.M_HASHED] > 4096  # it did grow


def test_flat_walk_runs_again_when_its_states_fill_the_table(monkeypatch, smollm2_vocab):
    """The per-state arrays grow only when full: a first mask whose walk makes more
    states than the table holds fails mid-walk, and is run again once the table is
    doubled (twice here). Its mask and every later one equal the Python automaton's."""
    rng = random.Random(0)
    words = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                    for _ in range(3000)})
    python, compiled = _both(monkeypatch, lambda: structgen.compile_choice(words, smollm2_vocab))
    rows = compiled.dfa.table.shape[0]
    mask = structgen.allocate_bitmask(1, smollm2_vocab.vocab_size)
    compiled.matcher().fill_bitmask(mask, 0)
    assert compiled.dfa.num_states > rows and compiled.dfa.table.shape[0] >= 4 * rows  # it did fill up
    same_masks_on_walks(python, compiled, smollm2_vocab, walks=6, steps=12)


def test_flat_any_order_with_a_wide_mask(smollm2_vocab):
    """An object of 130 properties in any order (three words of mask, interned): every
    order of the members is accepted, a repeat or a missing required one is not, and
    the same mask reached in two orders is one state."""
    import json
    names = [f"p{i}" for i in range(130)]
    required = ["p0", "p61", "p62", "p125"]
    schema = {"type": "object", "properties": {n: {"type": "boolean"} for n in names}, "required": required,
              "additionalProperties": False}
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, property_order="any", warm_s=0)
    dfa = grammar.dfa
    assert isinstance(dfa, FlatDFA)
    rng = random.Random(1)

    def state(members) -> int:  # after the members, before the closing bracket
        return dfa.walk(dfa.start, json.dumps({n: True for n in members}).encode()[:-1])

    for _ in range(20):
        members = required + rng.sample([n for n in names if n not in required], rng.randrange(0, 12))
        rng.shuffle(members)
        text = json.dumps({n: True for n in members}).encode()
        assert dfa.accepting[max(dfa.walk(dfa.start, text), 0)], text
    assert state(["p0", "p61", "p70"]) == state(["p70", "p61", "p0"]) >= 0
    assert state(["p0", "p61", "p70"]) != state(["p0", "p62", "p70"])
    for text in ('{"p0": true, "p61": true, "p62": true}', '{"p0": true, "p61": true, "p125": true, "p62": true, "p61": false}'):
        assert not dfa.accepting[max(dfa.walk(dfa.start, text.encode()), 0)], text


def test_flat_refuses_what_it_cannot_build():
    entries = [ir.lit(f'"k{i}": 1') for i in range(61)]  # a wide mask, and a count bound past 2^24
    with pytest.raises(FlatUnsupported, match="61 properties"):
        FlatDFA(LazyNFA(ir.Members(entries, [False] * 61, None, ir.lit("{"), ir.lit(", "), ir.lit("}"), ir.lit("}"),
                                   max_count=1 << 25)))
    # left recursion through an optional prefix, met after the first byte: refused with
    # the Python automaton's error
    rule = ir.Ref("a")
    rule.target = ir.alt(ir.seq(ir.opt(ir.lit("x")), rule, ir.lit("y")), ir.lit("z"))
    dfa = FlatDFA(LazyNFA(ir.seq(ir.lit("s"), rule)))
    with pytest.raises(GrammarTooLargeError, match="nests more than"):
        dfa.walk(dfa.start, b"sxzy")


def test_flat_refuses_states_past_the_item_bound(monkeypatch):
    monkeypatch.setattr(flat, "MAX_STATE_ITEMS", 4)
    node = ir.seq(ir.lit("s"), ir.alt(*(ir.lit(w) for w in ("ab", "cd", "ef", "gh", "ij"))))
    dfa = FlatDFA(LazyNFA(node))  # the start holds one item
    with pytest.raises(GrammarTooLargeError, match="too ambiguous"):
        dfa.expand(dfa.start)  # what "s" leads to holds five


def test_a_dropped_automaton_leaves_no_reference_to_its_arrays(smollm2_vocab):
    """Once a grammar is dropped, nothing holds its automaton's arrays -- neither those
    in use nor those its store replaced as it grew. The store grows by failing a
    compiled call and running it again: the kernels keep no array past a call."""
    import gc
    import weakref

    structgen.clear_cache()
    grammar = structgen.compile_json_schema(
        {"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": 20} for i in range(12)}},
        smollm2_vocab, warm_s=0)
    structgen.clear_cache()
    first_store = [weakref.ref(array) for array in grammar.dfa._store]
    grammar.warm(grammar.example(), range(len(grammar.example()) + 1), budget_s=5.0)  # grows the store
    replaced = [ref for ref, array in zip(first_store, grammar.dfa._store) if ref() is not array]
    assert len(replaced) >= 2  # (frames, items, hash slots ... were grown)
    arrays = [weakref.ref(array) for array in (grammar.dfa.table, *grammar.dfa._store)]
    del grammar
    gc.collect()
    assert [ref() is None for ref in replaced + arrays] == [True] * len(replaced + arrays)


_NEW_STORE = flat._new_store


def _tiny_store() -> list[np.ndarray]:
    """A store with room for 4 of everything: a call fails at nearly every addition."""
    store = _NEW_STORE()
    for i in range(1, len(store)):
        store[i] = store[i][:8] if i == flat.S_HASH else store[i][:5 if i == flat.S_SET_START else 4]
    return [np.ascontiguousarray(array) for array in store]


@pytest.mark.parametrize("schema", SCHEMAS[:4], ids=range(4))
def test_flat_masks_are_right_when_every_call_runs_out_of_room(monkeypatch, smollm2_vocab, schema):
    """Growth is signalled by a failure code, not an exception, and every function on the
    way must stop writing once it is set: with a store that is full at every turn, each
    failure site is met hundreds of times, and the masks still equal the Python
    automaton's."""
    monkeypatch.setattr(flat, "_new_store", _tiny_store)
    python, compiled = _both(monkeypatch, lambda: structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0))
    same_masks_on_walks(python, compiled, smollm2_vocab, walks=6, steps=50)
    assert compiled.dfa._store[flat.S_HASH].shape[0] > 8 and compiled.dfa._store[flat.S_FRAMES].shape[0] > 4


def test_the_kernels_layout_constants_are_the_python_modules():
    """The compiled kernels index the arrays with their own copies of the layout
    constants (flat_kernels.pxd, token_kernels.pyx): each equals flat.py's, or that of
    tokens.py or flat_tokens.py, whichever defines it."""
    from structgen.automata import flat_kernels, flat_tokens, token_kernels, tokens

    assert {k: getattr(flat, k) for k in flat_kernels.LAYOUT} == flat_kernels.LAYOUT
    owner = {k: tokens if hasattr(tokens, k) else flat_tokens for k in token_kernels.LAYOUT}
    assert {k: getattr(owner[k], k) for k in token_kernels.LAYOUT} == token_kernels.LAYOUT


def test_unbuilt_kernels_give_one_clear_error_at_the_first_compile(tmp_path):
    """Where the extensions cannot be imported (a checkout never built), `import
    structgen` works and the first compile raises KernelsNotBuiltError, a
    StructgenError that says how to build them; nothing falls back to the Python
    automaton, which needs the token kernels too. In a subprocess: this one has them."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "sys.modules['structgen.automata.flat_kernels'] = None  # (an import of it fails)\n"
        "import structgen\n"
        "from structgen.errors import KernelsNotBuiltError, StructgenError\n"
        "vocab = structgen.Vocabulary.default()\n"
        "for automaton in ('flat', 'python'):\n"
        "    import os; os.environ['STRUCTGEN_AUTOMATON'] = automaton\n"
        "    try:\n"
        "        structgen.compile_regex('[a-z]+', vocab)\n"
        "    except KernelsNotBuiltError as error:\n"
        "        assert isinstance(error, StructgenError)\n"
        "        print(automaton, error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["flat", "python"], done.stdout
    assert all("pip install -e ." in line for line in lines), done.stdout


def test_a_grown_hash_table_is_drained_while_the_automaton_goes_on(monkeypatch, smollm2_vocab):
    """A growth of the store's hash table moves no key in the step: the larger table
    starts empty beside the smaller one, lookups find a key in either, and the calls
    that follow move the rest a few slots at a time, then let the smaller one go. A
    growth while one is still being drained first finishes that one. Masks equal the
    Python automaton's throughout, and no key is added twice (a frame or item interned
    again would be a second id for it)."""
    python, compiled = _both(monkeypatch, lambda: structgen.compile_json_schema(SCHEMAS[0], smollm2_vocab, warm_s=0))
    same_masks_on_walks(python, compiled, smollm2_vocab, walks=2, steps=30)
    dfa = compiled.dfa
    store, meta = dfa._store, dfa._store[flat.S_META]
    keys, frames, items = (int(meta[m]) for m in (flat.M_HASHED, flat.M_FRAMES, flat.M_ITEMS))
    for _ in range(2):  # the second while the first is drained: nothing has moved yet
        with dfa.lock:
            flat._grown(store, flat.M_HASHED, dfa.spares)
        assert meta[flat.M_HASHED] == 0 and store[flat.S_OLD_HASH].shape[0] > 0
    assert int(meta[flat.M_FRAMES]) == frames and int(meta[flat.M_ITEMS]) == items
    same_masks_on_walks(python, compiled, smollm2_vocab, walks=2, steps=30)  # the same walks: every key looked up
    assert (int(meta[flat.M_FRAMES]), int(meta[flat.M_ITEMS])) == (frames, items)
    same_masks_on_walks(python, compiled, smollm2_vocab, walks=12, steps=60, seed=1)
    assert store[flat.S_OLD_HASH].shape[0] == 0  # drained, and let go
    assert int(meta[flat.M_HASHED]) >= keys
