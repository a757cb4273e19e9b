"""Array lowering: prefixItems/items, minItems/maxItems, contains (a graph over index and
count) and uniqueItems (finite sets of scalars, in schema order).

Owns: the element layout of arrays. A mixin of `compiler.SchemaCompiler`: it uses the
compiler's options, style, budget (`tick`, `refuse`) and the methods of the other mixins
through `self`.
"""

from __future__ import annotations

from structgen.errors import GrammarTooLargeError
from structgen.grammar import ir
from structgen.grammar.json_schema.graphs import StateNumbers, trimmed_graph
from structgen.grammar.json_schema.keywords import canon, kind_of
from structgen.grammar.json_schema.normalized import Normalized


class Arrays:
    """Array lowering."""

    def elem_items(self, s: Normalized, i: int | None) -> list:
        """Items constraining element i (None: an element past every prefix)."""
        out: list = []
        for a in s.arrs:
            if i is not None and i < len(a.prefix):
                out += a.prefix[i]
            elif a.rest is not None:
                out += a.rest
        return out

    def lower_array(self, s: Normalized, depth: int) -> ir.Node:
        st = self.style
        lo, hi = s.min_items, s.max_items
        if hi is not None and lo > hi:
            return ir.NOTHING
        k = max((len(a.prefix) for a in s.arrs), default=0)
        elems = [self.value(self.elem_items(s, i), depth + 1) for i in range(k)]
        rest = self.value(self.elem_items(s, None), depth + 1)
        # an impossible element caps the length
        for i, e in enumerate(elems):
            if ir.is_nothing(e):
                hi = i if hi is None else min(hi, i)
                break
        if ir.is_nothing(rest):
            hi = k if hi is None else min(hi, k)
        if hi is not None and lo > hi:
            return ir.NOTHING
        if s.contains:
            return self._array_contains(s, depth, elems, rest, lo, hi)
        if s.unique and (hi is None or hi > 1):
            return self._array_unique(s, depth, elems, rest, lo, hi)
        parts = []
        if lo == 0:
            parts.append(st.empty(depth, "[", "]"))
        if k == 0 and hi is None and lo <= 1:
            parts.append(self.nonempty_list(depth, rest, "[", "]"))
        elif hi is None or hi > 0:
            first = elems[0] if k else rest
            later = _later_elements(st.sep(depth), elems, rest, lo, hi)
            parts.append(ir.seq(ir.lit("["), st.open(depth), first, later, st.close(depth), ir.lit("]")))
        return ir.alt(*parts)

    def _array_contains(self, s, depth, elems, rest, lo, hi) -> ir.Node:
        """Arrays with `contains`: a Graph over (index, matches so far). Elements either
        satisfy the contains schema (counted) or not. Without maxContains a "plain"
        element may match or not (counting only proven matches keeps minContains sound);
        with maxContains, plain elements must satisfy the NEGATION of the contains schema
        (exact, or a subset of it), so the count is exact."""
        st = self.style
        if len(s.contains) > 1:
            self.refuse("contains", s.contains[1][3], "several 'contains' on one array are not supported")
        items, cmin, cmax, cptr = s.contains[0]
        if cmax is not None and hi is not None and cmax >= hi:
            cmax = None  # cannot be exceeded
        if cmax is not None and cmin > cmax:
            return ir.NOTHING
        if s.unique and (hi is None or hi > 1):
            self.refuse("uniqueItems", s.unique, "uniqueItems together with contains is not supported")
        k = len(elems)
        hits = [self.value(self.elem_items(s, i) + items, depth + 1) for i in range(k)]
        rest_hit = self.value(self.elem_items(s, None) + items, depth + 1)
        if cmax is not None:
            (raw, ptr, chain), = items
            neg, _exact = self.negate(raw, ptr, chain)
            if neg is None:
                self.refuse("maxContains", cptr, "the contains schema cannot be negated")
                cmax = None
            else:
                def misses(i: int | None) -> ir.Node:
                    base = self.elem_items(s, i)
                    return ir.alt(*(self.value(base + [(a, cptr, chain)], depth + 1) for a in neg))

                elems = [misses(i) for i in range(k)]
                rest = misses(None)
        top = cmin if cmax is None else cmax  # count states 0..top (saturating without max)
        cap = max(k, lo, 1) if hi is None else hi
        if (cap + 1) * (top + 1) > 100_000:
            raise GrammarTooLargeError("array bounds with contains need too many states")
        sid = StateNumbers()

        edges = []
        final = sid("end")
        for i in range(cap + 1):
            for c in range(top + 1):
                src = sid((i, c))
                if i >= lo and c >= cmin:
                    edges.append((src, final, st.empty(depth, "", "]") if i == 0 else ir.seq(st.close(depth), ir.lit("]"))))
                if hi is not None and i >= hi:
                    continue
                ni = min(i + 1, cap)
                pre = st.open(depth) if i == 0 else st.sep(depth)
                plain = elems[i] if i < k else rest
                hit = hits[i] if i < k else rest_hit
                edges.append((src, sid((ni, c)), ir.seq(pre, plain)))
                if cmax is None or c + 1 <= cmax:
                    edges.append((src, sid((ni, min(c + 1, top))), ir.seq(pre, hit)))
        g = trimmed_graph(len(sid), sid((0, 0)), [final], edges)
        return ir.seq(ir.lit("["), g)

    def _array_unique(self, s, depth, elems, rest, lo, hi) -> ir.Node:
        """uniqueItems: only when every element comes from one finite set of scalars;
        the values are then emitted in schema order (a documented subset)."""
        st = self.style
        values = None
        if not elems:
            rs = self.normalize(self.elem_items(s, None))
            values = self._finite_scalars(rs)
        if values is None:
            self.refuse(
                "uniqueItems",
                s.unique,
                "uniqueItems is only supported for arrays of at most one item or of a finite set of scalars",
            )
            return self._array_plain_fallback(s, depth, elems, rest, lo, hi)
        n = len(values)
        cap = n if hi is None else min(hi, n)
        if lo > cap:
            return ir.NOTHING
        lits = [self.literal(v, depth + 1) for v in values]
        sid = StateNumbers()

        start = sid(("start",))
        final = sid(("end",))
        edges = []
        if lo == 0:
            edges.append((start, final, st.empty(depth, "", "]")))
        for j in range(n):
            edges.append((start, sid((j, 1)), ir.seq(st.open(depth), lits[j])))
        for j in range(n):
            for c in range(1, cap + 1):
                src = sid((j, c))
                if c >= lo:
                    edges.append((src, final, ir.seq(st.close(depth), ir.lit("]"))))
                if c < cap:
                    for j2 in range(j + 1, n):
                        edges.append((src, sid((j2, c + 1)), ir.seq(st.sep(depth), lits[j2])))
        return ir.seq(ir.lit("["), trimmed_graph(len(sid), start, [final], edges))

    def _array_plain_fallback(self, s, depth, elems, rest, lo, hi) -> ir.Node:
        t = s.copy()
        t.unique = None
        return self.lower_array(t, depth)

    def _finite_scalars(self, s: Normalized) -> list | None:
        if s.groups or self.is_empty(s):
            return None if s.groups else []
        kinds = self.effective_kinds(s)
        excl = {canon(v) for v in s.not_values}
        if s.enum is not None:
            vals = [v for v in s.enum if kind_of(v) in kinds and canon(v) not in excl and self.value_ok(s, v)]
        elif kinds <= {"null", "boolean"}:
            vals = [v for v in (None, True, False) if kind_of(v) in kinds and canon(v) not in excl]
        else:
            return None
        if any(isinstance(v, (list, dict)) for v in vals):
            return None
        return vals


def _later_elements(sep: ir.Node, elems: list[ir.Node], rest: ir.Node, lo: int, hi: int | None) -> ir.Node:
    """The elements after the first, each preceded by `sep`: those of `elems` (the
    prefix items) in order, then `rest` repeated, the count of all of them within
    `lo..hi` (hi None: unbounded). Built from the last element back."""
    k = len(elems)
    end = max(1, k if hi is None else min(k, hi))  # the first index past the prefix items written out
    if hi is not None and end >= hi:
        node = ir.EMPTY
    else:
        node = ir.rep(ir.seq(sep, rest), max(0, lo - end), None if hi is None else hi - end)
    for i in range(end - 1, 0, -1):
        written = ir.seq(sep, elems[i], node)
        node = ir.alt(ir.EMPTY, written) if i >= lo else written
    return node
