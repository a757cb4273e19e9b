"""Context-free grammars in BNF form, and their lowering to the byte IR.

Owns: `Grammar` (rules as alternatives of symbols: a rule name, or a terminal given as an
IR node), the checks every front-end shares (undefined rules, unproductive rules, a
terminal that matches the empty string), left-recursion removal, `%ignore` insertion,
and `grammar_to_ir`, which turns rules into `ir.Ref` nodes so that the lazy NFA runs
them as a pushdown automaton. Front-ends (lark, GBNF, JSON Schema) build a `Grammar`
or IR; nothing here knows about tokens, matchers or the engine.

Semantics: a terminal may end wherever the next symbol can begin (the language of the
grammar with each terminal replaced by its regular language, which is what lark's Earley
parser accepts with `lexer="dynamic_complete"`). Priorities only choose between parses
of the same text, so they do not change the language and are not used here.

Left recursion (`sum: sum "+" term | term`, and lark's own helpers for `x*`) is removed
with the textbook substitution of rules that can start one another, then direct left
recursion `A: A a | b` becomes `A: b A'`, `A'` being the loop `a*` (a `Repeat`, so it
never deepens the stack). Left recursion hidden behind an optional prefix is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from structgen.errors import GrammarError, GrammarTooLargeError
from structgen.grammar import ir
from structgen.grammar.languages import Languages

Symbol = "str | ir.Node"  # a rule name, or a terminal's IR
MAX_ALTERNATIVES = 50_000  # after left-recursion removal


@dataclass
class Grammar:
    """rules: name -> alternatives, each a list of symbols (str = rule name, ir.Node =
    terminal). ignore: terminals allowed before any terminal and at the end (lark's
    `%ignore`). terminal_names: id(ir node) -> name, for error messages."""

    rules: dict[str, list[list]]
    start: str
    ignore: list[ir.Node] = field(default_factory=list)
    terminal_names: dict[int, str] = field(default_factory=dict)


def _fixpoint(rules: dict[str, list[list]], symbol_ok) -> set[str]:
    """Rules with an alternative whose every symbol satisfies the property, where a rule
    name satisfies it once it is in the result (least fixpoint). A worklist: each
    alternative counts the rule names it still waits for, so a chain of n rules takes
    n steps, not n passes over all the rules."""
    waiting: dict[tuple[str, int], int] = {}  # (rule, alternative) -> rule names not yet in the result
    users: dict[str, list[tuple[str, int]]] = {}  # rule name -> the alternatives that use it
    ready: list[str] = []
    for name, alts in rules.items():
        for index, alt in enumerate(alts):
            if not all(isinstance(s, str) or symbol_ok(s) for s in alt):
                continue  # a terminal without the property: this alternative never qualifies
            names = [s for s in alt if isinstance(s, str)]
            waiting[(name, index)] = len(names)
            for used in names:
                users.setdefault(used, []).append((name, index))
            if not names:
                ready.append(name)
    done: set[str] = set()
    while ready:
        name = ready.pop()
        if name in done:
            continue
        done.add(name)
        for user in users.get(name, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.append(user[0])
    return done


def _reachable(rules: dict[str, list[list]], start: str) -> list[str]:
    seen = {start: None}
    stack = [start]
    while stack:
        for alt in rules[stack.pop()]:
            for s in alt:
                if isinstance(s, str) and s not in seen:
                    seen[s] = None
                    stack.append(s)
    return list(seen)


class TerminalFacts:
    """Whether a terminal's language holds some text, and whether it holds the empty text,
    each worked out once per terminal: read off the structure of a tree of literals,
    byte sets, sequences, alternatives and repeats (most terminals), else asked of
    `languages` (which builds an automaton)."""

    def __init__(self, languages: Languages):
        self.languages = languages
        self.known: dict[int, list[bool | None]] = {}  # id -> [holds some text, holds the empty text]

    def nonempty(self, node: ir.Node) -> bool:
        return self._fact(node, 0, self.languages.nonempty)

    def nullable(self, node: ir.Node) -> bool:
        return self._fact(node, 1, self.languages.nullable)

    def _fact(self, node: ir.Node, which: int, ask) -> bool:
        facts = self.known.get(id(node))
        if facts is None:
            facts = self.known[id(node)] = list(_plain_facts(node) or (None, None))
        if facts[which] is None:
            facts[which] = ask(node)
        return facts[which]


def _plain_facts(node: ir.Node) -> tuple[bool, bool] | None:
    """(holds some text, holds the empty text) of a plain tree; None where a node in it
    (a graph, a rule, object members, a stepper) takes an automaton to answer."""
    cls = node.__class__
    if cls is ir.Bytes:
        return True, not node.data
    if cls is ir.ByteSet:
        return bool(node.ranges), False
    if cls is ir.Repeat:
        item = _plain_facts(node.item)
        if item is None:
            return None
        return item[0] or node.min == 0, item[1] or node.min == 0
    if cls is ir.Concat or cls is ir.Alt:
        parts = [_plain_facts(item) for item in node.items]
        if None in parts:
            return None
        combine = all if cls is ir.Concat else any
        return combine(p[0] for p in parts), combine(p[1] for p in parts)
    return None


def check(grammar: Grammar, languages: Languages | TerminalFacts) -> dict[str, list[list]]:
    """Validate and clean: returns the rules reachable from the start, with alternatives
    that can never produce a string dropped. `languages` answers for the terminals."""
    rules = grammar.rules
    if grammar.start not in rules:
        raise GrammarError(f"the start rule {grammar.start!r} is not defined")
    for name, alts in rules.items():
        for alt in alts:
            for s in alt:
                if isinstance(s, str) and s not in rules:
                    raise GrammarError(f"rule {name!r} uses the undefined rule {s!r}")
    terminals = {id(s): s for alts in rules.values() for alt in alts for s in alt if not isinstance(s, str)}
    for term in list(terminals.values()) + list(grammar.ignore):
        name = grammar.terminal_names.get(id(term))
        if name is not None and languages.nullable(term):
            raise GrammarError(f"terminal {name} matches the empty string (terminals must consume input)")
    live_terms = {tid for tid, t in terminals.items() if languages.nonempty(t)}
    productive = _fixpoint(rules, lambda s: id(s) in live_terms)
    if grammar.start not in productive:
        raise GrammarError(f"the start rule {grammar.start!r} can never produce a complete string")
    cleaned = {
        name: [
            alt
            for alt in alts
            if all(s in productive if isinstance(s, str) else id(s) in live_terms for s in alt)
        ]
        for name, alts in rules.items()
        if name in productive
    }
    return {name: cleaned[name] for name in _reachable(cleaned, grammar.start)}


# ---------------------------------------------------------------- left recursion


def _left_corners(rules: dict[str, list[list]], nullable: set[str], nullable_term) -> dict[str, set[str]]:
    """name -> rules that can come first in it (after a prefix that can be empty)."""
    corners: dict[str, set[str]] = {name: set() for name in rules}
    for name, alts in rules.items():
        for alt in alts:
            for s in alt:
                if isinstance(s, str):
                    corners[name].add(s)
                    if s not in nullable:
                        break
                elif not nullable_term(s):
                    break
    return corners


def _cyclic(corners: dict[str, set[str]]) -> set[str]:
    """Rules on a cycle of the left-corner graph (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: set[str] = set()
    counter = 0
    for root in corners:
        if root in index:
            continue
        work = [(root, iter(sorted(corners[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(corners[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in corners[node]:
                    out.update(component)
    return out


def remove_left_recursion(rules: dict[str, list[list]], nullable_term) -> tuple[dict, dict]:
    """Returns (rules, loops): `loops[name]` are the alternatives of a rule that stands for
    `(alt1 | alt2 | ...)*` (created here for direct left recursion)."""
    rules = {name: [list(a) for a in alts] for name, alts in rules.items()}
    nullable = _fixpoint(rules, nullable_term)
    cyclic = _cyclic(_left_corners(rules, nullable, nullable_term))
    loops: dict[str, list[list]] = {}
    if not cyclic:
        return rules, loops
    order = [name for name in rules if name in cyclic]
    total = sum(len(a) for a in rules.values())
    for i, name in enumerate(order):
        earlier = set(order[:i])
        changed = True
        while changed:
            changed = False
            new: list[list] = []
            for alt in rules[name]:
                if alt and isinstance(alt[0], str) and alt[0] in earlier:
                    new.extend(list(beta) + alt[1:] for beta in rules[alt[0]])
                    changed = True
                else:
                    new.append(alt)
            total += len(new) - len(rules[name])
            if total > MAX_ALTERNATIVES:
                raise GrammarTooLargeError(
                    f"removing the left recursion of rule {name!r} grows the grammar past "
                    f"{MAX_ALTERNATIVES:,} alternatives"
                )
            rules[name] = new
        tails = [alt[1:] for alt in rules[name] if alt and alt[0] == name]
        if tails:
            bases = [alt for alt in rules[name] if not (alt and alt[0] == name)]
            tails = [t for t in tails if t]  # `A: A` adds nothing
            if tails:
                loop = f"{name}'"
                while loop in rules or loop in loops:
                    loop += "'"
                loops[loop] = tails
                bases = [b + [loop] for b in bases]
            rules[name] = bases
    nullable = _fixpoint(rules, nullable_term) | set(loops)
    corners = _left_corners({**rules, **loops}, nullable, nullable_term)
    left = _cyclic(corners)
    if left:
        name = sorted(left)[0]
        raise GrammarError(
            f"rule {name!r} is left-recursive through a prefix that can be empty; "
            "make that prefix non-optional or move it (this left recursion cannot be removed)"
        )
    return rules, loops


# ---------------------------------------------------------------- lowering


def grammar_to_ir(grammar: Grammar, languages: Languages) -> ir.Node:
    """The IR of the grammar's language: one `ir.Ref` per rule. `languages` answers for
    the terminals (the compiler passes `automata.languages.AUTOMATA`)."""
    facts = TerminalFacts(languages)
    rules = check(grammar, facts)
    rules, loops = remove_left_recursion(rules, facts.nullable)
    refs = {name: ir.Ref(name) for name in list(rules) + list(loops)}
    ignored = ir.rep(ir.alt(*grammar.ignore), 0, None) if grammar.ignore else None
    with_ignore: dict[int, ir.Node] = {}

    def symbol(s) -> ir.Node:
        if isinstance(s, str):
            return refs[s]
        if ignored is None:
            return s
        got = with_ignore.get(id(s))
        if got is None:
            got = with_ignore[id(s)] = ir.seq(ignored, s)
        return got

    factored: dict[frozenset, ir.Node] = {}

    def key(s) -> object:
        return s if isinstance(s, str) else id(s)

    def alternatives(alts: list[list]) -> ir.Node:
        """Alternatives as a prefix tree: `a b c | a b d` becomes `a b (c | d)`, and equal
        sets of tails become one shared node. Without this, each alternative that shares
        a prefix keeps its own continuation, and the configurations reached through such
        rules double with every nesting level (lark expands `[x]` and `x?` into copies)."""
        tails = frozenset(tuple(key(s) for s in alt) for alt in alts)
        got = factored.get(tails)
        if got is not None:
            return got
        by_first: dict[object, list[list]] = {}
        firsts: dict[object, object] = {}
        nullable = False
        for alt in alts:
            if not alt:
                nullable = True
                continue
            k = key(alt[0])
            firsts[k] = alt[0]
            by_first.setdefault(k, []).append(alt[1:])
        branches = [ir.seq(symbol(firsts[k]), alternatives(rest)) for k, rest in by_first.items()]
        node = ir.alt(ir.EMPTY, *branches) if nullable else ir.alt(*branches)
        factored[tails] = node
        return node

    for name, alts in rules.items():
        refs[name].target = alternatives(alts)
    for name, alts in loops.items():
        refs[name].target = ir.rep(alternatives(alts), 0, None)
    start = refs[grammar.start]
    return ir.seq(start, ignored) if ignored is not None else start
