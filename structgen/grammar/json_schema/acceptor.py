"""Whether a short byte string is in the language of an IR node (`ir_match`): how the
compiler tests one enum value or property name against a structural schema.

Owns: a memoized walk of the IR over set-of-positions. Must not build IR nor know
schemas. (The automata have their own acceptor, `automata.nfa.ir_accepts`; the grammar
layer may not import it.)
"""

from __future__ import annotations

from structgen.grammar import ir


def ir_match(node: ir.Node, data: bytes) -> bool:
    """Whether `data` is in the language of `node`: a memoized set-of-positions walk.
    Meant for short strings (property names, enum values), not whole documents."""
    memo: dict[tuple[int, int], frozenset[int]] = {}
    n = len(data)

    def ends(x: ir.Node, p: int) -> frozenset[int]:
        key = (id(x), p)
        got = memo.get(key)
        if got is not None:
            return got
        memo[key] = frozenset()  # guards against pathological epsilon cycles
        if isinstance(x, ir.Bytes):
            out = frozenset([p + len(x.data)]) if data.startswith(x.data, p) else frozenset()
        elif isinstance(x, ir.ByteSet):
            out = frozenset()
            if p < n:
                b = data[p]
                if any(lo <= b <= hi for lo, hi in x.ranges):
                    out = frozenset([p + 1])
        elif isinstance(x, ir.Concat):
            cur = {p}
            for item in x.items:
                nxt: set[int] = set()
                for q in cur:
                    nxt |= ends(item, q)
                cur = nxt
                if not cur:
                    break
            out = frozenset(cur)
        elif isinstance(x, ir.Alt):
            acc: set[int] = set()
            for item in x.items:
                acc |= ends(item, p)
            out = frozenset(acc)
        elif isinstance(x, ir.Repeat):
            cur = {p}
            for _ in range(x.min):
                nxt = set()
                for q in cur:
                    nxt |= ends(x.item, q)
                cur = nxt
                if not cur:
                    break
            result = set(cur)
            frontier = set(cur)
            count = x.min
            while frontier and (x.max is None or count < x.max):
                nxt = set()
                for q in frontier:
                    nxt |= ends(x.item, q)
                frontier = nxt - result if x.max is None else nxt
                result |= nxt
                count += 1
            out = frozenset(result)
        elif isinstance(x, ir.Graph):
            seen = {(x.start, p)}
            stack = [(x.start, p)]
            by_src: dict[int, list] = {}
            for src, dst, label in x.edges:
                by_src.setdefault(src, []).append((dst, label))
            finals = set(x.finals)
            acc = set()
            while stack:
                s, q = stack.pop()
                if s in finals:
                    acc.add(q)
                for dst, label in by_src.get(s, ()):
                    targets = [q] if label is None else ends(label, q)
                    for r in targets:
                        if (dst, r) not in seen:
                            seen.add((dst, r))
                            stack.append((dst, r))
            out = frozenset(acc)
        elif isinstance(x, ir.Members):
            seen = {(ir.Members.START, p)}
            stack = [(ir.Members.START, p)]
            acc = set()
            while stack:
                state, q = stack.pop()
                for label, nxt in x.moves(state):
                    for r in ends(label, q):
                        if nxt is None:
                            acc.add(r)
                        elif (nxt, r) not in seen:
                            seen.add((nxt, r))
                            stack.append((nxt, r))
            out = frozenset(acc)
        elif isinstance(x, ir.Stepper):
            out = ends(x.plain(), p)
        elif isinstance(x, ir.Ref):  # JSON recursion consumes a bracket before recursing
            out = ends(x.target, p) if x.target is not None else frozenset()
        else:
            raise TypeError(f"not an IR node: {x!r}")
        memo[key] = out
        return out

    return n in ends(node, 0)
