"""JSON integer and number lexemes restricted to numeric bounds, as byte-level IR.

    integer_ir(minimum, maximum, exclusive_minimum, exclusive_maximum, *, pointer="") -> ir.Node
    number_ir(minimum, maximum, exclusive_minimum, exclusive_maximum, *, pointer="")  -> ir.Node
    number_bounds_empty(..., *, integer=False, pointer="") -> bool
    JSON_INTEGER, JSON_NUMBER: the unbounded lexemes
    decimal_multiples_ir(step, within, byte_dfa, *, max_states) -> ir.Node | None:
        the texts of `within` that are exact decimal multiples of `step`

Bounds are the values of the draft 2020-12 keywords `minimum`, `maximum`,
`exclusiveMinimum`, `exclusiveMaximum` (int, float or Decimal; None = absent). A bound
that is not a number (bool, str, NaN) raises `SchemaError`.

The grammar is exact by construction: integer ranges are built by digit-prefix
splitting, fractions by digit-by-digit comparison with the bound, never by
enumerating values. It never accepts a text that the bounds reject, under either of
the two ways validators read numbers:

* Python (`json.loads` + `jsonschema`): a text without `.`/`e` is an exact `int`; a
  text with `.` or `e` becomes the nearest `float` (so "0.99999999999999999999" IS 1.0,
  and with exclusiveMaximum 1 it is rejected; "1e-400" is 0.0). Both are compared with
  the bound exactly (Python compares int/float exactly).
* Exact decimal: the text's decimal value against the bound's decimal spelling
  (`repr` of a float bound, e.g. maximum 0.3 means 3/10, not 0.29999999999999998...).

For a text with `.`/`e` the grammar therefore requires  x <= min(R, repr(D))  where R
is the bound's decimal value and D the largest double that satisfies the bound (and
symmetrically for lower bounds). For bounds that are doubles or integers below 2**53,
every in-range `json.dumps(float)` output is accepted (shortest repr is monotone), and
every in-range `json.dumps(int)` output too (up to the size caps below).

Documented over-constraints (valid spellings that are refused), all rare:
* "-0" is never produced (0 is written "0"; "-0.0" is allowed when 0 is in range).
* With any bound present, exponent notation is allowed only with a normalized
  mantissa: [1-9](\\.[0-9]+)?[eE][+-]?[0-9]+ (what `json.dumps` writes: "1e-05",
  "1.5e+16"), or a zero mantissa "0(.0+)?e..." when 0 is in range; "10e3", "0.5e1"
  are refused. (Without bounds the full JSON number grammar is returned; a sign that
  is unbounded in its direction, e.g. positives with minimum <= 0 and no maximum, also
  gets the full grammar.)
* A '.'/'e' text lying between repr(D) and the rounding midpoint next to D (a 17+
  digit spelling that Python would round onto D, e.g. "0.99999999999999994" under
  exclusiveMaximum 1) is refused; so are values between D and an integer bound that is
  not a double (|bound| > 2**53), and integers between a float bound's exact value and
  its repr (only possible above 2**53).
* A bound with more than 40 significant digits is rounded inward to 40.
* Size caps that keep automata small: when a finite upper bound is above 10**40, texts
  without exponent have at most 40 integer digits (integers: |n| < 10**40); when a
  positive lower bound is below 1e-30, texts without exponent must be >= 1e-30
  (exclusiveMinimum 0 would otherwise need a 330-state chain to reject
  "0.000...0001" texts that round to 0.0). Exponent notation covers the rest.
* Infinite bounds: +inf upper / -inf lower are ignored (except an exclusive one,
  which forbids overflow to inf); a text that overflows to +-inf is never produced
  where only inf would satisfy the bound (minimum: inf -> nothing).

Owns: number texts as byte-level IR. Must not know JSON Schema beyond these keywords
(what `multipleOf` and exclusions compile to is `json_schema.numeric`'s choice) and
never imports automata/ (`decimal_multiples_ir` is given its automaton builder).

The package, one concept per module (each module's docstring says what it owns):
  bounded          integer_ir, number_ir, number_bounds_empty: the public lexemes
  bounds           the four keywords -> integer bounds and float thresholds
  lexemes          the pieces of a number text; JSON_INTEGER, JSON_NUMBER
  decimals         exact decimal arithmetic (powers of ten, significant digits)
  caps             the size caps on texts without an exponent
  integer_ranges   integer texts within a range
  fraction_digits  fraction digits compared with bounds
  decimal_ranges   texts with '.' or an exponent within thresholds
  multiples        decimal_multiples_ir: exact decimal multiples of a step
"""

from __future__ import annotations

from structgen.grammar.numbers.bounded import integer_ir, number_bounds_empty, number_ir
from structgen.grammar.numbers.lexemes import JSON_INTEGER, JSON_NUMBER
from structgen.grammar.numbers.multiples import decimal_multiples_ir

__all__ = ["integer_ir", "number_ir", "number_bounds_empty", "decimal_multiples_ir", "JSON_INTEGER", "JSON_NUMBER"]
