"""String lowering: pattern, format, minLength/maxLength and excluded values -> the IR of a
JSON string (with its quotes), and the same as a `CharNFA` where property names need it
(`string_nfa`).

Owns: compiling patterns and formats (and their errors), the pattern x length product
or, past a budget, the pattern bounded by the length, and the string bodies that
exclude names. A mixin of
`compiler.SchemaCompiler`: it uses the compiler's options, style, budget (`tick`,
`refuse`) and the methods of the other mixins through `self`.
"""

from __future__ import annotations

import functools
import re

from structgen.errors import GrammarTooLargeError, RegexError, SchemaError
from structgen.grammar import charset as C
from structgen.grammar import ir
from structgen.grammar import regex as rx
from structgen.grammar.formats import format_pattern
from structgen.grammar.json_schema.char_nfa import (
    BOUNDED_MIN_LENGTH,
    CharNFA,
    excluding_nfa,
    length_nfa,
    pattern_automaton,
)
from structgen.grammar.json_schema.memo import BoundedCache
from structgen.grammar.json_schema.normalized import Normalized
from structgen.grammar.string_except import StringExcept

# Pairs (pattern state, length) of a pattern under a short maxLength (below
# BOUNDED_MIN_LENGTH) built as an explicit graph; past it, and under any longer maxLength,
# the length is counted as the automaton reaches each pair (`ir.Bound`): an explicit
# product of 14k pairs took 77 ms to build, and one of 99k pairs 870 ms.
_PRODUCT_BUDGET = 1_000
# String bodies by what they are made of (lengths, patterns, excluded values, and the
# options `_string_body` reads), for every compile in the process: schemas repeat their
# formats, and a date-time body costs ~3 ms. Only bodies of at most _CACHED_BODY_FOOTPRINT
# nodes and edges (`ir.footprint`) are kept, so that what the cache holds stays small
# whatever clients send (a pattern of 50 words under a maxLength of 500 is ~1,200; one of
# 300 words ~6,000).
_BODIES = BoundedCache(256)
_CACHED_BODY_FOOTPRINT = 2_000


class Strings:
    """String lowering, patterns and formats."""

    def pattern_nfa(self, pattern: str, ptr: str) -> CharNFA | None:
        """Char NFA of a pattern (search semantics); None if unusable (lenient only)."""
        got = self.pattern_nfas.get(pattern)
        if got is None:
            try:
                got = pattern_automaton(pattern)
            except RegexError as e:
                self._bad_pattern(pattern, ptr, e)
                got = False  # lenient: unusable
            self.pattern_nfas[pattern] = got
        return got or None

    def _bad_pattern(self, pattern: str, ptr: str, e: Exception) -> None:
        keyword = "pattern"
        for k in ("patternProperties", "format", "propertyNames"):
            if f"/{k}" in ptr:
                keyword = k
        try:
            re.compile(pattern)
        except re.error:
            raise SchemaError(f"invalid regular expression {pattern!r}: {e}", ptr) from None
        self.refuse(keyword, ptr, f"regular expression not supported: {e}")

    def pattern_matches(self, pattern: str, name: str, ptr: str) -> bool:
        """Whether a patternProperties regex matches `name` (unknown -> True: apply it)."""
        nfa = self.pattern_nfa(pattern, ptr)
        return True if nfa is None else nfa.matches(name)

    def format_regex(self, name: str, ptr: str) -> str | None:
        pat = format_pattern(name)
        if pat is None:
            if self.options.unknown_formats == "error":
                self.refuse("format", ptr, f"unknown format {name!r} (pass unknown_formats='ignore' to ignore it)")
            return None
        return "^(?:" + pat + ")$"

    def lower_string(self, s: Normalized) -> ir.Node:
        pats: list[tuple[str, str]] = []
        for p, ptr in s.patterns:
            if (p, ptr) not in pats and all(p != q for q, _ in pats):
                pats.append((p, ptr))
        for name, ptr in s.formats:
            fmt = self.format_regex(name, ptr)
            if fmt is not None and all(fmt != q for q, _ in pats):
                pats.append((fmt, ptr))
        excluded = sorted({v for v in s.not_values if isinstance(v, str)})
        key = (s.min_len, s.max_len, tuple(p for p, _ in pats), tuple(excluded), self.options.max_states,
               self.options.lenient)
        got = self.body_cache.get(key)
        if got is None:
            got = _BODIES.get(key)
            if got is None:
                got = self._string_body(s.min_len, s.max_len, pats, excluded)
                if ir.footprint(got, _CACHED_BODY_FOOTPRINT) <= _CACHED_BODY_FOOTPRINT:
                    _BODIES.put(key, got)
            self.body_cache[key] = got
        if got is C.json_body_ir():
            return ir.seq(ir.lit('"'), free_string_rest())
        return ir.seq(ir.lit('"'), got, ir.lit('"'))

    def _string_body(self, lo: int, hi: int | None, pats: list, excluded: list[str]) -> ir.Node:
        if hi is not None and lo > hi:
            return ir.NOTHING
        nfas = []
        for p, ptr in pats:
            nfa = self.pattern_nfa(p, ptr)
            if nfa is not None:
                nfas.append((p, ptr, nfa))
        # excluded strings matter only if they are otherwise allowed
        excluded = [
            x for x in excluded if lo <= len(x) and (hi is None or len(x) <= hi) and all(n.matches(x) for _, _, n in nfas)
        ]
        if not nfas:
            if excluded:
                return body_except(excluded) if lo == 0 and hi is None else _body_excluding(excluded, lo, hi)
            if lo == 0 and hi is None:
                return C.json_body_ir()
            body = ir.rep(C.json_char_ir(C.ANY_CHAR), lo, hi)
            if isinstance(body, ir.Repeat) and hi is not None and hi >= BOUNDED_MIN_LENGTH:
                body.twin = ir.Repeat(body.item, body.min, None)  # (a character is at least a byte)
            return body
        if excluded:
            return ir.NOTHING  # documented over-constraint (not/enum exclusions next to a pattern)
        if len(nfas) == 1:
            p, ptr, nfa = nfas[0]
            plo, phi = nfa.length_range()
            if plo >= lo and (hi is None or (phi is not None and phi <= hi)):
                try:
                    return rx.regex_ir(p, encoding="json", search=True)
                except RegexError:
                    pass  # e.g. an anchor inside the pattern: use the NFA below
            combined = nfa
        else:
            combined = nfas[0][2]
            for _, _, n in nfas[1:]:
                combined = combined.intersect(n)
        if hi is None or (hi < BOUNDED_MIN_LENGTH and combined.n * (hi + 1) <= _PRODUCT_BUDGET):
            return combined.to_ir(lo, hi, max_states=self.options.max_states, tick=self.tick)
        # a maxLength: counted as the automaton reaches each (state, length) pair, not as
        # a graph of them all
        return combined.to_bounded_ir(lo, hi, max_states=self.options.max_states, tick=self.tick)

    def string_nfa(self, s: Normalized, keyword: str, ptr: str) -> CharNFA | None:
        """The strings `s` allows, as a char NFA (None: refused and lenient)."""
        if s.groups or s.enum is not None:
            self.refuse(keyword, ptr, "only patterns, formats, lengths and excluded values are supported here")
            return None
        if "string" not in self.effective_kinds(s):
            return CharNFA(1, 0, set(), [[]])
        nfa = None
        pats = [(p, q) for p, q in s.patterns]
        for name, q in s.formats:
            fmt = self.format_regex(name, q)
            if fmt is not None:
                pats.append((fmt, q))
        for p, q in pats:
            n = self.pattern_nfa(p, q)
            if n is not None:
                nfa = n if nfa is None else nfa.intersect(n)
        if s.min_len or s.max_len is not None:
            ln = length_nfa(s.min_len, s.max_len)
            nfa = ln if nfa is None else nfa.intersect(ln)
        excluded = [v for v in s.not_values if isinstance(v, str)]
        if excluded:
            ex = excluding_nfa(excluded)
            nfa = ex if nfa is None else nfa.intersect(ex)
        return nfa if nfa is not None else CharNFA.any_string()

@functools.lru_cache(maxsize=None)
def free_string_rest() -> ir.Node:
    """A free string's body and closing quote as one lexeme: the automaton runs them on
    the DFA shared by every grammar, so a string value's states each hold one position
    (in that DFA, with what follows the string) instead of the body's loop and the quote
    apart, each with continuations of its own."""
    # a one-branch Alt: `ir.seq` would flatten a Concat into the string's, lexeme and all
    return ir.mark_lexeme(ir.Alt((ir.Concat((C.json_body_ir(), ir.lit('"'))),)))


@functools.lru_cache(maxsize=1024)
def _any_chars(min_n: int, max_n: int | None, any_hex_escape: bool) -> ir.Node:
    """A string body of min_n..max_n characters: one node per argument tuple, so the
    free tails after every prefix of the names `_body_excluding` avoids share their
    closures (a node per prefix made each key state derive its tail again)."""
    if (min_n, max_n, any_hex_escape) == (0, None, True):
        return C.json_body_ir()
    return ir.rep(C.json_char_ir(C.ANY_CHAR, any_hex_escape=any_hex_escape), min_n, max_n)


def body_except(names: list[str]) -> ir.Node:
    """Any string body but `names` (by decoded value): a StringExcept where the names are
    ASCII, which runs far cheaper inside the automaton; the basic tree otherwise."""
    if all(name.isascii() for name in names):
        return StringExcept(names)
    return _body_excluding(names, 0, None)


def _body_excluding(
    names: list[str], lo: int, hi: int | None, *, first=None, allow_empty: bool = True
) -> ir.Node:
    """JSON string body of any string of length lo..hi that is NOT in `names` (compared
    after decoding, so no escape spelling of an excluded name gets through); with
    `first`, the first character must be in that CharSet (and the empty string is
    allowed only if `allow_empty`)."""
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True

    def anything(min_n: int, max_n: int | None) -> ir.Node:
        return _any_chars(max(0, min_n), max_n, min_n == 0 and max_n is None)

    def build(node: dict, length: int) -> ir.Node:
        parts = []
        if None not in node and lo <= length and (hi is None or length <= hi) and (length > 0 or allow_empty):
            parts.append(ir.EMPTY)
        if hi is not None and length >= hi:
            return ir.alt(*parts)
        children = [ch for ch in node if ch is not None]
        allowed = C.ANY_CHAR if (length > 0 or first is None) else first
        for ch in children:
            if C.contains(allowed, ord(ch)):
                parts.append(ir.seq(C.json_char_ir(C.charset([ord(ch)])), build(node[ch], length + 1)))
        other = C.difference(allowed, C.charset(ord(ch) for ch in children))
        if other:
            rest_hi = None if hi is None else hi - length - 1
            parts.append(ir.seq(C.json_char_ir(other), anything(lo - length - 1, rest_hi)))
        return ir.alt(*parts)

    return build(trie, 0)
