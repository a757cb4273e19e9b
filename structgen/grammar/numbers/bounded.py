"""JSON integer and number lexemes restricted to the four bound keywords:
`integer_ir`, `number_ir` and `number_bounds_empty` (their contract is the package
docstring's).

Owns: choosing between the unbounded lexeme, the integer texts and the float texts.
Must not build digits itself: `bounds` reads the keywords, `integer_ranges` and
`decimal_ranges` build the texts.
"""

from __future__ import annotations

from structgen.grammar import ir
from structgen.grammar.numbers.bounds import Bounds
from structgen.grammar.numbers.decimal_ranges import float_texts
from structgen.grammar.numbers.integer_ranges import integer_texts
from structgen.grammar.numbers.lexemes import JSON_INTEGER, JSON_NUMBER


def integer_ir(
    minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None, *, pointer: str = ""
) -> ir.Node:
    """JSON integer texts (0|-?[1-9][0-9]*, never "-0") within the bounds; ir.NOTHING if none.

    `pointer` (the subschema's JSON pointer) goes into the SchemaError for a bad bound.
    """
    b = Bounds(minimum, maximum, exclusive_minimum, exclusive_maximum, pointer)
    if b.unbounded:
        return JSON_INTEGER
    if b.int_impossible:
        return ir.NOTHING
    return integer_texts(b.int_lo, b.int_hi)


def number_ir(
    minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None, *, pointer: str = ""
) -> ir.Node:
    """JSON number texts within the bounds (see the package docstring); ir.NOTHING if none."""
    b = Bounds(minimum, maximum, exclusive_minimum, exclusive_maximum, pointer)
    if b.unbounded:
        return JSON_NUMBER
    parts = []
    if not b.int_impossible:
        parts.append(integer_texts(b.int_lo, b.int_hi))
    if not b.float_impossible:
        parts.append(float_texts(b.flo, b.fhi))
    return ir.alt(*parts)


def number_bounds_empty(
    minimum=None,
    maximum=None,
    exclusive_minimum=None,
    exclusive_maximum=None,
    *,
    integer: bool = False,
    pointer: str = "",
) -> bool:
    """True when no text of the type (integer if `integer`, else number) meets the bounds.

    Answers for the grammar this package builds (which may refuse a few exotic spellings),
    so an empty answer means the compiled lexeme is `ir.NOTHING`. Contradictory bounds are
    not an error in JSON Schema (the subschema just matches no number); the schema
    compiler decides whether to raise. Raises SchemaError for a non-numeric or NaN bound.
    """
    build = integer_ir if integer else number_ir
    return ir.is_nothing(build(minimum, maximum, exclusive_minimum, exclusive_maximum, pointer=pointer))
