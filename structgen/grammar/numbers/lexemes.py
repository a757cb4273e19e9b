"""The pieces of the JSON number grammar as byte-level IR, and the unbounded lexemes
`JSON_INTEGER` and `JSON_NUMBER`.

Owns: the bytes of a number text (digits, point, sign, exponent) and the texts built from
them without any bound. Must not know bounds: the range modules of this package put these
pieces together under thresholds.
"""

from __future__ import annotations

from structgen.grammar import ir

DIGIT = ir.byte_range(0x30, 0x39)  # [0-9]
NONZERO_DIGIT = ir.byte_range(0x31, 0x39)  # [1-9]
ZERO = ir.lit(b"0")
POINT = ir.lit(b".")
MINUS = ir.lit(b"-")
EXPONENT_MARK = ir.byteset([(0x45, 0x45), (0x65, 0x65)])  # [eE]
SIGN = ir.byteset([(0x2B, 0x2B), (0x2D, 0x2D)])  # [+-]

INTEGER_TEXT = ir.alt(ZERO, ir.seq(NONZERO_DIGIT, ir.rep(DIGIT)))  # 0|[1-9][0-9]*
FRACTION_TEXT = ir.seq(POINT, ir.rep(DIGIT, 1))  # \.[0-9]+
EXPONENT_TEXT = ir.seq(EXPONENT_MARK, ir.opt(SIGN), ir.rep(DIGIT, 1))  # [eE][+-]?[0-9]+
# unsigned text with a '.' or an exponent (Python reads these as float)
UNSIGNED_FLOAT_TEXT = ir.seq(INTEGER_TEXT, ir.alt(ir.seq(FRACTION_TEXT, ir.opt(EXPONENT_TEXT)), EXPONENT_TEXT))
ZERO_EXPONENT_TEXT = ir.seq(ZERO, ir.opt(ir.seq(POINT, ir.rep(ZERO, 1))), EXPONENT_TEXT)  # 0(\.0+)?e...
MANTISSA_TEXT = ir.seq(NONZERO_DIGIT, ir.opt(FRACTION_TEXT))  # [1-9](\.[0-9]+)?

JSON_INTEGER = ir.alt(ZERO, ir.seq(ir.opt(MINUS), NONZERO_DIGIT, ir.rep(DIGIT)))  # never "-0"
JSON_NUMBER = ir.seq(ir.opt(MINUS), INTEGER_TEXT, ir.opt(FRACTION_TEXT), ir.opt(EXPONENT_TEXT))
