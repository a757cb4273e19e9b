"""Exact decimal arithmetic on `Fraction`s: powers of ten, the decimal exponent of a
value, rounding to `MAX_SIG_DIGITS` significant digits, and a value's integer part and
fraction digits.

Owns: the digits of a bound's value. Must not build IR or read schema keywords.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Tuple

from structgen.errors import SchemaError

MAX_SIG_DIGITS = 40  # a bound with more significant digits is rounded inward to this many


def pow10(e: int) -> Fraction:
    return Fraction(10) ** e


def floor_log10(q: Fraction) -> int:
    """e with 10**e <= q < 10**(e+1), for q > 0 (exact)."""
    if q <= 0:
        raise ValueError("floor_log10 needs a positive value")
    e = len(str(q.numerator)) - len(str(q.denominator))
    while pow10(e) > q:
        e -= 1
    while pow10(e + 1) <= q:
        e += 1
    return e


def round_significant(q: Fraction, up: bool) -> Fraction:
    """q rounded (towards +inf if up, else -inf) to at most MAX_SIG_DIGITS significant digits."""
    if q == 0:
        return q
    if q < 0:
        return -round_significant(-q, not up)
    k = MAX_SIG_DIGITS - 1 - floor_log10(q)
    scaled = q * pow10(k)
    if scaled.denominator == 1:
        return q
    m = math.ceil(scaled) if up else math.floor(scaled)
    return Fraction(m) / pow10(k)


def split_decimal(q: Fraction) -> Tuple[int, str]:
    """q >= 0, a terminating decimal: (integer part, fraction digits without trailing zeros)."""
    ip = q.numerator // q.denominator
    rem = q - ip
    digits = []
    while rem:
        rem *= 10
        d = rem.numerator // rem.denominator
        digits.append(chr(0x30 + d))
        rem -= d
        if len(digits) > 5000:  # cannot happen after round_significant; guard anyway
            raise SchemaError("numeric bound needs too many digits")
    return ip, "".join(digits)
