"""Texts with a '.' or an exponent (those Python reads as floats) whose value lies
between two thresholds, as byte-level IR: plain decimals I.F and normalized scientific
texts [1-9](.F)?e[+-]?N, for either sign (`float_texts`).

Owns: rounding the thresholds to `MAX_SIG_DIGITS` inward, and splitting a range by
integer part and by decimal exponent. Must not read schema keywords: `bounds` gives the
thresholds; the digits come from `integer_ranges` and `fraction_digits`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Optional

from structgen.grammar import ir
from structgen.grammar.numbers.bounds import Threshold
from structgen.grammar.numbers.caps import cap_plain_decimals
from structgen.grammar.numbers.decimals import floor_log10, pow10, round_significant, split_decimal
from structgen.grammar.numbers.fraction_digits import FractionDigits
from structgen.grammar.numbers.integer_ranges import canonical_range, zero_padded_range
from structgen.grammar.numbers.lexemes import (
    EXPONENT_MARK,
    MANTISSA_TEXT,
    MINUS,
    POINT,
    UNSIGNED_FLOAT_TEXT,
    ZERO,
    ZERO_EXPONENT_TEXT,
)


def _normalize_unsigned(lo: Threshold, hi: Threshold):
    """Round to MAX_SIG_DIGITS inward, drop a lower bound that every u >= 0 meets.

    Returns (lo, hi) or None when the interval (within u >= 0) is empty.
    """
    if lo is not None:
        v = round_significant(lo[0], up=True)
        lo = (v, lo[1] and v == lo[0])
        if lo[0] < 0 or (lo[0] == 0 and not lo[1]):
            lo = None
    if hi is not None:
        v = round_significant(hi[0], up=False)
        hi = (v, hi[1] and v == hi[0])
        if hi[0] < 0 or (hi[0] == 0 and hi[1]):
            return None
    if lo is not None and hi is not None:
        if lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1])):
            return None
    return lo, hi


def _udec(lo: Threshold, hi: Threshold, require_point: bool, frac: FractionDigits) -> ir.Node:
    """Texts I or I.F (I canonical, F non-empty; I.F only if require_point) with value in [lo, hi]."""
    if lo is None:
        li, lf, sa = 0, None, False
    else:
        li, lf = split_decimal(lo[0])
        sa = lo[1]
    if hi is None:
        hi_i, hf, sb = None, None, False
    else:
        hi_i, hf = split_decimal(hi[0])
        sb = hi[1]

    def tail(a, b, sa_, sb_) -> ir.Node:
        point = ir.seq(POINT, frac(a, b, sa_, sb_, True))
        if require_point:
            return point
        lower_ok = a is None or (a == "" and not sa_)
        upper_ok = b is None or b != "" or not sb_
        return ir.alt(ir.EMPTY, point) if (lower_ok and upper_ok) else point

    if hi_i is not None and li > hi_i:
        return ir.NOTHING
    if hi_i is not None and li == hi_i:
        return ir.seq(ir.lit(str(li)), tail(lf, hf, sa, sb))
    parts = [ir.seq(ir.lit(str(li)), tail(lf, None, sa, False))]
    parts.append(ir.seq(canonical_range(li + 1, None if hi_i is None else hi_i - 1), tail(None, None, False, False)))
    if hi_i is not None:
        parts.append(ir.seq(ir.lit(str(hi_i)), tail(None, hf, False, sb)))
    return ir.alt(*parts)


def _scale(t: Threshold, e: int) -> Threshold:
    return None if t is None else (t[0] * pow10(e), t[1])


def _exp_text(e1: Optional[int], e2: Optional[int]) -> ir.Node:
    """[eE][+-]?[0-9]+ whose integer value lies in [e1, e2] (None = open)."""
    if e1 is not None and e2 is not None and e1 > e2:
        return ir.NOTHING
    parts = []
    nlo = 0 if e1 is None else max(e1, 0)
    if e2 is None or e2 >= nlo:
        parts.append(ir.seq(ir.opt(ir.lit(b"+")), zero_padded_range(nlo, e2)))
    mlo = 1 if e2 is None else max(1, -e2)
    mhi = None if e1 is None else -e1
    if mhi is None or mhi >= mlo:
        parts.append(ir.seq(MINUS, zero_padded_range(mlo, mhi)))
    if (e1 is None or e1 <= 0) and (e2 is None or e2 >= 0):
        parts.append(ir.seq(MINUS, ir.rep(ZERO, 1)))  # "-0", "-00": exponent 0
    return ir.seq(EXPONENT_MARK, ir.alt(*parts))


def _usci(lo: Threshold, hi: Threshold, frac: FractionDigits) -> ir.Node:
    """Normalized scientific texts [1-9](.F)?e[+-]?N with value in [lo, hi] (value > 0)."""
    if hi is not None and hi[0] <= 0:
        return ir.NOTHING
    e_lo = floor_log10(lo[0]) if lo is not None and lo[0] > 0 else None
    e_hi = floor_log10(hi[0]) if hi is not None else None
    one = (Fraction(1), False)
    ten = (Fraction(10), True)
    if e_lo is not None and e_hi is not None and e_lo == e_hi:
        m = _udec(_scale(lo, -e_lo), _scale(hi, -e_hi), False, frac)
        return ir.seq(m, _exp_text(e_lo, e_lo))
    parts = []
    free_lo = free_hi = None
    if e_lo is not None:
        parts.append(ir.seq(_udec(_scale(lo, -e_lo), ten, False, frac), _exp_text(e_lo, e_lo)))
        free_lo = e_lo + 1
    if e_hi is not None:
        parts.append(ir.seq(_udec(one, _scale(hi, -e_hi), False, frac), _exp_text(e_hi, e_hi)))
        free_hi = e_hi - 1
    if free_lo is None or free_hi is None or free_lo <= free_hi:
        parts.append(ir.seq(MANTISSA_TEXT, _exp_text(free_lo, free_hi)))
    return ir.alt(*parts)


def _ufloat(lo: Threshold, hi: Threshold, frac: FractionDigits) -> ir.Node:
    """Unsigned texts with '.' or an exponent whose value u >= 0 lies in [lo, hi]."""
    norm = _normalize_unsigned(lo, hi)
    if norm is None:
        return ir.NOTHING
    lo, hi = norm
    if lo is None and hi is None:
        return UNSIGNED_FLOAT_TEXT
    parts = [_udec(*cap_plain_decimals(lo, hi), True, frac), _usci(lo, hi, frac)]
    if lo is None:  # 0 is in range
        parts.append(ZERO_EXPONENT_TEXT)
    return ir.alt(*parts)


def float_texts(flo: Threshold, fhi: Threshold) -> ir.Node:
    frac = FractionDigits()
    pos = _ufloat(flo, fhi, frac)
    neg_lo = None if fhi is None else (-fhi[0], fhi[1])
    neg_hi = None if flo is None else (-flo[0], flo[1])
    neg = _ufloat(neg_lo, neg_hi, frac)
    return ir.alt(pos, ir.seq(MINUS, neg))
