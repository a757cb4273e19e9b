"""Numeric lexemes with bounds (structgen.grammar.numbers).

The oracle is what a validator decides: Python (`json.loads` then exact int/float
comparison, as `jsonschema` does) AND exact decimal comparison against the bound's
decimal spelling. An accepted text must satisfy both (soundness, always checked);
`json.dumps` of an in-range value must be accepted (completeness, checked for
ordinary bounds).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from decimal import Decimal, localcontext
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from structgen.errors import SchemaError
from structgen.grammar import ir
from structgen.grammar.numbers import (
    JSON_INTEGER,
    JSON_NUMBER,
    integer_ir,
    number_bounds_empty,
    number_ir,
)

NUMBER_RE = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
INTEGER_RE = re.compile(rb"-?(?:0|[1-9][0-9]*)")
KEYS = ("minimum", "maximum", "exclusive_minimum", "exclusive_maximum")


@lru_cache(maxsize=4096)
def _compiled(kind: str, bounds: tuple) -> re.Pattern:
    kwargs = dict(zip(KEYS, bounds))
    node = integer_ir(**kwargs) if kind == "integer" else number_ir(**kwargs)
    return re.compile(ir.to_python_regex(node))


def accepts(kind: str, bounds: tuple, text: str) -> bool:
    return _compiled(kind, bounds).fullmatch(text.encode()) is not None


def _dec(bound) -> Decimal:
    return Decimal(repr(bound)) if isinstance(bound, float) else Decimal(bound)


def python_valid(kind: str, bounds: tuple, text: str) -> bool:
    """What json.loads + jsonschema decide (exact Python comparisons)."""
    if not NUMBER_RE.fullmatch(text.encode()):
        return False
    value = json.loads(text)
    if kind == "integer" and not isinstance(value, int):
        return False  # the grammar only ever writes integer texts for "integer"
    lo, hi, xlo, xhi = bounds
    return (
        (lo is None or value >= lo)
        and (hi is None or value <= hi)
        and (xlo is None or value > xlo)
        and (xhi is None or value < xhi)
    )


def decimal_valid(bounds: tuple, text: str) -> bool:
    """Exact decimal comparison with the bounds' decimal spellings."""
    with localcontext() as ctx:
        ctx.prec = 10_000
        value = Decimal(text)
        lo, hi, xlo, xhi = bounds
        return (
            (lo is None or value >= _dec(lo))
            and (hi is None or value <= _dec(hi))
            and (xlo is None or value > _dec(xlo))
            and (xhi is None or value < _dec(xhi))
        )


def check_sound(kind: str, bounds: tuple, text: str) -> bool:
    ok = accepts(kind, bounds, text)
    if ok:
        assert NUMBER_RE.fullmatch(text.encode()), (bounds, text)
        if kind == "integer":
            assert INTEGER_RE.fullmatch(text.encode()), (bounds, text)
        assert python_valid(kind, bounds, text), ("accepted but Python rejects", bounds, text)
        assert decimal_valid(bounds, text), ("accepted but decimal rejects", bounds, text)
    return ok


# ---------------------------------------------------------------- strategies

small_ints = st.integers(-1000, 1000)
big_ints = st.sampled_from([0, 1, -1, 2**53, -(2**53), 2**63 - 1, -(2**63), 2**64, 10**20, -(10**20), 10**30])
short_floats = st.builds(
    lambda m, e: float(Decimal(m).scaleb(e)), st.integers(-99999, 99999), st.integers(-8, 3)
)
any_floats = st.floats(allow_nan=False, allow_infinity=False)
special_floats = st.sampled_from(
    [0.0, -0.0, 0.1, 0.3, 0.5, 1.0, -1.0, 1e-05, 1e16, 1e20, 1e23, 1e308, -1e308, 5e-324, 2.5, 1e-300,
     sys.float_info.max, -sys.float_info.max, math.inf, -math.inf]
)
decimals = st.sampled_from([Decimal("0.1"), Decimal("-2.5"), Decimal("1E+30"), Decimal("0.3"), Decimal("7")])
bound_values = st.one_of(small_ints, big_ints, short_floats, any_floats, special_floats, decimals)
# ordinary bounds: where every in-range json.dumps output must be accepted
ordinary_values = st.one_of(small_ints, short_floats, st.integers(-(2**53), 2**53),
                            st.floats(-(2.0**53), 2.0**53, allow_nan=False))


def bounds_strategy(values):
    return st.tuples(*(st.one_of(st.none(), values) for _ in KEYS))


def near_texts(bounds: tuple) -> list[str]:
    """Hand-made spellings around each bound: the places where an off-by-one would show."""
    out = []
    for b in bounds:
        if b is None or (isinstance(b, float) and math.isinf(b)):
            continue
        d = _dec(b)
        out.append(repr(b) if isinstance(b, float) else str(b))
        out.append(json.dumps(float(b)) if abs(b) < 1e300 else repr(b))
        for k in (1, 2, 3, 17, 20, 30):
            step = Decimal(1).scaleb(-k) if d == 0 else abs(d).scaleb(-k)
            with localcontext() as ctx:
                ctx.prec = 400
                for v in (d - step, d + step):
                    out.append(_plain(v))
                    out.append(f"{v:e}".replace("e+", "e"))
        if isinstance(b, float):
            for v in (math.nextafter(b, -math.inf), math.nextafter(b, math.inf)):
                if math.isfinite(v):
                    out.append(repr(v))
            out.append(_plain(Decimal(b)))  # the double's exact expansion
        if isinstance(b, int) or (isinstance(b, float) and b.is_integer() and abs(b) < 1e18):
            n = int(b)
            out += [str(n - 1), str(n), str(n + 1), f"{n}.0", f"{n}.00", f"{n - 1}.9", f"{n}.1"]
    return [t for t in out if NUMBER_RE.fullmatch(t.encode())]


def _plain(v: Decimal) -> str:
    s = format(v, "f")
    if s.startswith("-0") and Decimal(s) == 0 and "." not in s:
        s = "0"
    return s


json_number_texts = st.from_regex(
    r"-?(0|[1-9][0-9]{0,4})(\.[0-9]{1,5})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
)
int_texts = st.integers(-(10**25), 10**25).map(json.dumps)
float_texts = st.one_of(any_floats, short_floats, special_floats.filter(math.isfinite)).map(json.dumps)
SPELLINGS = ["0", "-0", "0.0", "-0.0", "1", "-1", "1.50", "1.5", "1e3", "1E3", "1e+3", "1e-3", "-1e-3",
             "10e2", "0.5e1", "0e0", "-0e5", "0.000", "123456789012345678901234567890",
             "1e400", "-1e400", "1e-400", "0.1", "0.3", "0.30000000000000004"]


# ---------------------------------------------------------------- fixed examples


def test_examples_from_the_brief():
    b = (0.5, None, None, None)
    for t in ("0.5", "0.50", "0.6", "1", "1.5", "100", "5e-1", "1e3"):
        assert check_sound("number", b, t), t
    for t in ("0.49", "0", "-1", "0.4999999", "4.9e-1"):
        assert not accepts("number", b, t), t
    b = (None, None, None, 1)
    for t in ("0.999", "0", "-5", "0.9999999999999999", "-1e300", "1e-5"):
        assert check_sound("number", b, t), t
    for t in ("1.0", "1", "1.5", "0.99999999999999999999", "1e0"):
        assert not accepts("number", b, t), t
    assert accepts("integer", (0.5, None, None, None), "1")
    assert not accepts("integer", (0.5, None, None, None), "0")


def test_unbounded_is_the_json_grammar():
    assert number_ir() is JSON_NUMBER
    assert integer_ir() is JSON_INTEGER
    for t in ("0", "-0", "1.5", "-1.5e-7", "1E+400"):
        assert accepts("number", (None,) * 4, t)
    for t in ("01", "1.", ".5", "+1", "1e", "--1", "0x1"):
        assert not accepts("number", (None,) * 4, t)
    assert accepts("integer", (None,) * 4, "-12")
    assert not accepts("integer", (None,) * 4, "-0")
    assert not accepts("integer", (None,) * 4, "1.0")


def test_integer_ranges_exhaustive():
    for lo, hi in [(-17, 12345), (0, 0), (-5, -5), (-120, -3), (7, 7), (99, 1001), (1, 9), (-9, 0), (0, 100)]:
        b = (lo, hi, None, None)
        got = [n for n in range(-1200, 13000) if accepts("integer", b, str(n))]
        assert got == list(range(lo, hi + 1)), (lo, hi)
    got = [n for n in range(-300, 300) if accepts("integer", (None, None, -3.5, 17.0), str(n))]
    assert got == list(range(-3, 17))


def test_empty_ranges():
    assert integer_ir(minimum=5, maximum=3) is ir.NOTHING or ir.is_nothing(integer_ir(minimum=5, maximum=3))
    assert ir.is_nothing(integer_ir(minimum=0.2, maximum=0.8))
    assert not ir.is_nothing(number_ir(minimum=0.2, maximum=0.8))
    assert ir.is_nothing(number_ir(exclusive_minimum=1, exclusive_maximum=1))
    assert ir.is_nothing(number_ir(minimum=1, exclusive_maximum=1))
    assert not ir.is_nothing(number_ir(minimum=1, maximum=1))
    assert number_bounds_empty(minimum=5, maximum=3)
    assert number_bounds_empty(minimum=0.2, maximum=0.8, integer=True)
    assert not number_bounds_empty(minimum=0.2, maximum=0.8)
    assert not number_bounds_empty(exclusive_minimum=0)
    assert number_bounds_empty(minimum=math.inf)
    assert number_bounds_empty(maximum=-math.inf, integer=True)
    # two adjacent doubles: no double strictly between, so no float text; no integer either
    a = 0.1
    assert number_bounds_empty(exclusive_minimum=a, exclusive_maximum=math.nextafter(a, 1))


def test_bad_bounds_raise_schema_error():
    for bad in (True, "5", float("nan"), [1], Decimal("NaN")):
        with pytest.raises(SchemaError):
            number_ir(minimum=bad)
        with pytest.raises(SchemaError):
            integer_ir(exclusive_maximum=bad)
    with pytest.raises(SchemaError) as info:
        number_bounds_empty(maximum="x", pointer="/properties/age")
    assert info.value.pointer == "/properties/age"
    assert "maximum" in str(info.value)


def test_huge_bounds_build_and_stay_sound():
    cases = [
        (None, 1e20, None, None), (-(2**63), 2**63 - 1, None, None), (2**63, None, None, None),
        (None, None, 1e308, None), (None, 1.7976931348623157e308, None, None), (None, None, None, 0),
        (None, None, 0, None), (1e-300, 1e-299, None, None), (None, None, None, math.inf),
        (None, None, -math.inf, None), (10**60 + 7, None, None, None), (None, -(10**50) - 3, None, None),
        (Decimal("1E+100"), None, None, None), (None, 5e-324, None, None), (-5e-324, None, None, None),
    ]
    for b in cases:
        for kind in ("number", "integer"):
            node = integer_ir(*b) if kind == "integer" else number_ir(*b)
            assert ir.expanded_size(node) < 60_000, (kind, b, ir.expanded_size(node))
            for t in near_texts(b) + SPELLINGS:
                check_sound(kind, b, t)
    assert accepts("integer", (-(2**63), 2**63 - 1, None, None), str(2**63 - 1))
    assert not accepts("integer", (-(2**63), 2**63 - 1, None, None), str(2**63))
    assert accepts("integer", (-(2**63), 2**63 - 1, None, None), str(-(2**63)))
    assert not accepts("integer", (-(2**63), 2**63 - 1, None, None), str(-(2**63) - 1))
    assert accepts("number", (None, 1e20, None, None), "100000000000000000000")
    assert not accepts("number", (None, 1e20, None, None), "100000000000000000001")
    assert accepts("number", (None, None, 0, None), "5e-324")
    assert not accepts("number", (None, None, 0, None), "1e-400")  # rounds to 0.0
    assert not accepts("number", (None, None, 0, None), "0." + "0" * 400 + "1")
    assert accepts("number", (None, None, 0, None), "1e400")  # inf > 0
    assert not accepts("number", (None, None, None, math.inf), "1e400")  # inf < inf is false
    assert accepts("number", (None, None, None, math.inf), str(10**400))  # an int, exact


def test_float_rounding_is_respected():
    # exclusiveMaximum 1: a text that rounds to 1.0 is 1.0 for a Python validator
    b = (None, None, None, 1)
    assert not accepts("number", b, "0.99999999999999999")
    assert accepts("number", b, repr(math.nextafter(1.0, 0)))
    # maximum 0.3 (the double is 0.29999999999999998...): "0.3" is valid
    assert accepts("number", (None, 0.3, None, None), "0.3")
    assert not accepts("number", (None, 0.3, None, None), "0.30000000000000001")
    assert accepts("number", (0.3, None, None, None), "0.3")
    assert not accepts("number", (0.3, None, None, None), "0.29999999999999999")
    # -0.0 equals 0
    assert accepts("number", (0, 0, None, None), "-0.0")
    assert accepts("number", (0, 0, None, None), "0")
    assert not accepts("number", (None, None, 0, None), "-0.0")


def test_exponent_forms_with_bounds():
    b = (0, 1000, None, None)
    for t in ("1e3", "1E3", "1e+3", "1e+003", "9.99e2", "1.5e-07", "1e-05", "0e0", "0.0e7", "5e-324"):
        assert check_sound("number", b, t), t
    for t in ("1.0001e3", "2e3", "-1e-5", "1e4"):
        assert not accepts("number", b, t), t
    b = (5, None, None, None)
    for t in ("5e0", "5.0e0", "1e1", "1e+99999", "6E0"):
        assert check_sound("number", b, t), t
    for t in ("4.99e0", "1e0", "5e-1"):
        assert not accepts("number", b, t), t
    # the open side takes any spelling: minimum 0 and positives
    assert check_sound("number", (0, None, None, None), "10e3")
    assert check_sound("number", (0, None, None, None), "0.5E-2")


@pytest.mark.parametrize("x", [3.14, 0.001, 100, 1.5, 0.0, -2.5, 1e-05, 1e16, 123456789, 0.1, 2.0, 1e-7])
def test_json_dumps_of_typical_values(x):
    b = (-1e6, 1e20, None, None)
    assert accepts("number", b, json.dumps(x))
    assert accepts("number", (min(x, 0), max(x, 0), None, None), json.dumps(x))
    assert accepts("number", (x, x, None, None), json.dumps(x))


# ---------------------------------------------------------------- properties

SETTINGS = settings(
    max_examples=int(os.environ.get("STRUCTGEN_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@SETTINGS
@given(
    bounds=bounds_strategy(bound_values),
    texts=st.lists(st.one_of(json_number_texts, int_texts, float_texts, st.sampled_from(SPELLINGS)), max_size=40),
)
@example(bounds=(None, None, None, 1), texts=["0.99999999999999999999"])
@example(bounds=(0.5, None, None, None), texts=["0.49999999999999999999", "0.5", "0.50"])
def test_number_never_accepts_out_of_range(bounds, texts):
    for t in texts + near_texts(bounds):
        check_sound("number", bounds, t)


@SETTINGS
@given(
    bounds=bounds_strategy(bound_values),
    texts=st.lists(st.one_of(json_number_texts, int_texts, st.sampled_from(SPELLINGS)), max_size=40),
)
def test_integer_never_accepts_out_of_range(bounds, texts):
    for t in texts + near_texts(bounds):
        check_sound("integer", bounds, t)


@SETTINGS
@given(
    bounds=bounds_strategy(ordinary_values),
    ints=st.lists(st.one_of(small_ints, st.integers(-(2**60), 2**60)), max_size=30),
    floats=st.lists(st.one_of(any_floats, short_floats, special_floats.filter(math.isfinite)), max_size=30),
)
def test_in_range_json_dumps_is_accepted(bounds, ints, floats):
    # also the bounds themselves and their neighbours, where an off-by-one shows
    for b in bounds:
        if b is not None:
            ints += [math.floor(b) - 1, math.floor(b), math.ceil(b), math.ceil(b) + 1]
            fb = float(b)
            floats += [fb, math.nextafter(fb, -math.inf), math.nextafter(fb, math.inf)]
    for n in ints:
        text = json.dumps(n)
        if python_valid("number", bounds, text):
            assert check_sound("number", bounds, text), (bounds, text)
            assert check_sound("integer", bounds, text), (bounds, text)
        else:
            assert not accepts("number", bounds, text)
            assert not accepts("integer", bounds, text)
    for x in floats:
        text = json.dumps(x)
        assert check_sound("number", bounds, text) == python_valid("number", bounds, text), (bounds, text)


@SETTINGS
@given(bounds=bounds_strategy(ordinary_values), texts=st.lists(json_number_texts, max_size=40))
def test_acceptance_matches_oracle_on_plain_spellings(bounds, texts):
    """Short plain spellings (no exponent, <= 17 significant digits): exact agreement."""
    for t in texts:
        if "e" in t or "E" in t or t in ("-0",):
            continue
        digits = t.lstrip("-").replace(".", "").lstrip("0")
        if len(digits) > 15:
            continue
        expected = python_valid("number", bounds, t) and decimal_valid(bounds, t)
        assert check_sound("number", bounds, t) == expected, (bounds, t)


@SETTINGS
@given(
    lo=st.integers(-(10**12), 10**12),
    width=st.integers(0, 10**6),
    probes=st.lists(st.integers(-(10**7), 10**7), max_size=50),
)
def test_integer_range_exact(lo, width, probes):
    hi = lo + width
    b = (lo, hi, None, None)
    for p in probes + [0, 1, -1, width, width + 1, -1 - width]:
        n = lo + p
        assert accepts("integer", b, str(n)) == (lo <= n <= hi), (lo, hi, n)


def _small_texts() -> list[str]:
    out = ["-0"]
    for i in range(0, 13):
        for sign in ("", "-"):
            out.append(f"{sign}{i}")
            for f in range(10):
                out.append(f"{sign}{i}.{f}")
            for f in range(100):
                out.append(f"{sign}{i}.{f:02d}")
    for m in ("0", "1", "2.5", "9.99", "10", "0.5", "1.0"):
        for e in ("e0", "e1", "e-1", "E+1", "e-2", "e2", "e01", "e-0"):
            out += [m + e, "-" + m + e]
    return out


@pytest.mark.parametrize(
    "bounds",
    [
        (0.25, 1.5, None, None), (None, None, -3.75, 10), (-1, None, None, 0), (None, 2.5, 0, None),
        (0, 0, None, None), (None, None, -0.5, 0.5), (1.05, None, None, None), (None, -0.3, None, None),
        (-12, -0.01, None, None), (3, 3, None, None), (0.1, 0.1, None, None), (None, None, 9.99, 11),
        (10, 20, None, None), (None, None, -10, -1), (0.5, None, 0.5, None), (None, 12, None, 1.2),
    ],
)
def test_exhaustive_small_texts(bounds):
    """Every short spelling: accepted iff in range, except the documented refusals
    ("-0", exponent with a non-normalized mantissa when bounds are present)."""
    for t in _small_texts():
        expected = python_valid("number", bounds, t) and decimal_valid(bounds, t)
        got = check_sound("number", bounds, t)
        mantissa = t.lstrip("-").lower().split("e")[0]
        refused_by_design = t == "-0" or (
            "e" in t.lower() and not re.fullmatch(r"[1-9](\.[0-9]+)?", mantissa) and float(mantissa) != 0
        )
        if not refused_by_design:
            assert got == expected, (bounds, t)
        is_int = INTEGER_RE.fullmatch(t.encode()) is not None
        if is_int and t != "-0":
            assert check_sound("integer", bounds, t) == expected, (bounds, t)
