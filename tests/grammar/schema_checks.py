"""Compiling a JSON Schema to IR for the tests of `structgen.grammar.json_schema`, and the
assertions they share: `G` (a compiled schema that says whether it accepts a text or a
value), `check` (values or texts `T("...")` that must be accepted or rejected), `raises`
(the error, its pointer and keyword), `dumps` (a value in a whitespace style) and
`acceptor` (bytes -> bool for an IR node).

The acceptor is the lazy NFA/DFA of `structgen.automata`, built once per schema. Holds no
test and no expectation: what a schema must accept or reject is each test's to say.
"""

from __future__ import annotations

import json

import pytest

from structgen.automata.languages import AUTOMATA
from structgen.grammar import ir
from structgen.grammar.json_schema import JsonOptions, schema_to_ir


def acceptor(node: ir.Node):
    """bytes -> bool for the IR's language (lazy DFA from structgen.automata)."""
    try:
        from structgen.automata.dfa import LazyDFA
        from structgen.automata.nfa import LazyNFA
    except ImportError:  # pragma: no cover - fall back to Python regexes (small graphs only)
        import re

        rx = re.compile(ir.to_python_regex(node), re.S)
        return lambda data: rx.fullmatch(data) is not None
    dfa = LazyDFA(LazyNFA(node), max_states=1_000_000)

    def accepts(data: bytes) -> bool:
        if dfa.start < 0:
            return False
        sid = dfa.walk(dfa.start, data)
        return sid >= 0 and bool(dfa.accepting[sid])

    return accepts


class G:
    """A compiled schema: `g.ok(text)` / `g.value(v)` (rendered in the style)."""

    def __init__(self, schema, **options):
        self.options = JsonOptions(**options)
        self.node = schema_to_ir(schema, self.options, languages=AUTOMATA)
        self.accepts = acceptor(self.node)

    def ok(self, text: str | bytes) -> bool:
        return self.accepts(text.encode() if isinstance(text, str) else text)

    def value(self, v) -> bool:
        return self.ok(dumps(v, self.options))


def dumps(v, options: JsonOptions) -> str:
    if options.style == "compact":
        return json.dumps(v, separators=(",", ":"))
    if options.style == "indent":
        return json.dumps(v, indent=options.indent)
    return json.dumps(v)


class T(str):
    """A literal JSON text (anything else given to `check` is a value to render)."""


def check(schema, accepted=(), rejected=(), **options):
    """Values (rendered in the style) or texts T("...") that must be accepted / rejected."""
    g = G(schema, **options)
    for x in accepted:
        text = x if isinstance(x, T) else dumps(x, g.options)
        assert g.ok(text), f"should accept {text!r} for {schema}"
    for x in rejected:
        text = x if isinstance(x, T) else dumps(x, g.options)
        assert not g.ok(text), f"should reject {text!r} for {schema}"
    return g


def raises(exc, schema, pointer=None, keyword=None, **options):
    with pytest.raises(exc) as info:
        schema_to_ir(schema, JsonOptions(**options), languages=AUTOMATA)
    if pointer is not None:
        assert info.value.pointer == pointer, str(info.value)
    if keyword is not None:
        assert info.value.keyword == keyword, str(info.value)
    return info.value
