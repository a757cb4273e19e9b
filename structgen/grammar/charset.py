"""Sets of Unicode code points, and the byte-level IR of their encodings.

A `CharSet` is a normalized tuple of inclusive code point ranges inside 0..0x10FFFF
(sorted, merged, non-empty ranges), so it is hashable and two equal sets compare equal.

`utf8_ir(cs)` matches exactly the UTF-8 encodings of the code points in `cs`
(surrogates are not encodable and are left out); it uses the classic range-splitting
construction, so that even `ANY_CHAR` is a handful of nodes.

`json_char_ir(cs)` matches every way JSON can write ONE character of `cs` inside a
string literal (between the quotes): raw UTF-8 where JSON allows it, the short escapes,
`\\uHHHH` (hex digits of either case) and surrogate-pair escapes for astral characters.

Both are memoized by their arguments, so the same set always yields the same node object
(which lets the IR share it).
"""

from __future__ import annotations

import bisect
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from structgen.grammar import ir

CharSet = tuple[tuple[int, int], ...]

MAX_CODE_POINT = 0x10FFFF
ANY_CHAR: CharSet = ((0, MAX_CODE_POINT),)
NO_CHAR: CharSet = ()
SURROGATES: CharSet = ((0xD800, 0xDFFF),)
#: every code point that has a UTF-8 encoding
SCALAR_VALUES: CharSet = ((0, 0xD7FF), (0xE000, MAX_CODE_POINT))


# ---------------------------------------------------------------- set algebra


def charset(ranges: Iterable[tuple[int, int] | int | str]) -> CharSet:
    """Normalize ranges into a CharSet.

    Items are `(lo, hi)` inclusive code point pairs; a bare int or a one-character
    string stands for that single code point.
    """
    pairs: list[tuple[int, int]] = []
    for item in ranges:
        if isinstance(item, str):
            if len(item) != 1:
                raise ValueError(f"expected one character, got {item!r}")
            cp = ord(item)
            pairs.append((cp, cp))
        elif isinstance(item, int):
            pairs.append((item, item))
        else:
            lo, hi = item
            pairs.append((int(lo), int(hi)))
    for lo, hi in pairs:
        if lo <= hi and (lo < 0 or hi > MAX_CODE_POINT):
            raise ValueError(f"code point range ({lo:#x}, {hi:#x}) outside 0..0x10FFFF")
    return ir.normalize_ranges(pairs)


def from_chars(chars: str) -> CharSet:
    """The set of the characters of a string."""
    return charset((ord(c), ord(c)) for c in chars)


def from_code_points(code_points: Iterable[int]) -> CharSet:
    """The set of ascending code points, merged into runs first (a Unicode class holds
    hundreds of thousands: one range per run, not per code point)."""
    runs: list[tuple[int, int]] = []
    for cp in code_points:
        if runs and runs[-1][1] == cp - 1:
            runs[-1] = (runs[-1][0], cp)
        else:
            runs.append((cp, cp))
    return charset(runs)


def union(*sets: CharSet) -> CharSet:
    if len(sets) == 1:  # already normalized: the common case of a pattern's edges
        return sets[0]
    return ir.normalize_ranges(r for s in sets for r in s)


def intersect(a: CharSet, b: CharSet) -> CharSet:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def complement(a: CharSet) -> CharSet:
    """All code points in 0..0x10FFFF that are not in `a`."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in a:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return tuple(out)


def difference(a: CharSet, b: CharSet) -> CharSet:
    return intersect(a, complement(b))


def contains(cs: CharSet, cp: int) -> bool:
    k = bisect.bisect_right(cs, (cp, MAX_CODE_POINT + 1)) - 1
    return k >= 0 and cs[k][0] <= cp <= cs[k][1]


def size(cs: CharSet) -> int:
    """Number of code points in the set."""
    return sum(hi - lo + 1 for lo, hi in cs)


def _as_charset(cs: Iterable) -> CharSet:
    """Accept an already-normalized CharSet as is (fast path), normalize anything else."""
    if isinstance(cs, tuple):
        prev = -2
        ok = True
        for r in cs:
            if not (isinstance(r, tuple) and len(r) == 2 and prev + 1 < r[0] <= r[1] <= MAX_CODE_POINT):
                ok = False
                break
            prev = r[1]
        if ok:
            return cs
    return charset(cs)


# ---------------------------------------------------------------- range sequences -> IR


def _sequences_ir(
    sequences: Iterable[Sequence[tuple[int, int]]],
    edge_bytes: Callable[[tuple[int, int]], Iterable[tuple[int, int]]],
) -> ir.Node:
    """IR for a union of sequences of labelled ranges (each label -> byte ranges).

    The sequences are put in a trie (common prefixes shared); identical sub-tries are
    hash-consed into one IR object, and sibling edges leading to the same sub-trie are
    merged into one ByteSet (so common suffixes are shared too).
    """
    trie: dict = {}
    for s in sequences:
        node = trie
        for label in s:
            node = node.setdefault(label, {})

    if not trie:
        return ir.NOTHING
    nodes: list[ir.Node] = []
    return nodes[_trie_node(trie, edge_bytes, {}, nodes)]


def _trie_node(t: dict, edge_bytes: Callable, ids: dict[tuple, int], nodes: list[ir.Node]) -> int:
    """The index in `nodes` of the IR of sub-trie `t`, made once per distinct sub-trie
    (`ids`: its sorted (byte ranges, child index) edges -> index). A module function
    rather than a closure, so that a compile leaves no reference cycle to collect."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for label, child in t.items():
        groups.setdefault(_trie_node(child, edge_bytes, ids, nodes), []).extend(edge_bytes(label))
    items = sorted((ir.normalize_ranges(rs), cid) for cid, rs in groups.items())
    key = tuple(items)
    found = ids.get(key)
    if found is not None:
        return found
    if not items:
        node = ir.EMPTY
    else:
        node = ir.alt(*(ir.seq(ir.byteset(rs), nodes[cid]) for rs, cid in items))
    ids[key] = len(nodes)
    nodes.append(node)
    return ids[key]


def _utf8_sequences(cs: CharSet) -> list[tuple[tuple[int, int], ...]]:
    """Split code point ranges (no surrogates) into sequences of byte ranges whose
    cartesian products are exactly the UTF-8 encodings of the ranges."""
    out: list[tuple[tuple[int, int], ...]] = []
    stack = list(reversed(cs))
    while stack:
        lo, hi = stack.pop()
        split = False
        for boundary in (0x7F, 0x7FF, 0xFFFF):  # encoded length changes
            if lo <= boundary < hi:
                stack.append((boundary + 1, hi))
                stack.append((lo, boundary))
                split = True
                break
        if split:
            continue
        if hi <= 0x7F:
            out.append(((lo, hi),))
            continue
        for i in (1, 2, 3):
            mask = (1 << (6 * i)) - 1
            if lo & ~mask != hi & ~mask:
                if lo & mask:
                    stack.append(((lo | mask) + 1, hi))
                    stack.append((lo, lo | mask))
                    split = True
                    break
                if hi & mask != mask:
                    stack.append((hi & ~mask, hi))
                    stack.append((lo, (hi & ~mask) - 1))
                    split = True
                    break
        if split:
            continue
        a = chr(lo).encode("utf-8")
        b = chr(hi).encode("utf-8")
        out.append(tuple(zip(a, b)))
    return out


def _identity_edge(r: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    return (r,)


@lru_cache(maxsize=4096)
def _utf8_ir(cs: CharSet) -> ir.Node:
    encodable = difference(cs, SURROGATES)
    return _sequences_ir(_utf8_sequences(encodable), _identity_edge)


def utf8_ir(cs: CharSet) -> ir.Node:
    """IR matching exactly the UTF-8 encodings of the code points in `cs`
    (surrogates D800-DFFF have none and are ignored). Memoized by `cs`."""
    return _utf8_ir(_as_charset(cs))


# ---------------------------------------------------------------- hex digits


def _digit_sequences(lo: int, hi: int, ndigits: int, base: int = 16) -> list[tuple[tuple[int, int], ...]]:
    """Split the value range lo..hi (fixed width, `ndigits` digits) into sequences of
    per-digit value ranges whose cartesian products are exactly the range."""
    if ndigits == 1:
        return [((lo, hi),)]
    m = base ** (ndigits - 1)
    hl, ll = divmod(lo, m)
    hh, lh = divmod(hi, m)
    if hl == hh:
        return [((hl, hl),) + s for s in _digit_sequences(ll, lh, ndigits - 1, base)]
    out: list[tuple[tuple[int, int], ...]] = []
    if ll != 0:
        out += [((hl, hl),) + s for s in _digit_sequences(ll, m - 1, ndigits - 1, base)]
        hl += 1
    tail: list[tuple[tuple[int, int], ...]] = []
    if lh != m - 1:
        tail = [((hh, hh),) + s for s in _digit_sequences(0, lh, ndigits - 1, base)]
        hh -= 1
    if hl <= hh:
        out.append(((hl, hh),) + ((0, base - 1),) * (ndigits - 1))
    return out + tail


def _hex_digit_bytes(r: tuple[int, int]) -> list[tuple[int, int]]:
    """Byte ranges of the hex digits with values lo..hi, letters in both cases."""
    lo, hi = r
    out: list[tuple[int, int]] = []
    if lo <= 9:
        out.append((0x30 + lo, 0x30 + min(hi, 9)))
    if hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        out.append((0x61 + a, 0x61 + b))  # a-f
        out.append((0x41 + a, 0x41 + b))  # A-F
    return out


# 512: most misses are the one-off sets of string_except (its letter sets), and each
# entry is objects every full garbage collection rescans (see _other_then_tail there).
@lru_cache(maxsize=512)
def hex_ir(values: CharSet, ndigits: int = 4) -> ir.Node:
    """IR for exactly `ndigits` hex digits (either case, per digit) whose value is in
    `values` (inclusive ranges inside 0..16**ndigits-1)."""
    top = 16**ndigits - 1
    seqs = []
    for lo, hi in values:
        if lo < 0 or hi > top:
            raise ValueError(f"value range ({lo:#x}, {hi:#x}) does not fit {ndigits} hex digits")
        seqs.extend(_digit_sequences(lo, hi, ndigits))
    return _sequences_ir(seqs, _hex_digit_bytes)


# ---------------------------------------------------------------- JSON string bodies

#: characters JSON allows unescaped inside a string
JSON_RAW: CharSet = ((0x20, 0x21), (0x23, 0x5B), (0x5D, MAX_CODE_POINT))
#: short escapes: code point -> the letter after the backslash
JSON_SHORT_ESCAPES: dict[int, int] = {
    0x22: ord('"'),
    0x5C: ord("\\"),
    0x2F: ord("/"),
    0x08: ord("b"),
    0x0C: ord("f"),
    0x0A: ord("n"),
    0x0D: ord("r"),
    0x09: ord("t"),
}
_BMP_SCALARS: CharSet = ((0, 0xD7FF), (0xE000, 0xFFFF))


def _surrogate_pair_ir(astral: CharSet) -> ir.Node:
    """`HHHH\\uHHHH` (after the first `\\u`): surrogate-pair escapes of exactly `astral`."""
    partial: dict[int, list[tuple[int, int]]] = {}  # high (0..0x3FF) -> low ranges
    full: list[tuple[int, int]] = []  # high ranges with every low
    for lo, hi in astral:
        h1, l1 = divmod(lo - 0x10000, 0x400)
        h2, l2 = divmod(hi - 0x10000, 0x400)
        if h1 == h2:
            if l1 == 0 and l2 == 0x3FF:
                full.append((h1, h1))
            else:
                partial.setdefault(h1, []).append((l1, l2))
            continue
        if l1 != 0:
            partial.setdefault(h1, []).append((l1, 0x3FF))
            h1 += 1
        if l2 != 0x3FF:
            partial.setdefault(h2, []).append((0, l2))
            h2 -= 1
        if h1 <= h2:
            full.append((h1, h2))
    by_lows: dict[CharSet, list[tuple[int, int]]] = {}
    if full:
        by_lows[((0, 0x3FF),)] = list(full)
    for h, lows in partial.items():
        norm = ir.normalize_ranges(lows)
        by_lows.setdefault(norm, []).append((h, h))
    parts = []
    for lows, highs in sorted(by_lows.items()):
        high_vals = tuple((0xD800 + a, 0xD800 + b) for a, b in ir.normalize_ranges(highs))
        low_vals = tuple((0xDC00 + a, 0xDC00 + b) for a, b in lows)
        parts.append(ir.seq(hex_ir(high_vals), ir.lit(b"\\u"), hex_ir(low_vals)))
    return ir.alt(*parts)


@lru_cache(maxsize=4096)
def _json_char_ir(cs: CharSet, any_hex_escape: bool) -> ir.Node:
    parts: list[ir.Node] = []
    raw = intersect(cs, JSON_RAW)
    # ASCII and multi-byte characters apart: the labels of an object key's states (every
    # character but the next letters of the declared names) then share one node for their
    # non-ASCII part, and the lazy automaton resumes its continuations once, not per state.
    for part in (intersect(raw, ((0, 0x7F),)), intersect(raw, ((0x80, MAX_CODE_POINT),))):
        if part:
            parts.append(utf8_ir(part))
    escapes: list[ir.Node] = []
    letters = [(b, b) for cp, b in JSON_SHORT_ESCAPES.items() if contains(cs, cp)]
    if letters:
        escapes.append(ir.byteset(letters))
    if any_hex_escape and not difference(SCALAR_VALUES, cs):
        escapes.append(ir.seq(ir.lit(b"u"), hex_ir(((0, 0xFFFF),))))
    else:
        u_parts: list[ir.Node] = []
        bmp = intersect(cs, _BMP_SCALARS)
        if bmp:
            u_parts.append(hex_ir(bmp))
        astral = intersect(cs, ((0x10000, MAX_CODE_POINT),))
        if astral:
            u_parts.append(_surrogate_pair_ir(astral))
        if u_parts:
            escapes.append(ir.seq(ir.lit(b"u"), ir.alt(*u_parts)))
    if escapes:
        parts.append(ir.seq(ir.lit(b"\\"), ir.alt(*escapes)))
    return ir.mark_lexeme(ir.alt(*parts))


def json_char_ir(cs: CharSet, *, any_hex_escape: bool = False) -> ir.Node:
    """IR for the JSON string-body encodings of exactly one character of `cs`.

    Accepts raw UTF-8 for characters JSON allows raw (>= 0x20, not `"` or `\\`), the
    short escapes of the characters in `cs`, `\\uHHHH` (either case per digit) for each
    BMP non-surrogate character in `cs`, and surrogate-pair escapes `\\uHHHH\\uHHHH`
    for the astral characters in `cs`: every accepted byte string decodes to exactly
    one character of `cs`, and every encoding of each such character is accepted.

    `any_hex_escape=True` allows `\\u` followed by ANY four hex digits (lone
    surrogates included) instead; it takes effect only when `cs` contains every
    encodable code point (i.e. `ANY_CHAR`) and is ignored otherwise. Meant for
    unconstrained string bodies, where a surrogate pair is then two escapes.
    Memoized by `(cs, any_hex_escape)`.
    """
    return _json_char_ir(_as_charset(cs), bool(any_hex_escape))


@lru_cache(maxsize=None)
def json_body_ir() -> ir.Node:
    """Any JSON string body: any characters, `\\u` escapes of any code unit (one node)."""
    return ir.rep(json_char_ir(ANY_CHAR, any_hex_escape=True), 0, None)
