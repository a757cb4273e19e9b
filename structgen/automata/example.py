"""One example sentence of a grammar, written to visit as much of its structure as it can.

Owns `covering_example`: bytes of the IR's language (or a prefix of a sentence, where
the walk stops early) that take every optional object property once, an array element
(two where the array is a plain repetition), the branch of an alternation with the most
structure in it, and short values. It is what a
compiled grammar warms its token tables along (`CompiledGrammar.warm`), so that the
first visit of the states every output passes through -- the start of each key, the
start of each value -- is paid while compiling instead of in the middle of decoding.

An example is a hint, never trusted: whoever uses it walks it through the automaton and
stops where it leaves the language. Must not know about tokens, DFAs or the engine;
reads the NFA only for which nodes have a non-empty language.
"""

from __future__ import annotations

from collections import deque

from structgen.automata.nfa import LazyNFA
from structgen.grammar import ir

MAX_EXAMPLE_BYTES = 8192
MAX_RULE_RECURSION = 3  # a rule is entered at most this many times within itself
MAX_RULE_NESTING = 200  # rules entered within one another, in all
# Bytes a ByteSet is written as, first match wins: plain letters and digits keep string
# values and numbers short and ordinary.
_PREFERRED = b"a0A "


class _Stop(Exception):
    """The example ends here (too long, too deep, or a node it does not write)."""


def covering_example(node: ir.Node, nfa: LazyNFA, limit: int = MAX_EXAMPLE_BYTES) -> bytes:
    """A sentence of `node`'s language visiting its optional parts, or a prefix of one."""
    out = bytearray()
    try:
        _Writer(nfa, out, limit).write(node, 0)
    except (_Stop, RecursionError):
        pass
    return bytes(out)


class _Writer:
    def __init__(self, nfa: LazyNFA, out: bytearray, limit: int):
        self.nfa = nfa
        self.out = out
        self.limit = limit
        self.active: dict[int, int] = {}  # rule -> times it is being written within itself
        self.structure: dict[int, bool] = {}  # memo of `_is_structure`, by node id
        # Choices that depend only on the node (IR nodes are shared, and a string's
        # character is written many times): an Alt's branch by (id, plain), a Graph's
        # labels by id
        self.branches: dict[tuple[int, bool], ir.Node] = {}
        self.routes: dict[int, list[ir.Node]] = {}

    def has_structure(self, node: ir.Node) -> bool:
        return _is_structure(node, self.structure)

    def emit(self, data: bytes) -> None:
        self.out += data
        if len(self.out) > self.limit:
            raise _Stop

    def write(self, node: ir.Node, depth: int, plain: bool = False) -> None:
        """Write one sentence of `node`. `plain`: inside a lexeme (one character of a
        string), where the first branch is the ordinary character, not an escape."""
        plain = plain or ir.is_lexeme(node)
        if isinstance(node, ir.Bytes):
            self.emit(node.data)
        elif isinstance(node, ir.ByteSet):
            self.emit(bytes([_pick_byte(node.ranges)]))
        elif isinstance(node, ir.Concat):
            for item in node.items:
                self.write(item, depth, plain)
        elif isinstance(node, ir.Alt):
            nested = plain or depth > 0
            branch = self.branches.get((id(node), nested))
            if branch is None:
                branch = self.branches[id(node), nested] = self._branch(node, nested)
            self.write(branch, depth, plain)
        elif isinstance(node, ir.Repeat):
            self._repeat(node, depth)
        elif isinstance(node, ir.Graph):
            route = self.routes.get(id(node))
            if route is None:
                route = self.routes[id(node)] = self._route(node)
            for label in route:
                if label is None:
                    raise _Stop
                self.write(label, depth)
        elif isinstance(node, ir.Members):
            self._members(node, depth)
        elif isinstance(node, ir.Ref):
            times = self.active.get(id(node), 0)
            if times >= MAX_RULE_RECURSION or depth >= MAX_RULE_NESTING:
                raise _Stop
            self.active[id(node)] = times + 1
            self.write(node.target, depth + 1)
            self.active[id(node)] = times
        elif isinstance(node, ir.Stepper):  # an undeclared key's name: written by its plain form
            self.write(node.plain(), depth, plain)
        else:
            raise _Stop

    def _branch(self, alt: ir.Alt, plain: bool) -> ir.Node:
        """The first branch with structure in it (an object or array over null or a
        scalar), else the first that writes something, else the first usable one.
        `plain` (inside a character, or inside a recursive rule such as "any JSON
        value", whose structure would only nest deeper): the first branch without
        structure that writes something, else the first usable one."""
        live = [item for item in alt.items if self.nfa.nonempty(item)]
        if not live:
            raise _Stop
        if plain:
            return next((item for item in live if not ir.is_empty(item) and not self.has_structure(item)), live[0])
        return (next((item for item in live if self.has_structure(item)), None)
                or next((item for item in live if not ir.is_empty(item)), live[0]))

    def _repeat(self, node: ir.Repeat, depth: int) -> None:
        """At least once (an optional part is visited); twice where the item is more than a
        byte or two (an array's elements: the state after the first separator is visited)."""
        if not self.nfa.nonempty(node.item):
            if node.min:
                raise _Stop
            return
        wanted = 2 if self.has_structure(node.item) else 1
        count = max(node.min, wanted)
        if node.max is not None:
            count = min(count, node.max)
        for _ in range(count):
            self.write(node.item, depth)

    def _route(self, graph: ir.Graph) -> list[ir.Node]:
        """The labels of a path from start to a final state through states not visited
        yet, taking at each one an edge with structure in its label (the next property's
        value, an array element), else an edge into a final state, else any labelled
        edge (a separator), else an epsilon edge (skipping what the example writes
        anyway); failing all, the shortest way out. At the start only, an edge whose
        next state goes on with structure comes before the way out: a map (an object of
        undeclared properties only) is written with one property, not empty. None
        last: the path cannot end (the example stops there)."""
        live, adjacency = self.nfa.graph_live(graph)
        if graph.bound is not None:  # a bounded graph: a way with the fewest labels, which fits the bound
            return _fewest_labels(graph, adjacency)
        state, seen, labels = graph.start, {graph.start}, []

        def leads_to_structure(dst: int) -> bool:
            return any(d in live and d not in seen and lab is not None and self.has_structure(lab)
                       for d, lab in adjacency.get(dst, ()))

        while True:
            moves = [(dst, label) for dst, label in adjacency.get(state, ()) if dst in live and dst not in seen]
            choice = (
                next(((d, lab) for d, lab in moves if lab is not None and self.has_structure(lab)), None)
                or (next(((d, lab) for d, lab in moves if lab is not None and leads_to_structure(d)), None)
                    if state == graph.start else None)
                or next(((d, lab) for d, lab in moves if d in graph.finals), None)
                or next(((d, lab) for d, lab in moves if lab is not None), None)
                or next(iter(moves), None)
            )
            if choice is None:
                if state not in graph.finals:
                    exit_path = _shortest_exit(graph, adjacency, live, state)
                    labels += [None] if exit_path is None else [label for _, label in exit_path if label is not None]
                return labels
            state, label = choice
            seen.add(state)
            if label is not None:
                labels.append(label)

    def _members(self, node: ir.Members, depth: int) -> None:
        """The declared members in order, no undeclared one, then the closing bracket."""
        state = ir.Members.START
        while True:
            moves = node.moves(state)
            entry = next(
                (
                    (label, nxt)
                    for label, nxt in moves
                    if nxt is not None and nxt[0] != state[0] and self.nfa.nonempty(label)
                    and self.nfa.members_live(node, nxt)
                ),
                None,
            )
            if entry is None:
                close = next((label for label, nxt in moves if nxt is None), None)
                if close is None:
                    raise _Stop  # only undeclared members would keep the object valid
                self.write(close, depth)
                return
            label, state = entry
            self.write(label, depth)


def _fewest_labels(graph: ir.Graph, adjacency: dict) -> list[ir.Node]:
    """The labels of a path from start to a final state with the fewest labels (a
    bounded graph's `need`: each step keeps to a state one label, or no label, nearer)."""
    need, state, labels = graph.bound.need, graph.start, []
    while need[state]:
        step = next(((dst, label) for dst, label in adjacency.get(state, ())
                     if need[dst] + (label is not None) == need[state]), None)
        if step is None:  # (its nearest way passes an empty label: the example stops here)
            return labels + [None]
        state, label = step
        if label is not None:
            labels.append(label)
    return labels


def _shortest_exit(graph: ir.Graph, adjacency: dict, live, state: int) -> list:
    """The edges (dst, label) of a shortest path from `state` to a final state; None
    where there is none."""
    back = {state: None}
    queue = deque([state])
    while queue:
        cur = queue.popleft()
        if cur in graph.finals and cur != state:
            path = []
            while back[cur] is not None:
                prev, label = back[cur]
                path.append((cur, label))
                cur = prev
            return path[::-1]
        for dst, label in adjacency.get(cur, ()):
            if dst in live and dst not in back:
                back[dst] = (cur, label)
                queue.append(dst)
    return None


def _pick_byte(ranges) -> int:
    for b in _PREFERRED:
        if any(lo <= b <= hi for lo, hi in ranges):
            return b
    return ranges[0][0]


def _is_structure(node: ir.Node, memo: dict[int, bool]) -> bool:
    """Whether a node holds more than characters: an object, an array, a string value
    (a repeated character), a rule -- not a letter, a digit run, an escape or a space.
    (Only a Ref can lead back to a node above it, and a Ref is structure: no cycles.)"""
    got = memo.get(id(node))
    if got is None:
        if isinstance(node, (ir.Bytes, ir.ByteSet)) or ir.is_lexeme(node):
            got = False
        elif isinstance(node, (ir.Concat, ir.Alt)):
            got = any(_is_structure(item, memo) for item in node.items)
        elif isinstance(node, ir.Repeat):
            got = ir.is_lexeme(node.item) or _is_structure(node.item, memo)
        else:  # Graph, Members, Ref, Stepper
            got = True
        memo[id(node)] = got
    return got
