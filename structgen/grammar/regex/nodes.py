"""The character-level AST of a parsed regex: `Chars`, `Sequence`, `Alternation`,
`Quantified`, `Anchor` (the `RegexNode` union).

Owns: the node types only. Must not parse or lower: `parser` builds these nodes,
`lowering` and the JSON Schema code-point automata (`json_schema.char_nfa`) walk them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from structgen.grammar import charset as C


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
