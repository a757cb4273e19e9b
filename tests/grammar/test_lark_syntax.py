"""The fast reader of lark's syntax (grammar/lark_syntax.py) against lark's own loader:
the grammars it reads compile to the same masks, token by token, with the SmolLM2
vocabulary; what it leaves to lark's loader still compiles; and the refusals match."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structgen
from benchmarks.hostile import HOSTILE_TERMINALS, lark_grammars
from structgen.errors import StructgenError
from structgen.grammar import lark_grammar
from structgen.grammar.lark_syntax import MAX_SPREAD, NotRead, read_lark
from tests.automata.test_flat import same_masks_on_walks

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"

FEATURES = {
    "library imports and ignore": r"""
        start: pair ("," pair)*
        pair: CNAME "=" (SIGNED_NUMBER | ESCAPED_STRING | WORD)
        %import common.CNAME
        %import common (SIGNED_NUMBER, ESCAPED_STRING, WS)
        %import common.LETTER -> L
        WORD: L+
        %ignore WS
        """,
    "modifiers, priorities, aliases and continuation lines": r"""
        ?start: sum
        ?sum: sum "+" product -> add
            | sum "-" product   -> sub
            // a comment between alternatives
            | product
        !product.2: product "*" atom | atom  # a hash comment
        _atom: NUMBER | "(" sum ")"
        atom: _atom
        NUMBER.3: /\d+(\.\d+)?/
        """,
    "optionals and repetitions of every kind": r"""
        start: "<" [a] b? c* d+ e~2 f~1..3 (g | h)~0..2 ">"
        a: "a"
        b: "b" | "bb"
        c: "c"
        d: "d" ("," "d")*
        e: "e"
        f: "f"
        g: "g"
        h: "h" [g]
        """,
    "left recursion behind optionals": r"""
        start: list
        list: [list ","] item | list ";" item
        item: ITEM ("." ITEM)*
        ITEM: "x".."z" | "0".."9"
        """,
    "literal flags, escapes and regex flags": r"""
        start: KW _S name (_S name)* END
        KW: "select"i | "from"i
        name: /[a-z_]\w*/i | "\"" /[^"\n]+/ "\"" | "\x41\u00e9\t"
        _S: /[ \t]+/
        END: /;\s*/x | "\\"
        """,
    "terminals made of terminals": r"""
        start: DATE ("T" TIME)?
        DATE: YEAR "-" MONTH "-" DAY
        YEAR: DIGIT~4
        MONTH: "0" "1".."9" | "1" "0".."2"
        DAY: DIGIT DIGIT
        TIME: DIGIT~2 (":" DIGIT~2)~1..2
        %import common.DIGIT
        """,
    "ignored text between every pair of terminals": r"""
        start: ("a" "b")+ x* | "c"~2..3
        x: "x" "y"?
        %ignore " "
        %ignore /\t+/
        """,
}


def _compiled(text: str, vocab, fast: bool, monkeypatch) -> structgen.CompiledGrammar:
    if not fast:
        monkeypatch.setattr(lark_grammar, "read_lark", _left_to_lark)
    structgen.clear_cache()
    try:
        return structgen.compile_grammar(text, vocab, syntax="lark")
    finally:
        monkeypatch.undo()
        structgen.clear_cache()


def _left_to_lark(text: str, start: str = "start"):
    raise NotRead("as if this reader left every grammar to lark's loader")


def _same_masks(text, vocab, monkeypatch, walks=8, steps=40, seed=0):
    read_lark(text)  # the fast reader takes it, rather than handing it to lark's loader
    fast = _compiled(text, vocab, True, monkeypatch)
    loaded = _compiled(text, vocab, False, monkeypatch)
    same_masks_on_walks(fast, loaded, vocab, walks=walks, steps=steps, seed=seed)


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_features_give_the_masks_of_larks_loader(name, smollm2_vocab, monkeypatch):
    _same_masks(FEATURES[name], smollm2_vocab, monkeypatch)


@pytest.mark.parametrize("file", sorted(p.name for p in GRAMMARS.glob("*.lark")))
def test_grammar_files_give_the_masks_of_larks_loader(file, smollm2_vocab, monkeypatch):
    _same_masks((GRAMMARS / file).read_text(), smollm2_vocab, monkeypatch, walks=6, steps=60)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=lark_grammars(tuple(HOSTILE_TERMINALS)), seed=st.integers(0, 2**31 - 1))
def test_random_grammars_compile_or_fail_as_with_larks_loader(text, seed, smollm2_vocab, monkeypatch):
    """Random rules, imports, ignores and odd lines: both paths refuse, or give the same masks."""
    outcomes = []
    for fast in (True, False):
        try:
            outcomes.append(_compiled(text, smollm2_vocab, fast, monkeypatch))
        except StructgenError as e:
            outcomes.append(e)
    fast, loaded = outcomes
    assert isinstance(fast, Exception) == isinstance(loaded, Exception), (text, fast, loaded)
    if isinstance(fast, Exception):
        assert type(fast) is type(loaded), (text, fast, loaded)
        return
    try:
        same_masks_on_walks(fast, loaded, smollm2_vocab, walks=3, steps=30, seed=seed)
    except StructgenError as e:  # an exponentially ambiguous grammar, refused while decoding
        assert "too ambiguous" in str(e), str(e)


@pytest.mark.parametrize(
    "text",
    [
        'start: _sep{"a", ","}\n_sep{x, s}: x (s x)*',  # a template
        'start: A\n%declare A',
        'start: "a"\n%override start: "b"',
        'start: "a"\n%extend start: "b"',
        'start: x\n%import lark.expansions -> x',  # a rule from lark's library
        'start: a\na: "x" | b',  # an undefined rule: lark words the error
        'start: "a" (',
        'start: WS\nWS: " "\n%import common.WS',  # imported and defined: lark refuses it
        "start: T0\n" + "".join(f"T{i}: T{i + 1}\n" for i in range(150)) + 'T150: "x"',  # a long chain
    ],
)
def test_what_it_leaves_goes_to_larks_loader(text):
    with pytest.raises(NotRead):
        read_lark(text)


def test_templates_still_compile_through_larks_loader(smollm2_vocab):
    g = structgen.compile_grammar('start: _sep{"a", ","}\n_sep{x, s}: x (s x)*', smollm2_vocab)
    assert g.accepts_bytes(b"a,a,a") and not g.accepts_bytes(b"a,,a")


@pytest.mark.parametrize("count", [16, 400])
def test_a_long_run_of_optionals_stays_small(count):
    """`a? b? ...` is spread into at most MAX_SPREAD alternatives, with a helper rule per
    optional, not lark's 2^n alternatives."""
    text = "start: " + " ".join(f'"x{i}"?' for i in range(count)) + ' "!"'
    rules = read_lark(text).rules
    assert len(rules["start"]) <= MAX_SPREAD + 1
    assert sum(len(alts) for alts in rules.values()) < 3 * count + MAX_SPREAD
