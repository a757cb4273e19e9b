"""ECMA-262 regexes lowered to the byte IR (structgen.grammar.regex), checked against Python's `re`."""

from __future__ import annotations

import json
import random
import re
import unicodedata
import zlib
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.errors import RegexError, StructgenError
from structgen.grammar import charset as C
from structgen.grammar import ir
from structgen.grammar.regex import (
    Alternation,
    Anchor,
    Chars,
    Quantified,
    Sequence,
    parse_regex,
    regex_ir,
)

# ---------------------------------------------------------------- ECMA -> Python re

_PY_CLASS_BODY = {
    "d": "0-9",
    "w": "A-Za-z0-9_",
    "s": "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff",
}


def to_python(pattern: str) -> str:
    """Translate the ECMA patterns used below into a Python `re` pattern of the same language.

    Handles `.`, `$`, `\\d \\w \\s` (and negations outside classes), `(?<name>`,
    `\\u{...}`, `\\cX`; the patterns avoid what it does not handle.
    """
    out = []
    i = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            d = pattern[i + 1]
            i += 2
            if d.lower() in _PY_CLASS_BODY:
                body = _PY_CLASS_BODY[d.lower()]
                if in_class:
                    assert d.islower(), "negated class escapes inside classes are not translated"
                    out.append(body)
                else:
                    out.append(("[" if d.islower() else "[^") + body + "]")
            elif d == "u" and pattern[i] == "{":
                end = pattern.index("}", i)
                out.append("\\U%08x" % int(pattern[i + 1 : end], 16))
                i = end + 1
            elif d == "u" and re.match(r"[dD][89abAB]..\\u[dD][c-fC-F]..", pattern[i : i + 10]):
                hi, lo = int(pattern[i : i + 4], 16), int(pattern[i + 6 : i + 10], 16)
                out.append("\\U%08x" % (0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)))
                i += 10
            elif d == "c":
                out.append("\\x%02x" % (ord(pattern[i]) % 32))
                i += 1
            else:
                out.append("\\" + d)
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if pattern[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                raise AssertionError("ECMA '[]' differs from Python")
        elif c == ".":
            out.append("[^\\n\\r\\u2028\\u2029]")
        elif c == "$":
            out.append("\\Z")
        elif c == "(" and pattern[i + 1 : i + 3] == "?<" and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


PATTERNS = [
    "abc", "a|b|", "a*b+c?", "(ab|cd)*", "a{2}", "a{2,}", "a{1,3}b", "a{0,2}?b", "x*?y+?", "a??b",
    "[abc]+", "[^abc]", "[a-c\\n]*", "[^\\n]*", "[é中😀]", "[^é]+", "[\\u00e9-\\u4e2d]", "\\u00e9\\u{1F600}",
    "\\uD83D\\uDE00+", "\\d+", "\\w*", "\\s", "\\D\\W\\S", "[\\d\\s]+", "[^\\d\\w]", ".", ".*", "a.c", "^a", "a$",
    "^a$", "^(a|b)$", "(^a|b$)", "^a|^b", "^a|b$|c", "^$", "^|a", "$", "((^a|b)|c)x(y|(z$|w))",
    "(?:a|é)+中", "(?<n>a|b)c", "\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\/\\^\\$", "a\\-b", "[-a]", "[a-]",
    "[\\]\\-]", "[\\b]", "\\x41\\t\\r\\n\\v\\f\\0", "(a|b|c)*abc(a|b)?", "((a|b)c)+", "😀{2,3}", "é?中*",
    "()", "(|a)b", "a]", "a}", "a{", "a{x}", "[\\s\\d]", "[\\w-]", "[^\\s]{2}", "\\cJ\\ca", "[\\cJ]",
    "[ -~]*", "[\\u2028\\u2029\\r\\n]", "\\u{10FFFF}|\\u{0}", "[\\x00-\\x7f]+é", "[😀-\\u{1F64F}]",
    "a(b(c(d)?)?)?", "(a|ab)(c|bcd)(d*)", "[0-9]{2,4}-[a-z]+",
]  # fmt: skip

ALPHABET = "abcdxyzwA0129-_. \n\r\t\x0b\x0c\x00\x08é中😀\u2028\u00a0\U0010ffff}]{$"


@lru_cache(maxsize=None)
def py_rx(pattern: str) -> re.Pattern:
    return re.compile(to_python(pattern), re.DOTALL)


@lru_cache(maxsize=None)
def ir_rx(pattern: str, encoding: str, search: bool) -> re.Pattern:
    return re.compile(ir.to_python_regex(regex_ir(pattern, encoding=encoding, search=search)), re.DOTALL)


def sample(node, rng: random.Random) -> str:
    """A random string of the AST's language (anchors treated as empty)."""
    if isinstance(node, Chars):
        picks = [ch for ch in ALPHABET if C.contains(node.cs, ord(ch))]
        if picks and rng.random() < 0.8:
            return rng.choice(picks)
        lo, hi = rng.choice(C.difference(node.cs, C.SURROGATES))
        return chr(rng.randint(lo, hi))
    if isinstance(node, Sequence):
        return "".join(sample(x, rng) for x in node.items)
    if isinstance(node, Alternation):
        return sample(rng.choice(node.items), rng)
    if isinstance(node, Quantified):
        hi = node.max if node.max is not None else node.min + 3
        return "".join(sample(node.item, rng) for _ in range(rng.randint(node.min, min(hi, node.min + 3))))
    if isinstance(node, Anchor):
        return ""
    raise TypeError(node)


def candidates(pattern: str, seed: int, n: int = 40) -> list[str]:
    rng = random.Random(seed)
    ast = parse_regex(pattern)
    out = [""]
    for _ in range(n):
        s = sample(ast, rng)
        out.append(s)
        pad = lambda: "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 3)))  # noqa: E731
        out.append(pad() + s + pad())
        out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 5))))
    return out


# ---------------------------------------------------------------- differential (UTF-8)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_utf8_matches_python_re(pattern):
    py = py_rx(pattern)
    full = ir_rx(pattern, "utf8", False)
    srch = ir_rx(pattern, "utf8", True)
    positives = 0
    for s in candidates(pattern, seed=zlib.crc32(pattern.encode())):
        b = s.encode()
        want = py.fullmatch(s) is not None
        positives += want
        assert (full.fullmatch(b) is not None) == want, (pattern, s)
        assert (srch.fullmatch(b) is not None) == (py.search(s) is not None), (pattern, s, "search")
    if pattern not in ("[\\u2028\\u2029\\r\\n]",):
        assert positives, f"no positive sample for {pattern!r}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATTERNS), st.text(alphabet=ALPHABET, max_size=8))
def test_utf8_random_strings(pattern, s):
    py = py_rx(pattern)
    b = s.encode()
    assert (ir_rx(pattern, "utf8", False).fullmatch(b) is not None) == (py.fullmatch(s) is not None)
    assert (ir_rx(pattern, "utf8", True).fullmatch(b) is not None) == (py.search(s) is not None)


# ---------------------------------------------------------------- JSON encoding

JSON_PATTERNS = [
    p for p in PATTERNS if p not in ("a{2,}", "(a|b|c)*abc(a|b)?", "[ -~]*", "((a|b)c)+")
] + ['"\\\\/', '[^"\\\\]*', "\\u0000\\u001f\\u007f", '^[^"]+$']


def _encodings(ch: str) -> list[str]:
    cp = ord(ch)
    out = []
    if cp >= 0x20 and ch not in '"\\':
        out.append(ch)
    short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if ch in short:
        out.append(short[ch])
    units = [cp] if cp <= 0xFFFF else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
    out.append("".join("\\u%04x" % u for u in units))
    out.append("".join("\\u%04X" % u for u in units))
    return out


def random_json_body(s: str, rng: random.Random) -> bytes:
    """s JSON-encoded with a random valid encoding for each character."""
    return "".join(rng.choice(_encodings(ch)) for ch in s).encode()


@pytest.mark.parametrize("pattern", JSON_PATTERNS)
def test_json_encoding_matches_decoded_string(pattern):
    py = py_rx(pattern)
    full = ir_rx(pattern, "json", False)
    srch = ir_rx(pattern, "json", True)
    rng = random.Random(zlib.crc32(pattern.encode()))
    for s in candidates(pattern, seed=rng.randrange(1 << 16), n=25) + ['"', "\\", '"\\/', "\x00\x1f\x7f"]:
        want_full = py.fullmatch(s) is not None
        want_search = py.search(s) is not None
        bodies = [json.dumps(s)[1:-1].encode(), json.dumps(s, ensure_ascii=False)[1:-1].encode()]
        bodies += [random_json_body(s, rng) for _ in range(2)]
        for body in bodies:
            assert (full.fullmatch(body) is not None) == want_full, (pattern, s, body)
            assert (srch.fullmatch(body) is not None) == want_search, (pattern, s, body, "search")


JSON_PIECES = [
    "a", "b", "c", "x", "A", "0", "-", " ", "/", "é", "中", "😀", "\\n", "\\r", "\\t", "\\/", "\\\\", '\\"',
    '"', "\\", "\\u0061", "\\u00E9", "\\u00e9", "\\u4E2D", "\\ud83d", "\\uDE00", "\\uD83D\\uDE00",
    "\\u2028", "\\u000a", "\\u0000", "\\x41", "\\u12", "\n", "\x7f",
]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(JSON_PATTERNS), st.lists(st.sampled_from(JSON_PIECES), max_size=6), st.booleans())
def test_json_encoding_accepts_nothing_the_pattern_rejects(pattern, pieces, search):
    body = "".join(pieces).encode()
    if ir_rx(pattern, "json", search).fullmatch(body):
        decoded = json.loads(b'"' + body + b'"')
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in decoded)
        py = py_rx(pattern)
        assert (py.search(decoded) if search else py.fullmatch(decoded)) is not None, (pattern, body, decoded)


# ---------------------------------------------------------------- anchors


def test_anchor_semantics():
    def m(p, s, search=True):
        return re.fullmatch(ir.to_python_regex(regex_ir(p, search=search)), s.encode(), re.DOTALL) is not None

    assert m("^ab", "abxx") and not m("^ab", "xab")
    assert m("ab$", "xxab") and not m("ab$", "abx") and not m("ab$", "ab\n")
    assert m("ab", "\n\nab\n")
    assert m("(^a|b$)", "ax") and m("(^a|b$)", "xb") and not m("(^a|b$)", "xax")
    assert m("^a|^b", "bx") and not m("^a|^b", "xb")
    assert m("a", "a", search=False) and not m("a", "xa", search=False)
    assert m("^(a|b)$", "b", search=False)
    # full-match mode: anchors are redundant
    assert regex_ir("^abc$") is not None
    assert ir.to_python_regex(regex_ir("^abc$")) == ir.to_python_regex(regex_ir("abc"))


@pytest.mark.parametrize(
    "pattern, position",
    [("a^b", 1), ("a$b", 1), ("(a^)", 2), ("(^a)*", 1), ("x(^a|b)", 2), ("(a$)b", 2), ("a|b^c", 3),
     ("$^", 0), ("^^a", 1), ("(?:^a)?b", 3), ("a(b$)+", 3)],
)  # fmt: skip
def test_misplaced_anchors(pattern, position):
    with pytest.raises(RegexError) as info:
        regex_ir(pattern)
    assert info.value.position == position
    assert "only supported" in str(info.value)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "pattern, position, words",
    [
        ("(a)\\1", 3, "backreference"),
        ("(?<x>a)\\k<x>", 7, "backreference"),
        ("(?=a)", 0, "lookahead"),
        ("a(?!b)", 1, "lookahead"),
        ("(?<=a)b", 0, "lookbehind"),
        ("(?<!a)b", 0, "lookbehind"),
        ("\\bword", 0, "word boundary"),
        ("a\\B", 1, "word boundary"),
        ("(?i)abc", 0, "(?i)"),
        ("x(?i:abc)", 1, "(?i:"),
        ("(?m-s:a)", 0, "inline flags"),
        ("(ab", 3, "missing ')'"),
        ("((a)", 4, "missing ')'"),
        ("ab)", 2, "unbalanced ')'"),
        ("[abc", 0, "missing ']'"),
        ("a[^", 1, "missing ']'"),
        ("[z-a]", 1, "out of order"),
        ("a{3,2}", 1, "out of order"),
        ("*a", 0, "nothing to repeat"),
        ("a|+", 2, "nothing to repeat"),
        ("(?:*)", 3, "nothing to repeat"),
        ("a**", 2, "nothing to repeat"),
        ("a{2}{3}", 4, "nothing to repeat"),
        ("{2}", 0, "nothing to repeat"),
        ("^*", 1, "nothing to repeat"),
        ("a???", 3, "nothing to repeat"),
        ("\\q", 0, "invalid escape"),
        ("a\\", 1, "lone backslash"),
        ("\\x4", 0, "\\x"),
        ("\\u12", 0, "\\u"),
        ("\\u{110000}", 0, "\\u{"),
        ("\\c1", 0, "\\c"),
        ("\\012", 0, "octal"),
        ("\\p{Foo}", 0, "Foo"),
        ("[\\p{Bogus_Prop}]", 1, "Bogus_Prop"),
        ("\\p{Script=Nonexistent}", 0, "Nonexistent"),
        ("\\p{gc=Xx}", 0, "Xx"),
        ("\\pL", 0, "\\p"),
        ("\\p{L", 0, "}"),
        ("(?P<n>a)", 0, "(?<name>"),
        ("(?P=n)", 0, "backreference"),
        ("(?#c)", 0, "comment"),
        ("(?<1a>x)", 0, "group name"),
        ("(?x", 0, "group"),
        ("a{,3}", 1, "{0,n}"),
    ],
)
def test_errors(pattern, position, words):
    with pytest.raises(RegexError) as info:
        regex_ir(pattern)
    err = info.value
    assert isinstance(err, StructgenError) and isinstance(err, ValueError)
    assert err.position == position, str(err)
    assert err.pattern == pattern
    assert words in str(err), str(err)
    assert f"position {position}" in str(err)


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(RegexError):
        regex_ir("(" * 5000 + "a" + ")" * 5000)
    assert regex_ir("(" * 50 + "a" + ")" * 50) is not None


def test_bad_arguments():
    with pytest.raises(ValueError):
        regex_ir("a", encoding="latin1")
    with pytest.raises(RegexError):
        parse_regex(b"abc")  # type: ignore[arg-type]


# ---------------------------------------------------------------- AST and IR shape


def test_parse_ast():
    assert parse_regex("a") == Chars(((0x61, 0x61),))
    ast = parse_regex("^(a|b)*?$")
    assert isinstance(ast, Sequence) and isinstance(ast.items[0], Anchor) and ast.items[0].position == 0
    q = ast.items[1]
    assert isinstance(q, Quantified) and (q.min, q.max) == (0, None)
    assert isinstance(q.item, Alternation)
    assert parse_regex("[]") == Chars(())  # ECMA: matches nothing
    assert parse_regex("[^]") == Chars(C.ANY_CHAR)  # ECMA: any character
    assert parse_regex("\\uD83D\\uDE00") == Chars(((0x1F600, 0x1F600),))
    assert parse_regex("[\\d-z]") == Chars(C.union(((0x30, 0x39),), ((0x2D, 0x2D),), ((0x7A, 0x7A),)))


def test_big_repeats_stay_repeat_nodes():
    node = regex_ir("a{1000000}")
    assert isinstance(node, ir.Repeat) and node.min == node.max == 1000000
    node = regex_ir("(ab|c){5,123456789}")
    assert isinstance(node, ir.Repeat) and (node.min, node.max) == (5, 123456789)
    node = regex_ir("x{99999999999999999999,}")
    assert isinstance(node, ir.Repeat) and node.max is None


def test_shapes_are_small():
    assert ir.expanded_size(regex_ir(".*", search=True)) < 150
    assert ir.expanded_size(regex_ir("[^a]", encoding="json")) < 200
    assert regex_ir("abc") is regex_ir("abc")  # memoized
    assert ir.is_nothing(regex_ir("[]"))
    assert ir.is_nothing(regex_ir("a[]b"))
    assert ir.is_empty(regex_ir("[]*"))
    assert ir.is_empty(regex_ir("^$"))


def test_empty_class_and_any_class():
    full = lambda p, s: re.fullmatch(ir.to_python_regex(regex_ir(p)), s.encode(), re.DOTALL) is not None  # noqa: E731
    assert full("[^]", "\n") and full("[^]", "😀") and not full("[^]", "")
    assert not full("a[]", "a")
    assert full("[]|a", "a")


# ---------------------------------------------------------------- Unicode properties


def _cat(cp: int) -> str:
    return unicodedata.category(chr(cp))


@pytest.mark.parametrize(
    "prop, test",
    [
        ("L", lambda c: _cat(c)[0] == "L"),
        ("Letter", lambda c: _cat(c)[0] == "L"),
        ("Lu", lambda c: _cat(c) == "Lu"),
        ("gc=Ll", lambda c: _cat(c) == "Ll"),
        ("General_Category=Lowercase_Letter", lambda c: _cat(c) == "Ll"),
        ("N", lambda c: _cat(c)[0] == "N"),
        ("Nd", lambda c: _cat(c) == "Nd"),
        ("P", lambda c: _cat(c)[0] == "P"),
        ("Zs", lambda c: _cat(c) == "Zs"),
        ("Any", lambda c: True),
        ("ASCII", lambda c: c < 128),
        ("Assigned", lambda c: _cat(c) != "Cn"),
    ],
)
def test_general_category_properties(prop, test):
    rng = random.Random(7)
    cps = [rng.randrange(0x30000) for _ in range(300)] + list(range(0x20, 0x250)) + [0x660, 0x4E2D, 0x1F600, 0x1D7CE]
    cps = [c for c in cps if not 0xD800 <= c <= 0xDFFF]
    pos = re.compile(ir.to_python_regex(regex_ir("\\p{%s}" % prop)), re.DOTALL)
    neg = re.compile(ir.to_python_regex(regex_ir("\\P{%s}" % prop)), re.DOTALL)
    cls = re.compile(ir.to_python_regex(regex_ir("[x\\p{%s}]" % prop)), re.DOTALL)
    for cp in cps:
        b = chr(cp).encode()
        assert (pos.fullmatch(b) is not None) == test(cp), (prop, hex(cp))
        assert (neg.fullmatch(b) is not None) != test(cp), (prop, hex(cp))
        assert (cls.fullmatch(b) is not None) == (test(cp) or cp == 0x78)


def test_scripts_and_binary_properties():
    pytest.importorskip("regex")

    def full(p, s):
        return re.fullmatch(ir.to_python_regex(regex_ir(p)), s.encode(), re.DOTALL) is not None

    assert full("\\p{Script=Greek}+", "αβγΩ") and not full("\\p{Script=Greek}", "a")
    assert full("\\p{sc=Latn}+", "abcé") and not full("\\p{sc=Latn}", "α")
    assert full("\\p{scx=Han}", "中") and not full("\\p{scx=Han}", "a")
    assert full("\\p{Script=Cyrillic}", "ж")
    assert full("\\p{Alphabetic}", "a") and not full("\\p{Alpha}", "1")
    assert full("\\p{White_Space}", "\u3000")
    assert full("\\P{Script=Greek}", "a") and not full("\\P{Script=Greek}", "α")


# ---------------------------------------------------------------- escapes and classes


@pytest.mark.parametrize(
    "pattern, yes, no",
    [
        ("\\s", [" ", "\t", "\n", "\x0b", "\x0c", "\r", "\u00a0", "\ufeff", "\u1680", "\u2000", "\u200a",
                 "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"], ["a", "\u200b", "\x85", "\x1c"]),
        ("\\S", ["a", "\x85", "\u200b"], [" ", "\u3000", "\n"]),
        ("\\d", list("0123456789"), ["٠", "a", "١"]),
        ("\\w", list("azAZ09_"), ["é", "-", " "]),
        ("\\W", ["é", "-"], ["a", "_"]),
        (".", ["a", "é", "😀", "\t", "\u0085"], ["\n", "\r", "\u2028", "\u2029", ""]),
        ("\\/\\-\\,\\#\\ \\\"\\'", ["/-,# \"'"], []),
        ("\\é", ["é"], []),
        ("[\\b]", ["\x08"], ["b"]),
        ("\\u{1F600}\\u{61}", ["😀a"], []),
        ("\\ca\\cZ", ["\x01\x1a"], []),
        ("😀+", ["😀😀"], ["\U0001f601"]),
    ],
)  # fmt: skip
def test_escape_meanings(pattern, yes, no):
    rx = re.compile(ir.to_python_regex(regex_ir(pattern)), re.DOTALL)
    for s in yes:
        assert rx.fullmatch(s.encode()), (pattern, s)
    for s in no:
        assert not rx.fullmatch(s.encode()), (pattern, s)
