"""Context-free grammars: the lark front-end, the CFG checks and left-recursion removal,
and a differential test against lark's own Earley parser.

lark with `lexer="dynamic_complete"` accepts exactly the language structgen compiles (each
terminal replaced by its regular language), so it is the oracle for random grammars:
complete strings must get the same verdict, and after any sequence of tokens the mask
allowed, structgen's own shortest completion must be one lark accepts (no dead ends).
"""

from __future__ import annotations

import collections
import json
import random

import lark
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structgen
from benchmarks.hostile import lark_grammars
from structgen.automata.languages import AUTOMATA
from structgen.errors import GrammarError, GrammarTooLargeError
from structgen.grammar.acceptor import ir_accepts
from structgen.grammar.cfg import grammar_to_ir
from structgen.grammar.lark_grammar import parse_lark
from tests.paths import GRAMMARS, MASKBENCH


def accepts(text: str, sample: str) -> bool:
    return ir_accepts(grammar_to_ir(parse_lark(text), AUTOMATA), sample.encode())


def lark_accepts(parser: lark.Lark, sample: str) -> bool:
    try:
        parser.parse(sample)
        return True
    except lark.exceptions.LarkError:
        return False


def shortest_completion(grammar, state: int, limit: int = 200_000) -> bytes | None:
    """Breadth-first search over the lazy DFA for the shortest bytes to an accepting state."""
    dfa = grammar.dfa
    parent = {state: None}
    queue = collections.deque([state])
    while queue and len(parent) < limit:
        sid = queue.popleft()
        if dfa.accepting[sid]:
            out = bytearray()
            while parent[sid] is not None:
                sid, byte = parent[sid]
                out.append(byte)
            return bytes(reversed(out))
        dfa.expand(sid)
        for byte in np.flatnonzero(dfa.table[sid] >= 0).tolist():
            nxt = int(dfa.table[sid, byte])
            if nxt not in parent:
                parent[nxt] = (sid, byte)
                queue.append(nxt)
    return None


# ---------------------------------------------------------------- front-end features


def test_left_recursion_direct_indirect_and_star():
    direct = 'start: sum\nsum: sum "+" NUM | sum "-" NUM | NUM\nNUM: /[0-9]+/'
    assert accepts(direct, "1+22-3") and not accepts(direct, "1+") and not accepts(direct, "+1")
    indirect = 'start: a\na: b "x" | "y"\nb: a "z" | "w"'  # a -> b x -> a z x
    for s, ok in [("y", True), ("wx", True), ("yzx", True), ("wxzx", True), ("yz", False), ("x", False)]:
        assert accepts(indirect, s) is ok, s
    star = 'start: "(" item* ")"\nitem: "a" | "b" item+'
    assert accepts(star, "()") and accepts(star, "(abaa)") and not accepts(star, "(b)")


def test_ambiguous_and_nullable_grammars():
    ambiguous = 'start: e\ne: e "+" e | e e | "a"'
    assert accepts(ambiguous, "a+aa+a") and accepts(ambiguous, "aaaa") and not accepts(ambiguous, "a++a")
    nullable = 'start: x? y* "!"\nx: "x"\ny: "y" | x?'
    assert accepts(nullable, "!") and accepts(nullable, "xyy!") and not accepts(nullable, "yx")


def test_imports_ignore_inlining_case_and_templates():
    text = r"""
    start: _sep{pair, ","}
    ?pair: key "=" value
    key: CNAME
    value: SIGNED_NUMBER | ESCAPED_STRING | "yes"i
    _sep{x, sep}: x (sep x)*
    %import common.CNAME
    %import common.SIGNED_NUMBER
    %import common.ESCAPED_STRING
    %import common.WS
    %ignore WS
    """
    assert accepts(text, 'a = 1, b_2="x \\" y" , c=YES ')
    assert not accepts(text, "a = 1,") and not accepts(text, "a=no") and not accepts(text, '9=1')


def test_terminal_regex_flavour_is_pythons():
    text = 'start: WORD " " DIGITS\nWORD: /\\w+/\nDIGITS: /\\d+/'
    assert accepts(text, "héllo ١٢")  # Unicode \w and \d, as Python's re
    assert not accepts(text, "a-b 1")
    assert accepts('start: /(?i:abc)/ /a.c/s', "ABca\nc")
    # re.IGNORECASE pairs the Kelvin sign with k and long s with s; x drops blanks and comments
    assert accepts('start: /k+/i | "select"i', "\u212ak") and accepts('start: /k+/i | "select"i', "\u017fELECT")
    assert accepts('start: /a # a comment\n   b+ [ ]/x', "abb ") and not accepts('start: /a # c\n b+ [ ]/x', "ab")
    with pytest.raises(GrammarError, match="lookahead"):
        parse_lark('start: /a(?=b)/ "b"')


@pytest.mark.parametrize(
    "text, fragments",
    [
        ('start: "a"\nb: : :', ["line 2"]),
        ('start: a\na: "x" | b', ["'b'", "line 2"]),
        ('start: A\nA: /x*/', ["A", "empty string"]),
        ('start: start "a"', ["never produce"]),
        ('other: "a"', ["start"]),
        ('start: "a" (', ["line 1"]),
    ],
)
def test_grammar_errors_are_clear(text, fragments):
    with pytest.raises(GrammarError) as info:
        grammar_to_ir(parse_lark(text), AUTOMATA)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_unremovable_left_recursion_is_refused():
    # `a` begins with an optional `n` and then itself: left recursion behind a nullable prefix
    text = 'start: a\na: n a "x" | "y"\nn: "n" | m\nm: "m"*'
    with pytest.raises((GrammarError, GrammarTooLargeError), match="left"):
        grammar_to_ir(parse_lark(text), AUTOMATA)


def test_gbnf_and_lark_are_told_apart_by_compile_grammar(smollm2_vocab):
    g = structgen.compile_grammar('root ::= "x" [0-9]', smollm2_vocab, syntax="gbnf")
    m = g.matcher()
    assert m.accept_bytes(b"x7") and m.is_accepting()
    with pytest.raises(structgen.StructgenError, match="syntax"):
        structgen.compile_grammar('start: "x"', smollm2_vocab, syntax="ebnf")


def test_deep_nesting_and_rollback_are_exact(smollm2_vocab, smollm2_tokenizer):
    g = structgen.compile_grammar('start: "(" start ")" | "x"', smollm2_vocab)
    text = "(" * 40 + "x" + ")" * 40
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    m = g.matcher()
    masks = []
    buf = structgen.allocate_bitmask(1, smollm2_vocab.vocab_size)
    for tid in ids:
        m.fill_bitmask(buf, 0)
        masks.append(buf[0].copy())
        assert m.accept_token(tid)
    assert m.is_accepting() and not m.accept_token(ids[-1])
    undone = len(ids) // 2
    m.rollback(undone)  # back into the middle: the masks are the ones seen then
    for k in range(len(ids) - undone, len(ids)):
        m.fill_bitmask(buf, 0)
        assert np.array_equal(buf[0], masks[k])
        assert m.accept_token(ids[k])
    assert m.is_accepting()


# ---------------------------------------------------------------- differential test

TERMINALS = ('"a"', '"b"', '"ab"', "/c+/", '"ba"')


def random_grammars():
    """Rules over a few terminals whose strings are made of a, b and c (see the samples)."""
    return lark_grammars(TERMINALS, odd_lines=False)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=random_grammars(), seed=st.integers(0, 2**31 - 1))
def test_random_grammars_agree_with_lark(text, seed, smollm2_vocab):
    parser = lark.Lark(text, parser="earley", lexer="dynamic_complete")
    try:
        grammar = structgen.compile_grammar(text, smollm2_vocab)
    except GrammarError as e:
        # the only refusals allowed: an empty language or unremovable left recursion
        assert "never produce" in str(e) or "left-recursive" in str(e), str(e)
        return
    except GrammarTooLargeError as e:
        assert "nests more than" in str(e) or "left recursion" in str(e), str(e)
        return
    try:
        _agree_with_lark(grammar, parser, text, random.Random(seed), smollm2_vocab)
    except GrammarTooLargeError as e:
        # an exponentially ambiguous grammar is refused while decoding, with a clear reason
        assert "too ambiguous" in str(e), str(e)


def _agree_with_lark(grammar, parser, text, rng, smollm2_vocab):
    # complete strings: the same verdict as lark
    for _ in range(40):
        sample = "".join(rng.choice("abc") for _ in range(rng.randint(0, 7)))
        m = grammar.matcher()
        ours = m.accept_bytes(sample.encode()) and m.is_accepting()
        assert ours == lark_accepts(parser, sample), (text, sample)
    # token-level walks: every allowed token keeps a completion lark accepts
    tokens = smollm2_vocab.token_bytes
    for _ in range(3):
        m = grammar.matcher()
        prefix = b""
        for _ in range(6):
            allowed = [t for t in m.allowed_token_ids().tolist() if t not in smollm2_vocab.eos_token_ids]
            if not allowed:
                assert m.is_accepting(), (text, prefix)
                break
            tid = rng.choice(allowed)
            assert m.accept_token(tid)
            prefix += tokens[tid]
            completion = shortest_completion(grammar, m._stack[-1])
            assert completion is not None, (text, prefix)
            assert lark_accepts(parser, (prefix + completion).decode()), (text, prefix, completion)
        eos_allowed = any(t in smollm2_vocab.eos_token_ids for t in m.allowed_token_ids().tolist())
        assert eos_allowed == lark_accepts(parser, prefix.decode()), (text, prefix)


def test_an_exponentially_ambiguous_grammar_is_refused_not_hung(smollm2_vocab):
    # found by the differential test: r2 -> r1 r2* -> r0 r2* -> r2 r2* ... matches the same
    # text in a number of ways that grows ~10x per token; unbounded, the fourth mask took
    # a minute and the fifth would take ten
    text = 'start: r0\nr0: "b" "ba"? | r2 | "b"? "a"+\nr1: "ab" | /c+/ "ab" | r0\nr2: "ba"? "ab" "b" | r1 r2*\n'
    grammar = structgen.compile_grammar(text, smollm2_vocab)
    m = grammar.matcher()
    with pytest.raises(GrammarTooLargeError, match="too ambiguous"):
        for piece in (b"abc", b"aba", b"ba", b"aca", b"ab", b"ab"):
            assert m.accept_bytes(piece)
            m.allowed_token_ids()


def test_an_exhausted_shared_grammar_is_rebuilt_not_failed(smollm2_vocab):
    text = 'start: "[" start "]" | "x"'
    g = structgen.compile_grammar(text, smollm2_vocab, max_dfa_states=40)
    m = g.matcher()
    depth = 0
    while not g.exhausted:  # every new depth is a new pushdown configuration
        assert m.accept_bytes(b"[")
        depth += 1
    assert depth < 40
    fresh = structgen.compile_grammar(text, smollm2_vocab, max_dfa_states=40)
    assert fresh is not g and not fresh.exhausted
    assert m.accept_bytes(b"x" + b"]" * depth) and m.is_accepting()  # the old one still serves its matcher
    with pytest.raises(GrammarTooLargeError):
        m.reset()
        m.accept_bytes(b"[" * 60)


@pytest.mark.skipif(not MASKBENCH.is_dir(), reason="../shared/data is not beside the checkout")
def test_json_object_and_json_lark_accept_every_valid_maskbench_object(smollm2_vocab):
    """json_object is any JSON object at any depth, and so is grammars/json.lark's value."""
    any_object = structgen.compile_json_schema({"type": "object"}, smollm2_vocab)
    compact = structgen.compile_json_schema({"type": "object"}, smollm2_vocab, whitespace="compact")
    json_lark = structgen.compile_grammar((GRAMMARS / "json.lark").read_text(), smollm2_vocab)
    count = 0
    for path in sorted(MASKBENCH.glob("*.json")):
        for test in json.loads(path.read_text()).get("tests", []):
            if not (test["valid"] and isinstance(test["data"], dict)):
                continue
            count += 1
            text = json.dumps(test["data"])
            assert any_object.accepts_bytes(text.encode()), (path.name, text[:200])
            assert compact.accepts_bytes(json.dumps(test["data"], separators=(",", ":")).encode()), path.name
            assert json_lark.accepts_bytes(json.dumps(test["data"], indent=2).encode()), path.name
    assert count > 1500
    assert not any_object.accepts_bytes(b'[1, 2]') and not any_object.accepts_bytes(b'{"a": }')


def test_tool_calls_grammar_is_text_or_one_valid_call(smollm2_vocab):
    call = {"type": "object", "properties": {"name": {"const": "get_weather"},
                                             "arguments": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"], "additionalProperties": False}},
            "required": ["name", "arguments"], "additionalProperties": False}
    g = structgen.compile_tool_calls(call, smollm2_vocab)
    good = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    for text in ["Hello!", "", "<b>bold</b>", "<tool", "x <tool_call>", good]:
        assert g.accepts_bytes(text.encode()), text
    for text in ['<tool_call>{"name": "other", "arguments": {}}</tool_call>', "<tool_call>hi", good + " more",
                 '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>']:
        assert not g.accepts_bytes(text.encode()), text
    m = g.matcher()
    assert m.accept_bytes(b"<tool_call>") and m.forced_bytes() == b'{"name": "get_weather", "arguments": {"city": "'
