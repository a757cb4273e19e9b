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
`flavor="python"` reads Python's `re` dialect instead (lark terminals): see `parse_regex`.

Owns: regex text and its lowering to byte-level IR. Must not build automata (grammar/
never imports automata/); the JSON Schema code-point automata read the AST that
`parse_regex` returns.

The package, one concept per module (each module's docstring says what it owns):
  nodes               the AST node types
  parser              regex text -> AST (`parse_regex`), both dialects
  classes             the sets of `\\d \\w \\s` and `.` in both dialects
  unicode_properties  the sets of `\\p{...}`
  case_folding        the `i` flag's case-closed sets
  lowering            AST -> byte IR (`regex_ir`)
"""

from __future__ import annotations

from structgen.grammar.regex.classes import DIGIT, DOT, LINE_TERMINATORS, SPACE, WORD
from structgen.grammar.regex.lowering import regex_ir
from structgen.grammar.regex.nodes import (
    EMPTY_SEQUENCE,
    Alternation,
    Anchor,
    Chars,
    Quantified,
    RegexNode,
    Sequence,
)
from structgen.grammar.regex.parser import parse_regex

__all__ = [
    "parse_regex", "regex_ir",
    "Chars", "Sequence", "Alternation", "Quantified", "Anchor", "RegexNode", "EMPTY_SEQUENCE",
    "DIGIT", "WORD", "SPACE", "LINE_TERMINATORS", "DOT",
]
