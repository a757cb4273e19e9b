"""Which parts of a grammar IR can still produce a string.

Owns `Liveness`, the questions the automata and the covering example ask of an IR --
whether a node's language has a string, from which states of a Graph an end can be
reached and by which edges, whether an any-order object can still be closed -- and
`TreeLiveness`, which answers them by walking the IR's objects (for rules, a least
fixpoint over the Refs). `flat.FlatLiveness` answers the same questions from a
`FlatIR`'s arrays, which compiled code has worked out already.
Must not know about tokens, vocabularies or the engine.
"""

from __future__ import annotations

import time

from structgen.errors import GrammarTooLargeError
from structgen.grammar import ir


class Liveness:
    """The answers common to every source: a subclass says which nodes are non-empty
    (`nonempty`) and which states of a Graph are live (`live_states`)."""

    def __init__(self):
        self._graph_live: dict[int, tuple[frozenset[int], dict[int, list]]] = {}
        self._members_ok: dict[int, tuple[int, bool]] = {}

    def nonempty(self, node: ir.Node) -> bool:
        """Whether the node's language has at least one string."""
        raise NotImplementedError

    def live_states(self, graph: ir.Graph) -> frozenset[int]:
        """The states of `graph` from which a final state can be reached through edges
        whose labels are non-empty."""
        raise NotImplementedError

    def graph_live(self, graph: ir.Graph) -> tuple[frozenset[int], dict[int, list]]:
        """(live states, adjacency of usable edges) of a Graph (memoized): the edges
        between live states whose labels are non-empty, (dst, label) per source state
        in the graph's order."""
        cached = self._graph_live.get(id(graph))
        if cached is not None:
            return cached
        live = self.live_states(graph)
        adjacency: dict[int, list] = {}
        for s, d, lab in graph.edges:
            if s in live and d in live and (lab is None or self.nonempty(lab)):
                adjacency.setdefault(s, []).append((d, lab))
        result = self._graph_live[id(graph)] = (live, adjacency)
        return result

    def members_live(self, node: ir.Members, state: tuple[int, int]) -> bool:
        """Whether the object can still be closed from `state`: every missing required
        entry has a value, and the member count can land in min..max."""
        cached = self._members_ok.get(id(node))
        if cached is None:
            ok = sum(1 << i for i, e in enumerate(node.firsts) if self.nonempty(e))
            extra = node.extra_first is not None and self.nonempty(node.extra_first)
            cached = self._members_ok[id(node)] = (ok, extra)
        ok, extra = cached
        mask, count = state
        missing = node.required_mask & ~mask
        if missing & ~ok:
            return False
        if node.max_count is not None and count + missing.bit_count() > node.max_count:
            return False
        return extra or count + (ok & ~mask).bit_count() >= node.min_count

    def forget(self) -> None:
        """Drop the memoized graph and object answers (they read `nonempty`)."""
        self._graph_live.clear()
        self._members_ok.clear()


class TreeLiveness(Liveness):
    """Liveness worked out from the IR's objects, memoized per node."""

    def __init__(self, root: ir.Node, deadline: float | None = None):
        """deadline: a `time.monotonic()` instant past which deciding the rules raises
        GrammarTooLargeError (it may take rounds)."""
        super().__init__()
        self._nonempty: dict[int, bool] = {}
        self._solve_refs(root, deadline)

    def _solve_refs(self, root: ir.Node, deadline: float | None) -> None:
        """Decide which rules have a non-empty language: a least fixpoint, since a rule
        may refer to itself (`a: "x" a` alone produces nothing)."""
        refs = ir.refs_in(root)
        if not refs:
            return
        known = {id(r): False for r in refs}
        changed = True
        while changed:
            changed = False
            self._nonempty = dict(known)
            self.forget()  # a graph's or object's answer read the rules as last round knew them
            for ref in reversed(refs):  # a rule's uses are listed before its own
                if not known[id(ref)] and self.nonempty(ref.target):
                    # seen at once by the rules decided after it in this round; a False
                    # cached before it is redone next round
                    known[id(ref)] = self._nonempty[id(ref)] = True
                    changed = True
            if deadline is not None and time.monotonic() > deadline:
                raise GrammarTooLargeError("deciding which rules can produce text exceeded the compile's budget")
        self._nonempty = dict(known)
        self.forget()

    def nonempty(self, node: ir.Node) -> bool:
        key = id(node)
        cached = self._nonempty.get(key)
        if cached is not None:
            return cached
        if isinstance(node, ir.Ref):  # only while solving: not proven non-empty yet
            return False
        if isinstance(node, (ir.Bytes, ir.ByteSet)):
            result = True
        elif isinstance(node, ir.Concat):
            result = all(self.nonempty(item) for item in node.items)
        elif isinstance(node, ir.Alt):
            result = any(self.nonempty(item) for item in node.items)
        elif isinstance(node, ir.Repeat):
            result = node.min == 0 or self.nonempty(node.item)
        elif isinstance(node, ir.Graph):
            result = node.start in self.graph_live(node)[0]
        elif isinstance(node, ir.Members):
            result = self.members_live(node, ir.Members.START)
        elif isinstance(node, ir.Stepper):
            result = True  # every position can reach an end (the Stepper contract)
        else:
            raise TypeError(f"not an IR node: {node!r}")
        self._nonempty[key] = result
        return result

    def live_states(self, graph: ir.Graph) -> frozenset[int]:
        usable = [(s, d) for s, d, lab in graph.edges if lab is None or self.nonempty(lab)]
        live = set(graph.finals)
        changed = True
        while changed:
            changed = False
            for s, d in usable:
                if d in live and s not in live:
                    live.add(s)
                    changed = True
        return frozenset(live)
