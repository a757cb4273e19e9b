"""Code point sets and their UTF-8 / JSON-string byte encodings (structgen.grammar.charset)."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.grammar import charset as C
from structgen.grammar import ir

MAX = C.MAX_CODE_POINT
# code points near every boundary the constructions care about
INTERESTING = sorted(
    {
        0, 1, 0x08, 0x09, 0x0A, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x2F, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F,
        0x80, 0xBF, 0xC0, 0xFF, 0x100, 0x7FF, 0x800, 0x801, 0xFFF, 0x1000, 0x1FFF, 0xD7FF,
        0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xE000, 0xFFFD, 0xFFFE, 0xFFFF, 0x10000, 0x103FF,
        0x10400, 0x1F600, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000, MAX - 1, MAX,
    }
)  # fmt: skip

code_points = st.one_of(
    st.sampled_from(INTERESTING),
    st.integers(0, 0x7FF),
    st.integers(0, MAX),
    st.sampled_from(INTERESTING).flatmap(lambda c: st.integers(max(0, c - 3), min(MAX, c + 3))),
)
ranges = st.tuples(code_points, code_points).map(lambda t: (min(t), max(t)))
charsets = st.lists(ranges, max_size=6).map(C.charset)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def compiled(node: ir.Node) -> re.Pattern:
    return re.compile(ir.to_python_regex(node), re.DOTALL)


def members(cs, cps):
    return [cp for cp in cps if C.contains(cs, cp)]


# ---------------------------------------------------------------- algebra


def as_set(cs, universe):
    return {cp for cp in universe if C.contains(cs, cp)}


@FAST
@given(charsets, charsets, st.lists(code_points, min_size=20, max_size=60))
def test_set_algebra_matches_python_sets(a, b, probe):
    universe = set(probe) | set(INTERESTING) | {lo for lo, _ in a + b} | {hi for _, hi in a + b}
    universe |= {x + d for x in list(universe) for d in (-1, 1) if 0 <= x + d <= MAX}
    sa, sb = as_set(a, universe), as_set(b, universe)
    assert as_set(C.union(a, b), universe) == sa | sb
    assert as_set(C.intersect(a, b), universe) == sa & sb
    assert as_set(C.difference(a, b), universe) == sa - sb
    assert as_set(C.complement(a), universe) == universe - sa
    for s in (C.union(a, b), C.intersect(a, b), C.difference(a, b), C.complement(a)):
        assert s == ir.normalize_ranges(s)
        assert all(0 <= lo <= hi <= MAX for lo, hi in s)
    assert C.complement(C.complement(a)) == a


def test_charset_constructor():
    assert C.charset([(5, 3)]) == ()
    assert C.charset([(1, 2), (3, 4), "a", 0x62]) == ((1, 4), (0x61, 0x62))
    assert C.from_chars("cab") == ((0x61, 0x63),)
    assert C.complement(()) == C.ANY_CHAR
    assert C.complement(C.ANY_CHAR) == ()
    assert C.size(C.ANY_CHAR) == 0x110000
    with pytest.raises(ValueError):
        C.charset([(0, MAX + 1)])
    with pytest.raises(ValueError):
        C.charset([(-1, 5)])
    assert C.contains(C.ANY_CHAR, 0) and C.contains(C.ANY_CHAR, MAX)
    assert not C.contains((), 0)


# ---------------------------------------------------------------- UTF-8


def test_any_char_is_small_and_exact():
    node = C.utf8_ir(C.ANY_CHAR)
    assert ir.expanded_size(node) < 60
    assert C.utf8_ir(C.ANY_CHAR) is node  # memoized
    rx = compiled(node)
    # every scalar value
    assert all(rx.fullmatch(chr(cp).encode()) for cp in range(0, 0xD800, 7))
    assert all(rx.fullmatch(chr(cp).encode()) for cp in range(0xE000, MAX + 1, 97))
    for cp in INTERESTING:
        assert bool(rx.fullmatch(chr(cp).encode("utf-8", "surrogatepass"))) == (not 0xD800 <= cp <= 0xDFFF)
    # every 1- and 2-byte string: accepted iff it is one valid UTF-8 character
    for b in [bytes([x]) for x in range(256)] + [bytes([x, y]) for x in range(0xC0, 0xE0) for y in range(256)]:
        assert bool(rx.fullmatch(b)) == _one_utf8_char(b), b


def _one_utf8_char(b: bytes) -> bool:
    try:
        return len(b.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


@FAST
@given(charsets, st.lists(code_points, min_size=30, max_size=60))
def test_utf8_ir_matches_python_encode(cs, probe):
    rx = compiled(C.utf8_ir(cs))
    for cp in probe + [lo for lo, _ in cs] + [hi for _, hi in cs] + INTERESTING:
        expected = C.contains(cs, cp) and not 0xD800 <= cp <= 0xDFFF
        assert bool(rx.fullmatch(chr(cp).encode("utf-8", "surrogatepass"))) == expected, hex(cp)


@FAST
@given(charsets, st.lists(st.binary(min_size=1, max_size=4), min_size=20, max_size=40))
def test_utf8_ir_accepts_only_encodings_of_members(cs, blobs):
    rx = compiled(C.utf8_ir(cs))
    for b in blobs:
        if rx.fullmatch(b):
            text = b.decode("utf-8")  # must be valid UTF-8
            assert len(text) == 1 and C.contains(cs, ord(text))


def test_utf8_ir_empty_and_surrogates_only():
    assert ir.is_nothing(C.utf8_ir(()))
    assert ir.is_nothing(C.utf8_ir(C.SURROGATES))
    assert C.utf8_ir([(0x61, 0x61)]) is C.utf8_ir(((0x61, 0x61),))  # normalized before memo


def test_big_scattered_set_stays_compact():
    rng = random.Random(1)
    cs = C.charset((x, x) for x in rng.sample(range(0x10000, 0x20000), 3000))
    node = C.utf8_ir(cs)
    assert ir.expanded_size(node) < 3000 * 2
    rx = compiled(node)
    for lo, _ in cs[:200]:
        assert rx.fullmatch(chr(lo).encode())


# ---------------------------------------------------------------- hex


@FAST
@given(st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)).map(lambda t: (min(t), max(t))), max_size=4),
       st.lists(st.integers(0, 0xFFFF), min_size=30, max_size=60))  # fmt: skip
def test_hex_ir(values, probe):
    values = ir.normalize_ranges(values)
    rx = compiled(C.hex_ir(values))
    for v in probe + [lo for lo, _ in values] + [hi for _, hi in values]:
        expected = C.contains(values, v)
        text = "%04x" % v
        mixed = "".join(ch.upper() if i % 2 else ch for i, ch in enumerate(text))
        for t in (text, text.upper(), mixed):
            assert bool(rx.fullmatch(t.encode())) == expected, (t, values)
    assert not rx.fullmatch(b"12345") and not rx.fullmatch(b"123") and not rx.fullmatch(b"12g4")


# ---------------------------------------------------------------- JSON


def json_encodings(cp: int) -> list[bytes]:
    """Every way (up to hex letter case, sampled) to write code point cp in a JSON string body."""
    ch = chr(cp)
    out = []
    if cp >= 0x20 and ch not in '"\\' and not 0xD800 <= cp <= 0xDFFF:
        out.append(ch.encode())
    short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if ch in short:
        out.append(short[ch].encode())
    if cp <= 0xFFFF:
        units = [cp]
    else:
        v = cp - 0x10000
        units = [0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)]
    for style in (str.lower, str.upper, lambda s: s[:2].upper() + s[2:].lower()):
        out.append("".join("\\u" + style("%04x" % u) for u in units).encode())
    return out


@FAST
@given(charsets, st.lists(code_points, min_size=20, max_size=40))
def test_json_char_ir_reaches_every_encoding_of_members(cs, probe):
    rx = compiled(C.json_char_ir(cs))
    for cp in probe + [lo for lo, _ in cs] + [hi for _, hi in cs] + INTERESTING:
        expected = C.contains(cs, cp) and not 0xD800 <= cp <= 0xDFFF
        for enc in json_encodings(cp):
            assert bool(rx.fullmatch(enc)) == expected, (hex(cp), enc)


JSON_PIECES = [
    b"a", b"A", b"0", b"/", b" ", b"\x7f", b"\x1f", b"\n", b'"', b"\\", b"\\\\", b'\\"', b"\\/", b"\\b",
    b"\\n", b"\\t", b"\\x", b"\\u", b"\\U", b"0041", b"00e9", b"00E9", b"d83d", b"D83D", b"de00",
    b"DE00", b"dc00", b"DBFF", b"DFFF", b"\\ud83d", b"\\uDE00", b"\\u0022", b"\\u005c", b"\\u00", b"4e2d",
    "é".encode(), "中".encode(), "😀".encode(), b"\xc3", b"\xa9", b"\xf0\x9f", b"\xed\xa0\x80",
    b"\\uD83D\\uDE00", b"\\udbff\\udfff", b"\\ud800\\udc00", b"\\u0000", b"\\uFFFF", b"\\u2028",
]  # fmt: skip


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(charsets, st.lists(st.lists(st.sampled_from(JSON_PIECES), min_size=1, max_size=3).map(b"".join),
                          min_size=30, max_size=60))  # fmt: skip
def test_json_char_ir_decodes_to_one_member(cs, blobs):
    rx = compiled(C.json_char_ir(cs))
    for b in blobs:
        if rx.fullmatch(b):
            decoded = json.loads(b'"' + b + b'"')
            assert len(decoded) == 1, (b, decoded)
            assert C.contains(cs, ord(decoded)), (b, decoded)
            assert not 0xD800 <= ord(decoded) <= 0xDFFF


def test_json_char_ir_specials():
    any_rx = compiled(C.json_char_ir(C.ANY_CHAR))
    for good in [b"a", "é".encode(), b"\\/", b"/", b"\\u00E9", b"\\u00e9", b"\\uD83D\\uDE00", b"\\ud83d\\ude00", b"\x7f"]:
        assert any_rx.fullmatch(good), good
    for bad in [b"\n", b"\x00", b'"', b"\\", b"\\ud800", b"\\uDC00", b"\\x41", b"\\U0041", b"\\u041", b"\xc3", b"ab"]:
        assert not any_rx.fullmatch(bad), bad
    assert ir.expanded_size(C.json_char_ir(C.ANY_CHAR)) < 120
    assert C.json_char_ir(C.ANY_CHAR) is C.json_char_ir(C.ANY_CHAR)
    only_slash = compiled(C.json_char_ir(C.from_chars("/")))
    assert only_slash.fullmatch(b"/") and only_slash.fullmatch(b"\\/") and only_slash.fullmatch(b"\\u002F")
    assert not only_slash.fullmatch(b"\\\\")
    quote = compiled(C.json_char_ir(C.from_chars('"')))
    assert quote.fullmatch(b'\\"') and quote.fullmatch(b"\\u0022") and not quote.fullmatch(b'"')
    nl = compiled(C.json_char_ir(C.from_chars("\n")))
    assert nl.fullmatch(b"\\n") and nl.fullmatch(b"\\u000A") and not nl.fullmatch(b"\n")
    assert ir.is_nothing(C.json_char_ir(C.SURROGATES))


def test_json_any_hex_escape():
    loose = compiled(C.json_char_ir(C.ANY_CHAR, any_hex_escape=True))
    for good in [b"\\ud800", b"\\uDFFF", b"\\uabcd", b"\\u0041", b"a", b"\\n", "😀".encode()]:
        assert loose.fullmatch(good), good
    for bad in [b"\\uD83D\\uDE00", b"\\u12", b"\\uxyzw", b"\n", b'"']:  # a pair is two escapes now
        assert not loose.fullmatch(bad), bad
    assert re.fullmatch(ir.to_python_regex(ir.rep(C.json_char_ir(C.ANY_CHAR, any_hex_escape=True))), b"\\uD83D\\uDE00")
    # ignored when the set is not everything: still exact
    cs = C.from_chars("ab")
    strict = compiled(C.json_char_ir(cs, any_hex_escape=True))
    assert strict.fullmatch(b"\\u0061") and not strict.fullmatch(b"\\u0063") and not strict.fullmatch(b"\\ud800")


def test_json_astral_ranges_across_surrogate_blocks():
    cs = C.charset([(0x1F5FE, 0x1F801), (0x10000, 0x10000), (MAX, MAX)])
    rx = compiled(C.json_char_ir(cs))
    for cp in list(range(0x1F5F0, 0x1F810)) + [0xFFFF, 0x10000, 0x10001, MAX - 1, MAX]:
        expected = C.contains(cs, cp)
        for enc in json_encodings(cp):
            assert bool(rx.fullmatch(enc)) == expected, (hex(cp), enc)
