"""Whether a byte string is in the language of an IR node (`ir_accepts`): the one IR
acceptor. The JSON Schema compiler tests an enum value or a property name against a
structural schema with it, and tests check the front ends' languages with it.

Owns: a memoized walk of the IR over sets of positions in the input. Reads every node
kind the way the automata do (a `Stepper` through its own spec, not its `plain()`
form), but builds no automaton. Must not build IR, nor know schemas, automata or
tokens.
"""

from __future__ import annotations

from structgen.grammar import ir
from structgen.grammar.nesting import make_room_for_deep_input


def ir_accepts(node: ir.Node, data: bytes) -> bool:
    """Whether `data` is in the language of `node`. The cost grows with the nodes and
    the positions they are tried at: meant for property names, enum values and test
    documents, not for decoding."""
    make_room_for_deep_input()  # the walk recurses along the IR's nesting
    return len(data) in _Walk(data).ends(node, 0)


class _Walk:
    """The positions where each node, started at a position, can end (memoized)."""

    def __init__(self, data: bytes):
        self.data = data
        self.memo: dict[tuple[int, int], frozenset[int]] = {}

    def ends(self, node: ir.Node, p: int) -> frozenset[int]:
        key = (id(node), p)
        got = self.memo.get(key)
        if got is not None:
            return got
        self.memo[key] = frozenset()  # a node met again at the same position adds nothing
        out = self._ends(node, p)
        self.memo[key] = out
        return out

    def _ends(self, x: ir.Node, p: int) -> frozenset[int]:
        if isinstance(x, ir.Bytes):
            return frozenset([p + len(x.data)]) if self.data.startswith(x.data, p) else frozenset()
        if isinstance(x, ir.ByteSet):
            if p < len(self.data) and any(lo <= self.data[p] <= hi for lo, hi in x.ranges):
                return frozenset([p + 1])
            return frozenset()
        if isinstance(x, ir.Concat):
            return self._concat(x.items, p)
        if isinstance(x, ir.Alt):
            return frozenset().union(*(self.ends(item, p) for item in x.items))
        if isinstance(x, ir.Repeat):
            return self._repeat(x, p)
        if isinstance(x, ir.Graph):
            return self._graph(x, p)
        if isinstance(x, ir.Members):
            return self._members(x, p)
        if isinstance(x, ir.Stepper):
            return self._stepper(x, p)
        if isinstance(x, ir.Ref):
            return self.ends(x.target, p) if x.target is not None else frozenset()
        raise TypeError(f"not an IR node: {x!r}")

    def _after(self, node: ir.Node, starts: set[int]) -> set[int]:
        out: set[int] = set()
        for q in starts:
            out |= self.ends(node, q)
        return out

    def _concat(self, items, p: int) -> frozenset[int]:
        cur = {p}
        for item in items:
            cur = self._after(item, cur)
            if not cur:
                break
        return frozenset(cur)

    def _repeat(self, x: ir.Repeat, p: int) -> frozenset[int]:
        cur = {p}
        for _ in range(x.min):
            cur = self._after(x.item, cur)
            if not cur:
                break
        result = set(cur)
        frontier = set(cur)
        count = x.min
        while frontier and (x.max is None or count < x.max):
            nxt = self._after(x.item, frontier)
            frontier = nxt - result if x.max is None else nxt
            result |= nxt
            count += 1
        return frozenset(result)

    def _graph(self, x: ir.Graph, p: int) -> frozenset[int]:
        """Ends of paths from the start to a final; in a bounded graph (`ir.Bound`), of
        those that read at most its bound's labels."""
        by_src: dict[int, list] = {}
        for src, dst, label in x.edges:
            by_src.setdefault(src, []).append((dst, label))
        finals = set(x.finals)
        bound = x.bound
        out: set[int] = set()
        seen = {(x.start, p, 0)}
        stack = [(x.start, p, 0)]
        while stack:
            s, q, count = stack.pop()
            if s in finals:
                out.add(q)
            for dst, label in by_src.get(s, ()):
                after = count if bound is None or label is None else count + 1
                if bound is not None and after + bound.need[dst] > bound.max:
                    continue
                for r in [q] if label is None else self.ends(label, q):
                    if (dst, r, after) not in seen:
                        seen.add((dst, r, after))
                        stack.append((dst, r, after))
        return frozenset(out)

    def _members(self, x: ir.Members, p: int) -> frozenset[int]:
        out: set[int] = set()
        seen = {(ir.Members.START, p)}
        stack = [(ir.Members.START, p)]
        while stack:
            state, q = stack.pop()
            for label, nxt in x.moves(state):
                for r in self.ends(label, q):
                    if nxt is None:
                        out.add(r)
                    elif (nxt, r) not in seen:
                        seen.add((nxt, r))
                        stack.append((nxt, r))
        return frozenset(out)

    def _stepper(self, x: ir.Stepper, p: int) -> frozenset[int]:
        """Through the node's positions: each byte goes where `spec` sends it (the
        `ir.Stepper` contract)."""
        out: set[int] = set()
        seen = {(x.start, p)}
        stack = [(x.start, p)]
        while stack:
            pos, q = stack.pop()
            if x.final(pos):
                out.add(q)
            if q >= len(self.data):
                continue
            b = self.data[q]
            for lo, hi, kind, arg in x.spec(pos):
                if not lo <= b <= hi:
                    continue
                if kind == ir.Stepper.GOTO:
                    if (arg, q + 1) not in seen:
                        seen.add((arg, q + 1))
                        stack.append((arg, q + 1))
                elif kind == ir.Stepper.ENTER:  # the byte ends the node's part; `arg` follows
                    out |= self.ends(arg, q + 1)
                else:  # STEP: `arg`'s start reads the byte instead
                    out.update(r for r in self.ends(arg, q) if r > q)
                break  # the ranges are disjoint
        return frozenset(out)
