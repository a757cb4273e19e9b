"""A lazy NFA over bytes whose states are positions in the grammar IR.

Owns: the NFA view of an `ir.Node` tree, built on demand. An NFA state ("item") is a
leaf of the tree -- a byte of a `Bytes` literal or a `ByteSet` -- together with its
continuation: an interned chain of frames saying what comes after (the rest of a
`Concat`, or its last item alone, the next iteration of a `Repeat`, the next state of a
`Graph` or of an any-order object's `Members`). Nothing is expanded before a DFA state
steps into it, so a schema whose "any value" branches are never taken costs nothing for
them, and shared subtrees are never copied.

`Ref` nodes (named rules of a context-free grammar, recursive JSON Schema `$ref`) are
entered with the continuation they were reached with, so continuations grow with the
nesting depth: the same machinery is then a pushdown automaton, determinized lazily
one reached configuration at a time. Left recursion would make a closure infinite; the
CFG front-end removes it, and `_enter` refuses what is left with a clear error.

Every item can reach acceptance: subtrees with an empty language are detected once
(`liveness`) and never entered, so a mask built from these items has no dead ends.

Lexemes (`ir.mark_lexeme`: one JSON string character, in all its encodings) are not
entered leaf by leaf: they run on one DFA shared by every grammar (`LexemeSpace`), and
an item is then (space, state of that DFA, continuation). A string body's state holds
one such item instead of one per character class, and the bytes inside a multi-byte
character or an escape need no continuations of their own.

A `Stepper` node (the name of an undeclared JSON property: any string but the declared
names) is one item too, (node, its position, continuation): the node says where each
byte goes from each of its positions, and bytes it hands to its STEP node move as that
node's start does.
Must not know about tokens, vocabularies or the engine.
"""

from __future__ import annotations

import threading
from bisect import bisect_left

from structgen.automata.dfa import LazyDFA
from structgen.automata.item_sets import ACCEPT, MAX_STATE_ITEMS, too_ambiguous, union
from structgen.automata.liveness import Liveness, TreeLiveness
from structgen.errors import GrammarTooLargeError
from structgen.grammar import ir
from structgen.grammar.nesting import make_room_for_deep_input

MAX_RULE_NESTING = 2000  # rules entered within one closure before we call it left recursion
DONE = 0  # the empty continuation


class LazyNFA:
    def __init__(self, root: ir.Node, *, lexemes: bool = True, deadline: float | None = None,
                 liveness: Liveness | None = None):
        """deadline: a `time.monotonic()` instant past which building it raises
        GrammarTooLargeError (deciding which rules are non-empty may take rounds).
        liveness: which nodes of `root` are non-empty, where that is known already
        (`flat.FlatLiveness`); else worked out from the IR (`TreeLiveness`)."""
        make_room_for_deep_input()  # closures recurse along the IR's nesting
        self.root = root
        self.deadline = deadline
        self._use_lexemes = lexemes
        self._space: LexemeSpace | None = None  # pinned at the first lexeme entered
        self._moves: dict[tuple, list] = {}
        self._start_moves_of: dict[tuple, tuple[list, list[int]]] = {}
        self._frames: list[tuple] = [()]  # frame id -> (kind, node, index, parent frame id)
        self._frame_ids: dict[tuple, int] = {(): DONE}
        self._alt_live: dict[int, tuple] = {}
        self._closures: dict[tuple, frozenset] = {}
        self._resumes: dict[int, frozenset] = {}
        self._ref_depth = 0
        self._has_steppers = False  # set once a closure meets one (row_parts looks for them)
        self.liveness = liveness if liveness is not None else TreeLiveness(root, deadline)
        # the liveness's answers, read as this NFA's own (closures ask them at every node)
        self.nonempty = self.liveness.nonempty
        self.graph_live = self.liveness.graph_live
        self.members_live = self.liveness.members_live
        self.is_empty_language = not self.nonempty(root)
        self.start = frozenset() if self.is_empty_language else self.closure(root, DONE)

    # ------------------------------------------------------------ continuations

    def _push(self, kind: str, node: ir.Node, index: int, parent: int) -> int:
        frame = (kind, node, index, parent)
        fid = self._frame_ids.get(frame)
        if fid is None:
            fid = len(self._frames)
            self._frames.append(frame)
            self._frame_ids[frame] = fid
        return fid

    def _then(self, concat: ir.Concat, index: int, parent: int) -> int:
        """The continuation after item `index - 1` of a Concat. After its last item that is
        just `parent`: no frame, so right (tail) recursion never deepens the stack."""
        if index >= len(concat.items):
            return parent
        if index == len(concat.items) - 1:
            # "enter the last item, then parent": keyed by that item alone, so Concats that
            # end in the same node (the free tail of an object key after any of its
            # prefixes) share one continuation, and its closure is computed once.
            last = concat.items[index]
            if isinstance(last, ir.Repeat) and last.min == 0 and last.max is None:
                # x* entered afresh is the frame it loops back to: one frame for both, so
                # a state just before the loop and the loop itself reach the same states
                # (the bytes of a multi-byte character, an escape, in a key's free tail).
                return self._push("R", last, 0, parent)
            return self._push("L", last, 0, parent)
        return self._push("C", concat, index, parent)

    @property
    def num_frames(self) -> int:
        return len(self._frames)

    # ------------------------------------------------------------ closures

    def closure(self, node: ir.Node, cont: int) -> frozenset:
        """Items reachable without consuming a byte by entering `node`, then `cont`."""
        key = (node, cont)
        cached = self._closures.get(key)
        if cached is None:
            out: set = set()
            self._enter(node, cont, out, set())
            cached = frozenset(out)
            self._closures[key] = cached
        return cached

    def _enter(self, node: ir.Node, cont: int, out: set, seen: set) -> None:
        key = (id(node), cont)
        if key in seen:
            return
        seen.add(key)
        if isinstance(node, (ir.Bytes, ir.ByteSet)):
            out.add((node, 0, cont))
            if len(out) > MAX_STATE_ITEMS:
                raise too_ambiguous()
        elif self._use_lexemes and ir.is_lexeme(node):
            self._enter_lexeme(node, cont, out, seen)
        elif isinstance(node, ir.Concat):
            if node.items:
                self._enter(node.items[0], self._then(node, 1, cont), out, seen)
            else:
                self._resume(cont, out, seen)
        elif isinstance(node, ir.Alt):
            for item in self._live_items(node):
                self._enter(item, cont, out, seen)
        elif isinstance(node, ir.Repeat):
            self._repeat(node, 0, cont, out, seen)
        elif isinstance(node, ir.Graph):
            self._graph_state(node, node.start, cont, out, seen)
        elif isinstance(node, ir.Members):
            self._members_state(node, ir.Members.START, cont, out, seen)
        elif isinstance(node, ir.Ref):
            self._enter_rule(node, cont, out, seen)
        elif isinstance(node, ir.Stepper):
            self._has_steppers = True
            out.add((node, node.start, cont))
            if node.final(node.start):
                self._resume(cont, out, seen)
        else:
            raise TypeError(f"not an IR node: {node!r}")

    def _live_items(self, alt: ir.Alt) -> tuple:
        """The branches of an Alt with a non-empty language (memoized: closures enter
        the same alternations -- a string's character classes -- over and over)."""
        live = self._alt_live.get(id(alt))
        if live is None:
            live = self._alt_live[id(alt)] = tuple(item for item in alt.items if self.nonempty(item))
        return live

    def _enter_lexeme(self, node: ir.Node, cont: int, out: set, seen: set) -> None:
        space = self._space
        if space is None:
            space = self._space = LexemeSpace.current()
        sid = space.start(node)
        if space.dfa.has_exits(sid):
            out.add((space, sid, cont))
        if space.dfa.accepting[sid]:
            self._resume(cont, out, seen)

    def _enter_rule(self, ref: ir.Ref, cont: int, out: set, seen: set) -> None:
        if not self.nonempty(ref):
            return
        self._ref_depth += 1
        try:
            if self._ref_depth > MAX_RULE_NESTING:
                raise GrammarTooLargeError(
                    f"rule {ref.name!r} nests more than {MAX_RULE_NESTING} times without consuming "
                    "input (left recursion through an optional prefix?)"
                )
            self._enter(ref.target, cont, out, seen)
        finally:
            self._ref_depth -= 1

    def _resume(self, cont: int, out: set, seen: set) -> None:
        key = ("resume", cont)
        if key in seen:
            return
        seen.add(key)
        if cont == DONE:
            out.add(ACCEPT)
            return
        kind, node, index, parent = self._frames[cont]
        if kind == "C":
            if index < len(node.items):
                self._enter(node.items[index], self._then(node, index + 1, parent), out, seen)
            else:
                self._resume(parent, out, seen)
        elif kind == "L":
            self._enter(node, parent, out, seen)
        elif kind == "R":
            self._repeat(node, index, parent, out, seen)
        elif kind == "M":
            self._members_state(node, index, parent, out, seen)
        else:  # "G"
            self._graph_state(node, index, parent, out, seen)

    def _repeat(self, node: ir.Repeat, done: int, parent: int, out: set, seen: set) -> None:
        """`done` iterations of `node.item` are complete (saturated at min when unbounded)."""
        if (node.max is None or done < node.max) and self.nonempty(node.item):
            nxt = min(done + 1, node.min) if node.max is None else done + 1
            self._enter(node.item, self._push("R", node, nxt, parent), out, seen)
        if done >= node.min:
            self._resume(parent, out, seen)

    def _graph_state(self, graph: ir.Graph, index: int, parent: int, out: set, seen: set) -> None:
        """State `index` of `graph`; in a bounded graph (`ir.Bound`), state index % states
        with index / states labels read, as the compiled automaton numbers them: an edge
        goes on only where its target can still reach an end within the bound."""
        key = ("graph", id(graph), index, parent)
        if key in seen:
            return
        seen.add(key)
        _, adjacency = self.graph_live(graph)
        bound, n = graph.bound, graph.num_states
        state, count = (index, 0) if bound is None else (index % n, index // n)
        if state in graph.finals:
            self._resume(parent, out, seen)
        for dst, label in adjacency.get(state, ()):
            target = dst
            if bound is not None:
                after = count + (label is not None)
                if after + bound.need[dst] > bound.max:
                    continue
                target = dst + n * after
            if label is None:
                self._graph_state(graph, target, parent, out, seen)
            else:
                self._enter(label, self._push("G", graph, target, parent), out, seen)

    def _members_state(self, node: ir.Members, state: tuple, parent: int, out: set, seen: set) -> None:
        key = ("members", id(node), state, parent)
        if key in seen:
            return
        seen.add(key)
        for label, nxt in node.moves(state):
            if nxt is None:
                self._enter(label, parent, out, seen)
            elif self.nonempty(label) and self.members_live(node, nxt):
                self._enter(label, self._push("M", node, nxt, parent), out, seen)

    # ------------------------------------------------------------ stepping

    @staticmethod
    def byte_ranges(item) -> tuple[tuple[int, int], ...]:
        """The bytes a leaf item consumes, as inclusive ranges."""
        leaf, offset, _ = item
        if isinstance(leaf, ir.Bytes):
            b = leaf.data[offset]
            return ((b, b),)
        return leaf.ranges

    def moves(self, item) -> list[tuple[int, int, frozenset]]:
        """(lo, hi, items reached) for the bytes an item consumes (memoized). A leaf
        goes to one set whatever its byte; a lexeme item to one per state it reaches."""
        cached = self._moves.get(item)
        if cached is None:
            first, position, cont = item
            if isinstance(first, LexemeSpace):
                cached = self._lexeme_moves(first, position, cont)
            elif isinstance(first, ir.Stepper):
                cached = self._stepper_moves(first, position, cont)
            else:
                target = self.after(item)
                cached = [(lo, hi, target) for lo, hi in self.byte_ranges(item)] if target else []
            self._moves[item] = cached
        return cached

    def _lexeme_moves(self, space: "LexemeSpace", sid: int, cont: int) -> list:
        dfa = space.dfa
        targets: dict[int, frozenset] = {}
        out = []
        for lo, hi, nxt in space.runs(sid):
            target = targets.get(nxt)
            if target is None:
                inside = [(space, nxt, cont)] if dfa.has_exits(nxt) else []
                if dfa.accepting[nxt]:  # the lexeme may end here: what follows it may start
                    target = self._resumed(cont).union(inside) if inside else self._resumed(cont)
                else:
                    target = frozenset(inside)
                targets[nxt] = target
            if target:
                out.append((lo, hi, target))
        return out

    def _stepper_target(self, node: ir.Stepper, kind: int, arg, cont: int) -> frozenset:
        """Where a GOTO or ENTER run of a Stepper's spec leads (empty: nowhere)."""
        if kind == ir.Stepper.GOTO:
            inside = frozenset([(node, arg, cont)])
            return inside.union(self._resumed(cont)) if node.final(arg) else inside
        return self.closure(arg, cont)

    def _stepper_moves(self, node: ir.Stepper, pos, cont: int) -> list:
        out = []
        for lo, hi, kind, arg in node.spec(pos):
            if kind != ir.Stepper.STEP:
                target = self._stepper_target(node, kind, arg, cont)
                if target:
                    out.append((lo, hi, target))
            else:  # STEP: the bytes are read by `arg`'s start instead
                moves, his = self._start_moves(arg, cont)
                i = bisect_left(his, lo)  # the first move that ends at or after lo
                while i < len(moves) and moves[i][0] <= hi:
                    m_lo, m_hi, target = moves[i]
                    out.append((max(lo, m_lo), min(hi, m_hi), target))
                    i += 1
        return out

    def _start_moves(self, node: ir.Node, cont: int) -> tuple[list, list[int]]:
        """(lo, hi, items reached) for the bytes `node` may start with, in byte order, and
        the list of their his (a Stepper's STEP node; memoized: every position of a
        Stepper shares its STEP node's moves)."""
        cached = self._start_moves_of.get((node, cont))
        if cached is None:
            moves = self.successors(self.closure(node, cont))
            cached = self._start_moves_of[(node, cont)] = (moves, [hi for _, hi, _ in moves])
        return cached

    def successors(self, items: frozenset) -> list[tuple[int, int, frozenset]]:
        """(lo, hi, next NFA state set) for the byte ranges leaving the set `items`."""
        moves = [self.moves(item) for item in items if item is not ACCEPT]
        if len(moves) <= 1:  # most states: one item
            return moves[0] if moves else []
        moves.sort(key=len)
        if all(len(m) == 1 and m[0][0] == m[0][1] for m in moves[:-1]):
            # Single bytes over one item's ranges: a prefix of declared keys (the next
            # letter of each name) over the free rest of an undeclared one.
            return _overlay_bytes(moves[-1], sorted((m[0][0], m[0][2]) for m in moves[:-1]))
        ranges = [move for item_moves in moves for move in item_moves]
        # Cut the byte axis where any range starts or ends; each piece between two cuts
        # leads to the union of the targets of the ranges covering it. Pieces covered
        # by the same ranges (most of them: the letters of a string body) share one union.
        cuts = sorted({lo for lo, _, _ in ranges} | {hi + 1 for _, hi, _ in ranges})
        covering: list[list[frozenset]] = [[] for _ in cuts]
        for lo, hi, target in ranges:
            for i in range(bisect_left(cuts, lo), bisect_left(cuts, hi + 1)):
                covering[i].append(target)
        unions: dict[tuple[int, ...], frozenset] = {}
        out = []
        for i, targets in enumerate(covering):
            if not targets:
                continue
            if len(targets) == 1:
                target = targets[0]
            else:
                key = tuple(map(id, targets))  # the targets live on in the moves lists
                target = unions.get(key)
                if target is None:
                    target = unions[key] = union(targets)
            out.append((cuts[i], cuts[i + 1] - 1, target))
        return out

    def row_parts(self, items: frozenset) -> tuple[list, list, list] | None:
        """`successors(items)` as a shared base and its changes, or None.

        For a Stepper item at a position with `patches` (the name of an undeclared
        property at a prefix of the declared ones: every byte but a few STEPs into one
        node), alone or beside items that each move on one byte (the next letter of each
        declared name): (base, replaced, points). `base` is that node's start moves, one
        list per node and continuation, so a DFA keeps its row once for every prefix;
        `replaced` are (byte, target) pairs that replace base on their byte (empty
        target: dead); `points` are (byte, target) pairs united with what the byte
        reaches otherwise."""
        if not self._has_steppers:
            return None
        stepper = None
        for item in items:
            if item is not ACCEPT and isinstance(item[0], ir.Stepper):
                stepper = item
                break
        if stepper is None:
            return None
        node, pos, cont = stepper
        patched = node.patches(pos)
        if patched is None:
            return None
        points = []
        for item in items:
            if item is ACCEPT or item is stepper:
                continue
            moves = self.moves(item)
            if len(moves) != 1 or moves[0][0] != moves[0][1]:
                return None
            points.append((moves[0][0], moves[0][2]))
        step_node, changed = patched
        base = self._start_moves(step_node, cont)[0]
        replaced = [(byte, self._stepper_target(node, kind, arg, cont)) for byte, kind, arg in changed]
        return base, replaced, points

    def free_bytes(self, items: frozenset) -> int:
        """Bytes (bit b for byte b) every string of which the set `items` reads without
        leaving the language, as far as one of its Stepper items vouches for it
        (`ir.Stepper.free_bytes`); 0 when none does."""
        best = 0
        if self._has_steppers:
            for item in items:
                if item is not ACCEPT and isinstance(item[0], ir.Stepper):
                    bits = item[0].free_bytes(item[1])
                    if bits.bit_count() > best.bit_count():
                        best = bits
        return best

    def literal_chain(self, item, limit: int) -> list[tuple[int, frozenset]]:
        """For an item inside a byte string: (byte, items after it) for its next bytes,
        up to `limit` of them or the string's end (then: what follows it). Empty for any
        other item."""
        if item is ACCEPT or not isinstance(item[0], ir.Bytes):
            return []
        leaf, offset, cont = item
        data = leaf.data
        out = []
        for j in range(offset, min(len(data), offset + limit)):
            if j + 1 < len(data):
                out.append((data[j], frozenset([(leaf, j + 1, cont)])))
            else:
                after = self._resumed(cont)
                if after:
                    out.append((data[j], after))
        return out

    def after(self, item) -> frozenset:
        """Items reachable once the leaf item has consumed its byte (not memoized
        itself: `moves`, its one caller, is)."""
        leaf, offset, cont = item
        if isinstance(leaf, ir.Bytes) and offset + 1 < len(leaf.data):
            return frozenset([(leaf, offset + 1, cont)])
        return self._resumed(cont)

    def _resumed(self, cont: int) -> frozenset:
        """Items reachable by resuming continuation `cont` (memoized: the leaves of one
        alternation -- the character classes of a JSON string, say -- share their
        continuation, and a state holding them all resumes it once)."""
        cached = self._resumes.get(cont)
        if cached is None:
            out: set = set()
            self._resume(cont, out, set())
            cached = self._resumes[cont] = frozenset(out)
        return cached


class LexemeSpace:
    """One DFA, shared by every grammar, over the lexemes (`ir.mark_lexeme`: one JSON
    string character of a given set) that grammars have entered. Inside a closure a
    lexeme is one item (space, state of this DFA, continuation): the character classes
    of a string body are one item, not ten, and the bytes inside a multi-byte character
    or an escape move through this DFA, built once per process, instead of through
    continuations built anew for every place the character occurs. A state is a set of
    the lexemes' own items, so lexemes that agree on what may follow (character sets
    share their non-ASCII part) reach the same state. Replaced by a fresh space past
    `MAX_STATES`; a grammar keeps the space it started with."""

    MAX_STATES = 20_000
    _current: "LexemeSpace | None" = None
    _lock = threading.Lock()

    def __init__(self):
        self.nfa = LazyNFA(ir.EMPTY, lexemes=False)
        # grammars pinned to a replaced space may still grow it a little
        self.dfa = LazyDFA(self.nfa, max_states=5 * self.MAX_STATES + 10_000)
        self._starts: dict[int, tuple[ir.Node, int]] = {}
        self._runs: dict[int, list] = {}

    @classmethod
    def current(cls) -> "LexemeSpace":
        with cls._lock:
            if cls._current is None or cls._current.dfa.num_states > cls.MAX_STATES:
                cls._current = LexemeSpace()
            return cls._current

    def start(self, node: ir.Node) -> int:
        """The state where the lexeme `node` begins."""
        got = self._starts.get(id(node))
        if got is None:
            with self.dfa.lock:  # the space's NFA is shared by grammars in every thread
                sid = self.dfa.state_of(self.nfa.closure(node, DONE))
                got = self._starts[id(node)] = (node, sid)
        return got[1]

    def runs(self, sid: int) -> list[tuple[int, int, int]]:
        """(lo, hi, next state) for the runs of bytes leaving state `sid`."""
        got = self._runs.get(sid)
        if got is None:
            self.dfa.expand(sid)
            row = self.dfa.table[sid].tolist()
            got, b = [], 0
            while b < 256:
                nxt, lo = row[b], b
                while b + 1 < 256 and row[b + 1] == nxt:
                    b += 1
                if nxt >= 0:
                    got.append((lo, b, nxt))
                b += 1
            self._runs[sid] = got
        return got


def _overlay_bytes(base: list, points: list) -> list:
    """`successors` of one item whose moves are the sorted, disjoint `base` ranges and of
    items that each move on one byte (`points`: sorted (byte, target) pairs): the base
    ranges split at those bytes, where the targets are united."""
    out = []
    i, n = 0, len(points)

    def united(byte: int, target: frozenset | None) -> frozenset:
        nonlocal i
        targets = [] if target is None else [target]
        while i < n and points[i][0] == byte:
            targets.append(points[i][1])
            i += 1
        return targets[0] if len(targets) == 1 else union(targets)

    for lo, hi, target in base:
        while i < n and points[i][0] < lo:  # bytes no base range covers
            byte = points[i][0]
            out.append((byte, byte, united(byte, None)))
        cur = lo
        while i < n and points[i][0] <= hi:
            byte = points[i][0]
            if cur < byte:
                out.append((cur, byte - 1, target))
            out.append((byte, byte, united(byte, target)))
            cur = byte + 1
        if cur <= hi:
            out.append((cur, hi, target))
    while i < n:
        byte = points[i][0]
        out.append((byte, byte, united(byte, None)))
    return out
