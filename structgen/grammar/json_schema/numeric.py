"""Number lowering: bounds, exclusions and multipleOf of a normalized schema -> the IR of
the number texts, by way of `grammar.numbers` (integer and decimal ranges, decimal
multiples) and the remainder automata of integer steps built here.

Owns: the choice between enumerating, ranges and remainder automata, and their budgets.
(`grammar.numbers` is the number-text package of every front end; what here is JSON
Schema's stays here.) A mixin of
`compiler.SchemaCompiler`: it uses the compiler's options, style, budget (`tick`,
`refuse`) and the methods of the other mixins through `self`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from structgen.grammar import ir
from structgen.grammar import numbers as N
from structgen.grammar.json_schema.graphs import StateNumbers, trimmed_graph
from structgen.grammar.json_schema.keywords import is_number
from structgen.grammar.json_schema.normalized import Normalized, range_nonempty

_MAX_ENUMERATED_MULTIPLES = 1000
_MAX_MOD_STATES = 20_000  # states of a remainder automaton (multipleOf without an upper bound)

SAFE_INTEGER = 2**53 - 1  # I-JSON's largest integer (safe_integers)

class Numbers:
    """Number lowering."""

    def _int_bounds(self, s: Normalized) -> tuple[int | None, int | None]:
        lo = hi = None
        if s.lo is not None:
            lo = math.floor(s.lo[0]) + 1 if s.lo[1] else math.ceil(s.lo[0])
        if s.hi is not None:
            hi = math.ceil(s.hi[0]) - 1 if s.hi[1] else math.floor(s.hi[0])
        return lo, hi

    def _safe_int_bounds(self, lo: int | None, hi: int | None) -> tuple[int | None, int | None]:
        """With safe_integers, a side the schema leaves open gets I-JSON's bound."""
        if self.options.safe_integers:
            if lo is None and (hi is None or hi >= -SAFE_INTEGER):
                lo = -SAFE_INTEGER
            if hi is None and lo <= SAFE_INTEGER:
                hi = SAFE_INTEGER
        return lo, hi

    def lower_number(self, s: Normalized, kinds: frozenset) -> ir.Node:
        holes = sorted({Fraction(v) for v in s.not_values if is_number(v) and math.isfinite(v)})
        if s.mults:
            if "int" not in kinds:
                return ir.NOTHING
            step = _common_multiple([_decimal_fraction(raw) for _, raw, _ in s.mults])
            if step.denominator != 1 and "frac" in kinds:
                return self._decimal_multiples(s, step, holes)
            # integers only: an integer multiple of p/q (in lowest terms) is one of p
            lo, hi = self._int_bounds(s)
            if step.numerator > 1:
                return self._int_multiples(lo, hi, step.numerator, [int(h) for h in holes if h.denominator == 1], s)
            return self._int_ranges(*self._safe_int_bounds(lo, hi), holes)
        if "frac" not in kinds:
            return self._int_ranges(*self._safe_int_bounds(*self._int_bounds(s)), holes)
        if "int" not in kinds:
            # "a number that is not an integer": plain decimals with a non-zero fraction
            # and at most 15 significant digits (so no reader rounds them to an integer);
            # only without bounds or exclusions (documented over-constraint otherwise)
            if s.lo is None and s.hi is None and not holes:
                return _fraction_ir()
            return ir.NOTHING
        return self._number_ranges(s, holes)

    def _decimal_multiples(self, s: Normalized, step: Fraction, holes: list) -> ir.Node:
        """Numbers within s's bounds (holes excluded) that are exact multiples of a
        non-integer step, written without exponent (`numbers.decimal_multiples_ir`)."""
        if self.languages is None:  # schema_to_ir called without automata (a grammar-only caller)
            self.refuse("multipleOf", s.mults[0][2], f"multipleOf {step} needs an automaton (languages=)")
            return self._number_ranges(s, holes)
        within = self._number_ranges(s, holes)
        got = N.decimal_multiples_ir(step, within, self.languages.byte_dfa, max_states=_MAX_MOD_STATES)
        if got is None:
            self.refuse("multipleOf", s.mults[0][2], f"multipleOf {step} needs too large an automaton")
            return self._number_ranges(s, holes)  # lenient: the bounds alone
        return got

    def _number_ranges(self, s: Normalized, holes: list) -> ir.Node:
        """All number texts within s's bounds, minus the excluded values `holes`."""
        # all numbers in (lo, hi) minus holes: split into intervals at the holes
        intervals = []
        lo = s.lo
        for h in holes:
            if lo is not None and (h < lo[0] or (h == lo[0] and lo[1])):
                continue
            if s.hi is not None and (h > s.hi[0] or (h == s.hi[0] and s.hi[1])):
                continue
            intervals.append((lo, (h, True, _num_raw(h))))
            lo = (h, True, _num_raw(h))
        intervals.append((lo, s.hi))
        parts = []
        for a, b in intervals:
            if not range_nonempty(a, b, False):
                continue
            parts.append(
                N.number_ir(
                    None if a is None or a[1] else a[2],
                    None if b is None or b[1] else b[2],
                    a[2] if a is not None and a[1] else None,
                    b[2] if b is not None and b[1] else None,
                )
            )
        return ir.alt(*parts)

    def _int_ranges(self, lo: int | None, hi: int | None, holes) -> ir.Node:
        cuts = sorted(int(h) for h in holes if h.denominator == 1)
        parts = []
        a = lo
        for h in cuts:
            if (a is not None and h < a) or (hi is not None and h > hi):
                continue
            if a is None or a <= h - 1:
                parts.append(N.integer_ir(a, h - 1, None, None))
            a = h + 1
        if a is None or hi is None or a <= hi:
            parts.append(N.integer_ir(a, hi, None, None))
        return ir.alt(*parts)

    def _int_multiples(self, lo, hi, m: int, holes: list[int], s: Normalized) -> ir.Node:
        """Integers in [lo, hi] that are multiples of m (holes excluded)."""
        parts = []
        # non-negative part
        a = 0 if lo is None else max(lo, 0)
        if hi is None or hi >= a:
            parts.append(self._nonneg_multiples(a, hi, m, holes, s))
        # negative part: mirror
        if lo is None or lo < 0:
            nb = None if lo is None else -lo
            na = 1 if hi is None or hi >= 0 else -hi
            if nb is None or nb >= na:
                parts.append(ir.seq(ir.lit("-"), self._nonneg_multiples(na, nb, m, [-h for h in holes], s)))
        return ir.alt(*parts)

    def _nonneg_multiples(self, a: int, b: int | None, m: int, holes: list[int], s: Normalized) -> ir.Node:
        first = -(-a // m) * m
        if b is not None:
            count = 0 if b < first else (b - first) // m + 1
            if count <= _MAX_ENUMERATED_MULTIPLES:
                return ir.alt(*(ir.lit(str(x)) for x in range(first, b + 1, m) if x not in holes))
            self.refuse("multipleOf", s.mults[0][2], "multipleOf with a wide bounded range is not supported")
            return N.integer_ir(a, b, None, None)
        if any(h >= a for h in holes):
            return ir.NOTHING  # documented over-constraint
        digits = len(str(a)) if a > 0 else 1
        top = 10**digits  # numbers with more digits than `a` are all >= a
        small = [x for x in range(first, top, m)] if a > 0 else []
        if len(small) > _MAX_ENUMERATED_MULTIPLES:
            self.refuse("multipleOf", s.mults[0][2], "multipleOf with a large minimum is not supported")
            return N.integer_ir(a, None, None, None)
        if m * (digits + 1) > _MAX_MOD_STATES:
            self.refuse("multipleOf", s.mults[0][2], f"multipleOf {m} needs too large an automaton")
            return N.integer_ir(a, None, None, None)
        if a > 0:
            return ir.alt(*(ir.lit(str(x)) for x in small), _mod_dfa(m, digits + 1))
        return ir.alt(ir.lit("0"), _mod_dfa(m, 1))


def _fraction_ir() -> ir.Node:
    d = ir.byte_range(0x30, 0x39)
    nz = ir.byte_range(0x31, 0x39)
    parts = [ir.seq(ir.lit("0."), ir.rep(ir.lit("0"), 0, 20), nz, ir.rep(d, 0, 13))]
    for n_int in range(1, 15):
        parts.append(ir.seq(nz, ir.rep(d, n_int - 1, n_int - 1), ir.lit("."), ir.rep(d, 0, 14 - n_int), nz))
    return ir.seq(ir.opt(ir.lit("-")), ir.alt(*parts))


def _num_raw(f: Fraction):
    return int(f) if f.denominator == 1 else float(f)


def _decimal_fraction(value) -> Fraction:
    """The exact decimal value of a JSON number as parsed (a float by its shortest repr:
    multipleOf 0.01 means 1/100, not the double nearest to it)."""
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def _common_multiple(steps: list[Fraction]) -> Fraction:
    """The least common multiple of positive fractions: what a value that is a multiple
    of each of them is a multiple of."""
    out = steps[0]
    for step in steps[1:]:
        a, b = out, step
        out = Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))
    return out


def _mod_dfa(m: int, min_digits: int) -> ir.Node:
    """Positive integers (no leading zero) with at least `min_digits` digits that are
    multiples of m, as a Graph over (remainder, digits so far)."""
    cap = min_digits
    sid = StateNumbers()

    start = sid("start")
    edges: dict[tuple[int, int], list] = {}
    todo = []
    for d in range(1, 10):
        key = (d % m, 1)
        edges.setdefault((start, sid(key)), []).append((0x30 + d, 0x30 + d))
        todo.append(key)
    seen = set(todo)
    while todo:
        r, k = todo.pop()
        for d in range(10):
            key = ((r * 10 + d) % m, min(k + 1, cap))
            edges.setdefault((sid((r, k)), sid(key)), []).append((0x30 + d, 0x30 + d))
            if key not in seen:
                seen.add(key)
                todo.append(key)
    finals = [sid(k) for k in seen if k[0] == 0 and k[1] >= cap]
    return trimmed_graph(len(sid), start, finals, [(a, b, ir.byteset(rs)) for (a, b), rs in edges.items()])
