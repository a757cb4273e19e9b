"""The byte-level grammar IR that every front-end lowers to.

A grammar is a tree (a graph, once `Ref`s recurse) of these node kinds over *bytes* (never characters: a token may
end in the middle of a UTF-8 character):

    Bytes(b"...")            a literal byte string
    ByteSet(((lo, hi), ...)) one byte from a union of inclusive ranges
    Concat((a, b, ...))      a then b then ...
    Alt((a, b, ...))         a or b or ...
    Repeat(x, min, max)      x repeated min..max times (max None = unbounded)
    Ref(name) -> target       a named rule whose body may refer back to itself
                             (context-free grammars; the lazy NFA becomes a pushdown)
    Graph(n, start, finals, edges)
                             a small explicit automaton whose edges carry subtrees
                             (edge label None = epsilon); lets front-ends share
                             structure that a tree would copy (e.g. optional object
                             properties, where a tree needs O(n^2) copies). With a
                             `Bound`, its paths read at most so many labels (a pattern
                             under a maxLength), counted as the automata reach them
    Members(entries, ...)    the members of a JSON object in any order: each entry at
                             most once, an optional extra member any number of times;
                             its states (entries written, member count) are made only
                             when reached, since there are 2^n of them
    Stepper                  a node that runs its own small automaton (a subclass says
                             how it moves from each of its positions), for languages
                             whose tree of basic nodes is costly to determinize

`EMPTY` (the empty string) is `Concat(())`; `NOTHING` (the empty language) is `Alt(())`.

Front-ends (regex, JSON Schema, choice) build trees with the smart constructors
`lit`, `byteset`, `seq`, `alt`, `rep`, `opt`, which flatten and simplify. Nodes compare
by identity; share a subtree by reusing the object. A front-end marks the finite nodes
it builds once and reuses everywhere (`mark_lexeme`: one JSON string character), a
hint the automata may use to share work between grammars. This module owns the node
types, that registry and size accounting; it knows nothing of automata, tokens or the
engine.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Sequence


class Node:
    __slots__ = ()


class Bytes(Node):
    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = bytes(data)

    def __repr__(self) -> str:
        return f"Bytes({self.data!r})"


class ByteSet(Node):
    __slots__ = ("ranges",)

    def __init__(self, ranges: tuple[tuple[int, int], ...]):
        self.ranges = ranges

    def __repr__(self) -> str:
        return f"ByteSet({self.ranges!r})"


class Concat(Node):
    __slots__ = ("items",)

    def __init__(self, items: tuple[Node, ...]):
        self.items = items

    def __repr__(self) -> str:
        return f"Concat({self.items!r})"


class Alt(Node):
    __slots__ = ("items",)

    def __init__(self, items: tuple[Node, ...]):
        self.items = items

    def __repr__(self) -> str:
        return f"Alt({self.items!r})"


class Repeat(Node):
    """`item` min..max times (max None: unbounded). `twin`, optional: the same item from
    min times on without a bound, set by a builder whose item reads at least one byte
    each time (a JSON string's characters under a maxLength), so that the automaton can
    give the counts a token cannot take past max one mask (`flat.FlatDFA.twin_of`)."""

    __slots__ = ("item", "min", "max", "twin")

    def __init__(self, item: Node, min: int, max: int | None):
        self.item = item
        self.min = min
        self.max = max
        self.twin: Repeat | None = None

    def __repr__(self) -> str:
        return f"Repeat({self.item!r}, {self.min}, {self.max})"


class Graph(Node):
    """States 0..num_states-1 joined by edges (src, dst, label node, or None for an
    empty move); starts at `start`, may end at `finals`. `free`, optional: per state, a
    set of bytes (bit b for byte b) every string of which it reads without leaving the
    language, as `Stepper.free_bytes` says of a position (0: none claimed)."""

    __slots__ = ("num_states", "start", "finals", "edges", "free", "bound")

    def __init__(
        self,
        num_states: int,
        start: int,
        finals: tuple[int, ...],
        edges: tuple[tuple[int, int, "Node | None"], ...],
        free: tuple[int, ...] | None = None,
    ):
        self.num_states = num_states
        self.start = start
        self.finals = tuple(finals)
        self.edges = tuple(edges)
        self.free = None if free is None else tuple(free)
        self.bound: Bound | None = None  # set by `bounded`: at most so many labels on a path
        if self.free is not None and len(self.free) != num_states:
            raise ValueError("graph `free` needs one entry per state")
        for src, dst, _ in self.edges:
            if not (0 <= src < num_states and 0 <= dst < num_states):
                raise ValueError(f"graph edge ({src}, {dst}) outside 0..{num_states - 1}")

    def __repr__(self) -> str:
        return f"Graph({self.num_states}, {self.start}, {self.finals}, {self.edges!r})"


class Bound:
    """A Graph whose paths may read at most `max` labels (each labelled edge one: a JSON
    string's characters under a maxLength), counted lazily: a state of the language is a
    (graph state, labels read) pair, made only when an automaton reaches it, where an
    explicit product would have a state per count. `need[s]`: the fewest labels from
    graph state s to a final -- (s, c) goes on only where c + need[s] <= max, so every
    pair reached can still end. `twin`: the same graph without the bound; from (s, c)
    with c + n <= `zone_top` (max less the largest need), every string of at most n
    labels is read as from the twin's s, since the bound can bind only past zone_top."""

    __slots__ = ("max", "need", "twin", "zone_top")

    def __init__(self, max_labels: int, need: Sequence[int], twin: "Graph"):
        self.max, self.need, self.twin = max_labels, tuple(need), twin
        self.zone_top = max_labels - max((n for n in need if n < _FAR), default=0)


def bounded(graph: Graph, max_labels: int) -> Node:
    """`graph`'s paths that read at most `max_labels` labels (see `Bound`): the graph,
    bounded, or NOTHING where no final is that near the start. Every labelled edge
    counts one; epsilon edges count none. Every label must read something (a JSON
    string's characters): `need` counts a path through an empty label as a way out."""
    need = _fewest_labels_to_final(graph)
    if need[graph.start] > max_labels:
        return NOTHING
    max_labels = min(max_labels, _MOST_LABELS)
    twin = Graph(graph.num_states, graph.start, graph.finals, graph.edges, graph.free)
    out = Graph(graph.num_states, graph.start, graph.finals, graph.edges, graph.free)
    out.bound = Bound(max_labels, need, twin)
    return out


_FAR = 1 << 60  # the need of a state with no way to a final
# The largest bound kept as it is (automata hold it in int64 arrays): no text read is
# ever this long, so a larger one (a maxLength of 1e30) reads the same texts.
_MOST_LABELS = (1 << 62) - 1


def _fewest_labels_to_final(graph: Graph) -> list[int]:
    """Per state, the fewest labelled edges on a path to a final (_FAR: none), by a
    0-1 breadth-first search backwards from the finals."""
    back: dict[int, list[tuple[int, int]]] = {}
    for src, dst, label in graph.edges:
        back.setdefault(dst, []).append((src, 0 if label is None else 1))
    need = [_FAR] * graph.num_states
    queue: deque[int] = deque()
    for final in graph.finals:
        need[final] = 0
        queue.append(final)
    while queue:
        state = queue.popleft()
        for src, cost in back.get(state, ()):
            if need[state] + cost < need[src]:
                need[src] = need[state] + cost
                if cost:
                    queue.append(src)
                else:
                    queue.appendleft(src)
    return need


class Members(Node):
    """The members of a JSON object in any order, up to and including the closing bracket.

    `entries[i]` (a whole `"key": value`) appears at most once, exactly once where
    `required[i]`; `extra` (a member under an undeclared key, or None) any number of
    times, anywhere. The first member is preceded by `open_`, the others by `sep`; then
    comes `close_none` (no member written) or `close_some`. The member count stays in
    `min_count..max_count` (max None = unbounded).

    A state is (mask of the entries written, members written, capped at `cap`): past
    `cap` only "at least cap" matters. `moves` lists a state's way out; the automata
    build the states they reach, one at a time.
    """

    __slots__ = ("firsts", "laters", "extra_first", "extra_later", "required_mask", "min_count", "max_count",
                 "cap", "close_none", "close_some")

    def __init__(
        self,
        entries: Sequence[Node],
        required: Sequence[bool],
        extra: "Node | None",
        open_: Node,
        sep: Node,
        close_none: Node,
        close_some: Node,
        min_count: int = 0,
        max_count: int | None = None,
    ):
        self.firsts = tuple(seq(open_, e) for e in entries)
        self.laters = tuple(seq(sep, e) for e in entries)
        self.extra_first = None if extra is None else seq(open_, extra)
        self.extra_later = None if extra is None else seq(sep, extra)
        self.required_mask = sum(1 << i for i, r in enumerate(required) if r)
        self.min_count = min_count
        self.max_count = max_count
        self.cap = max(max_count if max_count is not None else min_count, 1)
        self.close_none = close_none
        self.close_some = close_some

    START = (0, 0)

    def moves(self, state: tuple[int, int]) -> list[tuple[Node, "tuple[int, int] | None"]]:
        """(label, next state) for each way out of `state`; next state None = closed."""
        mask, count = state
        out: list = []
        if self.max_count is None or count < self.max_count:
            nxt_count = min(count + 1, self.cap)
            labels = self.firsts if count == 0 else self.laters
            for i, label in enumerate(labels):
                if not mask >> i & 1:
                    out.append((label, (mask | 1 << i, nxt_count)))
            if self.extra_first is not None:
                out.append((self.extra_first if count == 0 else self.extra_later, (mask, nxt_count)))
        if mask & self.required_mask == self.required_mask and count >= self.min_count:
            out.append((self.close_none if count == 0 else self.close_some, None))
        return out

    def children(self) -> list[Node]:
        kids = [*self.firsts, *self.laters, self.close_none, self.close_some]
        if self.extra_first is not None:
            kids += [self.extra_first, self.extra_later]
        return kids

    def __repr__(self) -> str:
        return f"Members({len(self.firsts)} entries, required={self.required_mask:b}, extra={self.extra_first!r})"


class Stepper(Node):
    """A node that steps through its own positions: a subclass says, per position, where
    each byte goes. For languages that are cheap to run by hand but costly to run as a
    tree of basic nodes (the name of an undeclared JSON property: any string but the
    declared names, in every escape spelling, is a tree of one alternation per prefix
    of those names, and the automaton's states inside a key then hold one parse position
    per branch).

    `spec(pos)` lists (lo, hi, kind, arg) for disjoint byte ranges:
      GOTO:  the byte leads to position `arg` of this node;
      ENTER: the byte ends this node's part; node `arg` follows it (then the continuation);
      STEP:  node `arg` (whose start reads one byte, with disjoint moves) consumes the
             byte instead: the position becomes wherever that node's start goes on it.
    Bytes in no range leave the language. `final(pos)` says whether the node may end at
    `pos`; every position must be able to reach an end. `plain()` is the same language
    as basic nodes (tests, regex export), `size()` an estimate for state budgets."""

    __slots__ = ()
    GOTO, ENTER, STEP = range(3)
    start: object = 0

    def spec(self, pos) -> list[tuple[int, int, int, object]]:
        raise NotImplementedError

    def final(self, pos) -> bool:
        raise NotImplementedError

    def plain(self) -> Node:
        raise NotImplementedError

    def size(self) -> int:
        raise NotImplementedError

    def free_bytes(self, pos) -> int:
        """A set of bytes (bit b for byte b) such that this node reads every string of
        them from `pos` without leaving its language. Optional (0: none claimed); a
        token made only of such bytes is then allowed from any state holding `pos`,
        without walking it (the name of an undeclared property takes any plain text)."""
        return 0

    def patches(self, pos) -> tuple[Node, list[tuple[int, int, object]]] | None:
        """(node, moves) when every byte that `spec(pos)` lists in no GOTO or ENTER run
        STEPs into one `node`: `moves` are (byte, kind, arg) for the bytes that do not,
        one byte each. Optional (None: the automaton takes the general path); the lazy
        DFA then builds the position's row as a copy of `node`'s start row, changed on
        those few bytes."""
        return None


class Ref(Node):
    """A named rule, possibly recursive: `target` is set once the rule's body is built,
    so a body may contain Refs to itself (context-free grammars, recursive `$ref`).
    The lazy NFA enters the target with the same continuation, which is what makes the
    automaton a pushdown one: continuations grow with nesting."""

    __slots__ = ("name", "target")

    def __init__(self, name: str, target: "Node | None" = None):
        self.name = name
        self.target = target

    def __repr__(self) -> str:
        return f"Ref({self.name!r})"


def refs_in(node: Node) -> list[Ref]:
    """Every Ref reachable from `node` (through targets too), each once."""
    found: dict[int, Ref] = {}
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Ref):
            found[id(n)] = n
            if n.target is None:
                raise ValueError(f"rule {n.name!r} was referenced but never defined")
            stack.append(n.target)
        elif isinstance(n, (Concat, Alt)):
            stack.extend(n.items)
        elif isinstance(n, Repeat):
            stack.append(n.item)
        elif isinstance(n, Graph):
            stack.extend(lab for _, _, lab in n.edges if lab is not None)
        elif isinstance(n, Members):
            stack.extend(n.children())
    return list(found.values())


EMPTY = Concat(())
NOTHING = Alt(())

# Lexemes: finite nodes a front-end builds once and reuses wherever they occur (the IR
# of one JSON string character of a given set). The automata may run such a node on one
# DFA shared by every grammar instead of tracking its leaves one by one. Registered
# nodes are kept alive, so their ids stay theirs; past the cap new ones are plain nodes.
_LEXEMES: dict[int, Node] = {}
LEXEMES_MAX = 16384


def mark_lexeme(node: Node) -> Node:
    """Register a finite, reused node as a lexeme; returns it."""
    if isinstance(node, (Concat, Alt)) and node.items and len(_LEXEMES) < LEXEMES_MAX:
        _LEXEMES.setdefault(id(node), node)
    return node


def is_lexeme(node: Node) -> bool:
    return _LEXEMES.get(id(node)) is node


def is_empty(node: Node) -> bool:
    return isinstance(node, Concat) and not node.items


def is_nothing(node: Node) -> bool:
    return isinstance(node, Alt) and not node.items


# ---------------------------------------------------------------- constructors


def lit(text: str | bytes) -> Node:
    """A literal; str is encoded as UTF-8."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return Bytes(data) if data else EMPTY


def normalize_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sort and merge inclusive integer ranges; drop empty ones."""
    items = sorted([r for r in ranges if r[0] <= r[1]])
    if not items:
        return ()
    merged: list[tuple[int, int]] = []
    lo, hi = items[0]
    for a, b in items[1:]:
        if a <= hi + 1:
            if b > hi:
                hi = b
        else:
            merged.append((lo, hi))
            lo, hi = a, b
    merged.append((lo, hi))
    return tuple(merged)


def byteset(ranges: Iterable[tuple[int, int]]) -> Node:
    """One byte out of the given inclusive ranges (0..255)."""
    norm = normalize_ranges(ranges)
    for lo, hi in norm:
        if lo < 0 or hi > 255:
            raise ValueError(f"byte range ({lo}, {hi}) outside 0..255")
    if not norm:
        return NOTHING
    if len(norm) == 1 and norm[0][0] == norm[0][1]:
        return Bytes(bytes([norm[0][0]]))
    return ByteSet(norm)


def byte_range(lo: int, hi: int) -> Node:
    return byteset([(lo, hi)])


def seq(*items: Node) -> Node:
    """Concatenation, flattened; NOTHING anywhere makes the whole NOTHING."""
    out: list[Node] = []
    for item in items:
        cls = item.__class__
        if cls is Concat:
            parts = item.items
        elif cls is Alt and not item.items:
            return NOTHING
        else:
            parts = (item,)
        for part in parts:
            if part.__class__ is Bytes and out and out[-1].__class__ is Bytes:
                out[-1] = Bytes(out[-1].data + part.data)
            else:
                out.append(part)
    if len(out) == 1:
        return out[0]
    return Concat(tuple(out))


def alt(*items: Node) -> Node:
    """Alternation, flattened; NOTHING branches dropped; identical objects deduplicated."""
    out: list[Node] = []
    seen: set[int] = set()
    for item in items:
        for part in (item.items if item.__class__ is Alt else (item,)):
            if id(part) not in seen:
                seen.add(id(part))
                out.append(part)
    if len(out) == 1:
        return out[0]
    return Alt(tuple(out))


def rep(item: Node, min: int = 0, max: int | None = None) -> Node:
    if min < 0 or (max is not None and max < min):
        raise ValueError(f"bad repeat bounds {{{min},{max}}}")
    if max == 0 or is_empty(item):
        return EMPTY
    if is_nothing(item):
        return EMPTY if min == 0 else NOTHING
    if min == 1 and max == 1:
        return item
    return Repeat(item, min, max)


def opt(item: Node) -> Node:
    return rep(item, 0, 1)


def join(items: Sequence[Node], separator: Node) -> Node:
    """items[0] sep items[1] sep ... (EMPTY for no items)."""
    parts: list[Node] = []
    for i, item in enumerate(items):
        if i:
            parts.append(separator)
        parts.append(item)
    return seq(*parts)


# ---------------------------------------------------------------- accounting


def reaching(finals: Iterable[int], edges: Iterable[tuple[int, int]]) -> set[int]:
    """The states of a graph (edges as (from, to) pairs) that can reach one of `finals`,
    the finals included: what a Graph keeps when it is trimmed."""
    back: dict[int, list[int]] = {}
    for a, b in edges:
        back.setdefault(b, []).append(a)
    live = set(finals)
    todo = list(live)
    while todo:
        for a in back.get(todo.pop(), ()):
            if a not in live:
                live.add(a)
                todo.append(a)
    return live


def footprint(node: Node, limit: int) -> int:
    """The nodes and Graph edges reachable from `node` (a Ref's target, a Stepper's
    states and a bounded graph's twin included), each once: a measure of the memory a
    subtree holds. Stops early (returning a value > limit) once `limit` is passed."""
    seen: set[int] = set()
    pending, total = [node], 0
    while pending and total <= limit:
        n = pending.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        total += 1
        if isinstance(n, (Concat, Alt)):
            pending.extend(n.items)
        elif isinstance(n, Repeat):
            pending.append(n.item)
            if n.twin is not None:
                pending.append(n.twin)
        elif isinstance(n, Graph):
            total += len(n.edges)
            pending.extend(label for _, _, label in n.edges if label is not None)
            if n.bound is not None:
                pending.append(n.bound.twin)
        elif isinstance(n, Members):
            pending.extend(n.children())
        elif isinstance(n, Ref) and n.target is not None:
            pending.append(n.target)
        elif isinstance(n, Stepper):
            total += n.size()
    return total


def expanded_size(node: Node, limit: int | None = None) -> int:
    """Number of NFA positions the tree expands to, counting repeats as copies.

    Used to refuse grammars before building anything big. Each node counts its own
    positions (a literal's bytes, a Graph's states; one for the others) times the
    copies it is made in: the product of the counts of the Repeats above it, along its
    most repeated path from the root. A node reached by several paths -- a definition
    `$ref`ed from many places, a subtree the builders share -- counts once, as the
    automata hold it once and enter it with each path's continuation; so does a rule's
    body (a `Ref` counts as one position, its target as a root of its own: recursion
    repeats without a bound, and what it costs is what decoding visits). A lexeme counts
    as one position, as the NFA enters it (one item on the shared lexeme DFA). Stops
    early (returning a value > limit) once `limit` is passed.

    The count is compiled code (expanded_count.pyx); a count past 2^62 reads 2^62. The
    last answer is remembered: a JSON Schema compile checks its IR's size and the
    compiler checks it again (the same node and limit).
    """
    global _last_expanded_size
    last = _last_expanded_size
    if last[0] is node and last[1] == limit:
        return last[2]
    from structgen.grammar.expanded_count import count_expanded  # (compiled; it imports this module)

    total = count_expanded(node, limit, _LEXEMES, _own_positions, _expanded_children)
    _last_expanded_size = (node, limit, total)  # one tuple: safe across threads
    return total


_last_expanded_size: tuple = (None, None, 0)


def _own_positions(n: Node, cls: type) -> int:
    """The positions of a Graph, Members or Stepper node (the kinds the compiled count
    asks about), without its children's: a Graph's states, a Stepper's estimate, one
    for Members."""
    if cls is Graph:
        return n.num_states
    if isinstance(n, Stepper):
        return n.size()
    return 1


def _expanded_children(n: Node, cls: type) -> tuple | list:
    """The children the count goes down to from a Graph, Members or Stepper node (the
    kinds the compiled count asks about): none below a Stepper."""
    if isinstance(n, Stepper):
        return ()
    if cls is Graph:
        return [label for _, _, label in n.edges if label is not None]
    if cls is Members:  # states are built when reached: count the parts once
        return n.children()
    raise TypeError(f"not an IR node: {n!r}")


def to_python_regex(node: Node) -> bytes:
    """A Python `re` bytes pattern for the same language (tests and debugging only)."""
    import re

    def rx(n: Node) -> bytes:
        if isinstance(n, Bytes):
            return b"(?:" + re.escape(n.data) + b")"
        if isinstance(n, ByteSet):
            body = b"".join(
                b"\\x%02x" % lo if lo == hi else b"\\x%02x-\\x%02x" % (lo, hi) for lo, hi in n.ranges
            )
            return b"[" + body + b"]"
        if isinstance(n, Concat):
            return b"(?:" + b"".join(rx(i) for i in n.items) + b")"
        if isinstance(n, Alt):
            if not n.items:
                return b"(?!)"
            return b"(?:" + b"|".join(rx(i) for i in n.items) + b")"
        if isinstance(n, Repeat):
            hi = b"" if n.max is None else str(n.max).encode()
            return b"(?:" + rx(n.item) + b"){" + str(n.min).encode() + b"," + hi + b"}"
        if isinstance(n, Graph):
            if n.bound is not None:
                raise ValueError("a bounded Graph (a pattern under a maxLength) has no regex form here")
            return graph_to_python_regex(n, rx)
        if isinstance(n, Members):
            return graph_to_python_regex(members_graph(n), rx)
        if isinstance(n, Stepper):
            return rx(n.plain())
        if isinstance(n, Ref):
            raise ValueError(f"rule {n.name!r} may be recursive: no regex for a context-free grammar")
        raise TypeError(f"not an IR node: {n!r}")

    return rx(node)


def members_graph(members: Members, max_states: int = 4096) -> Graph:
    """The same language as an explicit Graph over every reachable state (tests, debugging
    and small inputs: there are up to 2^n states)."""
    ids: dict = {}
    edges: list = []
    final = 0
    ids["closed"] = final
    stack = [Members.START]
    ids[Members.START] = 1
    while stack:
        state = stack.pop()
        for label, nxt in members.moves(state):
            key = "closed" if nxt is None else nxt
            if key not in ids:
                if len(ids) >= max_states:
                    raise ValueError(f"Members with more than {max_states} states")
                ids[key] = len(ids)
                stack.append(nxt)
            edges.append((ids[state], ids[key], label))
    return Graph(len(ids), 1, (final,), tuple(edges))


def graph_to_python_regex(graph: Graph, rx) -> bytes:
    """State elimination: turn a Graph into one regex (exponential in the worst case; tests only)."""
    n = graph.num_states
    start, final = n, n + 1
    label: dict[tuple[int, int], list[bytes]] = {}

    def add(src: int, dst: int, pattern: bytes) -> None:
        label.setdefault((src, dst), []).append(pattern)

    add(start, graph.start, b"")
    for f in graph.finals:
        add(f, final, b"")
    for src, dst, node in graph.edges:
        add(src, dst, b"" if node is None else rx(node))

    def union(parts: list[bytes]) -> bytes:
        return parts[0] if len(parts) == 1 else b"(?:" + b"|".join(parts) + b")"

    for k in range(n):
        loop = label.pop((k, k), None)
        star = b"(?:" + union(loop) + b")*" if loop else b""
        ins = [(s, union(p)) for (s, d), p in list(label.items()) if d == k]
        outs = [(d, union(p)) for (s, d), p in list(label.items()) if s == k]
        for key in [key for key in label if k in key]:
            del label[key]
        for s, pin in ins:
            for d, pout in outs:
                add(s, d, pin + star + pout)
    parts = label.get((start, final))
    return union(parts) if parts else b"(?!)"
