"""The four bound keywords (`minimum`, `maximum`, `exclusiveMinimum`,
`exclusiveMaximum`) turned into thresholds: `Bounds` gives the inclusive integer bounds
for texts without '.'/'e' and the (value, strict) thresholds for texts with them, under
both readings of a number (Python's float and the exact decimal; see the package
docstring).

Owns: checking a bound's value (SchemaError for a non-number or NaN), infinite bounds,
the largest double that meets a bound. Must not build IR: the range modules turn these
thresholds into texts.
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Optional, Tuple

from structgen.errors import SchemaError

_MAX_DOUBLE = sys.float_info.max

# A threshold: (value, strict) or None (absent).
Threshold = Optional[Tuple[Fraction, bool]]


def _check(name: str, value, pointer: str):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, Fraction)):
        raise SchemaError(f"{name} must be a number, got {value!r}", pointer)
    if isinstance(value, float) and math.isnan(value):
        raise SchemaError(f"{name} must not be NaN", pointer)
    if isinstance(value, Decimal) and value.is_nan():
        raise SchemaError(f"{name} must not be NaN", pointer)
    return value


def _is_inf(value) -> bool:
    if isinstance(value, float):
        return math.isinf(value)
    if isinstance(value, Decimal):
        return value.is_infinite()
    return False


def _decimal_value(value) -> Fraction:
    """The value a decimal validator reads for this bound (a float's shortest repr)."""
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(value)


def _repr_fraction(d: float) -> Fraction:
    return Fraction(Decimal(repr(d)))


def _largest_double_le(q: Fraction, strict: bool) -> Optional[float]:
    """The largest finite double d with d <= q (d < q if strict); None if there is none."""
    try:
        d = float(q)  # int / int true division: correctly rounded
    except OverflowError:
        d = math.inf if q > 0 else -math.inf
    if d == math.inf:
        d = _MAX_DOUBLE
    if d == -math.inf:
        return None
    while Fraction(d) > q or (strict and Fraction(d) == q):
        d = math.nextafter(d, -math.inf)
        if d == -math.inf:
            return None
    return d


def _tighter_upper(a: Threshold, b: Threshold) -> Threshold:
    if a is None:
        return b
    if b is None:
        return a
    if a[0] != b[0]:
        return a if a[0] < b[0] else b
    return (a[0], a[1] or b[1])


def _tighter_lower(a: Threshold, b: Threshold) -> Threshold:
    if a is None:
        return b
    if b is None:
        return a
    if a[0] != b[0]:
        return a if a[0] > b[0] else b
    return (a[0], a[1] or b[1])


class Bounds:
    """The four keywords turned into thresholds for int-form and float-form texts.

    int_lo/int_hi: inclusive int bounds (None = open) for texts without '.'/'e';
    flo/fhi: thresholds for texts with '.'/'e'; `int_impossible`/`float_impossible`.
    """

    def __init__(self, minimum, maximum, exclusive_minimum, exclusive_maximum, pointer: str = ""):
        minimum = _check("minimum", minimum, pointer)
        maximum = _check("maximum", maximum, pointer)
        exclusive_minimum = _check("exclusiveMinimum", exclusive_minimum, pointer)
        exclusive_maximum = _check("exclusiveMaximum", exclusive_maximum, pointer)
        self.unbounded = True
        self.int_impossible = False
        self.float_impossible = False
        int_hi: Threshold = None
        int_lo: Threshold = None
        fhi: Threshold = None
        flo: Threshold = None
        for value, strict in ((maximum, False), (exclusive_maximum, True)):
            if value is None:
                continue
            if _is_inf(value):
                if value > 0:
                    if strict:  # x < inf: finite only (a text overflowing to inf is out)
                        self.unbounded = False
                        fhi = _tighter_upper(fhi, (_repr_fraction(_MAX_DOUBLE), False))
                    continue
                self.unbounded = False
                self.int_impossible = self.float_impossible = True
                continue
            self.unbounded = False
            exact, dec = Fraction(value), _decimal_value(value)
            int_hi = _tighter_upper(int_hi, (exact, strict))
            int_hi = _tighter_upper(int_hi, (dec, strict))
            fhi = _tighter_upper(fhi, (dec, strict))
            d = _largest_double_le(exact, strict)
            if d is None:
                self.float_impossible = True
            else:
                fhi = _tighter_upper(fhi, (_repr_fraction(d), False))
        for value, strict in ((minimum, False), (exclusive_minimum, True)):
            if value is None:
                continue
            if _is_inf(value):
                if value < 0:
                    if strict:
                        self.unbounded = False
                        flo = _tighter_lower(flo, (-_repr_fraction(_MAX_DOUBLE), False))
                    continue
                self.unbounded = False
                self.int_impossible = self.float_impossible = True
                continue
            self.unbounded = False
            exact, dec = Fraction(value), _decimal_value(value)
            int_lo = _tighter_lower(int_lo, (exact, strict))
            int_lo = _tighter_lower(int_lo, (dec, strict))
            flo = _tighter_lower(flo, (dec, strict))
            d = _largest_double_le(-exact, strict)  # smallest double >= exact is -d
            if d is None:
                self.float_impossible = True
            else:
                flo = _tighter_lower(flo, (-_repr_fraction(d), False))
        self.int_lo = None if int_lo is None else _int_lower(int_lo)
        self.int_hi = None if int_hi is None else _int_upper(int_hi)
        self.flo = flo
        self.fhi = fhi


def _int_upper(t: Tuple[Fraction, bool]) -> int:
    v, strict = t
    return math.ceil(v) - 1 if strict else math.floor(v)


def _int_lower(t: Tuple[Fraction, bool]) -> int:
    v, strict = t
    return math.floor(v) + 1 if strict else math.ceil(v)
