"""ECMA-262 regular expressions (the JSON Schema dialect) lowered to the byte IR.

`parse_regex(pattern)` parses at the character (code point) level into a small AST:

    Chars(cs)                  one character from a CharSet
    Sequence(items)            concatenation
    Alternation(items)         alternatives
    Quantified(item, min, max) repetition (max None = unbounded; laziness is dropped,
                               it does not change the language)
    Anchor(kind, position)     `^` or `$`

`regex_ir(pattern, encoding=..., search=...)` lowers it to `structgen.grammar.ir`: each
character becomes the UTF-8 encodings of its set (`encoding="utf8"`), or the JSON
string-body encodings of one character of its set (`encoding="json"`: the regex
constrains the decoded string, the IR matches its JSON-encoded body).

Semantics are those of ECMA-262 in Unicode mode (code points, not UTF-16 units) without
flags: `.` excludes line terminators, `^`/`$` match only at the ends of the input, `\\d`,
`\\w` are ASCII-only. A few Annex B leniencies are kept because real schemas rely on
them: a lone `]`, `}` or a `{` that does not start a quantifier is a literal, and ASCII
punctuation may be escaped anywhere. Constructs that are not regular (backreferences,
lookaround, word boundaries) and flags are refused with a `RegexError`.
"""

from __future__ import annotations

import re as _re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Union

from structgen.errors import RegexError
from structgen.grammar import charset as C
from structgen.grammar import ir

# ---------------------------------------------------------------- AST


@dataclass(frozen=True)
class Chars:
    cs: C.CharSet


@dataclass(frozen=True)
class Sequence:
    items: tuple


@dataclass(frozen=True)
class Alternation:
    items: tuple


@dataclass(frozen=True)
class Quantified:
    item: "RegexNode"
    min: int
    max: int | None


@dataclass(frozen=True)
class Anchor:
    kind: str  # "^" or "$"
    position: int


RegexNode = Union[Chars, Sequence, Alternation, Quantified, Anchor]

EMPTY_SEQUENCE = Sequence(())

# ---------------------------------------------------------------- character sets

DIGIT: C.CharSet = ((0x30, 0x39),)
WORD: C.CharSet = C.charset([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
SPACE: C.CharSet = C.charset(
    [
        (0x09, 0x0D),  # \t \n \v \f \r
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
LINE_TERMINATORS: C.CharSet = C.charset([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
DOT: C.CharSet = C.complement(LINE_TERMINATORS)

_CLASS_ESCAPES: dict[str, C.CharSet] = {
    "d": DIGIT,
    "D": C.complement(DIGIT),
    "w": WORD,
    "W": C.complement(WORD),
    "s": SPACE,
    "S": C.complement(SPACE),
}
_CONTROL_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B}
_SYNTAX_CHARS = set("^$\\.*+?()[]{}|/")
_HEX = set("0123456789abcdefABCDEF")

# ---- Unicode properties

_GC_GROUPS = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "LC": ("Lu", "Ll", "Lt"),
    "M": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"),
    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "S": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"),
    "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
}
_GC_LONG = {
    "Letter": "L",
    "Cased_Letter": "LC",
    "Uppercase_Letter": "Lu",
    "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt",
    "Modifier_Letter": "Lm",
    "Other_Letter": "Lo",
    "Mark": "M",
    "Combining_Mark": "M",
    "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me",
    "Number": "N",
    "Decimal_Number": "Nd",
    "digit": "Nd",
    "Letter_Number": "Nl",
    "Other_Number": "No",
    "Punctuation": "P",
    "punct": "P",
    "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe",
    "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po",
    "Symbol": "S",
    "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk",
    "Other_Symbol": "So",
    "Separator": "Z",
    "Space_Separator": "Zs",
    "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp",
    "Other": "C",
    "Control": "Cc",
    "cntrl": "Cc",
    "Format": "Cf",
    "Surrogate": "Cs",
    "Private_Use": "Co",
    "Unassigned": "Cn",
}
_GC_ALL = set(_GC_GROUPS) | {c for group in _GC_GROUPS.values() for c in group}

# ECMA-262 binary Unicode properties (table "Binary Unicode property aliases"), long and short names.
_BINARY_PROPERTIES = {
    "ASCII_Hex_Digit": "AHex", "Alphabetic": "Alpha", "Bidi_Control": "Bidi_C",
    "Bidi_Mirrored": "Bidi_M", "Case_Ignorable": "CI", "Cased": None,
    "Changes_When_Casefolded": "CWCF", "Changes_When_Casemapped": "CWCM",
    "Changes_When_Lowercased": "CWL", "Changes_When_NFKC_Casefolded": "CWKCF",
    "Changes_When_Titlecased": "CWT", "Changes_When_Uppercased": "CWU", "Dash": None,
    "Default_Ignorable_Code_Point": "DI", "Deprecated": "Dep", "Diacritic": "Dia",
    "Emoji": None, "Emoji_Component": "EComp", "Emoji_Modifier": "EMod",
    "Emoji_Modifier_Base": "EBase", "Emoji_Presentation": "EPres",
    "Extended_Pictographic": "ExtPict", "Extender": "Ext", "Grapheme_Base": "Gr_Base",
    "Grapheme_Extend": "Gr_Ext", "Hex_Digit": "Hex", "IDS_Binary_Operator": "IDSB",
    "IDS_Trinary_Operator": "IDST", "ID_Continue": "IDC", "ID_Start": "IDS",
    "Ideographic": "Ideo", "Join_Control": "Join_C", "Logical_Order_Exception": "LOE",
    "Lowercase": "Lower", "Math": None, "Noncharacter_Code_Point": "NChar",
    "Pattern_Syntax": "Pat_Syn", "Pattern_White_Space": "Pat_WS", "Quotation_Mark": "QMark",
    "Radical": None, "Regional_Indicator": "RI", "Sentence_Terminal": "STerm",
    "Soft_Dotted": "SD", "Terminal_Punctuation": "Term", "Unified_Ideograph": "UIdeo",
    "Uppercase": "Upper", "Variation_Selector": "VS", "White_Space": "space",
    "XID_Continue": "XIDC", "XID_Start": "XIDS",
}  # fmt: skip
_BINARY_ALIASES = {short: long for long, short in _BINARY_PROPERTIES.items() if short}


@lru_cache(maxsize=1)
def _general_category_table() -> dict[str, C.CharSet]:
    """Code point ranges of every two-letter general category (from `unicodedata`)."""
    import unicodedata

    runs: dict[str, list[tuple[int, int]]] = {}
    cat = unicodedata.category
    start = 0
    current = cat("\x00")
    for cp in range(1, C.MAX_CODE_POINT + 1):
        c = cat(chr(cp))
        if c != current:
            runs.setdefault(current, []).append((start, cp - 1))
            start, current = cp, c
    runs.setdefault(current, []).append((start, C.MAX_CODE_POINT))
    return {k: tuple(v) for k, v in runs.items()}


@lru_cache(maxsize=256)
def _general_category(name: str) -> C.CharSet:
    table = _general_category_table()
    members = _GC_GROUPS.get(name, (name,))
    return C.union(*(table.get(m, ()) for m in members))


@lru_cache(maxsize=1)
def _all_code_points() -> str:
    import numpy as np

    return np.arange(C.MAX_CODE_POINT + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


@lru_cache(maxsize=256)
def _property_via_regex_module(expr: str) -> C.CharSet | None:
    """The set of a Unicode property that the `regex` package knows (None if it cannot)."""
    try:
        import regex as _regex_mod  # installed with transformers
    except ImportError:
        return None
    try:
        compiled = _regex_mod.compile(r"\p{%s}+" % expr)
    except Exception:
        return None
    return tuple((m.start(), m.end() - 1) for m in compiled.finditer(_all_code_points()))


def _unicode_property(body: str) -> C.CharSet | str:
    """The set for `\\p{body}`, or an error message."""
    if "=" in body:
        name, _, value = body.partition("=")
        if name in ("General_Category", "gc"):
            gc = _GC_LONG.get(value, value)
            if gc in _GC_ALL:
                return _general_category(gc)
            return f"unknown General_Category value {value!r}"
        if name in ("Script", "sc", "Script_Extensions", "scx"):
            if not _re.fullmatch(r"[A-Za-z][A-Za-z_]*", value):
                return f"invalid script name {value!r}"
            key = "Script" if name in ("Script", "sc") else "Script_Extensions"
            cs = _property_via_regex_module(f"{key}={value}")
            if cs is None:
                return f"unsupported Unicode property \\p{{{body}}} (unknown script, or the 'regex' package is missing)"
            return cs
        return f"unsupported Unicode property name {name!r}"
    gc = _GC_LONG.get(body, body)
    if gc in _GC_ALL:
        return _general_category(gc)
    if body == "Any":
        return C.ANY_CHAR
    if body == "ASCII":
        return ((0, 0x7F),)
    if body == "Assigned":
        return C.complement(_general_category("Cn"))
    long = _BINARY_ALIASES.get(body, body)
    if long in _BINARY_PROPERTIES:
        cs = _property_via_regex_module(long)
        if cs is None:
            return f"unsupported Unicode property \\p{{{body}}} (needs the 'regex' package)"
        return cs
    return f"unsupported Unicode property \\p{{{body}}}"


# ---------------------------------------------------------------- parser

_MAX_DEPTH = 100


class _Parser:
    def __init__(self, pattern: str, flavor: str = "ecma", flags: str = ""):
        self.p = pattern
        self.n = len(pattern)
        self.i = 0
        self.depth = 0
        self.python = flavor == "python"
        self.ignore_case = "i" in flags
        self.dotall = "s" in flags
        if self.python:
            self.leading_flags()

    def chars(self, cs: C.CharSet) -> "Chars":
        return Chars(_case_closed(cs) if self.ignore_case else cs)

    def leading_flags(self) -> None:
        """Python's global inline flags at the start of a pattern: `(?i)`, `(?s)`, `(?is)`."""
        m = _re.compile(r"\(\?([a-zA-Z]+)\)").match(self.p, self.i)
        if m:
            self.set_flags(m.group(1), self.i)
            self.i = m.end()

    def set_flags(self, letters: str, pos: int, on: bool = True) -> None:
        for flag in letters:
            if flag == "i":
                self.ignore_case = on
            elif flag == "s":
                self.dotall = on
            elif flag not in "ux":  # re.UNICODE is the default; x is handled before parsing
                raise self.error(f"inline flag {flag!r} is not supported (only i, s and u)", pos)

    def error(self, message: str, position: int | None = None) -> RegexError:
        return RegexError(message, self.p, self.i if position is None else position)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < self.n else ""

    # -- structure

    def parse(self) -> RegexNode:
        node = self.parse_alternation()
        if self.i < self.n:  # only a ')' stops parse_alternation early
            raise self.error("unbalanced ')': there is no open group to close")
        return node

    def parse_alternation(self) -> RegexNode:
        branches = [self.parse_sequence()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.parse_sequence())
        return branches[0] if len(branches) == 1 else Alternation(tuple(branches))

    def parse_sequence(self) -> RegexNode:
        items: list[RegexNode] = []
        while self.i < self.n and self.p[self.i] not in "|)":
            start = self.i
            atom = self.parse_atom()
            items.append(self.parse_quantifier(atom, start))
        if len(items) == 1:
            return items[0]
        return Sequence(tuple(items))

    def braced_quantifier(self, j: int) -> tuple[int, int | None, int] | None:
        """If a `{n}`, `{n,}` or `{n,m}` starts at j: (min, max, index after it)."""
        m = _re.compile(r"\{([0-9]+)(,([0-9]*))?\}").match(self.p, j)
        if not m:
            return None
        lo = int(m.group(1))
        if m.group(2) is None:
            hi: int | None = lo
        elif m.group(3) == "":
            hi = None
        else:
            hi = int(m.group(3))
        return lo, hi, m.end()

    def quantifier_at(self, j: int) -> tuple[int, int | None, int] | None:
        c = self.p[j] if j < self.n else ""
        if c == "*":
            return 0, None, j + 1
        if c == "+":
            return 1, None, j + 1
        if c == "?":
            return 0, 1, j + 1
        if c == "{":
            return self.braced_quantifier(j)
        return None

    def check_ambiguous_brace(self, j: int) -> None:
        if _re.compile(r"\{,[0-9]+\}").match(self.p, j):
            raise self.error(
                "'{,n}' is not a quantifier in ECMA-262 (it would be the literal text); "
                "write '{0,n}' for a repeat or '\\{,n}' for the text",
                j,
            )

    def parse_quantifier(self, atom: RegexNode, start: int) -> RegexNode:
        q = self.quantifier_at(self.i)
        if q is None:
            if self.peek() == "{":
                self.check_ambiguous_brace(self.i)
            return atom
        qpos = self.i
        if isinstance(atom, Anchor):
            raise self.error(f"nothing to repeat: the anchor '{atom.kind}' cannot be quantified", qpos)
        lo, hi, end = q
        if hi is not None and hi < lo:
            raise self.error(f"numbers out of order in quantifier {{{lo},{hi}}}", qpos)
        self.i = end
        if self.peek() == "?":  # lazy: same language
            self.i += 1
        if self.quantifier_at(self.i) is not None:
            raise self.error("nothing to repeat: a quantifier cannot follow a quantifier", self.i)
        return Quantified(atom, lo, hi)

    def parse_atom(self) -> RegexNode:
        c = self.p[self.i]
        pos = self.i
        if c == "^" or c == "$":
            self.i += 1
            return Anchor(c, pos)
        if c == ".":
            self.i += 1
            if self.python:
                return Chars(C.ANY_CHAR if self.dotall else _PY_DOT)
            return Chars(DOT)
        if c == "(":
            return self.parse_group()
        if c == "[":
            return self.chars(self.parse_class())
        if c == "\\":
            kind, value = self.parse_escape(in_class=False)
            return self.chars(value if kind == "set" else ((value, value),))
        if c in "*+?":
            raise self.error(f"nothing to repeat before '{c}'")
        if c == "{":
            if self.braced_quantifier(pos) is not None:
                raise self.error("nothing to repeat before '{'")
            self.check_ambiguous_brace(pos)
        # a literal (including a lone ']', '}' or '{', Annex B)
        cp = self.literal()
        return self.chars(((cp, cp),))

    def parse_group(self) -> RegexNode:
        open_pos = self.i
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error(f"groups nested deeper than {_MAX_DEPTH}", open_pos)
        self.i += 1
        if self.peek() == "?":
            nxt = self.peek(1)
            if nxt == ":":
                self.i += 2
            elif nxt in ("=", "!"):
                raise self.error(f"lookahead '(?{nxt}' is not supported (not a regular construct)", open_pos)
            elif nxt == "<" and self.peek(2) in ("=", "!"):
                raise self.error(
                    f"lookbehind '(?<{self.peek(2)}' is not supported (not a regular construct)", open_pos
                )
            elif nxt == "<":
                m = _re.compile(r"<([^\W\d]|\$)(\w|\$)*>").match(self.p, self.i + 1)
                if not m:
                    raise self.error("invalid group name after '(?<'", open_pos)
                self.i = m.end()
            elif nxt == "P" and self.python and self.peek(2) == "<":
                m = _re.compile(r"<[^\W\d]\w*>").match(self.p, self.i + 2)
                if not m:
                    raise self.error("invalid group name after '(?P'", open_pos)
                self.i = m.end()
            elif self.python and _re.compile(r"\?[a-zA-Z]*(-[a-zA-Z]+)?:").match(self.p, self.i):
                return self.flag_group(open_pos)
            elif nxt == "P":
                if self.peek(2) == "=":
                    raise self.error("backreference '(?P=' is not supported", open_pos)
                raise self.error(
                    "Python-style group '(?P' is not ECMA-262; write '(?<name>...)' for a named group", open_pos
                )
            elif nxt == "#":
                raise self.error("comment groups '(?#...)' are not ECMA-262", open_pos)
            else:
                m = _re.compile(r"\?([a-zA-Z]*(-[a-zA-Z]*)?)([:)])").match(self.p, self.i)
                if m and m.group(1):
                    raise self.error(
                        f"inline flags '(?{m.group(1)}{m.group(3)}' are not supported "
                        f"(flags cannot be set in a JSON Schema pattern)",
                        open_pos,
                    )
                raise self.error("invalid group: '(?' must be followed by ':', '<name>', or a lookaround", open_pos)
        inner = self.parse_alternation()
        if self.peek() != ")":
            raise self.error(f"missing ')' for the group opened at position {open_pos}", self.i)
        self.i += 1
        self.depth -= 1
        return inner

    def flag_group(self, open_pos: int) -> RegexNode:
        """Python's scoped flags `(?i:...)`, `(?-i:...)`, `(?s:...)`."""
        m = _re.compile(r"\?([a-zA-Z]*)(?:-([a-zA-Z]+))?:").match(self.p, self.i)
        saved = (self.ignore_case, self.dotall)
        self.set_flags(m.group(1), open_pos)
        self.set_flags(m.group(2) or "", open_pos, on=False)
        self.i = m.end()
        inner = self.parse_alternation()
        if self.peek() != ")":
            raise self.error(f"missing ')' for the group opened at position {open_pos}", self.i)
        self.i += 1
        self.depth -= 1
        self.ignore_case, self.dotall = saved
        return inner

    # -- character classes

    def parse_class(self) -> C.CharSet:
        open_pos = self.i
        self.i += 1
        negate = False
        if self.peek() == "^":
            negate = True
            self.i += 1
        parts: list[C.CharSet] = []
        while True:
            if self.i >= self.n:
                raise self.error(f"missing ']' for the character class opened at position {open_pos}", open_pos)
            if self.p[self.i] == "]":
                self.i += 1
                break
            a_pos = self.i
            a_kind, a = self.parse_class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                b_kind, b = self.parse_class_atom()
                if a_kind == "set" or b_kind == "set":
                    # Annex B: [\d-z] is \d, '-' and 'z'
                    for kind, v in ((a_kind, a), ("char", 0x2D), (b_kind, b)):
                        parts.append(v if kind == "set" else ((v, v),))
                    continue
                if a > b:
                    raise self.error(
                        f"range out of order in character class: {_show(a)}-{_show(b)}", a_pos
                    )
                parts.append(((a, b),))
                continue
            parts.append(a if a_kind == "set" else ((a, a),))
        cs = C.union(*parts)
        return C.complement(cs) if negate else cs

    def parse_class_atom(self) -> tuple[str, object]:
        c = self.p[self.i]
        if c == "\\":
            return self.parse_escape(in_class=True)
        return "char", self.literal()

    def literal(self) -> int:
        """The literal character at self.i (a surrogate pair in the string is one code point)."""
        cp = ord(self.p[self.i])
        self.i += 1
        if 0xD800 <= cp <= 0xDBFF and self.i < self.n and 0xDC00 <= ord(self.p[self.i]) <= 0xDFFF:
            cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.p[self.i]) - 0xDC00)
            self.i += 1
        return cp

    # -- escapes

    def parse_escape(self, in_class: bool) -> tuple[str, object]:
        """At a backslash: ("char", code point) or ("set", CharSet)."""
        pos = self.i
        if self.i + 1 >= self.n:
            raise self.error("pattern ends with a lone backslash", pos)
        c = self.p[self.i + 1]
        self.i += 2
        if c in _CLASS_ESCAPES:
            return "set", (_python_class(c) if self.python else _CLASS_ESCAPES[c])
        if c in _CONTROL_ESCAPES:
            return "char", _CONTROL_ESCAPES[c]
        if c == "b":
            if in_class:
                return "char", 0x08
            raise self.error("word boundary '\\b' is not supported", pos)
        if c == "B":
            raise self.error("word boundary '\\B' is not supported", pos)
        if c == "0":
            if self.peek().isdigit():
                raise self.error("octal escapes are not supported (use \\xHH or \\uHHHH)", pos)
            return "char", 0
        if c in "123456789":
            raise self.error(f"backreference '\\{c}' is not supported (not a regular construct)", pos)
        if c == "k":
            raise self.error("named backreference '\\k' is not supported (not a regular construct)", pos)
        if c == "x":
            h = self.p[self.i : self.i + 2]
            if len(h) == 2 and all(ch in _HEX for ch in h):
                self.i += 2
                return "char", int(h, 16)
            raise self.error("invalid '\\x' escape: expected two hex digits", pos)
        if c == "u":
            return "char", self.parse_unicode_escape(pos)
        if c == "c":
            x = self.peek()
            if x.isascii() and x.isalpha():
                self.i += 1
                return "char", ord(x) % 32
            raise self.error("invalid '\\c' escape: expected a letter A-Z or a-z", pos)
        if c in ("p", "P"):
            if self.peek() != "{":
                raise self.error(f"invalid '\\{c}' escape: expected '{{' and a Unicode property name", pos)
            close = self.p.find("}", self.i)
            if close < 0:
                raise self.error(f"missing '}}' for '\\{c}{{'", pos)
            body = self.p[self.i + 1 : close]
            self.i = close + 1
            result = _unicode_property(body)
            if isinstance(result, str):
                raise self.error(result, pos)
            return "set", (C.complement(result) if c == "P" else result)
        if c in _SYNTAX_CHARS or c == "-":
            return "char", ord(c)
        if c.isascii() and not c.isalnum():  # escaped punctuation (Annex B identity escape)
            return "char", ord(c)
        if not c.isascii():
            return "char", ord(c)
        raise self.error(f"invalid escape '\\{c}'", pos)

    def parse_unicode_escape(self, pos: int) -> int:
        """After `\\u`: `{H...}` or `HHHH` (a surrogate pair written as two escapes is one code point)."""
        if self.peek() == "{":
            m = _re.compile(r"\{([0-9a-fA-F]+)\}").match(self.p, self.i)
            if not m or int(m.group(1), 16) > C.MAX_CODE_POINT:
                raise self.error("invalid '\\u{...}' escape: expected hex digits of a code point <= 10FFFF", pos)
            self.i = m.end()
            return int(m.group(1), 16)
        h = self.p[self.i : self.i + 4]
        if len(h) != 4 or not all(ch in _HEX for ch in h):
            raise self.error("invalid '\\u' escape: expected four hex digits", pos)
        self.i += 4
        cp = int(h, 16)
        if 0xD800 <= cp <= 0xDBFF and self.p[self.i : self.i + 2] == "\\u":
            low = self.p[self.i + 2 : self.i + 6]
            if len(low) == 4 and all(ch in _HEX for ch in low) and 0xDC00 <= int(low, 16) <= 0xDFFF:
                self.i += 6
                return 0x10000 + ((cp - 0xD800) << 10) + (int(low, 16) - 0xDC00)
        return cp


def _show(cp: int) -> str:
    ch = chr(cp)
    return ch if ch.isprintable() and cp < 0xD800 else f"\\u{{{cp:X}}}"


@lru_cache(maxsize=1024)
def parse_regex(pattern: str, flavor: str = "ecma", flags: str = "") -> RegexNode:
    """Parse a regex into the char-level AST (raises RegexError). flavor "ecma" is
    ECMA-262 (JSON Schema); "python" is Python's `re` (lark terminals): `.` excludes only
    `\\n`, `\\d \\w \\s` are Unicode-wide, `(?P<name>...)`, flags i and s (inline or
    passed in `flags`)."""
    if not isinstance(pattern, str):
        raise RegexError(f"a regex must be a string, not {type(pattern).__name__}", "", None)
    if flavor == "python":
        lead = _re.match(r"\(\?([a-zA-Z]+)\)", pattern)
        if "x" in flags or (lead and "x" in lead.group(1)):
            pattern = _strip_verbose(pattern)
            flags = flags.replace("x", "")
    return _Parser(pattern, flavor, flags).parse()


_PY_DOT: C.CharSet = C.complement(C.charset([(0x0A, 0x0A)]))


@lru_cache(maxsize=None)
def _python_class(letter: str) -> C.CharSet:
    """`\\d \\w \\s` (and their complements) as Python's `re` defines them for str patterns."""
    test = {"d": str.isdecimal, "w": lambda ch: ch.isalnum() or ch == "_", "s": str.isspace}[letter.lower()]
    cps = [cp for cp in range(C.MAX_CODE_POINT + 1) if not 0xD800 <= cp <= 0xDFFF and test(chr(cp))]
    cs = C.charset(_runs(cps))
    return C.complement(cs) if letter.isupper() else cs


def _runs(cps: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in cps:
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


@lru_cache(maxsize=1)
def _case_classes() -> dict[int, tuple[int, ...]]:
    """Code point -> every code point that matches it case-insensitively. Characters are
    equivalent when their upper-then-lower forms agree, which also pairs the Kelvin sign
    with k and long s with s, as Python's `re.IGNORECASE` does."""
    groups: dict[str, list[int]] = {}
    for cp in range(0x20000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        up = ch.upper()
        key = up.lower() if len(up) == 1 else ch.lower()
        if len(key) == 1 and key != ch or ch.upper() != ch or ch.lower() != ch:
            groups.setdefault(key, []).append(cp)
    return {cp: tuple(members) for members in groups.values() if len(members) > 1 for cp in members}


@lru_cache(maxsize=4096)
def _case_closed(cs: C.CharSet) -> C.CharSet:
    """The set with every character's other cases added (the `i` flag)."""
    classes = _case_classes()
    extra: list[int] = []
    for lo, hi in cs:
        for cp in range(lo, min(hi, 0x1FFFF) + 1):
            extra.extend(classes.get(cp, ()))
    return C.union(cs, C.charset(_runs(sorted(set(extra))))) if extra else cs


def _strip_verbose(pattern: str) -> str:
    """Python's `x` flag: drop unescaped whitespace and `#` comments outside classes."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c.isspace():
            i += 1
            continue
        elif c == "#":
            end = pattern.find("\n", i)
            i = len(pattern) if end < 0 else end + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- lowering

_Branches = dict  # (anchored_start, anchored_end) -> list of part lists


def _lower(node: RegexNode, char_ir: Callable[[C.CharSet], ir.Node], at_start: bool, at_end: bool, pattern: str):
    """Lower `node` into {(anchored_start, anchored_end): [parts, ...]}: each value lists
    alternatives (each a list of IR parts to concatenate) by how they are anchored.
    Anchors are legal only where at_start/at_end say the node is at the edge."""
    if isinstance(node, Chars):
        return {(False, False): [[char_ir(node.cs)]]}
    if isinstance(node, Anchor):
        if node.kind == "^":
            if not at_start:
                raise RegexError(
                    "'^' is only supported at the start of the pattern (or of a branch or group there)",
                    pattern,
                    node.position,
                )
            return {(True, False): [[]]}
        if not at_end:
            raise RegexError(
                "'$' is only supported at the end of the pattern (or of a branch or group there)",
                pattern,
                node.position,
            )
        return {(False, True): [[]]}
    if isinstance(node, Alternation):
        out: _Branches = {}
        for item in node.items:
            for key, alts in _lower(item, char_ir, at_start, at_end, pattern).items():
                out.setdefault(key, []).extend(alts)
        return out
    if isinstance(node, Quantified):
        inner = _lower(node.item, char_ir, False, False, pattern)
        body = _join(inner[(False, False)])
        return {(False, False): [[ir.rep(body, node.min, node.max)]]}
    if isinstance(node, Sequence):
        acc: _Branches = {(False, False): [[]]}
        last = len(node.items) - 1
        for k, item in enumerate(node.items):
            sub = _lower(item, char_ir, at_start and k == 0, at_end and k == last, pattern)
            if len(sub) == 1 and len(acc) == 1:
                (skey, salts), = sub.items()
                (akey, aalts), = acc.items()
                part = _join(salts)
                key = (akey[0] or skey[0], akey[1] or skey[1])
                if len(aalts) == 1:
                    aalts[0].append(part)
                    acc = {key: aalts}
                else:
                    acc = {key: [[_join(aalts), part]]}
                continue
            new: _Branches = {}
            for akey, aalts in acc.items():
                left = _join(aalts)
                for skey, salts in sub.items():
                    key = (akey[0] or skey[0], akey[1] or skey[1])
                    new.setdefault(key, []).append([left, _join(salts)])
            acc = new
        return acc
    raise TypeError(f"not a regex AST node: {node!r}")


def _join(alternatives: list[list[ir.Node]]) -> ir.Node:
    return ir.alt(*(ir.seq(*parts) for parts in alternatives))


def _json_char(cs: C.CharSet) -> ir.Node:
    return C.json_char_ir(cs)


@lru_cache(maxsize=1024)
def regex_ir(
    pattern: str, *, encoding: str = "utf8", search: bool = False, flavor: str = "ecma", flags: str = ""
) -> ir.Node:
    """Lower an ECMA-262 regex to the byte IR.

    encoding="utf8": the IR matches the UTF-8 bytes of the strings the regex matches.
    encoding="json": the IR matches the JSON string bodies (between the quotes, any
    valid escaping) whose decoded value the regex matches.
    search=False: the whole string must match (`^`/`$` at the ends are redundant).
    search=True: JSON Schema `pattern` semantics, a match anywhere: every branch not
    anchored by `^` may be preceded, and every branch not anchored by `$` followed,
    by any characters (newlines included).
    """
    if encoding == "utf8":
        char_ir: Callable[[C.CharSet], ir.Node] = C.utf8_ir
    elif encoding == "json":
        char_ir = _json_char
    else:
        raise ValueError(f"unknown encoding {encoding!r} (expected 'utf8' or 'json')")
    ast = parse_regex(pattern, flavor, flags)
    branches = _lower(ast, char_ir, True, True, pattern)
    if not search:
        return _join([parts for alts in branches.values() for parts in alts])
    anything = ir.rep(char_ir(C.ANY_CHAR), 0, None)
    out = []
    for (anchored_start, anchored_end), alts in branches.items():
        out.append(
            ir.seq(
                ir.EMPTY if anchored_start else anything,
                _join(alts),
                ir.EMPTY if anchored_end else anything,
            )
        )
    return ir.alt(*out)
