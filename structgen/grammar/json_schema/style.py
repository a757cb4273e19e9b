"""The whitespace style of the JSON texts a grammar accepts (`Style`): the IR of the
separators, brackets and whitespace runs of one style at one depth.

Owns: every byte of whitespace and punctuation between JSON tokens. Must not know
schemas or values: the compiler asks it for separators and puts values between them.
"""

from __future__ import annotations

from structgen.grammar import ir
from structgen.grammar.json_schema.options import JsonOptions


_WS_BYTES = ((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20))
# "flexible" bounds a whitespace run by 2 + 4 * level up to this level, then by 42: from
# there the grammar no longer depends on the depth, so a recursive schema, or any value,
# closes its loop there instead of being refused or cut at a depth.
FLEXIBLE_LEVELS = 10


class Style:
    """Separators of one whitespace style; `d` is the depth of the container."""

    def __init__(self, options: JsonOptions):
        self.mode = options.style
        self.indent = options.indent
        self.max_ws = options.max_whitespace
        # flexible whitespace grows its bound with the depth unless max_whitespace fixes it
        self.depth_dependent = self.mode == "indent" or (self.mode == "flexible" and self.max_ws is None)
        self._ws_cache: dict[int, ir.Node] = {}

    def depth_key(self, depth: int) -> int:
        """What of the depth a value's IR depends on: the depth itself for "indent",
        the level up to FLEXIBLE_LEVELS for "flexible" with its default bound, else 0."""
        if self.mode == "indent":
            return depth
        if self.depth_dependent:
            return min(depth, FLEXIBLE_LEVELS)
        return 0

    def ws(self, level: int) -> ir.Node:
        k = self.max_ws if self.max_ws is not None else 2 + 4 * min(level, FLEXIBLE_LEVELS)
        node = self._ws_cache.get(k)
        if node is None:
            node = self._ws_cache[k] = ir.rep(ir.byteset(_WS_BYTES), 0, k)
        return node

    def open(self, d: int) -> ir.Node:
        if self.mode == "indent":
            return ir.lit("\n" + " " * (self.indent * (d + 1)))
        if self.mode == "flexible":
            return self.ws(d + 1)
        return ir.EMPTY

    def close(self, d: int) -> ir.Node:
        if self.mode == "indent":
            return ir.lit("\n" + " " * (self.indent * d))
        if self.mode == "flexible":
            return self.ws(d)
        return ir.EMPTY

    def sep(self, d: int) -> ir.Node:
        if self.mode == "indent":
            return ir.lit(",\n" + " " * (self.indent * (d + 1)))
        if self.mode == "flexible":
            return ir.seq(self.ws(d + 1), ir.lit(","), self.ws(d + 1))
        if self.mode == "compact":
            return ir.lit(",")
        return ir.lit(", ")

    def colon(self, d: int) -> ir.Node:
        if self.mode == "flexible":
            return ir.seq(self.ws(d + 1), ir.lit(":"), self.ws(d + 1))
        if self.mode == "compact":
            return ir.lit(":")
        return ir.lit(": ")

    def empty(self, d: int, opener: str, closer: str) -> ir.Node:
        if self.mode == "flexible":
            return ir.seq(ir.lit(opener), self.ws(d + 1), ir.lit(closer))
        return ir.lit(opener + closer)

    def members(self, d: int, entries: list[ir.Node], required: list[bool], extra: ir.Node | None = None,
                lo: int = 0, hi: int | None = None) -> ir.Node:
        """An object whose members come in any order (`ir.Members`), brackets included."""
        close_some = ir.seq(self.close(d), ir.lit("}"))
        return ir.seq(ir.lit("{"), ir.Members(
            entries, required, extra, self.open(d), self.sep(d), self.empty(d, "", "}"), close_some, lo, hi,
        ))

    def container(self, d: int, opener: str, closer: str, elements: list[ir.Node]) -> ir.Node:
        if not elements:
            return self.empty(d, opener, closer)
        return ir.seq(ir.lit(opener), self.open(d), ir.join(elements, self.sep(d)), self.close(d), ir.lit(closer))
