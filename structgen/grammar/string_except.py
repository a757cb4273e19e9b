"""The body of a JSON string whose value is none of a list of names, as a Stepper.

Owns `StringExcept`: what an object allows as the name of an undeclared property when
its declared names must keep their own schemas. Compared by decoded value, so no escape
spelling of a declared name gets through (`"\\u0061ge"` is `"age"`).

As a tree of basic nodes this language is one alternation per prefix of the names (the
next letter of each name, in all its spellings, or any other character and then any
string), and every automaton state inside a key held a parse position per branch, each
with its own continuation: those states were the costliest first visits of MaskBench's
schemas. Here one position is the prefix read so far (a node of the names' trie) or a
half-read escape after it, and the moves are worked out per position by hand:
  * a raw byte that is the next letter of some name goes on in the trie;
  * `\\` starts an escape, decoded as it is read: a short escape or `\\u` and four hex
    digits that spell a next letter go on in the trie, anything else leaves it;
  * any other byte leaves the trie: the string is no longer a prefix of a name, and the
    rest of it is free (a shared node: any JSON string body).
A position in the trie is final when its prefix is not a name.

Once off the trie, the rest of the string takes any `\\u` escape, lone surrogates
included, like an unconstrained string body (Python's `json` decodes them, so such a
name is just another undeclared one). The first character off the trie must still be
a whole character: a high surrogate escape needs its low half there.

Only names of ASCII characters are supported (so a trie letter is one raw byte); the
JSON Schema compiler builds the basic tree for others (whose free rest refuses lone
surrogate escapes: it is the stricter of the two). Knows the IR and character sets
only.
"""

from __future__ import annotations

from functools import lru_cache

from structgen.grammar import charset as C
from structgen.grammar import ir

_HEX_DIGITS = ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66))
_ANY_HEX = ir.byteset(_HEX_DIGITS)
_SHORT_ESCAPE_OF = {letter: cp for cp, letter in C.JSON_SHORT_ESCAPES.items()}  # letter byte -> code point
_HIGH, _LOW = (0xD800, 0xDBFF), (0xDC00, 0xDFFF)
_QUOTE_BACKSLASH = (0x22, 0x5C)  # the ASCII characters JSON_RAW leaves out, besides controls
# The ASCII characters JSON writes raw, as a byte set: from any node of the names' trie each
# of them either goes on in the trie or leaves it for the free rest, which takes them all.
_RAW_ASCII = sum(1 << b for lo, hi in C.intersect(C.JSON_RAW, ((0, 0x7F),)) for b in range(lo, hi + 1))


def _hex_value(b: int) -> int:
    return b - 0x30 if b <= 0x39 else (b | 0x20) - 0x61 + 10


# What follows once a character off the names' trie has been read: any string body.
_TAIL = C.json_body_ir()
# A first character off the trie, read raw (its escapes are decoded by StringExcept).
_FIRST_THEN_TAIL = ir.seq(C.json_char_ir(C.ANY_CHAR), _TAIL)
# A non-ASCII character in any JSON spelling (raw UTF-8, `\\u` escape, surrogate pair).
_NON_ASCII_CHAR = C.json_char_ir(((0x80, C.MAX_CODE_POINT),))
# A high surrogate escape needs its low half: `\uDC00`..`\uDFFF`.
_LOW_THEN_TAIL = ir.seq(ir.lit(b"\\u"), C.hex_ir((_LOW,)), _TAIL)


# 1,024 letter sets: an entry is ~26 objects that every full garbage collection rescans.
# MaskBench-dev filled 1,730 of 4,096 (44,000 objects, a third of what a compiling process
# tracked); at 1,024 it misses 4% more often, at 256 53% (a miss costs ~0.1 ms).
@lru_cache(maxsize=1024)
def _other_then_tail(letters: frozenset) -> ir.Node:
    """Any character but the ASCII `letters`, in any spelling, then any string body.
    The non-ASCII characters are one shared node; the ASCII ones are written out here
    (C.json_char_ir of each letter set would cost ~0.5 ms, mostly its hex escapes)."""
    if not letters:
        return _FIRST_THEN_TAIL
    return ir.seq(ir.alt(_NON_ASCII_CHAR, _ascii_char_except(letters)), _TAIL)


@lru_cache(maxsize=None)  # names are ASCII: 128 letters at most
def _letter_ir(cp: int) -> ir.Node:
    """One ASCII letter of a name in each of its JSON spellings (C.json_char_ir's node,
    without normalizing its one-letter set again for every edge of every trie)."""
    return C.json_char_ir(C.charset([cp]))


def _ascii_char_except(letters: frozenset) -> ir.Node:
    """One ASCII character not in `letters`, in each JSON spelling: raw where JSON allows
    it, its short escape, `\\u00HH`."""
    raw = ir.byteset([(b, b) for b in range(0x20, 0x80) if b not in letters and b not in _QUOTE_BACKSLASH])
    short = ir.byteset([(letter, letter) for letter, cp in _SHORT_ESCAPE_OF.items() if cp not in letters])
    hex_pairs = C.hex_ir(C.difference(((0, 0x7F),), C.charset(letters)), 2)
    escaped = ir.seq(ir.lit(b"\\"), ir.alt(short, ir.seq(ir.lit(b"u00"), hex_pairs)))
    return ir.alt(raw, escaped)


@lru_cache(maxsize=None)
def _rest(digits: int, then: ir.Node) -> ir.Node:
    """`digits` more hex digits of any value, then `then`."""
    return ir.seq(ir.rep(_ANY_HEX, digits, digits), then)


@lru_cache(maxsize=1024)
def _names_trie(names: tuple[str, ...]) -> tuple[tuple[dict[int, int], ...], tuple[bool, ...]]:
    """The trie of `names`: per node, its children by code point, and whether its prefix
    is a name (node 0 is the empty prefix). Shared by every StringExcept of the same
    names, which only read it."""
    children: list[dict[int, int]] = [{}]
    is_name = [False]
    for name in names:
        node = 0
        for ch in name:
            nxt = children[node].get(ord(ch))
            if nxt is None:
                nxt = children[node][ord(ch)] = len(children)
                children.append({})
                is_name.append(False)
            node = nxt
        is_name[node] = True
    return tuple(children), tuple(is_name)


class StringExcept(ir.Stepper):
    """Any JSON string body (between the quotes) whose decoded value is not in `names`.

    Positions: an int, a node of the names' trie (the prefix read so far); ("\\\\", t)
    after a backslash at node t; ("u", t, k, v) after `\\u` and k hex digits of value v."""

    __slots__ = ("names", "_children", "_is_name", "_specs", "_patches", "_plain")

    def __init__(self, names):
        self.names = tuple(names)
        if any(not name.isascii() for name in self.names):
            raise ValueError("StringExcept supports ASCII names only")
        self._children, self._is_name = _names_trie(self.names)
        self._specs: dict = {}
        self._patches: dict[int, tuple] = {}
        self._plain: ir.Node | None = None

    start = 0

    def final(self, pos) -> bool:
        return isinstance(pos, int) and not self._is_name[pos]

    def size(self) -> int:
        return 16 * len(self._children)

    def spec(self, pos) -> list[tuple[int, int, int, object]]:
        got = self._specs.get(pos)
        if got is None:
            if isinstance(pos, int):
                got = self._at_node_runs(pos)
            elif pos[0] == "\\":
                got = _runs(self._after_backslash(pos[1]))
            else:
                got = _runs(self._in_hex(*pos[1:]))
            self._specs[pos] = got
        return got

    def free_bytes(self, pos) -> int:
        """Any raw ASCII text reads from a trie node (not from inside an escape)."""
        return _RAW_ASCII if isinstance(pos, int) else 0

    def patches(self, pos) -> tuple[ir.Node, list[tuple[int, int, object]]] | None:
        """At a trie node, every byte but the next letters (names are ASCII: one byte
        each) and `\\` is read by _FIRST_THEN_TAIL: the moves of those few bytes alone
        (`_at_node_runs` writes the whole spec from them)."""
        if not isinstance(pos, int):
            return None
        got = self._patches.get(pos)
        if got is None:
            moves = [(cp, ir.Stepper.GOTO, child) for cp, child in self._children[pos].items()
                     if cp >= 0x20 and cp not in _QUOTE_BACKSLASH]
            moves.append((0x5C, ir.Stepper.GOTO, ("\\", pos)))
            got = self._patches[pos] = (_FIRST_THEN_TAIL, moves)
        return got

    def _at_node_runs(self, t: int) -> list[tuple[int, int, int, object]]:
        """The spec at trie node t: the moves of `patches` (each next letter that JSON
        writes raw goes on in the trie, `\\` starts an escape), every other byte read
        raw by _FIRST_THEN_TAIL. Written out directly (not through `_runs`)."""
        out, b = [], 0
        for byte, kind, arg in sorted(self.patches(t)[1], key=lambda move: move[0]):
            if byte > b:
                out.append((b, byte - 1, ir.Stepper.STEP, _FIRST_THEN_TAIL))
            out.append((byte, byte, kind, arg))
            b = byte + 1
        if b < 256:
            out.append((b, 255, ir.Stepper.STEP, _FIRST_THEN_TAIL))
        return out

    def _after_backslash(self, t: int) -> dict[int, tuple]:
        children = self._children[t]
        out = {}
        for letter, cp in _SHORT_ESCAPE_OF.items():
            child = children.get(cp)
            out[letter] = (ir.Stepper.GOTO, child) if child is not None else (ir.Stepper.ENTER, _TAIL)
        out[ord("u")] = (ir.Stepper.GOTO, ("u", t, 0, 0))
        return out

    def _in_hex(self, t: int, k: int, v: int) -> dict[int, tuple]:
        children = self._children[t]
        out = {}
        for lo, hi in _HEX_DIGITS:
            for b in range(lo, hi + 1):
                value = v * 16 + _hex_value(b)
                left = 3 - k  # digits still to come after this one
                first, last = value << (4 * left), ((value + 1) << (4 * left)) - 1
                if left == 0 and value in children:
                    out[b] = (ir.Stepper.GOTO, children[value])
                elif left and any(first <= cp <= last for cp in children):
                    out[b] = (ir.Stepper.GOTO, ("u", t, k + 1, value))
                elif _LOW[0] <= first and last <= _LOW[1]:
                    continue  # a lone low surrogate: JSON text with it is not a string here
                elif _HIGH[0] <= first and last <= _HIGH[1]:
                    out[b] = (ir.Stepper.ENTER, _rest(left, _LOW_THEN_TAIL))
                elif last < _HIGH[0] or first > _LOW[1]:
                    out[b] = (ir.Stepper.ENTER, _rest(left, _TAIL))
                else:  # the digits so far do not yet tell a surrogate from a plain character
                    out[b] = (ir.Stepper.GOTO, ("u", t, k + 1, value))
        return out

    def plain(self) -> ir.Node:
        """The same language as a Graph of basic nodes (built once): a state per node of
        the names' trie, final where its prefix is not a name, an edge to each child
        reading that letter in any of its spellings, and one to a final end state
        reading any other character and then any string. Its edge labels are shared
        between all StringExcepts (memoized per letter and per set of next letters)."""
        if self._plain is None:
            self._plain = self._build_plain()
        return self._plain

    def _build_plain(self) -> ir.Node:
        end = len(self._children)
        edges = []
        for t, children in enumerate(self._children):
            for cp, child in children.items():
                edges.append((t, child, _letter_ir(cp)))
            edges.append((t, end, _other_then_tail(frozenset(children))))
        finals = [t for t in range(end) if not self._is_name[t]] + [end]
        free = [self.free_bytes(t) for t in range(end)] + [0]
        return ir.Graph(end + 1, 0, finals, edges, free)

    def __repr__(self) -> str:
        return f"StringExcept({self.names!r})"


def _runs(per_byte: dict[int, tuple], fill: tuple | None = None) -> list[tuple[int, int, int, object]]:
    """The bytes listed, and with `fill` every other byte, as (lo, hi, kind, arg) runs of
    consecutive bytes with the same (kind, arg)."""
    out: list[tuple[int, int, int, object]] = []

    def add(lo: int, hi: int, kind: int, arg: object) -> None:
        if out and out[-1][1] == lo - 1 and out[-1][2] == kind and out[-1][3] == arg:
            out[-1] = (out[-1][0], hi, kind, arg)
        else:
            out.append((lo, hi, kind, arg))

    b = 0
    for listed in sorted(per_byte):
        if fill is not None and listed > b:
            add(b, listed - 1, *fill)
        add(listed, listed, *per_byte[listed])
        b = listed + 1
    if fill is not None and b < 256:
        add(b, 255, *fill)
    return out
