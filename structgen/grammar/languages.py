"""Questions about an IR node's language that take an automaton to answer.

Owns the `Languages` interface only. The front ends that need such answers (the checks
of a context-free grammar, `multipleOf` with a decimal step) are given a `Languages` by
their caller; the compiler passes `structgen.automata.languages.AUTOMATA`. grammar/
never imports automata/: the automata are built on this package, not the other way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from structgen.grammar import ir


class ByteDFA(Protocol):
    """A deterministic automaton over bytes: `step` gives -1 where no text continues."""

    start: int  # -1 when the language is empty
    accepting: Sequence[bool]

    def step(self, state: int, byte: int) -> int: ...


@dataclass(frozen=True)
class Languages:
    nullable: Callable[[ir.Node], bool]  # the language holds the empty text
    nonempty: Callable[[ir.Node], bool]  # the language holds some text
    byte_dfa: Callable[[ir.Node], ByteDFA]  # an automaton of the language (lexemes inlined)
