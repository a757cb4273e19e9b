"""The automata's answers to grammar/'s questions about a language (`grammar.languages`).

Owns `AUTOMATA`, the `Languages` that the compiler hands to the front ends. Must not
hold automaton code of its own: each answer is one call into nfa.py or dfa.py.
"""

from __future__ import annotations

from structgen.automata.dfa import LazyDFA
from structgen.automata.item_sets import ACCEPT
from structgen.automata.nfa import LazyNFA
from structgen.grammar import ir
from structgen.grammar.languages import Languages


def nullable(node: ir.Node) -> bool:
    return ACCEPT in LazyNFA(node).start


def nonempty(node: ir.Node) -> bool:
    return not LazyNFA(node).is_empty_language


def byte_dfa(node: ir.Node) -> LazyDFA:
    return LazyDFA(LazyNFA(node, lexemes=False))


AUTOMATA = Languages(nullable=nullable, nonempty=nonempty, byte_dfa=byte_dfa)
