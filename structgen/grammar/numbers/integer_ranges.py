"""Integer texts within a range, as byte-level IR: canonical digit strings
(0|[1-9][0-9]*) of the integers in [a, b] built by digit-prefix splitting, the same with
leading zeros (exponents), and signed JSON integer texts between two bounds.

Owns: the automata of digit strings between two integers, and the rounding of
integers of more than `MAX_SIG_DIGITS` digits inward. Must not read schema keywords or
floats: `bounds` gives the integers, `caps` the size cap.
"""

from __future__ import annotations

import functools
from typing import Optional

from structgen.grammar import ir
from structgen.grammar.numbers.caps import cap_plain_integer
from structgen.grammar.numbers.decimals import MAX_SIG_DIGITS
from structgen.grammar.numbers.lexemes import DIGIT, MINUS, NONZERO_DIGIT, ZERO


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


@functools.lru_cache(maxsize=1024)  # schemas repeat their bounds (a tool set, dozens of times)
def canonical_range(a: int, b: Optional[int]) -> ir.Node:
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
        parts.append(ZERO)
        a = 1
        if b is not None and b < 1:
            return ZERO
    sa = str(a)
    la = len(sa)
    if b is None:
        parts.append(_fixed_between(sa, "9" * la))
        parts.append(ir.seq(NONZERO_DIGIT, ir.rep(DIGIT, la, None)))
    else:
        sb = str(b)
        lb = len(sb)
        if la == lb:
            parts.append(_fixed_between(sa, sb))
        else:
            parts.append(_fixed_between(sa, "9" * la))
            if lb - la >= 2:
                parts.append(ir.seq(NONZERO_DIGIT, ir.rep(DIGIT, la, lb - 2)))
            parts.append(_fixed_between("1" + "0" * (lb - 1), sb))
    return ir.alt(*parts)


def zero_padded_range(a: int, b: Optional[int]) -> ir.Node:
    """Digit strings with leading zeros allowed whose value is in [a, b] (a >= 0)."""
    parts = []
    if a == 0:
        parts.append(ir.rep(ZERO, 1))
        a = 1
    if b is None or a <= b:
        parts.append(ir.seq(ir.rep(ZERO), canonical_range(a, b)))
    return ir.alt(*parts)


def integer_texts(lo: Optional[int], hi: Optional[int]) -> ir.Node:
    parts = []
    a = 0 if lo is None else max(lo, 0)
    if hi is None or hi >= a:
        parts.append(canonical_range(a, cap_plain_integer(a, hi)))
    mlo = 1 if hi is None else max(1, -hi)
    mhi = None if lo is None else -lo
    if mhi is None or mhi >= mlo:
        parts.append(ir.seq(MINUS, canonical_range(mlo, cap_plain_integer(mlo, mhi))))
    return ir.alt(*parts)
