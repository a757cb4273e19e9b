"""lark's grammar syntax read without lark's loader: the fast path of `lark_grammar`.

Owns a scanner and a recursive-descent reader for the grammars people write in lark's
syntax, and their lowering to `cfg.Grammar`, with the meaning lark's own loader gives
them:
- rules (with `?`, `!` and `_` modifiers and priorities) and terminals (with priorities);
- alternatives (`|`, on a new line too), groups, `[x]`, `x?`, `x*`, `x+`, `x~n`, `x~n..m`;
- string and regex literals with their flags, `"a".."z"` ranges, `-> alias`;
- `%ignore`, and `%import` of terminals from lark's own library (`common` and the like).

What it does not read raises `NotRead`, and `lark_grammar` hands the text to lark's
loader instead: templates, `%declare`, `%override`, `%extend`, importing a rule, any
construct whose reading is in doubt, and every error (so lark words the error). This
reader must therefore be right on the grammars lark accepts and never wrong on one.

Lowering, as lark's loader does: each terminal is one symbol (so `%ignore`d text may
come between any two), and a group, optional or repetition that starts an alternative
is spread into alternatives, so a rule that begins with itself behind one stays left
recursion that `cfg` can remove. Anywhere else such a part becomes a helper rule, and
not a copy of its alternative per combination (lark's loader writes `a? b? c?` as eight
alternatives). Knows nothing of tokens, matchers or the engine.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from structgen.errors import RegexError
from structgen.grammar import cfg, ir
from structgen.grammar.ebnf import MAX_RULE_REPEAT, BnfRules
from structgen.grammar.regex import regex_ir


# Terminals defined through one another at most this deep (deeper goes to lark's loader).
MAX_TERMINAL_DEPTH = 100
# A sequence that starts a rule is spread into at most about this many alternatives;
# past that, what starts it becomes a helper rule.
MAX_SPREAD = 64


class NotRead(Exception):
    """The text needs lark's own loader: a construct this reader leaves to it, or an error."""


# lark's terminals of its `common` library whose definitions use lookaround, as the
# same languages written without it (no automaton runs a lookbehind).
COMMON_REPLACEMENTS = {
    "ESCAPED_STRING": r'"(?:[^"\\\n]|\\.)*"',
}

# ---------------------------------------------------------------- scanning

# The tokens of lark's grammar syntax, as lark's own grammar loader defines them. Where
# two can match at one place, lark's lexer takes the first in this order: a comment (it
# may start with the newlines before it), a newline then `|` (an alternative goes on),
# a newline (a statement ends), blanks.
_LEXICON = re.compile(
    r"""(?P<COMMENT>\s*//[^\n]*|\s*\#[^\n]*)
      | (?P<NEWLINE_OR>(\r?\n)+\s*\|)
      | (?P<NL>(\r?\n)+\s*)
      | (?P<BLANKS>[ \t]+|\\[ ]*\n)
      | (?P<STRING>"(\\"|\\\\|[^"\n])*?"i?)
      | (?P<REGEXP>/(?!/)(\\/|\\\\|[^/])*?/[imslux]*)
      | (?P<NUMBER>[+-]?\d+)
      | (?P<MODIFIERS>(!|![?]?|[?]!?)(?=[_a-z]))
      | (?P<OP>[+*]|[?](?![a-z_]))
      | (?P<RULE>_?[a-z][_a-z0-9]*)
      | (?P<TERMINAL>_?[A-Z][_A-Z0-9]*)
      | (?P<DIRECTIVE>%ignore|%import|%declare|%override|%extend)
      | (?P<PUNCT>->|\.\.|[.():,|~\[\]{}])""",
    re.VERBOSE,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs; "NL" ends a statement, "|" may come after a newline."""
    out: list[tuple[str, str]] = []
    pos = 0
    text += "\n"  # as lark's loader does: the last statement ends with a newline
    while pos < len(text):
        token = _LEXICON.match(text, pos)
        if token is None:
            raise NotRead(f"unexpected character {text[pos]!r}")
        pos = token.end()
        kind = token.lastgroup
        if kind == "NEWLINE_OR":
            out.append(("PUNCT", "|"))
        elif kind == "NL":
            out.append(("NL", ""))
        elif kind not in ("COMMENT", "BLANKS"):
            out.append((kind, token.group()))
    return out


# ---------------------------------------------------------------- reading

# A definition's body is a tree of tuples:
#   ("alts", [[expr, ...], ...])   alternatives of sequences
#   ("rep", expr, low, high)       high None: unbounded ([x] and x? are 0..1)
#   ("name", NAME)                 a rule or a terminal
#   ("STRING" | "REGEXP", token)   a literal as written
#   ("range", token, token)        "a".."z"


class _Reader:
    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.pos = 0
        self.rules: dict[str, tuple] = {}
        self.terminals: dict[str, tuple] = {}
        self.ignore: list[tuple] = []
        self.imports: dict[str, tuple[str, str]] = {}  # local name -> (library, its name there)

    def read(self) -> "_Reader":
        while self.peek() is not None:
            kind, value = self.next()
            if kind == "NL":
                continue
            if kind == "DIRECTIVE":
                self.directive(value)
            elif kind in ("RULE", "MODIFIERS"):
                self.definition(self.rules, value if kind == "RULE" else self.expect("RULE"))
            elif kind == "TERMINAL":
                self.definition(self.terminals, value)
            else:
                raise NotRead(f"a statement cannot start with {value!r}")
        return self

    def definition(self, table: dict, name: str) -> None:
        if name in self.rules or name in self.terminals or name in self.imports:
            raise NotRead(f"{name} is defined twice")
        if self.peek() == ("PUNCT", "."):  # a priority: no part of the language
            self.next()
            self.expect("NUMBER")
        if self.next() != ("PUNCT", ":"):
            raise NotRead("a definition needs ':'")
        table[name] = self.expansions(top=table is self.rules)
        self.end_statement()

    def directive(self, word: str) -> None:
        if word == "%ignore":
            self.ignore.append(self.expansions(top=False))
            self.end_statement()
        elif word == "%import":
            self.import_statement()
        else:
            raise NotRead(f"{word} is left to lark's loader")

    def import_statement(self) -> None:
        path = [self.expect("RULE", "TERMINAL")]
        while self.peek() == ("PUNCT", "."):
            self.next()
            path.append(self.expect("RULE", "TERMINAL"))
        if self.peek() == ("PUNCT", "("):  # %import library (A, B)
            self.next()
            names = [self.expect("RULE", "TERMINAL")]
            while self.peek() == ("PUNCT", ","):
                self.next()
                names.append(self.expect("RULE", "TERMINAL"))
            if self.next() != ("PUNCT", ")"):
                raise NotRead("an import list needs ')'")
            pairs = [(".".join(path), name, name) for name in names]
        else:
            if len(path) < 2:
                raise NotRead("%import names a library and a symbol")
            local = path[-1]
            if self.peek() == ("PUNCT", "->"):
                self.next()
                local = self.expect("RULE", "TERMINAL")
            pairs = [(".".join(path[:-1]), path[-1], local)]
        self.end_statement()
        for library, name, local in pairs:
            if not name.isupper() or not local.isupper() or local in self.imports or local in self.terminals:
                raise NotRead("only terminals are imported here, each once and not defined too")
            self.imports[local] = (library, name)

    def expansions(self, top: bool) -> tuple:
        """Alternatives; `top`: those of a rule, where each may end in `-> alias`."""
        alternatives = [self.sequence(top)]
        while self.peek() == ("PUNCT", "|"):
            self.next()
            alternatives.append(self.sequence(top))
        return ("alts", alternatives)

    def sequence(self, top: bool) -> list:
        items: list = []
        while True:
            token = self.peek()
            if token == ("PUNCT", "->"):
                if not top:
                    raise NotRead("an alias inside a group or a terminal")
                self.next()
                self.expect("RULE")
                return items
            atom = self.atom()
            if atom is None:
                return items
            items.append(self.operators(atom))

    def atom(self) -> tuple | None:
        kind, value = self.peek() or ("", "")
        if (kind, value) in (("PUNCT", "("), ("PUNCT", "[")):
            self.next()
            inner = self.expansions(top=False)
            if self.next() != ("PUNCT", ")" if value == "(" else "]"):
                raise NotRead("a bracket is not closed")
            return inner if value == "(" else ("rep", inner, 0, 1)
        if kind in ("RULE", "TERMINAL"):
            self.next()
            if self.peek() == ("PUNCT", "{"):
                raise NotRead("templates are left to lark's loader")
            return ("name", value)
        if kind == "STRING":
            self.next()
            if self.peek() == ("PUNCT", ".."):
                self.next()
                return ("range", value, self.expect("STRING"))
            return ("STRING", value)
        if kind == "REGEXP":
            self.next()
            return ("REGEXP", value)
        return None

    def operators(self, atom: tuple) -> tuple:
        token = self.peek()
        if token is not None and token[0] == "OP":
            self.next()
            low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}[token[1]]
            return ("rep", atom, low, high)
        if token == ("PUNCT", "~"):
            self.next()
            low = high = self.count()
            if self.peek() == ("PUNCT", ".."):
                self.next()
                high = self.count()
            if high < low or high > MAX_RULE_REPEAT:
                raise NotRead("a repetition's bounds")
            return ("rep", atom, low, high)
        return atom

    def count(self) -> int:
        digits = self.expect("NUMBER")
        if not digits.isdigit():
            raise NotRead("a signed repetition count")
        return int(digits)

    def end_statement(self) -> None:
        if self.next() != ("NL", ""):
            raise NotRead("a statement goes on past its end")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def next(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise NotRead("the grammar ends inside a statement")
        self.pos += 1
        return token

    def expect(self, *kinds: str) -> str:
        kind, value = self.next()
        if kind not in kinds:
            raise NotRead(f"expected {' or '.join(kinds)}, not {value!r}")
        return value


# ---------------------------------------------------------------- literals


def literal_ir(token: str) -> ir.Node:
    """A string or regex literal, as written in the grammar (flags included)."""
    value, flags, is_regex = _decoded(token)
    return pattern_ir(value, flags, is_regex)


@functools.lru_cache(maxsize=4096)
def _decoded(token: str) -> tuple[str, str, bool]:
    """(value, flags, is_regex) of a literal, with lark's escapes and refusals."""
    from lark.load_grammar import eval_escaping  # lark's own escape rules

    flag_start = max(token.rfind('"'), token.rfind("/")) + 1
    flags, body = token[flag_start:], token[1 : flag_start - 1]
    is_regex = token.startswith("/")
    if "\n" in token and not (is_regex and "x" in flags):
        raise NotRead("a newline in a literal")
    try:
        value = eval_escaping(body)
    except Exception as e:  # lark's GrammarError, or Python's on a bad escape
        raise NotRead(f"a literal's escapes: {e}") from None
    if not value:
        raise NotRead("an empty literal")
    return (value, flags, True) if is_regex else (value.replace("\\\\", "\\"), flags, False)


def pattern_ir(value: str, flags: str, is_regex: bool) -> ir.Node:
    """A terminal's pattern: a string, or a regex in Python's syntax, with lark's flags."""
    if not is_regex:
        if "i" not in flags:
            return ir.lit(value)
        value = re.escape(value)
    return regex_ir(value, flavor="python", flags="".join(sorted(flags)))


def _range_ir(first: str, last: str) -> ir.Node:
    _check_range(first, last)
    return regex_ir(f"[{first[1:-1]}-{last[1:-1]}]", flavor="python")


def _check_range(first: str, last: str) -> None:
    if not (first.endswith('"') and last.endswith('"')):
        raise NotRead("a range of strings with flags")
    if len(_decoded(first)[0]) != 1 or len(_decoded(last)[0]) != 1:
        raise NotRead("a range between longer strings")


# ---------------------------------------------------------------- lark's library


@functools.lru_cache(maxsize=None)
def _library(name: str) -> _Reader:
    """One of the grammars lark ships, read once per process."""
    path = resources.files("lark") / "grammars" / f"{name}.lark"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise NotRead(f"no library {name}") from None
    return _Reader(text).read()


@functools.lru_cache(maxsize=256)
def _library_terminal(library: str, name: str) -> ir.Node:
    """A terminal of lark's library, as IR shared by every grammar that imports it."""
    if library == "common" and name in COMMON_REPLACEMENTS:
        return regex_ir(COMMON_REPLACEMENTS[name], flavor="python")
    return _Terminals(_library(library)).named(name)


# ---------------------------------------------------------------- terminals


class _Terminals:
    """The IR of a grammar's terminals, each made once (named by `names`)."""

    def __init__(self, reader: _Reader):
        self.reader = reader
        self.made: dict[str | tuple, ir.Node] = {}  # by name, or by the literal as written
        self.making: set[str] = set()
        self.names: dict[int, str] = {}  # id(IR) -> name, for cfg's messages

    def named(self, name: str) -> ir.Node:
        node = self.made.get(name)
        if node is not None:
            return node
        if name in self.reader.imports:
            node = _library_terminal(*self.reader.imports[name])
        elif name in self.reader.terminals:
            if name in self.making or len(self.making) >= MAX_TERMINAL_DEPTH:
                raise NotRead(f"terminal {name} refers to itself, or to a long chain of terminals")
            self.making.add(name)
            node = self.tree(self.reader.terminals[name])
            self.making.discard(name)
        else:
            raise NotRead(f"terminal {name} is not defined")
        self.made[name] = node
        self.names[id(node)] = name
        return node

    def anonymous(self, expr: tuple) -> ir.Node:
        """A literal or range written in a rule: equal ones are one terminal, as in lark."""
        node = self.made.get(expr)
        if node is None:
            node = self.made[expr] = self.literal(expr)
            self.names[id(node)] = "..".join(expr[1:])
        return node

    def tree(self, expr: tuple) -> ir.Node:
        kind = expr[0]
        if kind == "alts":
            return ir.alt(*(ir.seq(*(self.tree(item) for item in seq)) for seq in expr[1]))
        if kind == "rep":
            return ir.rep(self.tree(expr[1]), expr[2], expr[3])
        if kind == "name":
            if not _is_terminal(expr[1]):
                raise NotRead(f"terminal uses the rule {expr[1]}")
            return self.named(expr[1])
        return self.literal(expr)

    def literal(self, expr: tuple) -> ir.Node:
        try:
            if expr[0] == "range":
                return _range_ir(expr[1], expr[2])
            return literal_ir(expr[1])
        except RegexError as e:
            raise NotRead(f"a regex: {e}") from None


# ---------------------------------------------------------------- rules


class _Rules:
    """Rules as BNF: a rule's alternatives, helpers for the EBNF inside them."""

    def __init__(self, reader: _Reader, terminals: _Terminals):
        self.reader = reader
        self.terminals = terminals
        self.bnf = BnfRules()
        # id(expr) -> (expr, its symbols): the parts a spread copies share their helpers
        # (the expr is held so that its id is not reused)
        self.made: dict[int, tuple[tuple, list]] = {}

    def lower(self, names: list[str]) -> dict[str, list[list]]:
        for name in names:
            self.bnf.rules[name] = []  # user rules before their helpers
        for name in names:
            self.bnf.rules[name] = self.alternatives(name, self.reader.rules[name])
        return self.bnf.rules

    def alternatives(self, rule: str, alts: tuple) -> list[list]:
        out: list[list] = []
        for seq in alts[1]:
            out.extend(self.spread(rule, list(seq)))
        return out

    def spread(self, rule: str, items: list) -> list[list]:
        """The alternatives of a sequence that starts a rule: a leading group, optional or
        repetition is spread into alternatives, until each starts with a plain symbol or
        the sequence has MAX_SPREAD alternatives (a long run of optionals would make as
        many alternatives as it has parts, each a copy of the rest)."""
        out: list[list] = []
        pending = [items]
        while pending:
            items = pending.pop()
            if not items or not _spreads(items[0]) or len(out) + len(pending) >= MAX_SPREAD:
                out.append(self.symbols(rule, items))
                continue
            pending.extend(head + items[1:] for head in reversed(_heads(items[0])))
        return out

    def symbols(self, rule: str, items: list) -> list:
        out: list = []
        for expr in items:
            made = self.made.get(id(expr))
            if made is None:
                made = self.made[id(expr)] = (expr, self.expr(rule, expr))
            out.extend(made[1])
        return out

    def expr(self, rule: str, expr: tuple) -> list:
        kind = expr[0]
        if kind == "name":
            name = expr[1]
            return [self.terminals.named(name)] if _is_terminal(name) else [name]
        if kind in ("STRING", "REGEXP", "range"):
            return [self.terminals.anonymous(expr)]
        if kind == "alts":
            if len(expr[1]) == 1:
                return self.symbols(rule, expr[1][0])
            return [self.bnf.helper(rule, "group", self.alternatives(rule, expr))]
        _, item, low, high = expr
        inner = self.symbols(rule, [item])
        symbol = inner[0] if len(inner) == 1 else self.bnf.helper(rule, "group", [inner])
        return self.bnf.repeat(rule, symbol, low, high)


def _spreads(expr: tuple) -> bool:
    """Whether a leading part is spread: a group, an optional, or exactly one of something
    (a repetition of at least one stays a loop, as in lark)."""
    return expr[0] == "alts" or (expr[0] == "rep" and (expr[2] == 0 or expr[2:] == (1, 1)))


def _heads(expr: tuple) -> list[list]:
    """The ways a spread part can start a sequence, each as a list of items."""
    if expr[0] == "alts":
        return [list(seq) for seq in expr[1]]
    _, item, low, high = expr
    if high == 0:
        return [[]]
    if low == 1:  # exactly once
        return [[item]]
    return [[("rep", item, 1, high)], []]


def _rule_names(expr: tuple) -> set[str]:
    return {leaf[1] for leaf in _leaves(expr) if leaf[0] == "name" and not _is_terminal(leaf[1])}


def _is_terminal(name: str) -> bool:
    return name.lstrip("_")[:1].isupper()


def _reachable(reader: _Reader, start: str) -> list[str]:
    """The rules the start reaches (every name is defined: `_check_definitions`)."""
    if start not in reader.rules:
        raise NotRead(f"no start rule {start}")
    seen = {start: None}
    stack = [start]
    while stack:
        for name in _rule_names(reader.rules[stack.pop()]):
            if name not in seen:
                seen[name] = None
                stack.append(name)
    return list(seen)


def _check_definitions(reader: _Reader) -> None:
    """What lark refuses in any definition, used or not: a name that is not defined, and a
    literal it cannot read (empty, a newline in it, bad escapes, a range of long strings)."""
    defined = set(reader.rules) | set(reader.terminals) | set(reader.imports)
    for expr in [*reader.rules.values(), *reader.terminals.values(), *reader.ignore]:
        for leaf in _leaves(expr):
            if leaf[0] == "name" and leaf[1] not in defined:
                raise NotRead(f"{leaf[1]} is not defined")
            if leaf[0] in ("STRING", "REGEXP"):
                _decoded(leaf[1])
            elif leaf[0] == "range":
                _check_range(leaf[1], leaf[2])


def _leaves(expr: tuple) -> list[tuple]:
    if expr[0] == "alts":
        return [leaf for seq in expr[1] for item in seq for leaf in _leaves(item)]
    if expr[0] == "rep":
        return _leaves(expr[1])
    return [expr]


def read_lark(text: str, start: str = "start") -> cfg.Grammar:
    """The grammar, lowered to BNF; NotRead where lark's loader must read it instead."""
    reader = _Reader(text).read()
    _check_definitions(reader)
    terminals = _Terminals(reader)
    rules = _Rules(reader, terminals).lower(_reachable(reader, start))
    ignore = [terminals.tree(expr) for expr in reader.ignore]
    return cfg.Grammar(rules, start, ignore, terminals.names)
