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
from typing import NamedTuple, Optional, Tuple

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


def _negated(value):
    if isinstance(value, Decimal):
        return value.copy_negate()  # exact: `-value` rounds to the context's precision
    return None if value is None else -value


def _negated_threshold(t: Threshold) -> Threshold:
    return None if t is None else (-t[0], t[1])


def _tighter_upper(a: Threshold, b: Threshold) -> Threshold:
    if a is None:
        return b
    if b is None:
        return a
    if a[0] != b[0]:
        return a if a[0] < b[0] else b
    return (a[0], a[1] or b[1])


class Side(NamedTuple):
    bounded: bool  # a bound was given
    empty: bool  # no number meets it (a bound of infinity on the wrong side)
    no_float: bool  # no finite double meets it


def _upper_thresholds(bounds) -> tuple[Threshold, Threshold, Side]:
    """For bounds (value, strict) meaning x <= value (x < value if strict), value None
    when absent: the threshold for int-form texts, the one for float-form texts, and
    what the bounds allow."""
    int_t: Threshold = None
    float_t: Threshold = None
    bounded = empty = no_float = False
    for value, strict in bounds:
        if value is None:
            continue
        if _is_inf(value):
            if value < 0:
                bounded = empty = True
            elif strict:  # x < inf: finite only (a text overflowing to inf is out)
                bounded = True
                float_t = _tighter_upper(float_t, (_repr_fraction(_MAX_DOUBLE), False))
            continue
        bounded = True
        exact, dec = Fraction(value), _decimal_value(value)
        int_t = _tighter_upper(_tighter_upper(int_t, (exact, strict)), (dec, strict))
        float_t = _tighter_upper(float_t, (dec, strict))
        d = _largest_double_le(exact, strict)
        if d is None:
            no_float = True
        else:
            float_t = _tighter_upper(float_t, (_repr_fraction(d), False))
    return int_t, float_t, Side(bounded, empty, no_float)


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
        int_hi, fhi, above = _upper_thresholds(((maximum, False), (exclusive_maximum, True)))
        # x >= m is -x <= -m: the lower side is the upper side of the negated bounds
        int_lo, flo, below = _upper_thresholds(((_negated(minimum), False), (_negated(exclusive_minimum), True)))
        int_lo, flo = _negated_threshold(int_lo), _negated_threshold(flo)
        self.unbounded = not (above.bounded or below.bounded)
        self.int_impossible = above.empty or below.empty
        self.float_impossible = self.int_impossible or above.no_float or below.no_float
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
