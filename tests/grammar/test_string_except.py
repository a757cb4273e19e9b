"""StringExcept (the name of an undeclared property: any JSON string body but the
declared names, compared by decoded value) against its plain IR tree and against
`json.loads`, on names and spellings built to hit its escape decoding."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.automata.dfa import LazyDFA
from structgen.automata.item_sets import ACCEPT
from structgen.automata.nfa import LazyNFA
from structgen.grammar import ir
from structgen.grammar.acceptor import ir_accepts
from structgen.grammar.string_except import StringExcept

# Letters that exercise every way a character is spelled: plain, short escapes (/ and
# the ones JSON requires), control characters (escape only), DEL (raw), hex letters.
NAME_CHARS = "aebAEF0/\"\\\x01\n\x7f~"
SPICE = NAME_CHARS + "é中😀"
# Raw spellings spelled on purpose, some broken: lone surrogates, cut escapes.
RAW_TAILS = [b"", b"\\udc00", b"\\uDFFF", b"\\ud800", b"\\ud800x", b"\\uD8", b"\\uDC", b"\\ud7ff", b"\\u00", b"\\u0061",
             b"\\u007", b"\\u", b"\\x", b"\xc3", b"\xed\xa0\x80"]


def spell(text: str, choices: list[int]) -> bytes:
    """`text` as a JSON string body, each character spelled by the next choice: raw
    where JSON allows, a short escape where one exists, or \\u escapes (lower or upper
    hex; astral characters as a surrogate pair)."""
    out = []
    for i, ch in enumerate(text):
        how = choices[i % len(choices)] if choices else 0
        cp = ord(ch)
        short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
        if how == 0 and cp >= 0x20 and ch not in '"\\':
            out.append(ch)
        elif how == 1 and ch in short:
            out.append(short[ch])
        elif cp >= 0x10000:
            hi, lo = 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)
            out.append(("\\u%04x\\u%04X" if how == 2 else "\\u%04X\\u%04x") % (hi, lo))
        else:
            out.append(("\\u%04x" if how != 3 else "\\u%04X") % cp)
    return "".join(out).encode("utf-8")


def decoded(body: bytes):
    """The string a body spells, or None (strict UTF-8: json.loads on bytes would let
    encoded surrogates through)."""
    try:
        return json.loads('"' + body.decode("utf-8") + '"')
    except (ValueError, UnicodeDecodeError):
        return None


names_st = st.lists(st.text(alphabet=NAME_CHARS, min_size=0, max_size=4), max_size=5, unique=True)


@settings(max_examples=150, deadline=None)
@given(
    names=names_st,
    picks=st.lists(
        st.tuples(st.integers(0, 6), st.text(alphabet=SPICE, max_size=2), st.booleans(), st.sampled_from(RAW_TAILS)),
        min_size=1, max_size=12,
    ),
    choices=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    cut=st.integers(0, 12),
)
def test_string_except_matches_its_plain_tree_and_json(names, picks, choices, cut):
    node = StringExcept(names)
    plain = node.plain()
    dfa = LazyDFA(LazyNFA(node))
    pool = names + ["", "a", "ae"]
    for which, extra, trim, raw in picks:
        text = pool[which % len(pool)] + extra
        if trim and text:
            text = text[:-1]
        body = spell(text, choices) + raw
        for data in (body, body[:cut], body[: max(0, len(body) - 1)] + b"\\"):
            got = ir_accepts(node, data)
            assert got == ir_accepts(plain, data), (names, data)
            sid = dfa.walk(dfa.start, data)
            assert got == (sid >= 0 and bool(dfa.accepting[sid])), (names, data)
            if sid >= 0:  # no dead ends: a mask may allow a token only if the text can go on
                assert dfa.accepting[sid] or dfa.has_exits(sid), (names, data)
            value = decoded(data)
            if got:  # sound: a JSON string, and none of the names
                assert value is not None and value not in names, (names, data)
            elif value is not None and value not in names and not _lone_surrogate_first(value, names):
                pytest.fail(f"rejected {data!r}, a valid string that is not one of {names!r}")


@settings(max_examples=150, deadline=None)
@given(
    names=names_st,
    which=st.integers(0, 6),
    keep=st.integers(0, 4),
    choices=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    picks=st.lists(st.integers(0, 255), max_size=12),
)
def test_free_bytes_read_any_string_of_them(names, which, keep, choices, picks):
    """What `free_bytes` claims at a node of the names' trie, on which the masks take
    tokens unwalked (tokens.state_tokens): every string of those bytes goes on from
    there. The node is reached by a spelled prefix of a declared name (escapes decoded
    on the way), then any string of free bytes must keep the automaton alive."""
    node = StringExcept(names)
    free = [b for b in range(256) if node.free_bytes(0) >> b & 1]
    assert len(free) == 94 and 0x22 not in free and 0x5C not in free and all(b < 0x80 for b in free)
    assert node.free_bytes(("\\", 0)) == 0  # inside an escape: nothing claimed
    pool = names + ["", "a"]
    text = pool[which % len(pool)][:keep]
    data = spell(text, choices) + bytes(free[p % len(free)] for p in picks)
    nfa = LazyNFA(node)
    current = nfa.start
    for i, b in enumerate(data):
        current = {t for item in current if item is not ACCEPT
                   for lo, hi, target in nfa.moves(item) if lo <= b <= hi for t in target}
        assert current, (names, data[: i + 1])


def _lone_surrogate_first(value: str, names: list[str]) -> bool:
    """Whether the string leaves the names' prefixes at a lone surrogate: the plain tree
    (and so StringExcept) wants that character spelled as a valid pair."""
    for i, ch in enumerate(value):
        if not any(n.startswith(value[: i + 1]) for n in names):
            return 0xD800 <= ord(ch) <= 0xDFFF
    return False


def test_string_except_decodes_escapes_of_declared_names():
    node = StringExcept(["env", "a/b", 'q"'])
    for name_in_disguise in [b"env", b"\\u0065nv", b"e\\u006Ev", b"a\\/b", b"a\\u002Fb", b'q\\"', b"q\\u0022"]:
        assert not ir_accepts(node, name_in_disguise), name_in_disguise
    for other in [b"", b"en", b"envx", b"\\u0065NV", b"a\\u002fbc", b"\\u00e9nv", "é".encode(), b"\\ud83d\\ude00", b"x\\ud800"]:
        assert ir_accepts(node, other), other
    for broken in [b"\\ud800", b"\\udc00", b"\xc3", b'"', b"\\x", b"\\u00"]:
        assert not ir_accepts(node, broken), broken


def test_string_except_refuses_non_ascii_names_and_exports_a_regex():
    with pytest.raises(ValueError):
        StringExcept(["café"])
    import re

    rx = re.compile(ir.to_python_regex(StringExcept(["ab"])), re.S)
    assert rx.fullmatch(b"a") and not rx.fullmatch(b"ab") and not rx.fullmatch(b"\\u0061b")
