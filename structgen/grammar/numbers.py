"""JSON integer and number lexemes restricted to numeric bounds, as byte-level IR.

    integer_ir(minimum, maximum, exclusive_minimum, exclusive_maximum, *, pointer="") -> ir.Node
    number_ir(minimum, maximum, exclusive_minimum, exclusive_maximum, *, pointer="")  -> ir.Node
    number_bounds_empty(..., *, integer=False, pointer="") -> bool
    JSON_INTEGER, JSON_NUMBER: the unbounded lexemes

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
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Callable, Optional, Tuple

from structgen.errors import SchemaError
from structgen.grammar import ir
from structgen.grammar.languages import ByteDFA

__all__ = ["integer_ir", "number_ir", "number_bounds_empty", "decimal_multiples_ir", "JSON_INTEGER", "JSON_NUMBER"]

MAX_SIG_DIGITS = 40
PLAIN_MAX_DIGITS = 40  # integer digits of a text without exponent, when an upper bound allows more
PLAIN_MIN_EXP = -30  # smallest magnitude written without exponent, when a lower bound > 0 exists

_D = ir.byte_range(0x30, 0x39)  # [0-9]
_NZ = ir.byte_range(0x31, 0x39)  # [1-9]
_ZERO = ir.lit(b"0")
_DOT = ir.lit(b".")
_MINUS = ir.lit(b"-")
_E = ir.byteset([(0x45, 0x45), (0x65, 0x65)])  # [eE]
_SIGN = ir.byteset([(0x2B, 0x2B), (0x2D, 0x2D)])  # [+-]

_INT_TEXT = ir.alt(_ZERO, ir.seq(_NZ, ir.rep(_D)))  # 0|[1-9][0-9]*
_FRAC_TEXT = ir.seq(_DOT, ir.rep(_D, 1))  # \.[0-9]+
_EXP_TEXT = ir.seq(_E, ir.opt(_SIGN), ir.rep(_D, 1))  # [eE][+-]?[0-9]+
# unsigned text with a '.' or an exponent (Python reads these as float)
_UFLOAT_ANY = ir.seq(_INT_TEXT, ir.alt(ir.seq(_FRAC_TEXT, ir.opt(_EXP_TEXT)), _EXP_TEXT))
_ZERO_EXP = ir.seq(_ZERO, ir.opt(ir.seq(_DOT, ir.rep(_ZERO, 1))), _EXP_TEXT)  # 0(\.0+)?e...
_MANTISSA_ANY = ir.seq(_NZ, ir.opt(_FRAC_TEXT))  # [1-9](\.[0-9]+)?

JSON_INTEGER = ir.alt(_ZERO, ir.seq(ir.opt(_MINUS), _NZ, ir.rep(_D)))  # never "-0"
JSON_NUMBER = ir.seq(ir.opt(_MINUS), _INT_TEXT, ir.opt(_FRAC_TEXT), ir.opt(_EXP_TEXT))

_MAX_DOUBLE = sys.float_info.max

# A threshold: (value, strict) or None (absent). _IMPOSSIBLE: nothing satisfies it.
Threshold = Optional[Tuple[Fraction, bool]]
_IMPOSSIBLE = "impossible"


# ---------------------------------------------------------------- bound parsing


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


class _Bounds:
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


# ---------------------------------------------------------------- decimal helpers


def _pow10(e: int) -> Fraction:
    return Fraction(10) ** e


def _floor_log10(q: Fraction) -> int:
    """e with 10**e <= q < 10**(e+1), for q > 0 (exact)."""
    if q <= 0:
        raise ValueError("_floor_log10 needs a positive value")
    e = len(str(q.numerator)) - len(str(q.denominator))
    while _pow10(e) > q:
        e -= 1
    while _pow10(e + 1) <= q:
        e += 1
    return e


def _round_sig(q: Fraction, up: bool) -> Fraction:
    """q rounded (towards +inf if up, else -inf) to at most MAX_SIG_DIGITS significant digits."""
    if q == 0:
        return q
    if q < 0:
        return -_round_sig(-q, not up)
    k = MAX_SIG_DIGITS - 1 - _floor_log10(q)
    scaled = q * _pow10(k)
    if scaled.denominator == 1:
        return q
    m = math.ceil(scaled) if up else math.floor(scaled)
    return Fraction(m) / _pow10(k)


def _split(q: Fraction) -> Tuple[int, str]:
    """q >= 0, a terminating decimal: (integer part, fraction digits without trailing zeros)."""
    ip = q.numerator // q.denominator
    rem = q - ip
    digits = []
    while rem:
        rem *= 10
        d = rem.numerator // rem.denominator
        digits.append(chr(0x30 + d))
        rem -= d
        if len(digits) > 5000:  # cannot happen after _round_sig; guard anyway
            raise SchemaError("numeric bound needs too many digits")
    return ip, "".join(digits)


# ---------------------------------------------------------------- integer ranges


def _fixed_between(s: str, t: str) -> ir.Node:
    """Digit strings of length len(s) == len(t) between s and t inclusive (s <= t).

    Built as an explicit automaton (ir.Graph) over states (position, still equal to a
    prefix of s, still equal to a prefix of t), so that every way of leaving the bounds
    early converges on one "free" chain: the DFA stays linear in the number of digits
    (a tree of per-level alternatives would determinize to O(n^2) states).
    """
    n = len(s)
    index: dict = {}
    edges: list = []

    def state(i: int, lt: bool, ht: bool) -> int:
        # a tight flag whose remaining bound is all 0s (lower) / all 9s (upper) constrains nothing
        if lt and s[i:].strip("0") == "":
            lt = False
        if ht and t[i:].strip("9") == "":
            ht = False
        key = (i, lt, ht)
        sid = index.get(key)
        if sid is None:
            sid = index[key] = len(index)
            todo.append(key)
        return sid

    todo: list = []
    start = state(0, True, True)
    done = 0
    while done < len(todo):
        i, lt, ht = todo[done]
        done += 1
        if i == n:
            continue
        src = index[(i, lt, ht)]
        lo = ord(s[i]) if lt else 0x30
        hi = ord(t[i]) if ht else 0x39
        if lo > hi:
            continue
        groups: dict = {}
        for d in range(lo, hi + 1):
            nlt = lt and d == ord(s[i])
            nht = ht and d == ord(t[i])
            groups.setdefault((nlt, nht), []).append(d)
        for (nlt, nht), ds in groups.items():
            dst = state(i + 1, nlt, nht)
            edges.append((src, dst, ir.byteset([(d, d) for d in ds])))
    finals = tuple(sid for (i, _, _), sid in index.items() if i == n)
    if not finals:
        return ir.NOTHING
    return ir.Graph(len(index), start, finals, tuple(edges))


def _simplify_lower(a: int) -> int:
    """Round a >= 0 up to at most MAX_SIG_DIGITS significant digits (inward, sound)."""
    n = len(str(a))
    if n <= MAX_SIG_DIGITS:
        return a
    k = 10 ** (n - MAX_SIG_DIGITS)
    return -(-a // k) * k


def _simplify_upper(b: int) -> int:
    """Round b >= 0 down to q*10**k - 1 (digits q then k nines), inward and sound."""
    n = len(str(b))
    if n <= MAX_SIG_DIGITS:
        return b
    k = 10 ** (n - MAX_SIG_DIGITS)
    return ((b + 1) // k) * k - 1


def _canon_range(a: int, b: Optional[int]) -> ir.Node:
    """Canonical decimal texts (0|[1-9][0-9]*) of the integers in [a, b]; a >= 0, b None = inf."""
    if b is not None and a > b:
        return ir.NOTHING
    a = _simplify_lower(a)
    if b is not None:
        b = _simplify_upper(b)
        if a > b:
            return ir.NOTHING
    parts = []
    if a == 0:
        parts.append(_ZERO)
        a = 1
        if b is not None and b < 1:
            return _ZERO
    sa = str(a)
    la = len(sa)
    if b is None:
        parts.append(_fixed_between(sa, "9" * la))
        parts.append(ir.seq(_NZ, ir.rep(_D, la, None)))
    else:
        sb = str(b)
        lb = len(sb)
        if la == lb:
            parts.append(_fixed_between(sa, sb))
        else:
            parts.append(_fixed_between(sa, "9" * la))
            if lb - la >= 2:
                parts.append(ir.seq(_NZ, ir.rep(_D, la, lb - 2)))
            parts.append(_fixed_between("1" + "0" * (lb - 1), sb))
    return ir.alt(*parts)


def _lz_range(a: int, b: Optional[int]) -> ir.Node:
    """Digit strings with leading zeros allowed whose value is in [a, b] (a >= 0)."""
    parts = []
    if a == 0:
        parts.append(ir.rep(_ZERO, 1))
        a = 1
    if b is None or a <= b:
        parts.append(ir.seq(ir.rep(_ZERO), _canon_range(a, b)))
    return ir.alt(*parts)


def _int_texts(lo: Optional[int], hi: Optional[int]) -> ir.Node:
    parts = []
    a = 0 if lo is None else max(lo, 0)
    if hi is None or hi >= a:
        parts.append(_canon_range(a, _cap_int(a, hi)))
    mlo = 1 if hi is None else max(1, -hi)
    mhi = None if lo is None else -lo
    if mhi is None or mhi >= mlo:
        parts.append(ir.seq(_MINUS, _canon_range(mlo, _cap_int(mlo, mhi))))
    return ir.alt(*parts)


# ---------------------------------------------------------------- fractions


class _Frac:
    """Languages of fraction digit strings x compared as 0.x against 0.a and 0.b.

    a/b: digit strings without trailing zeros ("" = 0) or None (no bound);
    sa/sb: strict. `ne`: x must be non-empty. Shared subtrees are memoized.
    """

    def __init__(self):
        self.memo: dict = {}

    def __call__(self, a, b, sa, sb, ne) -> ir.Node:
        if a == "" and not sa:
            a = None
        if a is None:
            sa = False
        if b is None:
            sb = False
        key = (a, b, sa, sb, ne)
        node = self.memo.get(key)
        if node is None:
            node = self._build(a, b, sa, sb, ne)
            self.memo[key] = node
        return node

    def _build(self, a, b, sa, sb, ne) -> ir.Node:
        # closed forms (a == "" now means: strictly greater than 0)
        if a is None and b is None:
            return ir.rep(_D, 1 if ne else 0)
        if a == "" and b is None:
            return ir.seq(ir.rep(_D), _NZ, ir.rep(_D))
        if a is None and b == "":
            return ir.NOTHING if sb else ir.rep(_ZERO, 1 if ne else 0)
        if a == "" and b == "":
            return ir.NOTHING
        za = _lead_zeros(a)
        zb = _lead_zeros(b)
        if a and b and za >= 2 and zb >= 2:
            k = min(za, zb)
            return ir.seq(ir.lit("0" * k), self(a[k:], b[k:], sa, sb, True))
        if a and b is None and za >= 2:
            return ir.alt(
                ir.seq(ir.rep(_ZERO, 0, za - 1), _NZ, ir.rep(_D)),
                ir.seq(ir.lit("0" * za), self(a[za:], None, sa, False, False)),
            )
        if b and a is None and zb >= 2:
            return ir.alt(
                ir.rep(_ZERO, 1 if ne else 0, zb - 1),
                ir.seq(ir.lit("0" * zb), self(None, b[zb:], False, sb, False)),
            )
        if b and a == "" and zb >= 2:
            return ir.seq(ir.lit("0" * zb), self("", b[zb:], True, sb, True))
        # one digit at a time
        parts = []
        empty_ok = (not ne) and a is None and (b is None or b != "" or not sb)
        if empty_ok:
            parts.append(ir.EMPTY)
        x, ra = _head(a, -1)
        y, rb = _head(b, 10)
        if x + 1 <= y - 1:
            parts.append(ir.seq(ir.byte_range(0x30 + x + 1, 0x30 + y - 1), ir.rep(_D)))
        if 0 <= x <= 9:
            if x == y:
                parts.append(ir.seq(ir.lit(chr(0x30 + x)), self(ra, rb, sa, sb, False)))
            elif x < y:
                parts.append(ir.seq(ir.lit(chr(0x30 + x)), self(ra, None, sa, False, False)))
        if 0 <= y <= 9 and x < y:
            parts.append(ir.seq(ir.lit(chr(0x30 + y)), self(None, rb, False, sb, False)))
        return ir.alt(*parts)


def _lead_zeros(s: Optional[str]) -> int:
    if not s:
        return 0
    return len(s) - len(s.lstrip("0"))


def _head(s: Optional[str], absent: int):
    """(first digit, rest) of a fraction bound; None -> (absent, None); "" -> (0, "")."""
    if s is None:
        return absent, None
    if s == "":
        return 0, ""
    return ord(s[0]) - 0x30, s[1:]


# ---------------------------------------------------------------- unsigned decimals


def _normalize_unsigned(lo: Threshold, hi: Threshold):
    """Round to MAX_SIG_DIGITS inward, drop a lower bound that every u >= 0 meets.

    Returns (lo, hi) or None when the interval (within u >= 0) is empty.
    """
    if lo is not None:
        v = _round_sig(lo[0], up=True)
        lo = (v, lo[1] and v == lo[0])
        if lo[0] < 0 or (lo[0] == 0 and not lo[1]):
            lo = None
    if hi is not None:
        v = _round_sig(hi[0], up=False)
        hi = (v, hi[1] and v == hi[0])
        if hi[0] < 0 or (hi[0] == 0 and hi[1]):
            return None
    if lo is not None and hi is not None:
        if lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1])):
            return None
    return lo, hi


def _udec(lo: Threshold, hi: Threshold, require_point: bool, frac: _Frac) -> ir.Node:
    """Texts I or I.F (I canonical, F non-empty; I.F only if require_point) with value in [lo, hi]."""
    if lo is None:
        li, lf, sa = 0, None, False
    else:
        li, lf = _split(lo[0])
        sa = lo[1]
    if hi is None:
        hi_i, hf, sb = None, None, False
    else:
        hi_i, hf = _split(hi[0])
        sb = hi[1]

    def tail(a, b, sa_, sb_) -> ir.Node:
        point = ir.seq(_DOT, frac(a, b, sa_, sb_, True))
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
    parts.append(ir.seq(_canon_range(li + 1, None if hi_i is None else hi_i - 1), tail(None, None, False, False)))
    if hi_i is not None:
        parts.append(ir.seq(ir.lit(str(hi_i)), tail(None, hf, False, sb)))
    return ir.alt(*parts)


def _scale(t: Threshold, e: int) -> Threshold:
    return None if t is None else (t[0] * _pow10(e), t[1])


def _exp_text(e1: Optional[int], e2: Optional[int]) -> ir.Node:
    """[eE][+-]?[0-9]+ whose integer value lies in [e1, e2] (None = open)."""
    if e1 is not None and e2 is not None and e1 > e2:
        return ir.NOTHING
    parts = []
    nlo = 0 if e1 is None else max(e1, 0)
    if e2 is None or e2 >= nlo:
        parts.append(ir.seq(ir.opt(ir.lit(b"+")), _lz_range(nlo, e2)))
    mlo = 1 if e2 is None else max(1, -e2)
    mhi = None if e1 is None else -e1
    if mhi is None or mhi >= mlo:
        parts.append(ir.seq(_MINUS, _lz_range(mlo, mhi)))
    if (e1 is None or e1 <= 0) and (e2 is None or e2 >= 0):
        parts.append(ir.seq(_MINUS, ir.rep(_ZERO, 1)))  # "-0", "-00": exponent 0
    return ir.seq(_E, ir.alt(*parts))


def _usci(lo: Threshold, hi: Threshold, frac: _Frac) -> ir.Node:
    """Normalized scientific texts [1-9](.F)?e[+-]?N with value in [lo, hi] (value > 0)."""
    if hi is not None and hi[0] <= 0:
        return ir.NOTHING
    e_lo = _floor_log10(lo[0]) if lo is not None and lo[0] > 0 else None
    e_hi = _floor_log10(hi[0]) if hi is not None else None
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
        parts.append(ir.seq(_MANTISSA_ANY, _exp_text(free_lo, free_hi)))
    return ir.alt(*parts)


def _ufloat(lo: Threshold, hi: Threshold, frac: _Frac) -> ir.Node:
    """Unsigned texts with '.' or an exponent whose value u >= 0 lies in [lo, hi]."""
    norm = _normalize_unsigned(lo, hi)
    if norm is None:
        return ir.NOTHING
    lo, hi = norm
    if lo is None and hi is None:
        return _UFLOAT_ANY
    parts = [_udec(*_plain_caps(lo, hi), True, frac), _usci(lo, hi, frac)]
    if lo is None:  # 0 is in range
        parts.append(_ZERO_EXP)
    return ir.alt(*parts)


def _plain_caps(lo: Threshold, hi: Threshold):
    """Narrow the magnitudes written without an exponent (sound: only refuses texts).

    A plain text below 10**PLAIN_MIN_EXP (more than 30 zeros after the point) is refused
    when a positive lower bound exists, and one of more than PLAIN_MAX_DIGITS integer
    digits when a larger upper bound exists; exponent notation still covers both. This
    keeps e.g. exclusiveMinimum 0 (threshold 5e-324) from costing a 330-state chain.
    """
    tiny = _pow10(PLAIN_MIN_EXP)
    huge = _pow10(PLAIN_MAX_DIGITS)
    if lo is not None and 0 < lo[0] < tiny:
        lo = (tiny, False)
    if hi is not None and hi[0] > huge and (lo is None or lo[0] < huge):
        hi = (huge, True)
    return lo, hi


def _cap_int(lo: int, hi: Optional[int]) -> Optional[int]:
    """Cap an integer text's magnitude at PLAIN_MAX_DIGITS digits when the bound allows more."""
    cap = 10**PLAIN_MAX_DIGITS - 1
    if hi is not None and hi > cap and lo <= cap:
        return cap
    return hi


def _float_texts(flo: Threshold, fhi: Threshold) -> ir.Node:
    frac = _Frac()
    pos = _ufloat(flo, fhi, frac)
    neg_lo = None if fhi is None else (-fhi[0], fhi[1])
    neg_hi = None if flo is None else (-flo[0], flo[1])
    neg = _ufloat(neg_lo, neg_hi, frac)
    return ir.alt(pos, ir.seq(_MINUS, neg))


# ---------------------------------------------------------------- public API


def integer_ir(
    minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None, *, pointer: str = ""
) -> ir.Node:
    """JSON integer texts (0|-?[1-9][0-9]*, never "-0") within the bounds; ir.NOTHING if none.

    `pointer` (the subschema's JSON pointer) goes into the SchemaError for a bad bound.
    """
    b = _Bounds(minimum, maximum, exclusive_minimum, exclusive_maximum, pointer)
    if b.unbounded:
        return JSON_INTEGER
    if b.int_impossible:
        return ir.NOTHING
    return _int_texts(b.int_lo, b.int_hi)


def number_ir(
    minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None, *, pointer: str = ""
) -> ir.Node:
    """JSON number texts within the bounds (see the module docstring); ir.NOTHING if none."""
    b = _Bounds(minimum, maximum, exclusive_minimum, exclusive_maximum, pointer)
    if b.unbounded:
        return JSON_NUMBER
    parts = []
    if not b.int_impossible:
        parts.append(_int_texts(b.int_lo, b.int_hi))
    if not b.float_impossible:
        parts.append(_float_texts(b.flo, b.fhi))
    return ir.alt(*parts)


def decimal_multiples_ir(step: Fraction, within: ir.Node, byte_dfa: Callable[[ir.Node], ByteDFA], *,
                         max_states: int = 20_000) -> ir.Node | None:
    """Number texts without exponent whose exact decimal value is a multiple of `step`
    (> 0; its denominator divides a power of ten, as every JSON number's value does)
    and that the number IR `within` (bounds, see `number_ir`) accepts. None when the
    automaton would need more than `max_states` states.

    Reading x's digits with the point dropped gives an integer; with k the number of
    decimal places of `step` and step = M / 10**k, x is a multiple of step exactly when
    x * 10**k is an integer multiple of M: its first k fraction digits (padded with
    zeros) end that integer, any later digit is 0, and the integer is 0 modulo M. One
    state per (place in the text, remainder modulo M), crossed with `within`'s own
    automaton byte by byte (`byte_dfa(within)`, which the caller's automata build),
    gives a Graph."""
    rest = step.denominator
    for prime in (2, 5):
        while rest % prime == 0:
            rest //= prime
    if rest != 1:  # not a decimal's value: no number of places makes it whole
        return None
    places = 0
    while (step * 10**places).denominator != 1:
        places += 1
    modulus = int(step * 10**places)
    if modulus * (places + 3) > max_states:
        return None
    bounds = byte_dfa(within)
    if bounds.start < 0:
        return ir.NOTHING
    start = (_decimal_start(), bounds.start)
    index = {start: 0}
    edges: dict[tuple[int, int], list[tuple[int, int]]] = {}
    finals = []
    todo = [start]
    while todo:
        here = todo.pop()
        text_state, bound_state = here
        if _decimal_final(text_state, places, modulus) and bounds.accepting[bound_state]:
            finals.append(index[here])
        for byte in b"-.0123456789":
            after = _decimal_step(text_state, byte, places, modulus)
            bound_after = bounds.step(bound_state, byte) if after is not None else -1
            if bound_after < 0:
                continue
            there = (after, bound_after)
            if there not in index:
                if len(index) >= max_states:
                    return None
                index[there] = len(index)
                todo.append(there)
            edges.setdefault((index[here], index[there]), []).append((byte, byte))
    return _pruned_graph(len(index), finals, edges)


# The states of a decimal text being read for `decimal_multiples_ir`: (where, remainder,
# fraction digits read), where is "start", "sign" (after "-"), "zero" (integer part 0),
# "int" (in a nonzero integer part) or "frac" (after the point).
def _decimal_start() -> tuple:
    return ("start", 0, 0)


def _decimal_step(state: tuple, byte: int, places: int, modulus: int) -> tuple | None:
    where, rem, read = state
    digit = byte - 0x30 if 0x30 <= byte <= 0x39 else None
    if where in ("start", "sign"):
        if byte == 0x2D and where == "start":
            return ("sign", 0, 0)
        if digit == 0:
            return ("zero", 0, 0)
        return ("int", digit % modulus, 0) if digit else None
    if byte == 0x2E:
        return ("frac", rem, 0) if where in ("zero", "int") else None
    if digit is None or where == "zero":
        return None
    if where == "int":
        return ("int", (rem * 10 + digit) % modulus, 0)
    if read < places:
        return ("frac", (rem * 10 + digit) % modulus, read + 1)
    return state if digit == 0 else None  # past the step's places only zeros keep a multiple


def _decimal_final(state: tuple, places: int, modulus: int) -> bool:
    where, rem, read = state
    if where in ("start", "sign") or (where == "frac" and read == 0):
        return False
    return rem * 10 ** (places - read) % modulus == 0


def _pruned_graph(n: int, finals: list[int], edges: dict[tuple[int, int], list]) -> ir.Node:
    """An ir.Graph from state 0 over byte edges, keeping the states that reach a final."""
    live = ir.reaching(finals, edges)
    if 0 not in live:
        return ir.NOTHING
    kept = [(a, b, ir.byteset(ranges)) for (a, b), ranges in edges.items() if a in live and b in live]
    return ir.Graph(n, 0, tuple(finals), tuple(kept))


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

    Answers for the grammar this module builds (which may refuse a few exotic spellings),
    so an empty answer means the compiled lexeme is `ir.NOTHING`. Contradictory bounds are
    not an error in JSON Schema (the subschema just matches no number); the schema
    compiler decides whether to raise. Raises SchemaError for a non-numeric or NaN bound.
    """
    build = integer_ir if integer else number_ir
    return ir.is_nothing(build(minimum, maximum, exclusive_minimum, exclusive_maximum, pointer=pointer))
