"""Any JSON value (`{}`, `true`, an absent `items`): a recursive rule, or a bounded one
where the style depends on the depth, built once per process and shared by every
grammar.

Owns: the process-wide table of any-value IRs and its lock. A mixin of
`compiler.SchemaCompiler`: it uses the compiler's options, style, budget (`tick`,
`refuse`) and the methods of the other mixins through `self`.
"""

from __future__ import annotations

import threading

from structgen.grammar import ir
from structgen.grammar import numbers as N
from structgen.grammar.json_schema.graphs import trimmed_graph
from structgen.grammar.json_schema.strings import free_string_rest


# Any-value IRs by (style, depth key, levels); see SchemaCompiler.any_value. Bounded for a
# server that meets ever new indent widths or whitespace bounds.
_ANY_VALUES: dict = {}
_ANY_VALUES_LOCK = threading.RLock()
_MAX_ANY_VALUES = 4096

class AnyValues:
    """Any JSON value, and the one-or-more list loop."""

    @property
    def any_depth(self) -> int | None:
        """Nesting bound of "any value": None (recursive, unbounded) where the style allows."""
        if self.options.max_any_depth is None and self.style.mode == "indent":
            return 3
        return self.options.max_any_depth

    def any_value(self, depth: int, levels: int | None) -> ir.Node:
        """Any JSON value: `levels` more levels of nesting, or None for a recursive rule
        (one rule serves every depth from where the style stops depending on it).

        Schema-independent, so built once per process (`_ANY_VALUES`): the same objects
        in every grammar are also flattened once (`automata.flat.SHARED`)."""
        st = self.style
        key = (st.mode, st.indent, st.max_ws, st.depth_key(depth), levels)
        got = _ANY_VALUES.get(key)
        if got is not None:
            return got
        with _ANY_VALUES_LOCK:  # one builder at a time; a value enters the table complete
            got = _ANY_VALUES.get(key)
            if got is None:
                if len(_ANY_VALUES) >= _MAX_ANY_VALUES:
                    _ANY_VALUES.clear()
                got = self._build_any_value(key, depth, levels)
            return got

    def _build_any_value(self, key: tuple, depth: int, levels: int | None) -> ir.Node:
        st = self.style
        string = self.any_string()
        parts = [ir.lit("null"), ir.lit("true"), ir.lit("false"), N.number_ir(None, None, None, None), string]
        parts += [st.empty(depth, "[", "]"), st.empty(depth, "{", "}")]
        ref = None
        if levels is None and st.depth_key(depth + 1) == key[3]:
            inner = ref = ir.Ref("any JSON value")  # nesting deeper is this same rule
        elif levels is None:
            inner = self.any_value(depth + 1, None)
        elif levels > 0:
            inner = self.any_value(depth + 1, levels - 1)
        if levels is None or levels > 0:
            entry = ir.seq(string, st.colon(depth), inner)
            parts += [self.nonempty_list(depth, inner, "[", "]"), self.nonempty_list(depth, entry, "{", "}")]
        node = ir.alt(*parts)
        if ref is not None:
            ref.target = node
            node = ref
        _ANY_VALUES[key] = node
        return node

    def nonempty_list(self, depth: int, elem: ir.Node, opener: str, closer: str) -> ir.Node:
        """`[e, e, ...]` (one or more), with ONE copy of `elem` (a Graph loop), so nested
        containers do not double in size per level."""
        st = self.style
        edges = [
            (0, 1, st.open(depth)),
            (2, 1, st.sep(depth)),
            (1, 2, elem),
            (2, 3, ir.seq(st.close(depth), ir.lit(closer))),
        ]
        return ir.seq(ir.lit(opener), trimmed_graph(4, 0, [3], edges))

    def any_string(self) -> ir.Node:
        return ir.seq(ir.lit('"'), free_string_rest())
