"""Regex text -> the character-level AST (`parse_regex`), for the ECMA-262 dialect of
JSON Schema and Python's `re` dialect of lark terminals (see the package docstring for
what each accepts and refuses).

Owns: the syntax: groups, quantifiers, classes, escapes, inline flags, verbose
patterns, and every RegexError about them. Must not lower to the IR (`lowering` does)
or define what a class escape or property holds (`classes`, `unicode_properties`,
`case_folding`).
"""

from __future__ import annotations

import re as _re

from structgen.errors import RegexError
from structgen.grammar import charset as C
from structgen.grammar.regex.case_folding import case_closed
from structgen.grammar.regex.classes import CLASS_ESCAPES, DOT, PYTHON_DOT, python_class
from structgen.grammar.regex.nodes import Alternation, Anchor, Chars, Quantified, RegexNode, Sequence
from structgen.grammar.regex.unicode_properties import unicode_property

_CONTROL_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B}
_SYNTAX_CHARS = set("^$\\.*+?()[]{}|/")
_HEX = set("0123456789abcdefABCDEF")
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
        return Chars(case_closed(cs) if self.ignore_case else cs)

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
                return Chars(C.ANY_CHAR if self.dotall else PYTHON_DOT)
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
        if c in CLASS_ESCAPES:
            return "set", (python_class(c) if self.python else CLASS_ESCAPES[c])
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
            result = unicode_property(body)
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
