"""Fraction digit strings compared with bounds, as byte-level IR: `FractionDigits` gives
the strings x with 0.a <= 0.x <= 0.b (strict or not), one digit at a time, memoizing the
shared subtrees.

Owns: the digits after the point. Must not know the integer part, the sign or the
exponent: `decimal_ranges` puts those around it.
"""

from __future__ import annotations

from typing import Optional

from structgen.grammar import ir
from structgen.grammar.numbers.lexemes import DIGIT, NONZERO_DIGIT, ZERO


class FractionDigits:
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
            return ir.rep(DIGIT, 1 if ne else 0)
        if a == "" and b is None:
            return ir.seq(ir.rep(DIGIT), NONZERO_DIGIT, ir.rep(DIGIT))
        if a is None and b == "":
            return ir.NOTHING if sb else ir.rep(ZERO, 1 if ne else 0)
        if a == "" and b == "":
            return ir.NOTHING
        za = _lead_zeros(a)
        zb = _lead_zeros(b)
        if a and b and za >= 2 and zb >= 2:
            k = min(za, zb)
            return ir.seq(ir.lit("0" * k), self(a[k:], b[k:], sa, sb, True))
        if a and b is None and za >= 2:
            return ir.alt(
                ir.seq(ir.rep(ZERO, 0, za - 1), NONZERO_DIGIT, ir.rep(DIGIT)),
                ir.seq(ir.lit("0" * za), self(a[za:], None, sa, False, False)),
            )
        if b and a is None and zb >= 2:
            return ir.alt(
                ir.rep(ZERO, 1 if ne else 0, zb - 1),
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
            parts.append(ir.seq(ir.byte_range(0x30 + x + 1, 0x30 + y - 1), ir.rep(DIGIT)))
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
