"""Case-insensitive matching (the `i` flag): `case_closed(cs)` adds every character's
other cases to a set, pairing characters as Python's `re.IGNORECASE` does.

Owns: the case equivalence classes of code points. Must not read pattern text: the
parser closes each set it builds while the flag is on.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import lru_cache

from structgen.grammar import charset as C


CASED_BELOW = 0x20000  # no code point from here up has another case
_CHUNK = 256


@lru_cache(maxsize=1)
def _case_classes() -> tuple[dict[int, tuple[int, ...]], list[int]]:
    """(code point -> every code point that matches it case-insensitively, those code
    points in order). Characters are equivalent when their upper-then-lower forms agree,
    which also pairs the Kelvin sign with k and long s with s, as Python's
    `re.IGNORECASE` does."""
    groups: dict[str, list[int]] = {}
    for cp in _cased_code_points():
        ch = chr(cp)
        up = ch.upper()
        key = up.lower() if len(up) == 1 else ch.lower()
        groups.setdefault(key, []).append(cp)
    classes = {cp: tuple(members) for members in groups.values() if len(members) > 1 for cp in members}
    return classes, sorted(classes)


def _cased_code_points() -> list[int]:
    """The code points that have another case. A block of text whose upper and lower
    forms are itself has none, which skips most of Unicode in a few string calls."""
    out: list[int] = []
    for start in range(0, CASED_BELOW, _CHUNK):
        block = "".join(chr(cp) for cp in range(start, start + _CHUNK) if not 0xD800 <= cp <= 0xDFFF)
        if block.upper() == block and block.lower() == block:
            continue
        out.extend(ord(ch) for ch in block if ch.upper() != ch or ch.lower() != ch)
    return out


@lru_cache(maxsize=4096)
def case_closed(cs: C.CharSet) -> C.CharSet:
    """The set with every character's other cases added (the `i` flag)."""
    classes, cased = _case_classes()
    extra: list[int] = []
    for lo, hi in cs:
        for cp in cased[bisect_left(cased, lo) : bisect_right(cased, hi)]:
            extra.extend(classes[cp])
    return C.union(cs, C.from_code_points(sorted(set(extra)))) if extra else cs
