"""Case-insensitive matching (the `i` flag): `case_closed(cs)` adds every character's
other cases to a set, pairing characters as Python's `re.IGNORECASE` does.

Owns: the case equivalence classes of code points. Must not read pattern text: the
parser closes each set it builds while the flag is on.
"""

from __future__ import annotations

from functools import lru_cache

from structgen.grammar import charset as C


@lru_cache(maxsize=1)
def _case_classes() -> dict[int, tuple[int, ...]]:
    """Code point -> every code point that matches it case-insensitively. Characters are
    equivalent when their upper-then-lower forms agree, which also pairs the Kelvin sign
    with k and long s with s, as Python's `re.IGNORECASE` does."""
    groups: dict[str, list[int]] = {}
    for cp in range(0x20000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        up = ch.upper()
        key = up.lower() if len(up) == 1 else ch.lower()
        if len(key) == 1 and key != ch or ch.upper() != ch or ch.lower() != ch:
            groups.setdefault(key, []).append(cp)
    return {cp: tuple(members) for members in groups.values() if len(members) > 1 for cp in members}


@lru_cache(maxsize=4096)
def case_closed(cs: C.CharSet) -> C.CharSet:
    """The set with every character's other cases added (the `i` flag)."""
    classes = _case_classes()
    extra: list[int] = []
    for lo, hi in cs:
        for cp in range(lo, min(hi, 0x1FFFF) + 1):
            extra.extend(classes.get(cp, ()))
    return C.union(cs, C.from_code_points(sorted(set(extra)))) if extra else cs
