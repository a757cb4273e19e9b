"""Byte-level NFA built from the grammar IR (Thompson construction), trimmed of dead states.

Owns: turning an `ir.Node` tree into an epsilon-NFA over bytes, removing states from
which the accepting state cannot be reached (so no path the NFA allows is a dead end),
and epsilon closures. Must not know about tokens, vocabularies or the engine.
"""

from __future__ import annotations

import sys
import time

from structgen.errors import GrammarTooLargeError
from structgen.grammar import ir


class NFA:
    """An epsilon-NFA with one start and one final state.

    `edges[s]` lists `(lo, hi, dst)` byte-range transitions, `eps[s]` epsilon targets.
    After `trim()`, every state can reach `final`.
    """

    def __init__(self) -> None:
        self.edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []
        self.start = self.new_state()
        self.final = self.start
        self._closure_cache: dict[int, frozenset[int]] = {}

    def new_state(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    @property
    def num_states(self) -> int:
        return len(self.edges)

    # ------------------------------------------------------------ closures

    def closure(self, state: int) -> frozenset[int]:
        """States reachable from `state` by epsilon moves, keeping only the ones that
        matter to a DFA: states with byte edges, and the final state."""
        cached = self._closure_cache.get(state)
        if cached is not None:
            return cached
        seen = {state}
        stack = [state]
        while stack:
            s = stack.pop()
            for t in self.eps[s]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        result = frozenset(s for s in seen if self.edges[s] or s == self.final)
        self._closure_cache[state] = result
        return result

    def closure_of(self, states) -> frozenset[int]:
        out: set[int] = set()
        for s in states:
            out |= self.closure(s)
        return frozenset(out)

    # ------------------------------------------------------------ trimming

    def trim(self) -> None:
        """Drop transitions into states that cannot reach the final state."""
        reverse: list[list[int]] = [[] for _ in range(self.num_states)]
        for s in range(self.num_states):
            for _, _, d in self.edges[s]:
                reverse[d].append(s)
            for d in self.eps[s]:
                reverse[d].append(s)
        live = {self.final}
        stack = [self.final]
        while stack:
            d = stack.pop()
            for s in reverse[d]:
                if s not in live:
                    live.add(s)
                    stack.append(s)
        for s in range(self.num_states):
            if s not in live:
                self.edges[s] = []
                self.eps[s] = []
            else:
                self.edges[s] = [e for e in self.edges[s] if e[2] in live]
                self.eps[s] = [d for d in self.eps[s] if d in live]
        self.live = live
        self._closure_cache.clear()


class _Builder:
    """Thompson construction. `build(node, start)` adds transitions out of `start`
    (never into it) and returns the state where the node's language ends."""

    def __init__(self, nfa: NFA, max_states: int, deadline: float | None):
        self.nfa = nfa
        self.max_states = max_states
        self.deadline = deadline

    def _check(self) -> None:
        if self.nfa.num_states > self.max_states:
            raise GrammarTooLargeError(
                f"grammar needs more than {self.max_states} automaton states "
                "(raise max_states, or tighten large bounds such as maxLength/maxItems)"
            )
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise GrammarTooLargeError("grammar compilation exceeded its time budget")

    def build(self, node: ir.Node, start: int) -> int:
        nfa = self.nfa
        if isinstance(node, ir.Bytes):
            cur = start
            for b in node.data:
                nxt = nfa.new_state()
                nfa.edges[cur].append((b, b, nxt))
                cur = nxt
            return cur
        if isinstance(node, ir.ByteSet):
            end = nfa.new_state()
            for lo, hi in node.ranges:
                nfa.edges[start].append((lo, hi, end))
            return end
        if isinstance(node, ir.Concat):
            cur = start
            for item in node.items:
                cur = self.build(item, cur)
            return cur
        if isinstance(node, ir.Alt):
            end = nfa.new_state()
            for item in node.items:
                branch = nfa.new_state()
                nfa.eps[start].append(branch)
                nfa.eps[self.build(item, branch)].append(end)
            self._check()
            return end
        if isinstance(node, ir.Repeat):
            return self._repeat(node, start)
        if isinstance(node, ir.Graph):
            mapped = [nfa.new_state() for _ in range(node.num_states)]
            nfa.eps[start].append(mapped[node.start])
            for src, dst, label in node.edges:
                if label is None:
                    nfa.eps[mapped[src]].append(mapped[dst])
                else:
                    entry = nfa.new_state()
                    nfa.eps[mapped[src]].append(entry)
                    nfa.eps[self.build(label, entry)].append(mapped[dst])
            end = nfa.new_state()
            for f in node.finals:
                nfa.eps[mapped[f]].append(end)
            self._check()
            return end
        raise TypeError(f"not an IR node: {node!r}")

    def _repeat(self, node: ir.Repeat, start: int) -> int:
        nfa = self.nfa
        cur = start
        for _ in range(node.min):
            cur = self.build(node.item, cur)
            self._check()
        if node.max is None:
            # A fresh hub state: the loop returns only here, never into `start`.
            hub = nfa.new_state()
            nfa.eps[cur].append(hub)
            body = nfa.new_state()
            nfa.eps[hub].append(body)
            nfa.eps[self.build(node.item, body)].append(hub)
            return hub
        end = nfa.new_state()
        for _ in range(node.max - node.min):
            nfa.eps[cur].append(end)
            entry = nfa.new_state()
            nfa.eps[cur].append(entry)
            cur = self.build(node.item, entry)
            self._check()
        nfa.eps[cur].append(end)
        return end


def build_nfa(node: ir.Node, *, max_states: int = 1_000_000, deadline: float | None = None) -> NFA:
    """Compile an IR tree to a trimmed NFA, refusing trees beyond the state budget."""
    size = ir.expanded_size(node, limit=max_states)
    if size > max_states:
        raise GrammarTooLargeError(
            f"grammar would need about {size:,}+ automaton states, over the budget of "
            f"{max_states:,} (raise max_states, or tighten bounds such as maxLength/maxItems)"
        )
    nfa = NFA()
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20_000))
    try:
        nfa.final = _Builder(nfa, max_states * 2 + 16, deadline).build(node, nfa.start)
    finally:
        sys.setrecursionlimit(old_limit)
    nfa.trim()
    return nfa


def ir_accepts(node: ir.Node, data: bytes) -> bool:
    """Whether the IR's language contains `data` (simulates the NFA; for tests)."""
    nfa = build_nfa(node)
    current = nfa.closure(nfa.start)
    for b in data:
        nxt = set()
        for s in current:
            for lo, hi, d in nfa.edges[s]:
                if lo <= b <= hi:
                    nxt.add(d)
        if not nxt:
            return False
        current = nfa.closure_of(nxt)
    return nfa.final in current
