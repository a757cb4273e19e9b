"""Automata over code points (`CharNFA`): where the IR has no operator for what a
string keyword needs -- intersecting several patterns, bounding their lengths,
complementing `patternProperties`, testing property names, first-character sets --
and their lowering to a JSON string body (`CharNFA.to_ir`).

Owns: regex AST -> epsilon-free NFA (JSON Schema search semantics and anchors), the
product, union and complement constructions, and the (state, count) graphs that bound
lengths. Must not know schemas or the compiler: patterns in, NFAs and IR out.
"""

from __future__ import annotations

import functools
from typing import Iterator

from structgen.errors import GrammarTooLargeError
from structgen.grammar import charset as C
from structgen.grammar import ir
from structgen.grammar import regex as rx
from structgen.grammar.json_schema.graphs import trimmed_graph_ids

# A pattern under a maxLength of at least this many characters is bounded (`to_bounded_ir`):
# below it a state rarely has a twin far enough from the bound to share its mask, and the
# explicit (state, length) graph is small.
BOUNDED_MIN_LENGTH = 16


class CharNFA:
    """An epsilon-free NFA over code points (edges carry CharSets), built from the
    regex AST of `structgen.grammar.regex` with JSON Schema `pattern` (search)
    semantics. Used where the IR has no operator: intersecting several patterns,
    bounding lengths, testing property names, first-character sets."""

    __slots__ = ("n", "start", "finals", "edges")

    def __init__(self, n: int, start: int, finals: set[int], edges: list[list[tuple[tuple, int]]]):
        self.n = n
        self.start = start
        self.finals = finals
        self.edges = edges

    # -- construction

    @classmethod
    def from_pattern(cls, pattern: str, search: bool = True, budget: int = 1_000_000) -> "CharNFA":
        """The strings `pattern` matches (anywhere in them, with `search`)."""
        b = _EpsilonNFA(budget)
        s0 = b.new()
        r_start = b.new()
        if search:
            b.pad(s0, r_start, s0)
        else:
            b.eps[s0].append((r_start, ""))
        r_end = b.build(rx.parse_regex(pattern), r_start)
        f = b.new()
        if search:
            b.pad(r_end, f, f)
        else:
            b.eps[r_end].append((f, ""))
        return cls._eliminate(b.chars, b.eps, s0, f)

    @staticmethod
    def _eliminate(chars, eps, start: int, final: int) -> "CharNFA":
        """Remove epsilons, resolving anchors with two flags: `started` (a character was
        consumed: '^' no longer matches) and `ended` ('$' passed: no more characters)."""
        index: dict[tuple[int, int, int], int] = {}
        order: list[tuple[int, int, int]] = []

        def sid(key) -> int:
            got = index.get(key)
            if got is None:
                got = index[key] = len(order)
                order.append(key)
            return got

        closure_cache: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}

        def closure(key):
            got = closure_cache.get(key)
            if got is not None:
                return got
            seen = {key}
            stack = [key]
            while stack:
                q, st, en = stack.pop()
                for dst, kind in eps[q]:
                    if kind == "^" and st:
                        continue
                    nk = (dst, st, 1 if kind == "$" else en)
                    if nk not in seen:
                        seen.add(nk)
                        stack.append(nk)
            closure_cache[key] = out = list(seen)
            return out

        edges: list[list[tuple[tuple, int]]] = []
        finals: set[int] = set()
        sid((start, 0, 0))
        i = 0
        while i < len(order):
            key = order[i]
            out: dict[int, list] = {}
            for q, st, en in closure(key):
                if q == final:
                    finals.add(i)
                if en:
                    continue
                for cs, dst in chars[q]:
                    out.setdefault(sid((dst, 1, 0)), []).append(cs)
            edges.append([(C.union(*css), d) for d, css in out.items()])
            i += 1
        return CharNFA(len(order), 0, finals, edges).trim()

    def trim(self) -> "CharNFA":
        """Keep states that are reachable and can reach a final state; renumber."""
        reach = {self.start}
        stack = [self.start]
        while stack:
            s = stack.pop()
            for _, d in self.edges[s]:
                if d not in reach:
                    reach.add(d)
                    stack.append(d)
        rev: dict[int, list[int]] = {}
        for s in reach:
            for _, d in self.edges[s]:
                rev.setdefault(d, []).append(s)
        live = {f for f in self.finals if f in reach}
        stack = list(live)
        while stack:
            d = stack.pop()
            for s in rev.get(d, ()):
                if s not in live:
                    live.add(s)
                    stack.append(s)
        if self.start not in live:
            return CharNFA(1, 0, set(), [[]])
        ids = {s: k for k, s in enumerate(sorted(live))}
        edges = [[(cs, ids[d]) for cs, d in self.edges[s] if d in live] for s in sorted(live)]
        return CharNFA(len(ids), ids[self.start], {ids[f] for f in live if f in self.finals}, edges)

    # -- queries

    def is_empty(self) -> bool:
        return not self.finals

    def matches(self, text: str) -> bool:
        cur = {self.start}
        for ch in text:
            cp = ord(ch)
            nxt = set()
            for s in cur:
                for cs, d in self.edges[s]:
                    if C.contains(cs, cp):
                        nxt.add(d)
            if not nxt:
                return False
            cur = nxt
        return bool(cur & self.finals)

    def first_chars(self):
        return C.union(*(cs for cs, _ in self.edges[self.start])) if self.edges[self.start] else C.NO_CHAR

    def length_range(self) -> tuple[int, int | None]:
        """Shortest and longest accepted length in code points (None = unbounded)."""
        if not self.finals:
            return (0, 0)
        dist = {self.start: 0}
        frontier = [self.start]
        shortest = 0 if self.start in self.finals else None
        d = 0
        while frontier and shortest is None:
            d += 1
            nxt = []
            for s in frontier:
                for _, t in self.edges[s]:
                    if t not in dist:
                        dist[t] = d
                        nxt.append(t)
                        if t in self.finals and shortest is None:
                            shortest = d
            frontier = nxt
        # longest: a cycle among (trimmed) states means unbounded
        color: dict[int, int] = {}
        longest: dict[int, int] = {}
        order: list[int] = []
        stack = [(self.start, 0)]
        while stack:
            s, k = stack.pop()
            if k == 0:
                if color.get(s) == 2:
                    continue
                if color.get(s) == 1:
                    continue
                color[s] = 1
                stack.append((s, 1))
                for _, t in self.edges[s]:
                    c = color.get(t)
                    if c == 1:
                        return (shortest or 0, None)
                    if c is None:
                        stack.append((t, 0))
            else:
                color[s] = 2
                order.append(s)
        for s in order:  # post-order: successors first
            best = 0 if s in self.finals else -1
            for _, t in self.edges[s]:
                if longest.get(t, -1) >= 0:
                    best = max(best, longest[t] + 1)
            longest[s] = best
        return (shortest or 0, max(longest.get(self.start, 0), 0))

    def intersect(self, other: "CharNFA") -> "CharNFA":
        index = {(self.start, other.start): 0}
        order = [(self.start, other.start)]
        edges: list[list[tuple[tuple, int]]] = []
        finals: set[int] = set()
        i = 0
        while i < len(order):
            a, b = order[i]
            if a in self.finals and b in other.finals:
                finals.add(i)
            out = []
            for cs, key in _edge_pairs(self.edges[a], other.edges[b]):
                if key not in index:
                    index[key] = len(order)
                    order.append(key)
                out.append((cs, index[key]))
            edges.append(out)
            i += 1
            if len(order) > 200_000:
                raise GrammarTooLargeError("intersection of string patterns is too large")
        return CharNFA(len(order), 0, finals, edges).trim()

    def union(self, other: "CharNFA") -> "CharNFA":
        """Accepts what either accepts (a fresh start copying both starts' edges)."""
        off = self.n
        edges = [list(e) for e in self.edges] + [[(cs, d + off) for cs, d in e] for e in other.edges]
        start_edges = list(self.edges[self.start]) + [(cs, d + off) for cs, d in other.edges[other.start]]
        edges.append(start_edges)
        finals = set(self.finals) | {f + off for f in other.finals}
        if self.start in self.finals or other.start in other.finals:
            finals.add(self.n + other.n)
        return CharNFA(self.n + other.n + 1, self.n + other.n, finals, edges)

    def complement(self, limit: int = 20_000) -> "CharNFA":
        """Every string this NFA rejects: subset construction over code point atoms
        into a complete DFA (with a dead state), finals flipped."""
        start = frozenset([self.start])
        index = {start: 0}
        order = [start]
        edges: list[list] = []
        accepting: set[int] = set()
        i = 0
        while i < len(order):
            cur = order[i]
            if cur & self.finals:
                accepting.add(i)
            groups = _one_state_moves(self.edges[next(iter(cur))]) if len(cur) == 1 else None
            if groups is None:
                groups = {}
                for a, b, tgt in _atoms(self.edges[q] for q in cur):
                    groups.setdefault(tgt, []).append((a, b - 1))
            out = []
            for tgt, ranges in groups.items():
                if tgt not in index:
                    index[tgt] = len(order)
                    order.append(tgt)
                    if len(order) > limit:
                        raise GrammarTooLargeError("complement of patternProperties patterns is too large")
                out.append((_joined(ranges), index[tgt]))
            edges.append(out)
            i += 1
        finals = {k for k in range(len(order)) if k not in accepting}
        return CharNFA(len(order), 0, finals, edges).trim()

    @staticmethod
    def any_string() -> "CharNFA":
        return CharNFA(1, 0, {0}, [[(C.ANY_CHAR, 0)]])

    def to_ir(self, min_len: int = 0, max_len: int | None = None, *, max_states: int = 2_000_000, tick=None) -> ir.Node:
        """JSON string body (no quotes) of the accepted strings whose length (code
        points) is within [min_len, max_len]: a Graph, each edge one JSON char."""
        cap = max_len if max_len is not None else min_len
        if self.n * (cap + 1) > max_states:
            raise GrammarTooLargeError(
                f"string pattern with length bounds needs {self.n * (cap + 1):,} states (over {max_states:,})"
            )
        targets = self._targets()
        order, merged = self._count_product(targets, cap, max_len, tick)
        finals = [k for k, (s, c) in enumerate(order) if s in self.finals and c >= min_len]
        if not finals:
            return ir.NOTHING
        # trim states that cannot reach a final
        live = ir.reaching(finals, [(a, b) for a, b, _ in merged])
        if 0 not in live:
            return ir.NOTHING
        labels: dict = {}

        def label(css: list) -> ir.Node:
            cs = css[0] if len(css) == 1 else C.union(*css)
            got = labels.get(cs)
            if got is None:
                got = labels[cs] = C.json_char_ir(cs)
            return got

        edges = [(a, b, label(css)) for a, b, css in merged if a in live and b in live]
        return trimmed_graph_ids(len(order), 0, finals, edges)[0]

    def to_bounded_ir(self, min_len: int, max_len: int, *, max_states: int = 2_000_000, tick=None) -> ir.Node:
        """The language of `to_ir(min_len, max_len)` without its (state, length) graph:
        the graph counting lengths only up to `min_len`, bounded to `max_len` characters
        (`ir.bounded`: the automata count them as they reach each pair, and a pair far
        from the bound shares its mask with the unbounded twin's state)."""
        graph = self.to_ir(min_len, None, max_states=max_states, tick=tick)
        return ir.bounded(graph, max_len) if isinstance(graph, ir.Graph) else graph

    def _targets(self) -> list[list[tuple[int, list]]]:
        """Per state: each next state, with the char sets of the edges that lead there
        (parallel edges merged), in the order of the edges."""
        out = []
        for s in range(self.n):
            by_target: dict[int, list] = {}
            for cs, t in self.edges[s]:
                by_target.setdefault(t, []).append(cs)
            out.append(list(by_target.items()))
        return out

    def _count_product(self, targets: list[list[tuple[int, list]]], cap: int, stop: int | None = None,
                       tick=None) -> tuple[list[tuple[int, int]], list[tuple[int, int, list]]]:
        """The graph over (state, characters read) pairs reachable from (start, 0), the
        count saturating at `cap` and no pair left once its count reaches `stop`: the
        pairs by number (in the order met), and the edges between numbers with the char
        sets of each (`targets`, from `_targets`)."""
        if cap == 0 and stop is None:
            return self._renumbered(targets, tick)
        index: dict[tuple[int, int], int] = {(self.start, 0): 0}
        pairs = [(self.start, 0)]
        edges: list[tuple[int, int, list]] = []
        for i, (s, c) in enumerate(pairs):  # (grows while it runs)
            if tick is not None and not (i + 1) & 1023:
                tick()
            if stop is not None and c >= stop:
                continue
            c2 = min(c + 1, cap)
            for t, css in targets[s]:
                key = (t, c2)
                if key not in index:
                    index[key] = len(pairs)
                    pairs.append(key)
                edges.append((i, index[key], css))
        return pairs, edges

    def _renumbered(self, targets: list[list[tuple[int, list]]],
                    tick=None) -> tuple[list[tuple[int, int]], list[tuple[int, int, list]]]:
        """`_count_product` where nothing is counted (every pair's count is 0): the
        states reachable from the start, numbered in the order met, by a list."""
        number = [-1] * self.n
        number[self.start] = 0
        states = [self.start]
        edges: list[tuple[int, int, list]] = []
        for i, s in enumerate(states):  # (grows while it runs)
            if tick is not None and not (i + 1) & 1023:
                tick()
            for t, css in targets[s]:
                k = number[t]
                if k < 0:
                    k = number[t] = len(states)
                    states.append(t)
                edges.append((i, k, css))
        return [(s, 0) for s in states], edges


class _EpsilonNFA:
    """A regex AST's NFA with epsilon moves (anchors are labelled ones), state by state,
    for `CharNFA.from_pattern`: `chars[s]` its (char set, next) edges, `eps[s]` its
    (next, anchor kind or "") moves. An object rather than closures in from_pattern,
    whose recursion would leave a reference cycle holding both lists after every compile."""

    __slots__ = ("chars", "eps", "budget")

    def __init__(self, budget: int):
        self.chars: list[list[tuple[tuple, int]]] = []
        self.eps: list[list[tuple[int, str]]] = []
        self.budget = budget

    def new(self) -> int:
        self.chars.append([])
        self.eps.append([])
        if len(self.chars) > self.budget:
            raise GrammarTooLargeError("pattern automaton too large")
        return len(self.chars) - 1

    def pad(self, a: int, b: int, loop: int) -> None:
        """Any characters between `a` and `b` (search semantics): a loop on `loop`."""
        self.chars[loop].append((C.ANY_CHAR, loop))
        self.eps[a].append((b, ""))

    def build(self, node, s: int) -> int:
        """The states of `node` from state `s`; returns its end state."""
        chars, eps = self.chars, self.eps
        if isinstance(node, rx.Chars):
            e = self.new()
            chars[s].append((node.cs, e))
            return e
        if isinstance(node, rx.Anchor):
            e = self.new()
            eps[s].append((e, node.kind))
            return e
        if isinstance(node, rx.Sequence):
            cur = s
            for item in node.items:
                cur = self.build(item, cur)
            return cur
        if isinstance(node, rx.Alternation):
            end = self.new()
            for item in node.items:
                b = self.new()
                eps[s].append((b, ""))
                eps[self.build(item, b)].append((end, ""))
            return end
        if isinstance(node, rx.Quantified):
            return self.quantified(node, s)
        raise TypeError(f"not a regex AST node: {node!r}")

    def quantified(self, node, s: int) -> int:
        cur = s
        for _ in range(node.min):
            cur = self.build(node.item, cur)
        if node.max is None:
            hub = self.new()
            self.eps[cur].append((hub, ""))
            b = self.new()
            self.eps[hub].append((b, ""))
            self.eps[self.build(node.item, b)].append((hub, ""))
            return hub
        end = self.new()
        for _ in range(node.max - node.min):
            self.eps[cur].append((end, ""))
            b = self.new()
            self.eps[cur].append((b, ""))
            cur = self.build(node.item, b)
        self.eps[cur].append((end, ""))
        return end


def _one_state_moves(edges) -> dict[frozenset, list[tuple[int, int]]] | None:
    """What `complement` makes of a subset of one NFA state whose edges take disjoint
    characters (most states of a pattern's NFA): each target, as a set of one, with its
    ranges, and the empty set with the characters no edge takes, in the order of their
    first code point, as the sweep of `_atoms` gives them. None where edges overlap."""
    groups: dict[frozenset, list[tuple[int, int]]] = {}
    after = 0  # the first code point not yet passed
    for lo, hi, target in sorted((lo, hi, t) for cs, t in edges for lo, hi in cs):
        if lo < after:
            return None
        if lo > after:
            groups.setdefault(_NO_STATES, []).append((after, lo - 1))
        groups.setdefault(frozenset((target,)), []).append((lo, hi))
        after = hi + 1
    if after <= C.MAX_CODE_POINT:
        groups.setdefault(_NO_STATES, []).append((after, C.MAX_CODE_POINT))
    return groups


_NO_STATES: frozenset = frozenset()


def _joined(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The CharSet of ascending, disjoint ranges (a group of `complement`'s): those
    that touch joined, as `C.charset` would, without its sorting and checks."""
    out = [ranges[0]]
    for lo, hi in ranges[1:]:
        if lo == out[-1][1] + 1:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _atoms(edge_lists) -> Iterator[tuple[int, int, frozenset]]:
    """The code points 0..MAX_CODE_POINT cut where some edge's ranges start or end:
    (first, one past the last, the targets of the edges that take them), ascending. A
    sweep: each cut changes the edges under way by those starting or ending there."""
    changes: dict[int, list[tuple[int, int]]] = {}
    for edges in edge_lists:
        for cs, target in edges:
            for lo, hi in cs:
                changes.setdefault(lo, []).append((target, 1))
                changes.setdefault(hi + 1, []).append((target, -1))
    cuts = sorted({0, C.MAX_CODE_POINT + 1} | changes.keys())
    under_way: dict[int, int] = {}  # target -> edges to it under way (none: no entry)
    for a, b in zip(cuts, cuts[1:]):
        for target, step in changes.get(a, ()):
            count = under_way.get(target, 0) + step
            if count:
                under_way[target] = count
            else:
                del under_way[target]
        yield a, b, frozenset(under_way)


def _edge_pairs(left: list, right: list) -> list[tuple[tuple, tuple[int, int]]]:
    """The edges of a product state: (the characters both edges take, (the two targets)),
    in the order of `left`'s edges, then `right`'s. A side whose one edge takes every
    character (the sink of `excluding_nfa`, where most of a product's states are) keeps
    the other side's sets as they are."""
    if len(right) == 1 and right[0][0] == C.ANY_CHAR:
        target = right[0][1]
        return [(cs, (a2, target)) for cs, a2 in left if cs]
    if len(left) == 1 and left[0][0] == C.ANY_CHAR:
        target = left[0][1]
        return [(cs, (target, b2)) for cs, b2 in right if cs]
    pairs = []
    for cs1, a2 in left:
        for cs2, b2 in right:
            cs = C.intersect(cs1, cs2)
            if cs:
                pairs.append((cs, (a2, b2)))
    return pairs


@functools.lru_cache(maxsize=512)
def pattern_automaton(pattern: str) -> CharNFA:
    """`CharNFA.from_pattern(pattern)`, remembered: a CharNFA is never changed once
    built, and schemas repeat the patterns of their formats. Kept in tuples, which the
    garbage collector stops tracking, where lists of lists would be rescanned in every
    full collection for as long as the pattern stays here (~30 objects a pattern)."""
    nfa = CharNFA.from_pattern(pattern)
    return CharNFA(nfa.n, nfa.start, frozenset(nfa.finals), tuple(tuple(edges) for edges in nfa.edges))


def excluding_nfa(names: list[str], first=None, allow_empty: bool = True) -> CharNFA:
    """Char NFA (a DFA, in fact) of every string not in `names`; with `first`, the
    first character must be in that set (the empty string only if allow_empty)."""
    trie: list[dict] = [{}]
    terminal: set[int] = set()
    for name in names:
        t = 0
        for ch in name:
            nxt = trie[t].get(ch)
            if nxt is None:
                nxt = len(trie)
                trie.append({})
                trie[t][ch] = nxt
            t = nxt
        terminal.add(t)
    sink = len(trie)
    edges: list[list] = []
    for t, children in enumerate(trie):
        allowed = first if (t == 0 and first is not None) else C.ANY_CHAR
        out = [(C.charset([ord(ch)]), d) for ch, d in children.items() if C.contains(allowed, ord(ch))]
        other = C.difference(allowed, C.charset(ord(ch) for ch in children))
        if other:
            out.append((other, sink))
        edges.append(out)
    edges.append([(C.ANY_CHAR, sink)])
    finals = {t for t in range(len(trie)) if t not in terminal and (t != 0 or allow_empty)} | {sink}
    return CharNFA(len(trie) + 1, 0, finals, edges).trim()

def length_nfa(lo: int, hi: int | None) -> CharNFA:
    if hi is None:
        n = lo + 1
        edges = [[(C.ANY_CHAR, min(i + 1, lo))] for i in range(n)]
        return CharNFA(n, 0, {lo}, edges)
    edges = [[(C.ANY_CHAR, i + 1)] if i < hi else [] for i in range(hi + 1)]
    return CharNFA(hi + 1, 0, set(range(lo, hi + 1)), edges)
