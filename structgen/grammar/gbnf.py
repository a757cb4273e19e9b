"""GBNF grammars (llama.cpp's grammar format) -> `cfg.Grammar`.

Owns: reading GBNF text as llama.cpp's `grammars/README.md` and `llama-grammar.cpp`
define it, with a small hand-written recursive-descent parser, and lowering it to the
shared CFG form. Knows nothing of tokens, matchers or the engine (must not import it).

    name ::= alternatives          names: ASCII letters, digits, `-` and `_`
    a b | c                        sequence, alternatives
    ( ... )                        grouping (newlines allowed inside)
    "..."  [a-z]  [^"\\]  .        literal, character class, negated class, any character
    x*  x+  x?  x{m}  x{m,}  x{m,n}  x{,n}
    # comment                      to the end of the line

Escapes in literals and classes: `\\n \\r \\t \\\\ \\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH`.
Terminals are Unicode code points, matched as their UTF-8 bytes.

Lowering: literals, classes, `.`, and groups or repetitions made only of those become one
IR terminal (adjacent terminals of a sequence are joined into one). A group that contains
a rule reference becomes a helper rule `rule/groupN`; a repetition of one becomes helper
rules `rule/repN` (the `/` keeps them apart from user names). An unbounded repetition is
left-recursive, `L ::= L x | ""`, which `cfg` turns into a loop that never deepens the
stack, even when `x` can be empty.

Deviations from llama.cpp, all accepting more: a rule body may continue on the next line
(a new rule starts at a line that begins with `name ::=`), left recursion is allowed,
`{,n}` means `{0,n}`, and `{m,n}` keeps its bound above 2000 (llama.cpp drops it).
Refused: a rule defined twice (llama.cpp silently keeps the last definition), token
references `<...>` / `!<...>` (they match token ids, and structgen grammars match text),
and a reversed range `[z-a]` (llama.cpp matches nothing).
"""

from __future__ import annotations

import re

from structgen.errors import GrammarError
from structgen.grammar import cfg, ir
from structgen.grammar import charset as C
from structgen.grammar.ebnf import MAX_RULE_REPEAT, BnfRules

_NAME = re.compile(r"[A-Za-z0-9_-]+")
_RULE_HEAD = re.compile(r"[A-Za-z0-9_-]+[ \t]*::=")
_INT = re.compile(r"[0-9]+")
_HEX = re.compile(r"[0-9A-Fa-f]*")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_REPEAT_OPERATORS = {"*": (0, None), "+": (1, None), "?": (0, 1)}

MAX_NESTING = 100  # parentheses inside one another (keeps Python's recursion shallow)


def parse_gbnf(text: str, start: str = "root") -> cfg.Grammar:
    """Parse a GBNF grammar; `start` names the start rule."""
    if not isinstance(text, str):
        raise GrammarError(f"a grammar must be a string, not {type(text).__name__}")
    if not isinstance(start, str):
        raise GrammarError(f"the start rule must be named by a string, not {type(start).__name__}")
    return _Parser(text).parse(start)


def _fold_terminals(symbols: list) -> list:
    """Join adjacent terminals into one IR node and drop empty ones."""
    out: list = []
    for s in symbols:
        if not isinstance(s, str) and out and not isinstance(out[-1], str):
            out[-1] = ir.seq(out[-1], s)
        else:
            out.append(s)
    return [s for s in out if isinstance(s, str) or not ir.is_empty(s)]


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.bnf = BnfRules()
        self.rules = self.bnf.rules
        self.defined_at: dict[str, int] = {}
        self.first_use: dict[str, int] = {}
        self.depth = 0

    # ------------------------------------------------------------ grammar and rules

    def parse(self, start: str) -> cfg.Grammar:
        self.skip_space()
        while self.pos < len(self.text):
            self.parse_rule()
            self.skip_space()
        self.check_references()
        if start not in self.defined_at:
            raise GrammarError(f"GBNF grammar: the start rule {start!r} is not defined (add `{start} ::= ...`)")
        return cfg.Grammar(self.rules, start, [], {})

    def parse_rule(self) -> None:
        begin = self.pos
        name = self.match(_NAME)
        if name is None:
            raise self.error("expected a rule definition `name ::= ...`")
        if not self.at_line_start(begin):
            raise self.error("a new rule must start on its own line", begin)
        self.skip_blanks()
        if not self.text.startswith("::=", self.pos):
            raise self.error(f"expected '::=' after the rule name {name!r}")
        if name in self.defined_at:
            line, _ = self.location(self.defined_at[name])
            raise self.error(f"rule {name!r} is defined twice (first on line {line})", begin)
        self.defined_at[name] = begin
        self.rules[name] = []  # keeps user rules before their helpers
        self.pos += 3
        self.rules[name] = self.parse_alternatives(name)
        if self.pos < len(self.text) and not self.at_rule_head():
            raise self.unexpected()

    def check_references(self) -> None:
        for name, pos in self.first_use.items():
            if name not in self.defined_at:
                raise self.error(f"rule {name!r} is used but never defined", pos)

    # ------------------------------------------------------------ expressions

    def parse_alternatives(self, rule: str) -> list[list]:
        alternatives = [self.parse_sequence(rule)]
        while self.peek() == "|":
            self.pos += 1
            alternatives.append(self.parse_sequence(rule))
        return alternatives

    def parse_sequence(self, rule: str) -> list:
        """Symbols up to `|`, `)`, a new rule, the end, or anything else that cannot
        start an element (the caller decides whether that is an error)."""
        symbols: list = []
        while True:
            self.skip_space()
            at = self.pos
            if self.peek() in _REPEAT_OPERATORS or self.peek() == "{":
                low, high = self.parse_repetition()
                if not symbols:
                    raise self.error(f"{self.text[at]!r} must follow something to repeat", at)
                symbols[-1] = self.repeat(rule, symbols[-1], low, high, at)
                continue
            element = self.parse_element(rule)
            if element is None:
                return _fold_terminals(symbols)
            symbols.append(element)

    def parse_element(self, rule: str):
        """One literal, class, `.`, group or rule reference; None if none starts here."""
        c = self.peek()
        if c == '"':
            return self.parse_literal()
        if c == "[":
            return C.utf8_ir(self.parse_class())
        if c == ".":
            self.pos += 1
            return C.utf8_ir(C.ANY_CHAR)
        if c == "(":
            return self.parse_group(rule)
        if self.at_rule_head():
            return None
        at = self.pos
        name = self.match(_NAME)
        if name is not None:
            self.first_use.setdefault(name, at)
        return name

    def parse_group(self, rule: str):
        open_at = self.pos
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"parentheses nested more than {MAX_NESTING} deep")
        self.pos += 1
        alternatives = self.parse_alternatives(rule)
        if self.peek() != ")":
            if self.pos >= len(self.text) or self.at_rule_head():
                raise self.error("'(' is never closed", open_at)
            raise self.unexpected()
        self.pos += 1
        self.depth -= 1
        if all(not isinstance(s, str) for alt in alternatives for s in alt):
            return ir.alt(*(ir.seq(*alt) for alt in alternatives))
        if len(alternatives) == 1 and len(alternatives[0]) == 1:
            return alternatives[0][0]
        return self.bnf.helper(rule, "group", alternatives)

    # ------------------------------------------------------------ repetition

    def parse_repetition(self) -> tuple[int, int | None]:
        op = self.peek()
        self.pos += 1
        if op in _REPEAT_OPERATORS:
            return _REPEAT_OPERATORS[op]
        return self.parse_braces(self.pos - 1)

    def parse_braces(self, open_at: int) -> tuple[int, int | None]:
        """`{m}`, `{m,}`, `{m,n}`, `{,n}` (the `{` already read)."""
        self.skip_space()
        low = self.parse_int()
        self.skip_space()
        if self.peek() == "}" and low is not None:
            self.pos += 1
            return low, low
        if self.peek() != ",":
            raise self.error("expected a number" if low is None else "expected ',' or '}'")
        self.pos += 1
        self.skip_space()
        high = self.parse_int()
        self.skip_space()
        if self.peek() != "}":
            raise self.error("expected '}'")
        self.pos += 1
        if low is None and high is None:
            raise self.error("'{,}' needs a bound", open_at)
        low = low or 0
        if high is not None and high < low:
            raise self.error(f"repetition maximum {high} is less than its minimum {low}", open_at)
        return low, high

    def repeat(self, rule: str, symbol, low: int, high: int | None, at: int):
        """`symbol{low,high}`: an IR repeat for a terminal; for a rule, helper rules."""
        if not isinstance(symbol, str):
            return ir.rep(symbol, low, high)
        if max(low, high or 0) > MAX_RULE_REPEAT:
            raise self.error(f"a rule or group with a rule reference repeats at most {MAX_RULE_REPEAT} times", at)
        body = self.bnf.repeat(rule, symbol, low, high)
        if len(body) == 1:
            return body[0]
        return self.bnf.helper(rule, "rep", [body])

    # ------------------------------------------------------------ terminals

    def parse_literal(self) -> ir.Node:
        open_at = self.pos
        self.pos += 1
        chars: list[str] = []
        while self.peek() != '"':
            if self.pos >= len(self.text):
                raise self.error("unterminated string literal", open_at)
            at = self.pos
            cp = self.parse_char()
            if C.contains(C.SURROGATES, cp):
                raise self.error(f"U+{cp:04X} is a surrogate, which UTF-8 cannot encode", at)
            chars.append(chr(cp))
        self.pos += 1
        return ir.lit("".join(chars))

    def parse_class(self) -> C.CharSet:
        open_at = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            if self.pos >= len(self.text):
                raise self.error("unterminated character class", open_at)
            at = self.pos
            low = high = self.parse_char()
            if self.peek() == "-" and self.text[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.pos += 1
                high = self.parse_char()
                if high < low:
                    raise self.error(f"character range out of order (U+{low:04X} > U+{high:04X})", at)
            ranges.append((low, high))
        self.pos += 1
        cs = C.charset(ranges)
        return C.complement(cs) if negated else cs

    def parse_char(self) -> int:
        """One character of a literal or class, escapes decoded, as a code point."""
        c = self.text[self.pos]
        if c != "\\":
            self.pos += 1
            return ord(c)
        at = self.pos
        kind = self.text[at + 1 : at + 2]
        if kind in _SIMPLE_ESCAPES:
            self.pos += 2
            return ord(_SIMPLE_ESCAPES[kind])
        if kind in _HEX_ESCAPES:
            width = _HEX_ESCAPES[kind]
            digits = _HEX.match(self.text, at + 2, at + 2 + width).group()
            if len(digits) != width:
                raise self.error(f"'\\{kind}' needs exactly {width} hex digits", at)
            cp = int(digits, 16)
            if cp > C.MAX_CODE_POINT:
                raise self.error(f"'\\{kind}{digits}' is beyond the last Unicode code point", at)
            self.pos += 2 + width
            return cp
        if not kind:
            raise self.error("'\\' at the end of the grammar", at)
        raise self.error(f"unknown escape '\\{kind}'", at)

    # ------------------------------------------------------------ lexical helpers

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def match(self, pattern: re.Pattern) -> str | None:
        m = pattern.match(self.text, self.pos)
        if m is None:
            return None
        self.pos = m.end()
        return m.group()

    def parse_int(self) -> int | None:
        digits = self.match(_INT)
        return int(digits) if digits is not None else None

    def skip_blanks(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def skip_space(self) -> None:
        """Whitespace, newlines included, and `#` comments."""
        while True:
            c = self.peek()
            if c in (" ", "\t", "\r", "\n"):
                self.pos += 1
            elif c == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                return

    def at_rule_head(self) -> bool:
        return _RULE_HEAD.match(self.text, self.pos) is not None

    def at_line_start(self, pos: int) -> bool:
        line_start = self.text.rfind("\n", 0, pos) + 1
        return self.text[line_start:pos].strip(" \t\r") == ""

    # ------------------------------------------------------------ errors

    def location(self, pos: int) -> tuple[int, int]:
        """1-based (line, column) of a position in the text."""
        return self.text.count("\n", 0, pos) + 1, pos - self.text.rfind("\n", 0, pos)

    def error(self, message: str, pos: int | None = None) -> GrammarError:
        line, column = self.location(self.pos if pos is None else pos)
        return GrammarError(f"GBNF grammar: {message}", line, column)

    def unexpected(self) -> GrammarError:
        c = self.peek()
        if c == ")":
            return self.error("unmatched ')'")
        if c in ("<", "!"):
            return self.error("token references (`<...>`, `!<...>`) are not supported: structgen grammars match text")
        if c in (":", "="):
            return self.error("expected '::=' to follow a rule name at the start of a line")
        if c in ("]", "}"):
            return self.error(f"unmatched {c!r}")
        return self.error(f"unexpected character {c!r}")
